#!/usr/bin/env bash
# The lens split's `cpu` model on the lent GPU machine's host cores, two binaries alternating (issue 17):
# `ci` with 2 and 16 threads (split and direct float32) and `hff` with 16 (split, warm). Usage:
# gpu_lens_cpu_ab.sh NAME=BINARY NAME=BINARY; rows and logs go to $OUT/cpu-ab/.
set -uo pipefail
source "$(dirname "$0")/gpu_common.sh"
mkdir -p "$out/cpu-ab"
status=0
run() {
  local name=$1 bin=$2 threads=$3; shift 3
  RAYON_NUM_THREADS=$threads "$bin" run lens "$@" --precision f32 --backend cpu \
    --out "$out/cpu-ab/$name" > "$out/cpu-ab/$name.log" 2>&1 || status=1
  echo "$name: $(grep -E '^\s+-> cpu' "$out/cpu-ab/$name.log" | tr '\n' ' ')"
}
for k in 1 2 3; do
  for pair in "$@"; do
    run "${pair%%=*}-ci-2-$k" "${pair#*=}" 2 --preset ci --method split,direct --repeats 21
  done
done
for k in 1 2; do
  for pair in "$@"; do
    run "${pair%%=*}-ci-16-$k" "${pair#*=}" 16 --preset ci --method split,direct --repeats 21
  done
done
for pair in "$@"; do
  run "${pair%%=*}-hff-16" "${pair#*=}" 16 --preset hff --method split --repeats 5 --warmup 1
done
exit $status
