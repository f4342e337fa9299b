#!/usr/bin/env bash
# `subtract --pairs` on the lent GPU machine (issue 15): a 10240² field made there, then the same pair
# listed PAIRS times (names p1..pN) and subtracted in one process on CUDA, against one process per pair,
# interleaved REPS times; --no-fsync unless FSYNC=1. Results: $OUT/pairs.txt and $OUT/pairs.tgz.
# Usage: bash scripts/gpu_subtract_pairs.sh [PAIRS [REPS]]
set -uo pipefail
final="${OUT:-out/gpu}"
mkdir -p "$final"
export OUT=$(mktemp -d)
source "$(dirname "$0")/gpu_common.sh"
pairs=${1:-4}; reps=${2:-2}
make_field 10240
work=$(mktemp -d)
{
  echo "name,ref,sci,ref_var,sci_var,ref_mask,sci_mask"
  for p in $(seq 1 "$pairs"); do
    echo "p$p,$f/ref.fits,$f/sci.fits,$f/ref.var.fits,$f/sci.var.fits,$f/ref.mask.fits,$f/sci.mask.fits"
  done
} > "$work/pairs.csv"
for r in $(seq 1 "$reps"); do
  d="$out/single-$r"; mkdir -p "$d"
  /usr/bin/time -f "%e s wall" "$bin" subtract --out "$d" "${plain[@]}" --backend cuda \
    ${nofsync[@]+"${nofsync[@]}"} > "$d/stdout.txt" 2> "$d/stderr.txt"
  rm -f "$d"/*.fits
  echo "single $r: $(grep -o 'file to file [0-9.]* s' "$d/stdout.txt") ($(tail -1 "$d/stderr.txt"))"
  d="$out/list-$r"; mkdir -p "$d"
  /usr/bin/time -f "%e s wall" "$bin" subtract --pairs "$work/pairs.csv" --out "$d" --backend cuda \
    ${nofsync[@]+"${nofsync[@]}"} > "$d/stdout.txt" 2> "$d/stderr.txt"
  rm -f "$d"/*/*.fits
  echo "list $r: $(grep -o 'file to file [0-9.]* s' "$d/stdout.txt" | tr '\n' ' ')"
  echo "list $r: $(grep 'pairs subtracted' "$d/stdout.txt") ($(tail -1 "$d/stderr.txt"))"
done | tee "$final/pairs.txt"
cat "$out/machine.txt" >> "$final/pairs.txt"
tar czf "$final/pairs.tgz" -C "$out" .
