#!/usr/bin/env bash
# PAGANI's claims on the lent GPU machine: f1-f6 in DIMS dimensions (default 3,4,6,7,9,10) at 1e-4..1e-6 on
# CUDA, each integration capped at MAX_SECONDS (default 8) of wall time; every claim of convergence is checked
# against the closed-form truth (a false claim is a failed row). Rows: $OUT/results.jsonl; log: $OUT/coverage.log.
# Build as docs/architecture.md says ("GPU evidence runs"); carry .carry.
set -uo pipefail
source "$(dirname "$0")/gpu_common.sh"
t0=$SECONDS
"$bin" run cubature --method pagani --integrand f1,f2,f3,f4,f5,f6 --dim "${DIMS:-3,4,6,7,9,10}" \
  --epsrel 1e-4,1e-5,1e-6 --max-seconds "${MAX_SECONDS:-8}" --backend "${BACKEND:-cuda}" --repeats 1 --warmup 0 \
  ${CUBATURE_ARGS:-} --out "$out" > "$out/coverage.log" 2>&1
status=$?
echo "coverage sweep: $((SECONDS - t0)) s wall, exit $status"
grep "claim convergence" "$out/coverage.log"
grep -E "failed —" "$out/coverage.log" | head -20
exit $status
