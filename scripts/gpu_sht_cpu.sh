#!/usr/bin/env bash
# Spherical harmonics on the GPU machine's CPU cores (issue 14): the `cpu` model's alm2map and map2alm at the
# ci (nside 256, lmax 512) and planck (nside 2048, lmax 4096) presets, and ducc0 0.42 (the wheel carried in
# .whl, as docs/sht.md says) on the same cores, the same sizes and thread counts, best of REPEATS.
# Build as docs/architecture.md says ("GPU evidence runs"); carry .carry and .whl.
set -uo pipefail
source "$(dirname "$0")/gpu_common.sh"
status=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/ducc0-*.whl \
  && export PYTHONPATH=/tmp/site
for preset in ci planck; do
  "$bin" run sht --preset "$preset" --backend cpu --repeats "${REPEATS:-5}" --out "$out/sht-cpu" \
    > "$out/sht-$preset.log" 2>&1 || status=1
  grep -E "^│ sht" "$out/sht-$preset.log" | cut -c1-220
done
python3 - "${REPEATS:-5}" <<'PY' 2>&1 | tee "$out/ducc0.txt"
import sys, time
import numpy as np
import ducc0
repeats = int(sys.argv[1])
print("ducc0", ducc0.__version__, "numpy", np.__version__)
for nside, lmax in [(256, 512), (2048, 4096)]:
    geom = ducc0.healpix.Healpix_Base(nside, "RING").sht_info()
    rng = np.random.default_rng(1)
    n = (lmax + 1) * (lmax + 2) // 2
    alm = (rng.standard_normal(n) + 1j * rng.standard_normal(n)) / np.sqrt(2)
    alm[: lmax + 1] = alm[: lmax + 1].real
    for threads in (1, 16):
        if nside == 2048 and threads == 1 and repeats > 2:
            continue
        best = {}
        for _ in range(repeats):
            t = time.perf_counter()
            m = ducc0.sht.synthesis(alm=alm[None], lmax=lmax, spin=0, nthreads=threads, **geom)
            best["alm2map"] = min(best.get("alm2map", 1e9), time.perf_counter() - t)
            t = time.perf_counter()
            ducc0.sht.adjoint_synthesis(map=m, lmax=lmax, spin=0, nthreads=threads, **geom)
            best["map2alm"] = min(best.get("map2alm", 1e9), time.perf_counter() - t)
        print(f"nside {nside} lmax {lmax} threads {threads}: alm2map {best['alm2map']*1e3:.1f} ms, "
              f"map2alm (adjoint) {best['map2alm']*1e3:.1f} ms (best of {repeats})")
PY
exit $status
