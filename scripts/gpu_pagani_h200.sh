#!/usr/bin/env bash
# The cubature evidence run on the lent H200 (reports/nvidia-h200/cubature.md): the PAGANI sweep on CUDA twice
# (run-to-run spread), the same sweep on NVIDIA OpenCL (portability ratio on identical work), m-Cubes on both,
# and the kernels' ptxas resources. PARTS picks a subset (default: all of "cuda cuda-repeat opencl mcubes").
# Rows: $OUT/<part>.jsonl; logs: $OUT/logs.tgz.
# Build here first:   cargo build --release --features cuda --target-dir target/gpu
#                     mkdir -p .carry && cp target/gpu/release/astroport .carry/
set -uo pipefail
base="${OUT:-out/gpu}"
status=0
parts=${PARTS:-cuda cuda-repeat opencl mcubes}
for part in $parts; do
  case $part in
    cuda|cuda-repeat) env OUT="$base/$part" STAGE=sweep SWEEP_BACKEND=cuda MAX_SECONDS=12 bash scripts/gpu_cubature.sh ;;
    opencl) env OUT="$base/$part" STAGE=sweep SWEEP_BACKEND=nvidia-opencl MAX_SECONDS=12 bash scripts/gpu_cubature.sh ;;
    mcubes) env OUT="$base/$part" STAGE=mcubes MAX_SECONDS=8 bash scripts/gpu_cubature.sh ;;
  esac | grep -v "^│" || status=1
  cp "$base/$part/results.jsonl" "$base/$part.jsonl"
done
first=${parts%% *}
cp "$base/$first/machine.txt" "$base/$first/devices.txt" "$base/"
command -v cuobjdump >/dev/null && cuobjdump -res-usage .carry/astroport 2>&1 | grep -A1 "cub_" > "$base/$first/res-usage-cubature.txt"
tar czf "$base/logs.tgz" -C "$base" $parts
for part in $parts; do rm -rf "${base:?}/$part"; done
exit $status
