#!/usr/bin/env bash
# The test command: builds with every model (cuda compiled and linked, sycl run on Intel's CPU OpenCL)
# and runs all tests. Backends set up by scripts/setup.sh are *required*: a missing one fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/env.sh
export ASTROPORT_REQUIRE="${ASTROPORT_REQUIRE:-opencl-pocl,opencl-intel,sycl}"
cargo test --release --features "$ASTROPORT_FEATURES" "$@"
