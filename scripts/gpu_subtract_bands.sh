#!/usr/bin/env bash
# Issue 15, one lending's worth (written in the twenty-third session, which was lent no machine): the CUDA
# discovery's state at 10k (scripts/gpu_discovery_state.sh), then `subtract` at 10240² with the significance
# in bands (c4d0bac) against the binary before them and against one band:
#   gate   the binary of 3ccda77 (the images uploaded once the fit's first stamp sums are back; whole plane);
#   bands  this binary, its default bands (7 at 10k, 1639 rows each);
#   one    this binary, one band (the plane's write still begins when the plane is home);
#   b14    this binary, 14 bands (732 rows, the last 724).
# Carry: .carry/astroport (this commit's `cargo build --release --features cuda --target-dir target/gpu --bin
# astroport`, stripped), .carry/astroport_gate (the same build of 3ccda77, from a `git worktree`),
# .carry/start_probe (scripts/probes/cuda_start.cu, as its header says) and .carry/strace (strace and its
# libunwind libraries, from a Debian 12 machine: the GPU machine has none). Results under $OUT: disc/ (the
# discovery's lines and strace logs) and ab/ (ab.txt, one line per run, and ab.tgz, every run's timeline).
# The device tool's command, with carry [".carry"] and the binaries gzipped there:
#   gunzip -f .carry/*.gz; chmod +x .carry/astroport* .carry/start_probe .carry/strace/strace; bash scripts/gpu_subtract_bands.sh
set -uo pipefail
final="${OUT:-out/gpu}"
mkdir -p "$final"
here=$(dirname "$0")
OUT="$final/disc" ASTROPORT_BIN=.carry/astroport timeout 250 bash "$here/gpu_discovery_state.sh" > /dev/null 2>&1
cat "$final/disc/discovery.txt"
OUT="$final/ab" ASTROPORT_BIN=.carry/astroport timeout 320 bash "$here/gpu_subtract_ab.sh" "${REPS:-3}" \
  "gate=BIN=.carry/astroport_gate" "bands=-" "one=BANDS=10240" "b14=BANDS=732"
