#!/usr/bin/env bash
# Installs everything astroport needs on a fresh Debian 12 machine (no GPU needed):
#   - PoCL (CPU OpenCL) and the OpenCL ICD loader/headers from Debian;
#   - OpenMPI from Debian (the `mpi` feature: distributed spherical harmonic transforms, `mpirun` in the tests);
#   - Intel's CPU OpenCL runtime + DPC++ SYCL runtime from PyPI into .tools/sycl (pinned 2026.1: 2026.2
#     dropped the UR OpenCL adapter, see docs/toolchain.md);
#   - nvcc 13.0 from PyPI into .tools/cuda so the `cuda` feature compiles and links without a GPU;
#   - an ICD folder .tools/icd listing PoCL and Intel's CPU runtime.
# Idempotent: re-running skips what is already there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/.tools"
mkdir -p "$tools"
sudo_=""; [ "$(id -u)" = 0 ] || sudo_="sudo"

need_apt=0
for p in pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo python3-venv libopenmpi-dev openmpi-bin; do
  dpkg -s "$p" >/dev/null 2>&1 || need_apt=1
done
if [ "$need_apt" = 1 ]; then
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo python3-venv \
    libopenmpi-dev openmpi-bin >/dev/null
fi

if [ ! -x "$tools/sycl/bin/python" ] || [ ! -f "$tools/sycl/lib/libintelocl.so" ]; then
  python3 -m venv "$tools/sycl"
  "$tools/sycl/bin/pip" install -q --disable-pip-version-check \
    "intel-sycl-rt==2026.1.*" "intel-cmplr-lib-ur==2026.1.*" "intel-opencl-rt==2026.1.*"
fi

if [ ! -x "$tools/cuda/bin/python" ] || ! ls "$tools"/cuda/lib/python3*/site-packages/nvidia/cu13/bin/nvcc >/dev/null 2>&1; then
  python3 -m venv "$tools/cuda"
  "$tools/cuda/bin/pip" install -q --disable-pip-version-check \
    "nvidia-cuda-nvcc==13.0.88" "nvidia-nvvm==13.0.88" "nvidia-cuda-crt==13.0.88" "nvidia-cuda-runtime==13.0.96"
fi

# Our own ICD folder: the wheel's .icd holds a placeholder path, and Debian's PoCL is in /etc/OpenCL/vendors.
mkdir -p "$tools/icd"
echo "$tools/sycl/lib/libintelocl.so" > "$tools/icd/intel-cpu.icd"
pocl=$(ls /usr/lib/x86_64-linux-gnu/libpocl.so.2* 2>/dev/null | head -n1 || true)
[ -n "$pocl" ] && echo "libpocl.so.2" > "$tools/icd/pocl.icd"
echo "astroport set-up done: tools in $tools"
