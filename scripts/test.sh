#!/usr/bin/env bash
# The test command: builds with every model (cuda compiled and linked, sycl run on Intel's CPU OpenCL)
# and runs all tests. Backends set up by scripts/setup.sh are *required*: a missing one fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
export ASTROPORT_REQUIRE="${ASTROPORT_REQUIRE:-opencl-pocl,opencl-intel,sycl}"
# OpenCL binaries cached on disk (src/backend/opencl.rs, binary_cache): a fresh folder per run, so the run
# builds each program from source once and later processes load it, both paths exercised every time.
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
export ASTROPORT_CACHE_DIR="${ASTROPORT_CACHE_DIR:-$cache}"
# One test thread: once in several runs, tests/backends.rs died with SIGSEGV while several test threads used
# Intel's CPU OpenCL/SYCL runtime at once (not reproduced in 3 reruns; see docs/architecture.md).
cargo test --release --features "$ASTROPORT_FEATURES" "$@" -- --test-threads=1
