#!/usr/bin/env python3
"""Lomb-Scargle by NUFFT: astroport against nifty-ls and astropy on the same light curves and grids.

For each size, one CoRoT-like light curve (150 d, 0.18-d pulsation, orbital gaps, errors; numpy seed fixed)
is written as CSV; `astroport periodogram --method nufft --precision f64` computes it on the `cpu` backend
with 1 and 2 rayon threads; nifty-ls (finufft) with 1 and 2 threads and astropy's `fast` method compute the
same grid (culsp's: df = 1/(8 T), from df up to the mean Nyquist frequency). Each time is the median of
--repeats calls after one warm-up. Errors: max |P - P_nifty| and max |P - P_astropy_fast| over the grid,
and every tool's error against astropy's exact `cython` method on --exact frequencies spread over the grid.

  python3 scripts/bench_nufft.py --binary target/release/astroport --out reports/cpu-2core/lombscargle-nufft

Writes DIR/nufft.jsonl (one line per tool and size) and prints a Markdown table.
Needs: pip install nifty-ls astropy numpy.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np


def light_curve(n, seed=20100629, span=150.0):
    """CoRoT-like: ~12% orbital gaps of 103 min, three multi-day gaps, 0.18-d pulsation with a harmonic."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0.0, span, int(n * 1.4)))
    orbit = 103.0 / 1440.0
    keep = (t % orbit) > 0.12 * orbit
    for a, b in [(30.0, 33.0), (71.0, 72.5), (118.0, 121.0)]:
        keep &= ~((t > a) & (t < b))
    t = t[keep][:n]
    y = 0.010 * np.sin(2 * np.pi * t / 0.18) + 0.003 * np.sin(4 * np.pi * t / 0.18 + 0.7)
    dy = 0.004 * (1.0 + 0.2 * rng.random(len(t)))
    y = y + dy * rng.standard_normal(len(t))
    return t, y, dy


def median_time(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def run_astroport(binary, csv, out, threads, repeats, tolerance, warmup=1):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    cmd = [binary, "periodogram", "--input", csv, "--backend", "cpu", "--precision", "f64",
           "--method", "nufft", "--tolerance", str(tolerance), "--f-over", "8", "--f-high", "1",
           "--fap", "none", "--warmup", str(warmup), "--repeats", str(repeats), "--out", out]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"astroport failed: {' '.join(cmd)}\n{r.stderr}")
    ms = float(re.search(r": ([0-9.]+) ms \(", r.stderr).group(1))
    data = np.loadtxt(os.path.join(out, "periodogram.csv"), delimiter=",", skiprows=2, usecols=(1, 2))
    return ms / 1e3, data[:, 0], data[:, 1], " ".join(cmd)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default="target/release/astroport")
    ap.add_argument("--out", required=True)
    ap.add_argument("--sizes", default="10000,100000,382003")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--tolerance", type=float, default=1e-9)
    ap.add_argument("--exact", type=int, default=64, help="frequencies checked with astropy's exact method")
    ap.add_argument("--no-astropy-fast", action="store_true")
    ap.add_argument("--threads", default="1,2", help="thread counts for astroport and nifty-ls")
    args = ap.parse_args()
    import nifty_ls
    try:
        import astropy
        from astropy.timeseries import LombScargle
    except ImportError:  # the GPU machine: errors then come from astroport's own direct float64 check
        astropy = None
        args.no_astropy_fast = True
    threads_list = [int(x) for x in args.threads.split(",")]

    os.makedirs(args.out, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(s) for s in args.sizes.split(",")]:
            t, y, dy = light_curve(n)
            csv = os.path.join(tmp, f"curve{n}.csv")
            np.savetxt(csv, np.column_stack([t, y, dy]), delimiter=",", header="t,y,dy", comments="",
                       fmt="%.17g")
            ours = {}
            for threads in threads_list:
                ours[threads] = run_astroport(args.binary, csv, os.path.join(tmp, f"o{n}"), threads,
                                              args.repeats, args.tolerance)
            _, freq, p_ours, cmd = ours[threads_list[0]]
            df = freq[1] - freq[0]
            nf = len(freq)
            pick = np.linspace(0, nf - 1, args.exact).astype(int)
            pick = np.unique(np.concatenate([pick, [int(np.argmax(p_ours))]]))
            exact = (LombScargle(t, y, dy).power(freq[pick], method="cython") if astropy
                     else np.full(len(pick), np.nan))
            nifty = {}
            for threads in threads_list:
                sec, res = median_time(lambda: nifty_ls.lombscargle(
                    t, y, dy, fmin=freq[0], fmax=freq[0] + (nf - 1) * df, Nf=nf, backend="finufft",
                    nthreads=threads), args.repeats)
                nifty[threads] = (sec, res.power)
            p_nifty = nifty[threads_list[0]][1]
            if not args.no_astropy_fast:
                fast_sec, p_fast = median_time(
                    lambda: LombScargle(t, y, dy).power(freq, method="fast"), max(1, args.repeats // 2))
            base = dict(points=len(t), frequencies=nf, df=df, date=time.strftime("%Y-%m-%d"))
            for threads in threads_list:
                sec, _, p, c = ours[threads]
                rows.append(dict(base, tool="astroport nufft-f64", threads=threads, seconds=sec,
                                 max_abs_vs_exact=float(np.max(np.abs(p[pick] - exact))),
                                 max_abs_vs_nifty=float(np.max(np.abs(p - p_nifty))), command=c))
            # One cold call: the plan (kernel fit, deconvolution table, FFT twiddles, memory) included.
            cold = run_astroport(args.binary, csv, os.path.join(tmp, f"c{n}"), threads_list[0], 1,
                                 args.tolerance, warmup=0)
            rows.append(dict(base, tool="astroport nufft-f64 (cold: plan included)", threads=threads_list[0],
                             seconds=cold[0], max_abs_vs_exact=float(np.max(np.abs(cold[2][pick] - exact))),
                             command=cold[3]))
            for threads in threads_list:
                sec, p = nifty[threads]
                rows.append(dict(base, tool=f"nifty-ls {nifty_ls.__version__}", threads=threads,
                                 seconds=sec, max_abs_vs_exact=float(np.max(np.abs(p[pick] - exact)))))
            if not args.no_astropy_fast:
                rows.append(dict(base, tool=f"astropy {astropy.__version__} fast", threads=1,
                                 seconds=fast_sec,
                                 max_abs_vs_exact=float(np.max(np.abs(p_fast[pick] - exact)))))
            for r in [r for r in rows if r["points"] == len(t)]:
                print(json.dumps(r), file=sys.stderr)
    with open(os.path.join(args.out, "nufft.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print("| points | frequencies | tool | threads | time | max abs error vs astropy exact | max abs vs nifty-ls |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        vs_nifty = f"{r['max_abs_vs_nifty']:.1e}" if "max_abs_vs_nifty" in r else "-"
        print(f"| {r['points']:,} | {r['frequencies']:,} | {r['tool']} | {r['threads']} | "
              f"{r['seconds'] * 1e3:.2f} ms | {r['max_abs_vs_exact']:.1e} | {vs_nifty} |")


if __name__ == "__main__":
    main()
