#!/usr/bin/env bash
# A/B timing of `astroport subtract` at 10240² on the lent GPU machine, variants interleaved in one lending
# (machines differ by 10-40 % in host work between lendings, so only runs of one lending compare). Each
# variant is an environment setting; every run is --no-fsync (FSYNC=1: synced) and traced, and its line ends with a
# hash of its planes' data and catalogue (SETTLE=1: `sync` before each run). Results: $OUT/ab.tgz, $OUT/ab.txt.
# Usage: bash scripts/gpu_subtract_ab.sh REPS "NAME=ENV ..." ...   (ENV as VAR=value,VAR=value or "-";
# BIN=path among a variant's settings runs that binary, e.g. the one before a change; VARIANT_BIN=path sets it
# for every variant; BANDS=N runs it with --significance-band-rows N, which binaries from c4d0bac on take;
# SLEEP=S among a variant's settings waits S seconds before its run, PRE=1k runs a 1024² subtraction just
# before it: how the start depends on what ran before)
set -uo pipefail
final="${OUT:-out/gpu}"
mkdir -p "$final"
export OUT=$(mktemp -d)
source "$(dirname "$0")/gpu_common.sh"
reps=$1; shift
if [[ "$*" == *PRE=1k* ]]; then
  small=$(mktemp -d); "$bin" field --size 1024 --out "$small" > /dev/null 2>&1 || exit 1
  small_pair=(--ref "$small/ref.fits" --sci "$small/sci.fits" --ref-var "$small/ref.var.fits"
              --sci-var "$small/sci.var.fits" --ref-mask "$small/ref.mask.fits" --sci-mask "$small/sci.mask.fits")
fi
make_field 10240
for r in $(seq 1 "$reps"); do
  for v in "$@"; do
    name=${v%%=*}; envs=${v#*=}
    d="$out/$name-$r"; mkdir -p "$d"
    # SETTLE=1: the page cache's dirty pages (the run before's planes) written back first, so that no run
    # starts beside the writeback of another's outputs.
    [ -z "${SETTLE:-}" ] || sync
    ( [ "$envs" = "-" ] || export $(echo "$envs" | tr ',' ' ')
      [ -z "${SLEEP:-}" ] || sleep "$SLEEP"
      if [ "${PRE:-}" = 1k ]; then
        pre=$(mktemp -d); "${BIN:-${VARIANT_BIN:-$bin}}" subtract --out "$pre" "${small_pair[@]}" --backend cuda --no-fsync \
          > "$d/pre-1k.txt" 2>&1; rm -rf "$pre"
      fi
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
    start=$(grep -o -E 'trace \+[0-9.]+ s backend: (discovered|prepared)|context [0-9.]+ ms' "$d/stderr.txt" \
      | sed -E 's/trace \+([0-9.]+) s backend: /\1 /' | tr '\n' ' ')
    echo "$name $r $(grep -o 'file to file [0-9.]* s' "$d/stdout.txt") | start: $start| $(grep -o 'steps: .*' "$d/stdout.txt") | outputs $sums"
  done
done | tee "$final/ab.txt"
{ cat "$out/machine.txt"; cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag; } >> "$final/ab.txt" 2>&1
tar czf "$final/ab.tgz" -C "$out" .
