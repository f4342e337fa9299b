#!/usr/bin/env bash
# Image subtraction scored against the truth (issue 15): the anchor field of research/imgsub.md §4 (seed
# 20110101) at 1024², 2048² and 10240², and fields not tuned on (768² seed 5, 1024² seed 42, 2048² seed 7),
# generated and subtracted file to file on one backend (default cpu), each subtraction's summary,
# quality.json and catalogue kept.
# Usage: scripts/imgsub_quality.sh OUT_DIR [BACKEND]   (needs the release binary; ~4 min on 2 cores)
set -euo pipefail
out=${1:?usage: scripts/imgsub_quality.sh OUT_DIR [BACKEND]}
backend=${2:-cpu}
bin="${ASTROPORT_BIN:-$(dirname "$0")/../target/release/astroport}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
for case in "1024 20110101" "2048 20110101" "10240 20110101" "768 5" "1024 42" "2048 7"; do
  set -- $case
  name="$1-seed$2"
  mkdir -p "$work/$name/field" "$work/$name/sub" "$out/$name"
  "$bin" field --size "$1" --seed "$2" --out "$work/$name/field" > /dev/null
  start=$(date +%s.%N)
  "$bin" subtract --field "$work/$name/field" --backend "$backend" --out "$work/$name/sub" \
    | tee "$out/$name/stdout.txt"
  echo "wall clock, file to file (scoring included): $(awk "BEGIN{print $(date +%s.%N) - $start}") s" \
    | tee -a "$out/$name/stdout.txt"
  cp "$work/$name/sub/quality.json" "$work/$name/sub/catalogue.csv" "$out/$name/"
  rm -rf "$work/$name"
done
