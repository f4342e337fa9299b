#!/usr/bin/env bash
# Lens `hff` preset on the lent GPU machine (no Rust there): CUDA and NVIDIA OpenCL in f32 and f64, plus
# the Rust `cpu` model on its cores, one invocation so ratios share one reference.
# Build here first:   cargo build --release --features cuda --target-dir target/gpu
#                     mkdir -p .carry && cp target/gpu/release/astroport .carry/
# Then run it there with .carry carried; results land in $OUT (results.jsonl, report.md, logs).
set -uo pipefail
out="${OUT:-out/gpu}"
mkdir -p "$out"
bin="${ASTROPORT_BIN:-.carry/astroport}"
icd=$(mktemp -d)
echo "libnvidia-opencl.so.1" > "$icd/nvidia.icd"
echo "libpocl.so.2" > "$icd/pocl.icd"
export OCL_ICD_VENDORS="$icd"
export CUDA_CACHE_DISABLE=1   # NVIDIA OpenCL returns no ptxas report for cached programs
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,power.limit,temperature.gpu --format=csv
  nproc; lscpu | grep "Model name"
} > "$out/machine.txt" 2>&1
"$bin" devices > "$out/devices.txt" 2>&1
cat "$out/devices.txt"
nv=$(awk '$2=="opencl" && /NVIDIA/ {print $1; exit}' "$out/devices.txt")
[ -n "$nv" ] || nv="opencl"   # no NVIDIA OpenCL: the row will say why
"$bin" bench --preset hff --backend cuda --backend "$nv" --backend cpu --repeats "${REPEATS:-7}" --out "$out" \
  2> "$out/bench.log"
status=$?
tail -n 5 "$out/bench.log"
exit $status
