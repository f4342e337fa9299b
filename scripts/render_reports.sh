#!/usr/bin/env bash
# Renders every committed report's figures and tables from its rows with `astroport report` (report.md and
# SVG figures in each folder named below), then the whole study across machines in reports/study/.
# Usage: scripts/render_reports.sh [path/to/astroport]   (default target/release/astroport)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/astroport}
render() { # OUT TITLE INPUT... (rows repeated by a re-run replace the earlier ones: --latest)
  render_all "$@" --latest
}
render_all() { # OUT TITLE INPUT... (every row kept: old against new, one binary per kernel shape)
  local out=$1 title=$2
  shift 2
  # Only what a previous rendering wrote: the folder may hold the rows and logs themselves.
  mkdir -p "$out" && rm -f "$out"/report.md "$out"/*.svg
  "$bin" report "$@" --out "$out" --title "$title" > /dev/null
}
h100=reports/nvidia-h100 h200=reports/nvidia-h200 cpu=reports/cpu-2core
render $h100/cubature/report "H100: PAGANI and m-Cubes, CUDA and NVIDIA OpenCL (2026-11-29)" $h100/cubature
render $h100/lombscargle "H100: Lomb-Scargle direct sums (2026-11-29)" $h100/lombscargle
render $h100/lens-report "H100: lens hff gradients (2026-11-29)" $h100/lens-hff.jsonl
render $h100/energy/report "H100: lens hff, energy runs (2026-11-29)" $h100/energy/run-*.jsonl
render $h200/cubature/report "H200: PAGANI and m-Cubes sweep, CUDA and NVIDIA OpenCL (2026-12-01)" \
  $h200/cubature/cuda.jsonl $h200/cubature/opencl.jsonl $h200/cubature/opencl-8d.jsonl $h200/cubature/mcubes.jsonl
render $h200/cubature/working16M-report "H200: cubature sweep at --working-regions 16777216 (2026-12-01)" \
  $h200/cubature/cuda-working16M.jsonl $h200/cubature/opencl-working16M.jsonl
render $h200/coverage/report "H200: are the cubature claims true? (2026-12-01)" $h200/coverage/*.jsonl
render_all $h200/cold-start/report "H200: cubature cold start, old and new (2026-12-01)" $h200/cold-start/*.jsonl
render $h200/dpie/report "H200: lens with dPIE galaxies (2026-12-01)" $h200/dpie/*.jsonl
render $h200/lens/run "H200: lens hff, every mode (2026-12-01)" $h200/lens/run/results.jsonl
render_all $h200/lens/variants/report "H200: lens kernel shapes (2026-12-01)" $h200/lens/variants/*.jsonl
render_all $h200/regression/report "H200: kernel times across the workload-seam refactor (2026-12-01)" \
  $h200/regression/old-1 $h200/regression/old-1/cubature.jsonl $h200/regression/old-2 \
  $h200/regression/old-2/cubature.jsonl $h200/regression/new-1 $h200/regression/new-2
render $h200/sht-device "H200: spherical harmonics on the device" $h200/sht-device
render $h200/sht-cpu/report "H200 host: spherical harmonics on 16 cores" $h200/sht-cpu
render $h200/sht-highl/report "H200: spherical harmonics at high l" $h200/sht-highl
render $h200/lombscargle-nufft "H200: Lomb-Scargle by NUFFT (2026-12-02)" $h200/lombscargle-nufft
render_all $h200/imgsub/report "H200: image subtraction, the difference image, four kernels (2026-12-02)" \
  $h200/imgsub/run-7881aa6/rows $h200/imgsub/run-2f3c0d5/rows $h200/imgsub/run-36ac207/rows \
  $h200/imgsub/run-28f2559/rows
render_all $h200/imgsub/subtract-9433d6d/report \
  "H200: image subtraction, the difference kernel exact and with 21x21 tiles (2026-12-02)" \
  $h200/imgsub/subtract-9433d6d/run-imgsub/results.jsonl
render $cpu/cubature-report "2-core VM: PAGANI and m-Cubes on the cpu model and PoCL" \
  $cpu/cubature.jsonl $cpu/cubature-8d-vs-cuhre.jsonl
render $cpu/lens-report "2-core VM: lens ci" $cpu/lens.jsonl
render_all $cpu/lens-split/report "2-core VM: lens ci, split against direct float32 (2026-12-05)" \
  $cpu/lens-split/run-1 $cpu/lens-split/run-2 $cpu/lens-split/run-3
render $cpu/lombscargle-ci-report "2-core VM: Lomb-Scargle ci" $cpu/lombscargle-ci.jsonl
render_all $cpu/pocl-vectorize "2-core VM: Lomb-Scargle ci f32 on PoCL, before and after the loop hint" \
  $cpu/pocl-vectorize/before $cpu/pocl-vectorize/after
# The whole study: the latest figures of each workload on each machine.
render reports/study "astroport: the porting study across machines" \
  $h200/lens/run/results.jsonl $h200/lombscargle-nufft $h200/sht-device $h200/cubature/cuda.jsonl \
  $h200/cubature/opencl.jsonl $h200/cubature/opencl-8d.jsonl $h200/cubature/mcubes.jsonl $h100/lombscargle \
  $h200/imgsub/run-28f2559/rows $cpu/lens.jsonl $cpu/lombscargle-ci.jsonl $cpu/pocl-vectorize/after \
  $cpu/cubature.jsonl
