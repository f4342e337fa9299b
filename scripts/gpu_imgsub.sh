#!/usr/bin/env bash
# Image subtraction's difference image on the lent GPU machine (issue 15): ast3 (10240², the seed's camera) and
# ci in float32 and float64 on CUDA and NVIDIA OpenCL, the `cpu` model on the host's cores at ci, and
# (PROFILE=1) Nsight Compute's speed of light of the float32 kernel at ast3. Everything lands in $OUT, packed
# as imgsub-gpu.tgz with a summary. Build as docs/architecture.md says ("GPU evidence runs"); carry .carry.
set -uo pipefail
# The device tool returns at most 8 files: work in a folder of our own, hand back the archive and a summary.
final="${OUT:-out/gpu}"
mkdir -p "$final"
export OUT=$(mktemp -d)
source "$(dirname "$0")/gpu_common.sh"
status=0
run() {  # name, then astroport arguments
  local name=$1; shift
  local t0=$SECONDS
  "$bin" run imgsub "$@" --out "$out/rows" > "$out/$name.log" 2>&1 || status=1
  echo "$name: $((SECONDS - t0)) s wall"; grep -E "^│ " "$out/$name.log" | cut -c1-200
}
run ast3 --preset ast3 --precision f32,f64 --backend cuda --backend "$nv" --repeats 10
run ci --preset ci --precision f32,f64 --backend cuda --backend "$nv" --backend cpu --repeats 10
if [ "${PROFILE:-0}" = 1 ] && command -v ncu >/dev/null; then
  ncu --kernel-name regex:imgsub --section SpeedOfLight --section Occupancy --section LaunchStats \
    "$bin" run imgsub --preset ast3 --precision f32 --backend cuda --warmup 0 --repeats 1 \
    --out "$out/ncu-rows" > "$out/ncu-ast3.txt" 2>&1 || status=1
  grep -E "imgsub|Duration|Compute \(SM\) Throughput|Memory Throughput|Registers|Achieved Occupancy" \
    "$out/ncu-ast3.txt" | head -40
fi
if command -v cuobjdump >/dev/null; then
  cuobjdump -res-usage "$bin" 2>&1 | grep -A1 "imgsub" > "$out/res-usage.txt" || true
fi
tar czf "$final/imgsub-gpu.tgz" -C "$out" .
{ cat "$out/machine.txt"; for f in "$out"/*.log; do echo "== $(basename "$f")"; grep -E "^│ |^imgsub" "$f" \
  | cut -c1-200; done; } > "$final/summary.txt" 2>&1
exit $status
