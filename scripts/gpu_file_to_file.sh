#!/usr/bin/env bash
# File to file on the lent GPU machine (issue 15): a 10240² field generated there, then `astroport subtract`
# as a survey pipeline calls it, one process per pair: cold (the first call of the process: runtime start,
# kernel load) on CUDA (once scored against the truth, twice as a pipeline runs it: the six images named and
# nothing scored, then three times without fsync, once with the seed's 19 x 19 tiles), NVIDIA OpenCL (its
# programs built from source, stored in a fresh binary cache) and the `cpu` model on the host's cores (scored,
# and unscored without fsync). The disk's fsync'd write rate is measured first (dd). Every run
# prints its timeline (read, discovery, fit, device passes with their wall clock, host work, scoring, write,
# fsync, file to file). Before that, `bench --preset tiny` checks every workload on every backend (the host
# plumbing changed). Everything lands in $OUT/file-to-file.tgz and $OUT/summary.txt.
# Build as docs/architecture.md says ("GPU evidence runs"); carry .carry.
set -uo pipefail
final="${OUT:-out/gpu}"
mkdir -p "$final"
export OUT=$(mktemp -d)
source "$(dirname "$0")/gpu_common.sh"
status=0
work=$(mktemp -d)
ASTROPORT_CACHE_DIR=off "$bin" bench --preset tiny --out "$out/bench-tiny" > "$out/bench-tiny.log" 2>&1 || status=1
# OpenCL's first subtract builds its programs from source and stores them; the second loads them.
export ASTROPORT_CACHE_DIR=$(mktemp -d)
tail -5 "$out/bench-tiny.log"
# Device tests carried as test binaries (`cargo test --release --features cuda --target-dir target/gpu --no-run`
# for tests/backends.rs and tests/imgsub_subtract.rs, copied to .carry/<name>_test): the host plumbing's
# resident buffers read back, and subtract's difference kept on the device against the cpu model, on CUDA
# and NVIDIA's OpenCL.
for t in .carry/*_test; do
  [ -x "$t" ] || continue
  echo "== $(basename "$t")" >> "$out/tests.txt"
  ASTROPORT_REQUIRE=cuda,opencl "$t" every_backend resident unwritten --nocapture >> "$out/tests.txt" 2>&1 || status=1
done
[ -f "$out/tests.txt" ] && grep -E "^== |test result|against float64|^test " "$out/tests.txt"
mkdir -p "$work/f10240"
/usr/bin/time -v "$bin" field --size 10240 --out "$work/f10240" > "$out/field-10240.log" 2>&1 || status=1
grep -E "Elapsed|field" "$out/field-10240.log"
subtract() {  # name, then astroport subtract arguments
  local name=$1; shift
  mkdir -p "$out/$name"
  /usr/bin/time -v "$bin" subtract --out "$out/$name" "$@" \
    > "$out/$name/stdout.txt" 2> "$out/$name/stderr.txt" || status=1
  rm -f "$out/$name"/*.fits
  echo "== $name"; cat "$out/$name/stdout.txt"
  grep -E "Elapsed|Maximum resident" "$out/$name/stderr.txt"
}
f=$work/f10240
scored=(--field "$f")
# As a survey pipeline runs it: the six images named, no truth, so no scores.
plain=(--ref "$f/ref.fits" --sci "$f/sci.fits" --ref-var "$f/ref.var.fits" --sci-var "$f/sci.var.fits"
       --ref-mask "$f/ref.mask.fits" --sci-mask "$f/sci.mask.fits")
# The disk's own write rate with fsync: the floor of writing the four planes (1.3 GB) durably.
dd if=/dev/zero of="$work/dd.bin" bs=1M count=1300 conv=fsync > "$out/disk.txt" 2>&1; rm -f "$work/dd.bin"
cat "$out/disk.txt"
subtract cuda-1 "${scored[@]}" --backend cuda
subtract cuda-unscored-1 "${plain[@]}" --backend cuda
# ASTROPORT_TRACE_JOBS: every device job prints its phases (host allocation, uploads, runs, downloads,
# unpinning) to stderr.txt.
ASTROPORT_TRACE_JOBS=1 subtract cuda-unscored-2 "${plain[@]}" --backend cuda
# As a pipeline writing to scratch runs it: the outputs renamed into place whole, not forced to the disk.
ASTROPORT_TRACE_JOBS=1 subtract cuda-nofsync-1 "${plain[@]}" --backend cuda --no-fsync
subtract cuda-nofsync-2 "${plain[@]}" --backend cuda --no-fsync
subtract cuda-nofsync-tile19 "${plain[@]}" --backend cuda --no-fsync --tile 19
subtract opencl-1 "${scored[@]}" --backend "$nv"
subtract cpu "${scored[@]}" --backend cpu
subtract cpu-nofsync "${plain[@]}" --backend cpu --no-fsync
tar czf "$final/file-to-file.tgz" -C "$out" .
{ cat "$out/machine.txt" "$out/disk.txt"; tail -5 "$out/bench-tiny.log"
  [ -f "$out/tests.txt" ] && grep -E "^== |test result|against float64|^test " "$out/tests.txt"; grep -E "Elapsed|field" "$out/field-10240.log"
  for d in "$out"/*/; do [ -f "$d/stdout.txt" ] || continue; echo "== $(basename "$d")"
  cat "$d/stdout.txt"; grep -E "Elapsed|Maximum resident|^cuda job" "$d/stderr.txt"; done
} > "$final/summary.txt" 2>&1
exit $status
