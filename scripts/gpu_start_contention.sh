#!/usr/bin/env bash
# Issue 15: does the CUDA runtime's start slow down beside `subtract`'s read? The start probe
# (scripts/probes/cuda_start.cu, carried as .carry/start_probe) alone and beside threads faulting in fresh
# memory, then `subtract` at 10240² with the read beside the backend's start and after it
# (ASTROPORT_PROBE_READ_AFTER_PREPARE). Results under $OUT.
set -uo pipefail
final="${OUT:-out/gpu}"
mkdir -p "$final"
{
  for r in 1 2 3; do
    for load in "" "LOAD=16" "LOAD=16 LOAD_HUGE=1"; do
      echo "== probe ${load:-no load} ($r)"
      env $load .carry/start_probe
    done
  done
} > "$final/start_probe.txt" 2>&1
OUT="$final" bash "$(dirname "$0")/gpu_subtract_ab.sh" "${REPS:-3}" "beside=-" "after=ASTROPORT_PROBE_READ_AFTER_PREPARE=1"
