#!/usr/bin/env bash
# The whole image subtraction on the lent GPU machine (issue 15): a 10240² field (the seed's camera) and a
# 2048² one generated there, subtracted file to file on CUDA and NVIDIA OpenCL (float32, exact kernel; CUDA
# also float64 and the 21×21 tile-constant kernel), timed by the device (median of 10 after 2 warm-ups) and
# by the wall clock (one cold run), with the peak GPU memory sampled by nvidia-smi, and scored against the
# truth. The difference kernel alone (`run imgsub`) at ast3, exact and tiled, for the ratios and registers.
# Everything lands in $OUT: one archive imgsub-subtract.tgz (outputs without the big FITS) and a summary.
# Build as docs/architecture.md says ("GPU evidence runs"); carry .carry.
set -uo pipefail
final="${OUT:-out/gpu}"
mkdir -p "$final"
export OUT=$(mktemp -d)
source "$(dirname "$0")/gpu_common.sh"
status=0
work=$(mktemp -d)
timed() {  # GNU time's report (wall clock, peak memory) on stderr, or the wall clock alone without it
  if [ -x /usr/bin/time ]; then /usr/bin/time -v "$@"; return; fi
  local t0 rc; t0=$(date +%s.%N); "$@"; rc=$?
  echo "Elapsed (wall clock) time: $(awk "BEGIN{print $(date +%s.%N) - $t0}") s" >&2; return $rc
}
for size in 2048 10240; do
  mkdir -p "$work/f$size"
  timed "$bin" field --size "$size" --out "$work/f$size" > "$out/field-$size.log" 2>&1 || status=1
  echo "field $size: $(grep -E 'Elapsed' "$out/field-$size.log")"
done
subtract() {  # name, size, then astroport subtract arguments
  local name=$1 size=$2; shift 2
  mkdir -p "$out/$name"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 50 > "$out/$name/gpu-memory.txt" 2>&1 &
  local sampler=$!
  timed "$bin" subtract --field "$work/f$size" --out "$out/$name" "$@" \
    > "$out/$name/stdout.txt" 2> "$out/$name/stderr.txt" || status=1
  kill "$sampler" 2>/dev/null
  rm -f "$out/$name"/*.fits
  echo "== $name"; cat "$out/$name/stdout.txt" | cut -c1-240
  grep -E "Elapsed|Maximum resident" "$out/$name/stderr.txt"
  echo "peak GPU memory (MiB, whole board): $(sort -n "$out/$name/gpu-memory.txt" | tail -1)"
}
# Cold, file to file, one run each (no warm-up: what a user's first call costs).
subtract cold-cuda-10k 10240 --backend cuda
subtract cold-opencl-10k 10240 --backend "$nv"
# Warm device timing: 2 warm-ups, median of 10.
subtract cuda-10k 10240 --backend cuda --warmup 2 --repeats 10
subtract opencl-10k 10240 --backend "$nv" --warmup 2 --repeats 10
subtract cuda-10k-f64 10240 --backend cuda --precision f64 --warmup 2 --repeats 10
subtract cuda-10k-tile21 10240 --backend cuda --tile 21 --warmup 2 --repeats 10
subtract cuda-2k 2048 --backend cuda --warmup 2 --repeats 10
subtract cpu16-2k 2048 --backend cpu
# The difference kernel alone, exact and tile-constant, for the OpenCL/CUDA ratio, registers and occupancy.
for tile in 0 21; do
  "$bin" run imgsub --preset ast3 --precision f32 --tile "$tile" --backend cuda --backend "$nv" --repeats 10 \
    --out "$out/rows" > "$out/run-tile$tile.log" 2>&1 || status=1
  grep -E "^│ " "$out/run-tile$tile.log" | cut -c1-200
done
tar czf "$final/imgsub-subtract.tgz" -C "$out" .
{ cat "$out/machine.txt"; for d in "$out"/*/; do [ -f "$d/stdout.txt" ] || continue; echo "== $(basename "$d")"
  cat "$d/stdout.txt"; grep -E "Elapsed|Maximum resident" "$d/stderr.txt"
  echo "peak GPU MiB: $(sort -n "$d/gpu-memory.txt" | tail -1)"; done
  for f in "$out"/run-*.log; do echo "== $(basename "$f")"; grep -E "^│ " "$f" | cut -c1-200; done
} > "$final/summary.txt" 2>&1
exit $status
