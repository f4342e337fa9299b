#!/usr/bin/env bash
# Cold start of one integration on the lent GPU machine (issue 19, item 4): m-Cubes f4 8D 1e-4 on CUDA in
# RUNS fresh processes (--warmup 0 --repeats 1, the command-line user's case) and once warm (--warmup 1
# --repeats 5, which reports details.cold_start_s), for every carried binary (.carry/astroport and
# .carry/astroport-LABEL). Rows land in $out/cold-LABEL/results.jsonl; the summary prints each row's wall
# time, context_s (the context created before timing, binaries from this change on) and cold_start_s.
set -uo pipefail
source "$(dirname "$0")/gpu_common.sh"
status=0
args=(run cubature --method mcubes --integrand f4 --dim 8 --epsrel 1e-4 --backend cuda)
for b in .carry/astroport .carry/astroport-*; do
  [ -x "$b" ] || continue
  label=${b#.carry/astroport}; label=${label#-}; label=${label:-new}
  for i in $(seq 1 "${RUNS:-3}"); do
    "$b" "${args[@]}" --warmup 0 --repeats 1 --out "$out/cold-$label" > /dev/null 2>&1 || status=1
  done
  "$b" "${args[@]}" --warmup 1 --repeats 5 --out "$out/cold-$label" > /dev/null 2>&1 || status=1
  python3 - "$out/cold-$label/results.jsonl" "$label" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    d = r.get("details") or {}
    print(f"{sys.argv[2]:>4} {r['status']:>10} wall {r['time_s']['median']*1e3:8.2f} ms  ×{r['time_s']['repeats']} warm-up {r['time_s']['warmup']}"
          f"  context_s {r.get('context_s')}  cold_start_s {d.get('cold_start_s')}  build_s {r.get('build_s')}")
PY
done
exit $status
