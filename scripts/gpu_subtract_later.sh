#!/usr/bin/env bash
# Issue 15, twenty-sixth session, one lending's worth: the CUDA subtraction tests, then `subtract` at 10240²
# file to file with binaries interleaved (scripts/gpu_subtract_ab.sh); the variants are the arguments (as
# gpu_subtract_ab.sh takes them), by default the first lending's three:
#   direct  ba31a4a: the bands read back straight into the planes (the last lending's figure);
#   premap  addb54e: that, with the planes' pages mapped beside the fit;
#   later   this binary: that, with each band's read-back beside the next band's kernels (ReadBack::IntoLater);
# then this binary's device time of the whole subtraction, warm (2 warm-ups, median of 10 by device events).
# Carry: .carry/astroport.xz (this commit's `cargo build --release --features cuda --target-dir target/gpu
# --bin astroport`, stripped, xz), .carry/astroport_direct.xz and .carry/astroport_premap.xz (the same build
# of those commits), .carry/imgsub_subtract.xz (`cargo test --release --features cuda --target-dir target/gpu
# --test imgsub_subtract --no-run`, stripped) and .carry/backends.xz (below). The device tool's command, with carry [".carry"]:
#   bash scripts/gpu_subtract_later.sh [VARIANT ...]
# Results under $OUT: tests.txt, ab/ab.txt (one line per run; every variant must print one outputs hash),
# ab/ab.tgz (every run's timeline), warm/ (the device-timed run); with PAIRS=N also pairs/ (a list of N pairs
# in one process against single processes, twice: scripts/gpu_subtract_pairs.sh).
set -uo pipefail
final="${OUT:-out/gpu}"
mkdir -p "$final"
here=$(dirname "$0")
for f in .carry/*.xz; do xz -d -f "$f"; done
chmod +x .carry/astroport* .carry/imgsub_subtract .carry/backends 2>/dev/null
if [ -x .carry/imgsub_subtract ]; then
  icd=$(mktemp -d); echo libnvidia-opencl.so.1 > "$icd/nvidia.icd"
  # NVIDIA's OpenCL only: the second lending's machine also listed its PoCL 5.0 through the loader, and PoCL
  # aborted there at a program's release (pocl_release_dlhandle_cache's assertion); OCL_ICD_FILENAMES wins.
  env | grep -i -E "ocl|opencl" > "$final/opencl-env.txt"; ls /etc/OpenCL/vendors >> "$final/opencl-env.txt" 2>&1
  OCL_ICD_FILENAMES=libnvidia-opencl.so.1 OCL_ICD_VENDORS=$icd timeout 150 .carry/imgsub_subtract --skip the_planes_written --skip subtract_writes_its_files \
    --skip bad_pairs_are_refused --skip a_list_of_pairs --skip another_tools_difference > "$final/tests.txt" 2>&1
  echo "tests: rc $? $(grep 'test result' "$final/tests.txt")"
fi
# ReadBack::IntoLater on CUDA (the resident read-back tests, a 36 MiB one through the staging lanes among
# them; .carry/backends.xz is `cargo test --release --features cuda --target-dir target/gpu --test backends
# --no-run`, stripped).
if [ -x .carry/backends ]; then
  OCL_ICD_FILENAMES=libnvidia-opencl.so.1 OCL_ICD_VENDORS=$icd timeout 60 .carry/backends resident a_large_read_back \
    > "$final/backends-resident.txt" 2>&1
  echo "resident: rc $? $(grep 'test result' "$final/backends-resident.txt")"
fi
[ $# -gt 0 ] || set -- "direct=BIN=.carry/astroport_direct" "premap=BIN=.carry/astroport_premap" "later=-"
OUT="$final/ab" ASTROPORT_BIN=.carry/astroport timeout 330 bash "$here/gpu_subtract_ab.sh" "${REPS:-6}" "$@"
if [ -n "${PAIRS:-}" ]; then
  OUT="$final/pairs" ASTROPORT_BIN=.carry/astroport timeout 200 bash "$here/gpu_subtract_pairs.sh" "$PAIRS" 2
fi
# The device time, warm: repeats take the route with the planes home between the passes (resident buffers
# need single-shot jobs), which is what the issue's 50 ms is judged on.
mkdir -p "$final/warm/out"
w=$(mktemp -d)
.carry/astroport field --size 10240 --seed 1 --out "$w" > /dev/null 2>&1
timeout 100 .carry/astroport subtract --field "$w" --out "$final/warm/out" --backend cuda --no-fsync \
  --warmup 2 --repeats 10 > "$final/warm/stdout.txt" 2> "$final/warm/stderr.txt"
echo "warm: rc $?"; cut -c1-400 "$final/warm/stdout.txt"
rm -f "$final/warm/out"/*.fits
