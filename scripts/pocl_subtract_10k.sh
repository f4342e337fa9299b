#!/usr/bin/env bash
# One `astroport subtract` of a 10240² field on PoCL (the 2-core VM's CPU timings of issue 15), for
# farm-bench: BIN [flags...] runs BIN on the six named images of $FIELD (default /tmp/f10k, made by
# `astroport field --size 10240 --seed 1 --out /tmp/f10k`) with `--backend opencl:0:0 --no-fsync` into a
# fresh folder, appends its summary lines to $LOG (default /tmp/pocl-subtract.log) and removes the outputs.
#   farm-bench -n 3 --warmup 1 --timeout 900 --vs "scripts/pocl_subtract_10k.sh BASE_BIN" -- \
#     scripts/pocl_subtract_10k.sh target/release/astroport
set -uo pipefail
bin=$1; shift
f=${FIELD:-/tmp/f10k}
d=$(mktemp -d)
source "$(dirname "$0")/env.sh"
"$bin" subtract --ref "$f/ref.fits" --sci "$f/sci.fits" --ref-var "$f/ref.var.fits" --sci-var "$f/sci.var.fits" \
  --ref-mask "$f/ref.mask.fits" --sci-mask "$f/sci.mask.fits" --out "$d" --backend opencl:0:0 --no-fsync "$@" \
  > "$d/out.txt" 2>&1
rc=$?
grep -E "file to file|steps" "$d/out.txt" >> "${LOG:-/tmp/pocl-subtract.log}"
rm -rf "$d"
exit $rc
