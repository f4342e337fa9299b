#!/usr/bin/env bash
# Cubature on the lent GPU machine (no Rust there): PAGANI and m-Cubes on CUDA and NVIDIA OpenCL for the
# seed's grid of integrands, dimensions and tolerances, plus the Σx control. Rows land in $OUT/results.jsonl,
# logs in $OUT/*.log. STAGE picks a part (each fits one 10-minute device call):
#   probe   one quick PAGANI and m-Cubes run per backend
#   pagani  PAGANI f1..f6 and sum, 5D and 8D, epsrel 1e-3..1e-6, on CUDA then NVIDIA OpenCL
#           (PAGANI_BACKENDS="cuda" or ="opencl:1:0" for one of them; PAGANI_EPS8 narrows the 8D tolerances)
#   mcubes  m-Cubes f1..f6 and sum, 6D and 8D, epsrel 1e-3 and 1e-4, on both
#   sweep   PAGANI on one backend (SWEEP_BACKEND, default cuda): 5D and 8D, epsrel 1e-3..1e-6, with f2 8D
#           (which neither we nor upstream converge) at 1e-3 only
# CUBATURE_ARGS adds options to every run (for example --working-regions 16777216).
# Build here first:   cargo build --release --features cuda --target-dir target/gpu
#                     mkdir -p .carry && cp target/gpu/release/astroport .carry/
set -uo pipefail
source "$(dirname "$0")/gpu_common.sh"
status=0
cap=${MAX_SECONDS:-25}
run() {  # name, then astroport arguments
  local name=$1; shift
  local t0=$SECONDS
  "$bin" run cubature "$@" ${CUBATURE_ARGS:-} --max-seconds "$cap" --repeats "${REPEATS:-1}" --warmup "${WARMUP:-0}" \
    --out "$out" > "$out/$name.log" 2>&1 || status=1
  echo "$name: $((SECONDS - t0)) s wall"; grep -E "^│ cubature" "$out/$name.log" | cut -c1-260
  grep "claim convergence" "$out/$name.log"
}
case "${STAGE:-probe}" in
  probe)
    run probe-pagani --method pagani --integrand f4,f1 --dim 8 --epsrel 1e-3 --backend cuda --backend "$nv"
    run probe-mcubes --method mcubes --integrand f4 --dim 8 --epsrel 1e-4 --backend cuda --backend "$nv" ;;
  pagani)
    for be in ${PAGANI_BACKENDS:-cuda $nv}; do
      run "pagani-5d-$be" --method pagani --integrand sum,f1,f2,f3,f4,f5,f6 --dim 5 --epsrel 1e-3,1e-4,1e-5,1e-6 --backend "$be"
      run "pagani-8d-$be" --method pagani --integrand sum,f1,f2,f3,f4,f5,f6 --dim 8 --epsrel "${PAGANI_EPS8:-1e-3,1e-4,1e-5,1e-6}" --backend "$be"
    done ;;
  sweep)
    be=${SWEEP_BACKEND:-cuda}; [ "$be" = nvidia-opencl ] && be=$nv
    run "sweep-5d-$be" --method pagani --integrand sum,f1,f2,f3,f4,f5,f6 --dim 5 --epsrel 1e-3,1e-4,1e-5,1e-6 --backend "$be"
    run "sweep-8d-$be" --method pagani --integrand sum,f1,f3,f4,f5,f6 --dim 8 --epsrel 1e-3,1e-4,1e-5,1e-6 --backend "$be"
    run "sweep-8d-f2-$be" --method pagani --integrand f2 --dim 8 --epsrel 1e-3 --backend "$be" ;;
  mcubes)
    run mcubes --method mcubes --integrand sum,f1,f2,f3,f4,f5,f6 --dim 6,8 --epsrel 1e-3,1e-4 --backend cuda --backend "$nv" ;;
esac
if [ "${STAGE:-probe}" = probe ] && command -v cuobjdump >/dev/null; then
  cuobjdump -res-usage "$bin" 2>&1 | grep -A1 "cub_" > "$out/res-usage-cubature.txt" || true
fi
exit $status
