#!/usr/bin/env bash
# Issue 17's figure on this machine: the `cpu` split against the direct float32 grid at `ci`, both timed in
# one process (21 repeats each), printed as medians, minima and their ratios from results.jsonl.
# Usage: bash scripts/lens_split_ratio.sh [BIN [THREADS]]   (defaults: target/release/astroport, 2)
set -euo pipefail
bin=${1:-target/release/astroport}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
RAYON_NUM_THREADS=${2:-2} "$bin" run lens --preset ci --method split,direct --precision f32 --backend cpu \
  --repeats 21 --out "$d" -q > "$d/log.txt" 2>&1 || { cat "$d/log.txt"; exit 1; }
python3 - "$d/results.jsonl" <<'PY'
import json, sys
times = {}
for line in open(sys.argv[1]):
    row = json.loads(line)
    if row.get("status") != "ok":
        sys.exit(f"row {row.get('precision')} is {row.get('status')}: {row.get('note', '')}")
    times[row["precision"]] = row["time_s"]
s, f = times["split"], times["f32"]
print("split median %.2f min %.2f ms | direct f32 median %.1f min %.1f ms | ratio of medians %.1f, of minima %.1f"
      % (s["median"] * 1e3, s["min"] * 1e3, f["median"] * 1e3, f["min"] * 1e3,
         f["median"] / s["median"], f["min"] / s["min"]))
PY
