#!/usr/bin/env bash
# dPIE on the lent GPU machine (issue 19, item 6). PART=accuracy: the hff preset as dPIE halos (--profile dpie)
# in f32, f64 and mixed-budget on CUDA and NVIDIA OpenCL, verified against the float64 cpu reference (about
# 3 minutes of the machine's cores). PART=timing: kernel times of every carried binary (.carry/astroport and
# .carry/astroport-LABEL) on one dPIE catalogue (.carry/dpie-hff.csv, the same halos written as CSV so that
# binaries without --profile read them) on a 2048² grid of the hff field, interleaved over ROUNDS rounds.
# Build as docs/architecture.md says ("GPU evidence runs"); carry .carry.
set -uo pipefail
source "$(dirname "$0")/gpu_common.sh"
status=0
case "${PART:-accuracy}" in
  accuracy)
    "$bin" run lens --preset hff --profile dpie --precision f32,f64,mixed-budget --backend cuda --backend "$nv" \
      --repeats 5 --out "$out/dpie-hff" > "$out/dpie-hff.log" 2>&1 || status=1
    grep -E "^│|halos" "$out/dpie-hff.log" | cut -c1-260
    ;;
  timing)
    for round in $(seq 1 "${ROUNDS:-2}"); do
      for b in .carry/astroport .carry/astroport-*; do
        [ -x "$b" ] || continue
        label=${b#.carry/astroport}; label=${label#-}; label=${label:-new}
        "$b" run lens --preset hff --size 2048 --halos .carry/dpie-hff.csv --precision f32 --backend cuda \
          --backend "$nv" --repeats 7 --out "$out/timing/$label-$round" > "$out/timing-$label-$round.log" 2>&1 \
          || status=1
        echo "$label round $round"
        grep -E "^│ lens" "$out/timing-$label-$round.log" | cut -c1-260
      done
    done
    ;;
esac
exit $status
