#!/usr/bin/env bash
# The `highl` preset (Gauss-Legendre, lmax 8192) on the GPU machine's 16 CPU cores (issue 14, item 7): alm2map
# and map2alm on the `cpu` model; map2alm's row reports details.input_recovery_rel_l2, the round trip
# alm -> map -> alm (exact quadrature: it must stay <= 1e-11 if the recurrence is stable at l = 8192).
# Build as docs/architecture.md says ("GPU evidence runs"); carry .carry.
set -uo pipefail
source "$(dirname "$0")/gpu_common.sh"
status=0
"$bin" run sht --preset highl --backend cpu --warmup 0 --repeats 1 --out "$out/sht-highl" \
  > "$out/sht-highl.log" 2>&1 || status=1
grep -E "^│ sht" "$out/sht-highl.log" | cut -c1-200
python3 - "$out/sht-highl/results.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(r["size"], r["status"], "time", r["time_s"]["median"] if r["time_s"] else None,
          "details", r.get("details"))
PY
exit $status
