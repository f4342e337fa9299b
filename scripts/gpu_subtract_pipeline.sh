#!/usr/bin/env bash
# Issue 15, one lending's worth (written in the twenty-third and twenty-fourth sessions, which were lent no
# machine): the CUDA discovery's state at 10k (scripts/gpu_discovery_state.sh), then `subtract` at 10240²
# with the difference and the matched filter pipelined in bands against the binaries before, interleaved:
#   gate   3ccda77: the images uploaded once the fit's first stamp sums are back; difference, then filter;
#   snr    1723f1a: that, with the significance computed and written in bands (7 at 10k);
#   pipe   this binary: the difference and the filter pipelined, D, VD and the significance in 7 bands;
#   pipe1  this binary in one job (the writes begin when the job is done);
#   pipe14 this binary in 14 bands (732 rows, the last 724).
# Carry: .carry/astroport (this commit's `cargo build --release --features cuda --target-dir target/gpu --bin
# astroport`, stripped), .carry/astroport_gate and .carry/astroport_snr (the same build of 3ccda77 and of
# 1723f1a, each from a `git worktree` with .tools linked in), .carry/start_probe (scripts/probes/cuda_start.cu,
# as its header says) and .carry/strace (strace and its libunwind libraries, from a Debian 12 machine: the
# GPU machine has none). Results under $OUT: disc/ (the discovery's lines and strace logs) and ab/ (ab.txt,
# one line per run, and ab.tgz, every run's timeline). Every variant must print the same outputs hash.
# The device tool's command, with carry [".carry"] and the binaries gzipped there:
#   gunzip -f .carry/*.gz; chmod +x .carry/astroport* .carry/imgsub_subtract .carry/start_probe .carry/strace/strace; bash scripts/gpu_subtract_pipeline.sh
set -uo pipefail
final="${OUT:-out/gpu}"
mkdir -p "$final"
here=$(dirname "$0")
# CUDA's check first: the subtraction tests (every backend against the cpu model, the bands to the bit), when
# .carry/imgsub_subtract is carried (`cargo test --release --features cuda --target-dir target/gpu --test
# imgsub_subtract --no-run`, stripped; the CLI's test needs the build's own binary path and is skipped).
if [ -x .carry/imgsub_subtract ]; then
  icd=$(mktemp -d); echo libnvidia-opencl.so.1 > "$icd/nvidia.icd"
  OCL_ICD_VENDORS=$icd timeout 120 .carry/imgsub_subtract --skip the_planes_written_in_bands > "$final/tests.txt" 2>&1
  echo "tests: rc $? $(grep 'test result' "$final/tests.txt")"
fi
OUT="$final/disc" ASTROPORT_BIN=.carry/astroport timeout 150 bash "$here/gpu_discovery_state.sh" > /dev/null 2>&1
cat "$final/disc/discovery.txt"
OUT="$final/ab" ASTROPORT_BIN=.carry/astroport timeout 320 bash "$here/gpu_subtract_ab.sh" "${REPS:-3}" \
  "gate=BIN=.carry/astroport_gate" "snr=BIN=.carry/astroport_snr" "pipe=-" "pipe1=BANDS=10240" "pipe14=BANDS=732"
