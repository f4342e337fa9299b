#!/usr/bin/env bash
# Issue 15: why does `subtract`'s CUDA discovery (its first runtime call) take 0.18-0.21 s at 10240² and
# 0.10-0.12 s at 1024², with the same binary? Candidates: the state a 10k run leaves behind (memory still
# being given back, by the kernel or the driver), or something in the run itself. The start probe
# (scripts/probes/cuda_start.cu, .carry/start_probe) and `subtract`'s discovery, right after a 10k run, after a
# pause, after a 1024² run; and each discovery's system calls (`strace -f -tt -T`, carried in .carry/strace:
# the machine has none). Results under $OUT (discovery.txt, strace-*.txt.gz).
set -uo pipefail
final="${OUT:-out/gpu}"
mkdir -p "$final"
export OUT=$(mktemp -d)
source "$(dirname "$0")/gpu_common.sh"
probe=.carry/start_probe
make_field 1024
small=("${plain[@]}")
make_field 10240
big=("${plain[@]}")
st() { LD_LIBRARY_PATH=.carry/strace .carry/strace/strace "$@"; }
mem() { awk '/^(MemFree|Dirty|Writeback|Cached):/ {printf "%s %d MB  ", $1, $2/1024}' /proc/meminfo; }
# sub LABEL ARGS...: one traced `subtract`, its discovery's end, context and file to file on one line.
sub() {
  local label=$1 d="$out/$1"
  shift
  mkdir -p "$d"
  local before
  before=$(mem)
  ASTROPORT_TRACE_JOBS=1 "$bin" subtract --out "$d" "$@" --backend cuda --no-fsync \
    > "$d/stdout.txt" 2> "$d/stderr.txt"
  echo "$label: $(grep -o '+[0-9.]* s backend: discovered' "$d/stderr.txt") |" \
    "$(grep -o 'context [0-9.]* ms' "$d/stderr.txt") | $(grep -o 'file to file [0-9.]* s' "$d/stdout.txt")" \
    "| before: $before"
  rm -f "$d"/*.fits
}
prb() { echo "probe $1: $($probe | awk '{printf "%s %s | ", $1, $3}') before: $(mem)"; }
{
  date -u
  prb first
  prb again
  sub small-1 "${small[@]}"
  sub small-2 "${small[@]}"
  prb after-small
  sub big-1 "${big[@]}"
  prb right-after-big
  sub big-2 "${big[@]}"
  sub small-right-after-big "${small[@]}"
  sub big-3 "${big[@]}"
  sleep 3
  prb after-big-and-3s
  sleep 3
  sub big-after-6s "${big[@]}"
  sync
  sleep 5
  sub big-after-sync-and-5s "${big[@]}"
  sub big-4 "${big[@]}"
  ASTROPORT_PROBE_READ_AFTER_PREPARE=1 sub big-read-after-context "${big[@]}"
  (unset CUDA_CACHE_DISABLE OCL_ICD_VENDORS; sub big-without-gpu-common-env "${big[@]}")
  # The system calls of each discovery: the first 0.4 s of the process, every thread.
  for size in small big; do
    arr="${size}[@]"
    d="$out/strace-$size"
    mkdir -p "$d"
    st -f -tt -T -o "$d/trace.txt" env ASTROPORT_TRACE_JOBS=1 "$bin" subtract --out "$d" "${!arr}" \
      --backend cuda --no-fsync > "$d/stdout.txt" 2> "$d/stderr.txt"
    echo "strace $size: rc $? $(grep -o '+[0-9.]* s backend: discovered' "$d/stderr.txt") $(wc -l < "$d/trace.txt") lines"
    rm -f "$d"/*.fits
    gzip -c "$d/trace.txt" > "$final/strace-$size.txt.gz"
    cp "$d/stderr.txt" "$final/strace-$size-stderr.txt"
  done
} 2>&1 | tee "$final/discovery.txt"
