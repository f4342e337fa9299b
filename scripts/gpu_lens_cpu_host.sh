#!/usr/bin/env bash
# The lens split's `cpu` model on the lent GPU machine's host cores (issue 17): `ci` with 2 and 16 threads
# and `hff` with 16, split against direct float32, every pixel checked against the float64 reference. Rows
# and logs go to $OUT/cpu-host/. Carry .carry with the binary (scripts/gpu_lens.sh says how to build it).
set -uo pipefail
source "$(dirname "$0")/gpu_common.sh"
status=0
run() {
  local name=$1 threads=$2; shift 2
  RAYON_NUM_THREADS=$threads "$bin" run lens "$@" --precision f32 --method direct,split --backend cpu \
    --out "$out/cpu-host/$name" > "$out/cpu-host/$name.log" 2>&1 || status=1
  echo "$name: $(grep -E '^\s+-> cpu' "$out/cpu-host/$name.log" | tr '\n' ' ')"
}
mkdir -p "$out/cpu-host"
for k in 1 2; do
  run "ci-2-$k" 2 --preset ci --repeats 21
  run "ci-16-$k" 16 --preset ci --repeats 21
done
run hff-16 16 --preset hff --repeats 3
exit $status
