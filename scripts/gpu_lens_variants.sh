#!/usr/bin/env bash
# Float32 grid geometry experiment on the lent GPU machine: one carried binary per work-item shape
# (.carry/astroport-PPIxRPI, built by changing LENS_PIXELS_PER_ITEM_f32/LENS_ROWS_PER_ITEM_f32 and the mirrored
# constants in src/workload/lens/mod.rs), each timed on the hff f32 grid (CUDA and NVIDIA OpenCL) and in the
# mixed-budget scheme (CUDA), with the SM clock sampled meanwhile. Everything ends in one archive in $OUT.
set -uo pipefail
source "$(dirname "$0")/gpu_common.sh"
work=$(mktemp -d)
mv "$out"/*.txt "$work"/ 2>/dev/null
for b in .carry/astroport-*; do
  v=${b#.carry/astroport-}
  nvidia-smi --query-gpu=timestamp,power.draw.instant,clocks.sm --format=csv,noheader,nounits -lms 20 \
    > "$work/clock-$v.csv" 2>&1 &
  smi=$!
  "$b" run lens --preset hff --precision f32 --backend cuda --backend "$nv" --repeats "${REPEATS:-7}" \
    --out "$work/$v" > "$work/$v-f32.log" 2>&1
  "$b" run lens --preset hff --precision mixed-budget --backend cuda --repeats "${REPEATS:-7}" \
    --out "$work/$v" > "$work/$v-mixed-budget.log" 2>&1
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  grep "│ lens" "$work/$v"-*.log
done
tar czf "$out/lens-variants.tgz" -C "$work" .
