#!/usr/bin/env bash
# Lens image-plane χ² at the `hff` preset on the lent GPU machine: 24 mock systems, CUDA and NVIDIA OpenCL,
# each checked against the f64 CPU delensing. Build and carry as scripts/gpu_lens.sh says.
set -uo pipefail
out="${OUT:-out/gpu}"
mkdir -p "$out"
bin="${ASTROPORT_BIN:-.carry/astroport}"
icd=$(mktemp -d)
echo "libnvidia-opencl.so.1" > "$icd/nvidia.icd"
export OCL_ICD_VENDORS="$icd"
"$bin" run lens-chi2 --preset hff --backend cuda --backend opencl --repeats "${REPEATS:-7}" --out "$out" \
  --write-images "$out/mock-systems-hff.csv" 2>&1 | tee "$out/chi2.log"
