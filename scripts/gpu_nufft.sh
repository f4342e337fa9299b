#!/usr/bin/env bash
# Lomb-Scargle by NUFFT on the lent GPU machine (issue 20): ci, corot and survey-small with --method nufft on
# CUDA and NVIDIA OpenCL (float64), the direct float32 kernel on survey-small beside it (where direct wins),
# the `cpu` model on 1 and all cores, and nifty-ls (the wheels carried in .whl) on the same cores and light
# curves through scripts/bench_nufft.py. PROFILE=1 adds Nsight Compute's speed of light of each NUFFT kernel
# at corot. Everything lands in $OUT, packed as nufft-gpu.tgz.
# Build as docs/architecture.md says ("GPU evidence runs"); carry .carry and .whl.
set -uo pipefail
# The device tool returns at most 8 files: work in a folder of our own, hand back the archive and a summary.
final="${OUT:-out/gpu}"
mkdir -p "$final"
export OUT=$(mktemp -d)
source "$(dirname "$0")/gpu_common.sh"
status=0
{ python3 -V; ldd --version | head -1; python3 -c "import numpy; print('numpy', numpy.__version__)"; } \
  >> "$out/machine.txt" 2>&1
run() {  # name, then astroport arguments
  local name=$1; shift
  local t0=$SECONDS
  "$bin" run lombscargle "$@" --out "$out/rows" > "$out/$name.log" 2>&1 || status=1
  echo "$name: $((SECONDS - t0)) s wall"; grep -E "lombscargle ┆" "$out/$name.log" | cut -c1-250
}
run ci-nufft --preset ci --method nufft --precision f64 --backend cuda --backend "$nv" --repeats 20
run corot-nufft --preset corot --method nufft --precision f64 --backend cuda --backend "$nv" --repeats 20
run corot-fixed-nufft --preset corot --model fixed --method nufft --precision f64 --backend cuda --backend "$nv" --repeats 10
run survey-small-nufft --preset survey-small --method nufft --precision f64 --backend cuda --backend "$nv" --repeats 5
run survey-small-direct --preset survey-small --precision f32,f64 --backend cuda --repeats 5
RAYON_NUM_THREADS=1 run corot-cpu1 --preset corot --method nufft --precision f64 --backend cpu --repeats 5
run corot-cpu --preset corot --method nufft --precision f64 --backend cpu --repeats 10
run ci-cpu --preset ci --method nufft --precision f64 --backend cpu --repeats 20
if [ "${PROFILE:-0}" = 1 ] && command -v ncu >/dev/null; then
  ncu --kernel-name regex:ls_nufft --section SpeedOfLight --section Occupancy --section LaunchStats \
    "$bin" run lombscargle --preset corot --method nufft --precision f64 --backend cuda --warmup 0 --repeats 1 \
    --out "$out/ncu-rows" > "$out/ncu-corot.txt" 2>&1 || status=1
  grep -E "ls_nufft|Duration|Memory Throughput|DRAM Through|Registers|Achieved Occupancy" "$out/ncu-corot.txt" | head -80
fi
if command -v cuobjdump >/dev/null; then
  cuobjdump -res-usage "$bin" 2>&1 | grep -A1 "ls_nufft" > "$out/res-usage.txt" || true
fi
python3 -m pip install -q --no-index --find-links .whl --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site nifty-ls finufft > "$out/pip.log" 2>&1 && export PYTHONPATH=/tmp/site
python3 scripts/bench_nufft.py --binary "$bin" --out "$out/nifty" --sizes "${SIZES:-10000,382003}" \
  --threads "1,$(nproc)" --repeats 5 > "$out/nifty.md" 2> "$out/nifty.log" || status=1
cat "$out/nifty.md"; tail -3 "$out/nifty.log"
tar czf "$final/nufft-gpu.tgz" -C "$out" .
{ cat "$out/machine.txt"; cat "$out/pip.log"; for f in "$out"/*.log; do echo "== $(basename "$f")"
  grep -E "lombscargle ┆" "$f" | cut -c1-260; done; cat "$out/nifty.md"; } > "$final/summary.txt" 2>&1
exit $status
