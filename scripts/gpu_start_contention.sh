#!/usr/bin/env bash
# Issue 15: does the CUDA runtime's start slow down beside `subtract`'s read? The start probe
# (scripts/probes/cuda_start.cu, carried as .carry/start_probe) alone and beside threads faulting in fresh
# memory, then `subtract` at 10240² with the read beside the backend's start and after it
# (ASTROPORT_PROBE_READ_AFTER_PREPARE). Results under $OUT.
set -uo pipefail
final="${OUT:-out/gpu}"
mkdir -p "$final"
[ -x .carry/start_probe ] || { echo "no .carry/start_probe: build it as scripts/probes/cuda_start.cu's header says" >&2; exit 1; }
{
  for r in 1 2 3; do
    # 8 threads leave cores free, 16 fill them: a slowdown at 16 alone is the CPU, at both the faults.
    for load in "" "LOAD=8" "LOAD=16" "LOAD=8 LOAD_HUGE=1"; do
      echo "== probe ${load:-no load} ($r)"
      env $load .carry/start_probe
    done
  done
} > "$final/start_probe.txt" 2>&1
OUT="$final" bash "$(dirname "$0")/gpu_subtract_ab.sh" "${REPS:-3}" "beside=-" "after=ASTROPORT_PROBE_READ_AFTER_PREPARE=1"
