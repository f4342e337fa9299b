#!/usr/bin/env bash
# A/B timing of `astroport subtract` at 10240² on the lent GPU machine, variants interleaved in one lending
# (machines differ by 10-40 % in host work between lendings, so only runs of one lending compare). Each
# variant is an environment setting; every run is --no-fsync (FSYNC=1: synced) and traced, and its line ends with a
# hash of its planes' data and catalogue (SETTLE=1: `sync` before each run). Results: $OUT/ab.tgz, $OUT/ab.txt.
# Usage: bash scripts/gpu_subtract_ab.sh REPS "NAME=ENV ..." ...   (ENV as VAR=value,VAR=value or "-";
# BIN=path among a variant's settings runs that binary, e.g. the one before a change; VARIANT_BIN=path sets it
# for every variant; BANDS=N runs it with --significance-band-rows N, which binaries from c4d0bac on take)
set -uo pipefail
final="${OUT:-out/gpu}"
mkdir -p "$final"
export OUT=$(mktemp -d)
source "$(dirname "$0")/gpu_common.sh"
reps=$1; shift
make_field 10240
for r in $(seq 1 "$reps"); do
  for v in "$@"; do
    name=${v%%=*}; envs=${v#*=}
    d="$out/$name-$r"; mkdir -p "$d"
    # SETTLE=1: the page cache's dirty pages (the run before's planes) written back first, so that no run
    # starts beside the writeback of another's outputs.
    [ -z "${SETTLE:-}" ] || sync
    ( [ "$envs" = "-" ] || export $(echo "$envs" | tr ',' ' ')
      ASTROPORT_TRACE_JOBS=1 "${BIN:-${VARIANT_BIN:-$bin}}" subtract --out "$d" "${plain[@]}" --backend cuda ${nofsync[@]+"${nofsync[@]}"} \
        ${BANDS:+--significance-band-rows "$BANDS"} \
        > "$d/stdout.txt" 2> "$d/stderr.txt" )
    # One hash of the planes' data and the catalogue: variants that compute the same must write the same.
    if planes=$(python3 "$(dirname "$0")/probes/fits_data_md5.py" "$d"/*.fits) \
      && catalogue=$(md5sum < "$d/catalogue.csv"); then
      sums=$(printf '%s\n%s\n' "$planes" "$catalogue" | md5sum | cut -c1-10)
    else
      sums=ERR
    fi
    rm -f "$d"/*.fits
    echo "$name $r $(grep -o 'file to file [0-9.]* s' "$d/stdout.txt") | $(grep -o 'steps: .*' "$d/stdout.txt") | outputs $sums"
  done
done | tee "$final/ab.txt"
{ cat "$out/machine.txt"; cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag; } >> "$final/ab.txt" 2>&1
tar czf "$final/ab.tgz" -C "$out" .
