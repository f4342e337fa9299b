#!/usr/bin/env bash
# Lens `hff` preset on the lent GPU machine (no Rust there): CUDA and NVIDIA OpenCL in every numeric mode
# (f32, f64, mixed, mixed-patches, mixed-paper, mixed-budget), plus the Rust `cpu` model on its cores for
# f32 and f64 (WITH_CPU=1). One `run` per mode (each computes its own f64 reference). Then energy runs (GPU
# power sampled through nvidia-smi/NVML while a mode runs many repeats) and the SASS of the grid kernels.
# Build here first:   cargo build --release --features cuda --target-dir target/gpu
#                     mkdir -p .carry && cp target/gpu/release/astroport .carry/
# Then run it there with .carry carried.
# The device tool returns at most 8 files: everything is written to a scratch folder and $OUT gets one
# archive, lens-gpu.tgz (results.jsonl and report.md of every mode, energy runs, power samples, SASS, χ²).
set -uo pipefail
GPU_WITH_POCL=1
source "$(dirname "$0")/gpu_common.sh"
archive="$out"
out=$(mktemp -d)
mv "$archive"/machine.txt "$archive"/devices.txt "$out"/
modes="${MODES:-f32 f64 mixed mixed-patches mixed-paper mixed-budget}"
status=0
for p in $modes; do
  cpu=""
  case $p in f32|f64) cpu=${WITH_CPU:+--backend cpu} ;; esac
  "$bin" run lens --preset hff --precision "$p" --backend cuda --backend "$nv" $cpu --repeats "${REPEATS:-7}" \
    --out "$out" 2>> "$out/bench.log" || status=1
done
tail -n 5 "$out/bench.log"

# Energy: sample board power every 10 ms while one mode runs 40 timed repeats on CUDA.
if [ -z "${NO_ENERGY:-}" ]; then
  for p in ${ENERGY_MODES:-$modes}; do
    nvidia-smi --query-gpu=timestamp,power.draw.instant,clocks.sm --format=csv,noheader,nounits -lms 10 \
      > "$out/power-$p.csv" 2>&1 &
    smi=$!
    sleep 0.5
    "$bin" run lens --preset hff --precision "$p" --backend cuda --repeats "${ENERGY_REPEATS:-40}" --warmup 3 \
      --out "$out/energy-$p" > "$out/energy-$p.log" 2>&1
    sleep 0.3
    kill $smi 2>/dev/null; wait $smi 2>/dev/null
  done
fi
# SASS of the lens kernels, for the instruction-mix notes (-fun needs the mangled names).
if command -v cuobjdump >/dev/null; then
  cuobjdump -sass -fun _Z13lens_grid_f32PKfiS0_iiiifiPfS1_ "$bin" > "$out/sass-lens_grid_f32.txt" 2>&1 || true
  cuobjdump -sass -fun _Z13lens_grid_f64PKdiS0_iiiidiPdS1_ "$bin" > "$out/sass-lens_grid_f64.txt" 2>&1 || true
  cuobjdump -res-usage "$bin" > "$out/res-usage.txt" 2>&1 || true
fi
# The image-plane χ² (24 mock systems) on CUDA and NVIDIA OpenCL.
if [ -z "${NO_CHI2:-}" ]; then
  OUT="$out/chi2" ASTROPORT_BIN="$bin" bash "$(dirname "$0")/gpu_chi2.sh" > /dev/null 2>&1 || status=1
fi
tar czf "$archive/lens-gpu.tgz" -C "$out" .
exit $status
