#!/usr/bin/env bash
# The lens near/far split (issue 17) on the lent GPU machine: the `hff` grid in f32, mixed-budget and split
# (the paper's galaxies, realistic 110-130 km/s galaxies, dPIE halos) and the image-plane χ² with the direct
# (mixed-budget) and split grids, on CUDA and NVIDIA OpenCL, every pixel checked against the float64 `cpu`
# reference of the machine's cores. Build as scripts/gpu_lens.sh says; carry .carry. $OUT gets one archive,
# lens-split.tgz, rewritten after each part (a run cut short still returns what finished).
set -uo pipefail
source "$(dirname "$0")/gpu_common.sh"
archive="$out"
out=$(mktemp -d)
mv "$archive"/machine.txt "$archive"/devices.txt "$out"/
status=0
pack() { tar czf "$archive/lens-split.tgz" -C "$out" .; }
part() {
  local name=$1; shift
  "$bin" "$@" --backend cuda --backend "$nv" --repeats "${REPEATS:-7}" --out "$out/$name" -v \
    > "$out/$name.log" 2>&1 || status=1
  grep -E "^│|halos|systems" "$out/$name.log" | cut -c1-200
  pack
}
# PARTS picks some of: grid realistic chi2 dpie (default all).
for p in ${PARTS:-grid realistic chi2 dpie}; do
  case $p in
    grid) part grid run lens --preset hff --precision f32,mixed-budget --method direct,split ;;
    realistic) part grid-realistic run lens --preset hff --galaxy-sigma 110,130 --precision f32 --method direct,split ;;
    chi2) part chi2 run lens-chi2 --preset hff --method direct,split ;;
    dpie) part grid-dpie run lens --preset hff --profile dpie --precision f32 --method direct,split ;;
  esac
done
command -v cuobjdump > /dev/null && cuobjdump -res-usage "$bin" 2>&1 | grep -A1 lens_split > "$out/res-usage.txt"
pack
exit $status
