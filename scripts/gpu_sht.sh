#!/usr/bin/env bash
# Spherical harmonic transforms on the GPU machine (issue 14): presets ci and planck, alm2map and map2alm, on
# CUDA, NVIDIA OpenCL and the 16-core `cpu` model. The device rows time the Legendre stage with device events
# and the ring FFTs (host, realfft) with the host clock; each row's steps give the two apart.
# Build as docs/architecture.md says ("GPU evidence runs"); carry .carry. PRESETS overrides "ci planck", SPINS
# overrides "0 2"; CPU_ROW=0 leaves out the 16-core cpu rows (the reference is computed either way); PROFILE=1
# adds Nsight Compute's speed-of-light and occupancy of every SHT kernel at planck (one run each, ncu-*.txt).
set -uo pipefail
source "$(dirname "$0")/gpu_common.sh"
status=0
cpu_row="--backend cpu"
[ "${CPU_ROW:-1}" = 1 ] || cpu_row=""
for preset in ${PRESETS:-ci planck}; do
  for spin in ${SPINS:-0 2}; do
    "$bin" run sht --preset "$preset" --spin "$spin" --backend cuda --backend "$nv" $cpu_row \
      --out "$out/sht-gpu" > "$out/sht-$preset-spin$spin.log" 2>&1 || status=1
    grep -E "^│ sht|failed" "$out/sht-$preset-spin$spin.log" | cut -c1-260
  done
done
if [ "${PROFILE:-0}" = 1 ]; then
  for t in alm2map map2alm; do
    ncu --kernel-name regex:sht_ --section SpeedOfLight --section Occupancy --section LaunchStats \
      "$bin" run sht --preset planck --transform "$t" --backend cuda --warmup 0 --repeats 1 \
      --out "$out/ncu-rows" > "$out/ncu-$t.txt" 2>&1 || status=1
    grep -E "sht_|Duration|Memory Throughput|Compute \(SM\)|Registers|Achieved Occupancy|DRAM Through" \
      "$out/ncu-$t.txt" | head -60
  done
fi
python3 - "$out/sht-gpu/results.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    t = r["time_s"]["median"] if r["time_s"] else None
    res = r.get("resources") or {}
    print(r["preset"], r["size"], r["backend"], r["status"], "median_s", t,
          "regs", res.get("regs_per_thread"), "occ", res.get("occupancy"),
          "max_rel", (r.get("accuracy") or {}).get("max_rel"))
    for s in r.get("steps", []):
        sres = s.get("resources") or {}
        print("   step", s["name"], s["median_s"], "regs", sres.get("regs_per_thread"), "occ", sres.get("occupancy"))
PY
# The device tool returns at most 8 files: everything but the machine's description goes in one archive.
archive=$(mktemp --suffix .tgz)
tar czf "$archive" -C "$out" --exclude machine.txt --exclude devices.txt . &&
  find "$out" -mindepth 1 ! -name machine.txt ! -name devices.txt -delete && mv "$archive" "$out/sht-gpu.tgz"
exit $status
