#!/usr/bin/env bash
# Regression timing on the lent GPU machine: lens hff f32, Lomb-Scargle corot f32 and PAGANI f4 8D 1e-5, each
# on CUDA and NVIDIA OpenCL, for every carried binary (.carry/astroport, labelled "new", and each
# .carry/astroport-LABEL, for example an older commit), the binaries interleaved over ROUNDS rounds so they see
# the same clocks. Rows: $OUT/runs.tgz (LABEL-ROUND/results.jsonl; older binaries may write other schemas).
# Build as docs/architecture.md says ("GPU evidence runs"); carry .carry.
set -uo pipefail
source "$(dirname "$0")/gpu_common.sh"
work=$(mktemp -d)
status=0
for round in $(seq 1 "${ROUNDS:-2}"); do
  for b in .carry/astroport .carry/astroport-*; do
    [ -x "$b" ] || continue
    label=${b#.carry/astroport}; label=${label#-}; label=${label:-new}
    dir="$work/$label-$round"
    mkdir -p "$dir"
    t0=$SECONDS
    "$b" run lens --preset hff --precision f32 --backend cuda --backend "$nv" --repeats 7 --out "$dir" \
      > "$dir/lens.log" 2>&1 || status=1
    "$b" run lombscargle --preset corot --precision f32 --backend cuda --backend "$nv" --repeats 5 --out "$dir" \
      > "$dir/ls.log" 2>&1 || status=1
    "$b" run cubature --method pagani --integrand f4 --dim 8 --epsrel 1e-5 --backend cuda --backend "$nv" \
      --warmup 1 --repeats 3 --out "$dir" > "$dir/pagani.log" 2>&1 || status=1
    echo "$label round $round: $((SECONDS - t0)) s"
    grep -hE "^│ (lens|lombscargle|cubature)" "$dir"/*.log | cut -c1-200
    grep -hE "^│ (pagani|mcubes)" "$dir"/*.log | cut -c1-200
  done
done
cp "$out"/machine.txt "$out"/devices.txt "$work"/
tar czf "$out/runs.tgz" -C "$work" .
exit $status
