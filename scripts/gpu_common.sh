# Sourced by the scripts/gpu_*.sh evidence runs on the lent GPU machine: sets out (results folder), bin (the
# carried binary), an ICD folder with NVIDIA's OpenCL (and PoCL when GPU_WITH_POCL is set), records the machine
# and the devices, and sets nv to the NVIDIA OpenCL backend id.
out="${OUT:-out/gpu}"
mkdir -p "$out"
bin="${ASTROPORT_BIN:-.carry/astroport}"
icd=$(mktemp -d)
echo "libnvidia-opencl.so.1" > "$icd/nvidia.icd"
[ -z "${GPU_WITH_POCL:-}" ] || echo "libpocl.so.2" > "$icd/pocl.icd"
export OCL_ICD_VENDORS="$icd"
export CUDA_CACHE_DISABLE=1   # NVIDIA OpenCL returns no ptxas report for cached programs
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,power.limit,temperature.gpu --format=csv
  nproc; lscpu | grep "Model name"
} > "$out/machine.txt" 2>&1
"$bin" devices > "$out/devices.txt" 2>&1
cat "$out/devices.txt"
nv=$(awk '$2=="opencl" && /NVIDIA/ {print $1; exit}' "$out/devices.txt")
[ -n "$nv" ] || nv="opencl"   # no NVIDIA OpenCL: the row will say why

# make_field SIZE: a field of SIZE² made here into a new temporary folder; sets f (that folder), plain (the six
# file flags of its pair for `subtract`) and nofsync (--no-fsync, or nothing when FSYNC=1).
make_field() {
  f=$(mktemp -d)
  "$bin" field --size "$1" --out "$f" > "$out/field.log" 2>&1 || exit 1
  plain=(--ref "$f/ref.fits" --sci "$f/sci.fits" --ref-var "$f/ref.var.fits" --sci-var "$f/sci.var.fits"
         --ref-mask "$f/ref.mask.fits" --sci-mask "$f/sci.mask.fits")
  nofsync=(--no-fsync); [ -z "${FSYNC:-}" ] || nofsync=()
}
