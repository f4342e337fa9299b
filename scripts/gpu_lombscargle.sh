#!/usr/bin/env bash
# Lomb-Scargle on the lent GPU machine (no Rust there): presets ci, corot and survey on CUDA and NVIDIA
# OpenCL, f32 and f64, plus the Rust `cpu` model on the machine's cores (ci, and corot f32 once). Then the SASS
# and resource usage of every kernel, and one archive of everything.
# Build here first:   cargo build --release --features cuda --target-dir target/gpu
#                     mkdir -p .carry && cp target/gpu/release/astroport .carry/
# Then run it there with .carry carried; results land in $OUT (results.jsonl, report.md, logs, ls-gpu.tgz).
set -uo pipefail
source "$(dirname "$0")/gpu_common.sh"
status=0
run() {  # name, then astroport arguments
  local name=$1; shift
  local t0=$SECONDS
  "$bin" run lombscargle "$@" --out "$out" > "$out/$name.log" 2>&1 || status=1
  echo "$name: $((SECONDS - t0)) s wall"; grep -E "lombscargle ┆" "$out/$name.log" | cut -c1-250
}
run ci-f32 --preset ci --backend cuda --backend "$nv" --backend cpu --precision f32 --repeats 5
run ci-f64 --preset ci --backend cuda --backend "$nv" --backend cpu --precision f64 --repeats 5
run corot-f32 --preset corot --backend cuda --backend "$nv" --precision f32 --repeats "${REPEATS:-5}"
run corot-fixed-f32 --preset corot --model fixed --backend cuda --backend "$nv" --precision f32 --repeats 3
run corot-f64 --preset corot --backend cuda --backend "$nv" --precision f64 --repeats 3
run survey-f32 --preset survey --backend cuda --backend "$nv" --precision f32 --repeats 3
[ -n "${NO_CPU_COROT:-}" ] || run corot-cpu-f32 --preset corot --backend cpu --precision f32 --warmup 0 --repeats 1
if command -v cuobjdump >/dev/null; then
  cuobjdump -res-usage "$bin" > "$out/res-usage.txt" 2>&1 || true
  cuobjdump -sass "$bin" > "$out/sass-all.txt" 2>&1 || true
fi
tar czf "$out/../ls-gpu.tgz" -C "$out" . && mv "$out/../ls-gpu.tgz" "$out/ls-gpu.tgz"
exit $status
