# Sourced by the scripts: the environment astroport's runtimes need on this machine.
# OCL_ICD_VENDORS points the OpenCL loader at .tools/icd (PoCL + Intel's CPU runtime); the SYCL runtime
# only sees Intel's CPU device through it (cpp/sycl_host.cpp).
_astroport_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export OCL_ICD_VENDORS="${OCL_ICD_VENDORS:-$_astroport_root/.tools/icd}"
export ASTROPORT_FEATURES="${ASTROPORT_FEATURES:-cuda,sycl,mpi}"
