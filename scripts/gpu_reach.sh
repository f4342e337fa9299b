#!/usr/bin/env bash
# Which cubature method reaches what in high dimensions, on the lent GPU machine (CUDA): m-Cubes f1-f6 in
# 9, 10, 12 and 15 dimensions at 1e-3 and 1e-4, and PAGANI at 1e-3 in 12 and 15 dimensions, each capped at
# MAX_SECONDS (default 5); then m-Cubes f4 8D 1e-4 cold (one integration in a fresh process) and warm, for
# the one-time cost a command-line user pays. Rows: $OUT/results.jsonl; logs in $OUT.
set -uo pipefail
source "$(dirname "$0")/gpu_common.sh"
cap=${MAX_SECONDS:-5}
"$bin" run cubature --method mcubes --integrand f1,f2,f3,f4,f5,f6 --dim 9,10,12,15 --epsrel 1e-3,1e-4 \
  --max-seconds "$cap" --backend cuda --repeats 1 --warmup 0 --out "$out" > "$out/mcubes-high.log" 2>&1
grep "claim convergence" "$out/mcubes-high.log"
"$bin" run cubature --method pagani --integrand f1,f2,f3,f4,f5,f6 --dim 12,15 --epsrel 1e-3 \
  --max-seconds "$cap" --backend cuda --repeats 1 --warmup 0 --out "$out" > "$out/pagani-high.log" 2>&1
grep "claim convergence" "$out/pagani-high.log"
for i in 1 2 3; do
  /usr/bin/time -f "cold process: %e s wall" "$bin" run cubature --method mcubes --integrand f4 --dim 8 \
    --epsrel 1e-4 --backend cuda --repeats 1 --warmup 0 --out "$out/cold" 2>&1 | grep -E "wall|│ cubature" | cut -c1-160
done
"$bin" run cubature --method mcubes --integrand f4 --dim 8 --epsrel 1e-4 --backend cuda --repeats 5 --warmup 1 \
  --out "$out/warm" 2>&1 | grep -E "│ cubature" | cut -c1-160
