#!/usr/bin/env bash
# One `subtract` on the local OpenCL device (PoCL) with an empty program-binary cache, so that every program
# the run needs is built: for farm-bench A/B timing of program builds (docs/perf-notes.md, "Review of the whole
# change"). Usage: scripts/pocl_subtract_cold.sh BINARY FIELD_DIR (a folder written by `astroport field`).
set -uo pipefail
cache=$(mktemp -d); out=$(mktemp -d)
ASTROPORT_CACHE_DIR=$cache "$1" subtract --field "$2" --out "$out" --backend opencl --no-fsync > /dev/null 2>&1
rc=$?
echo "$(find "$cache" -type f | wc -l) program binaries built" >&2
rm -rf "$cache" "$out"
exit $rc
