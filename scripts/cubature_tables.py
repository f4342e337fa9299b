#!/usr/bin/env python3
"""Markdown tables of the porting study from astroport's cubature rows (JSON Lines, schema astroport.cubature/1).

Usage: scripts/cubature_tables.py ROWS.jsonl [more.jsonl ...] > tables.md
One table per method: for each (integrand, dim, epsrel), every backend's status, wall time, kernel time,
evaluations, reported and true relative error and coverage; then the kernel-time ratio of each backend to the
reference model of its device type (CUDA on GPUs, cpu on CPUs) when both did identical work (same evaluation
count), with registers/thread and occupancy. Later rows for the same key replace earlier ones."""
import json
import sys


def fmt_s(s):
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} µs"


def main(paths):
    rows = {}
    for p in paths:
        for line in open(p):
            r = json.loads(line)
            rows[(r["method"], r["integrand"], r["dim"], r["epsrel"], r["backend"])] = r
    order = ["sum", "f1", "f2", "f3", "f4", "f5", "f6"]
    keys = sorted({k[:4] for k in rows}, key=lambda k: (k[0], k[2], order.index(k[1]), -k[3]))
    backends = sorted({k[4] for k in rows}, key=lambda b: (not b.startswith("cuda"), b))
    for method in ["pagani", "mcubes"]:
        mk = [k for k in keys if k[0] == method]
        if not mk:
            continue
        print(f"\n### {method}\n")
        print("| f | d | epsrel | backend | status | wall | kernels | evals | reported rel | true rel | covered | kernel ratio | regs | occupancy |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for k in mk:
            ref = None
            for b in backends:
                r = rows.get(k + (b,))
                if r and r.get("outcome") and b.startswith(("cuda", "cpu")):
                    ref = r
                    break
            for b in backends:
                r = rows.get(k + (b,))
                if not r:
                    continue
                o = r.get("outcome")
                if not o:
                    print(f"| {k[1]} | {k[2]} | {k[3]:.0e} | {b} | {r['run']} | | | | | | | | | |")
                    continue
                kern = max(r["kernels"], key=lambda x: x["device_s"]) if r["kernels"] else None
                ratio = "-"
                if ref is not None and ref is not r and ref["outcome"]["evaluations"] == o["evaluations"] and ref["outcome"]["device_s"] > 0:
                    ratio = f"{o['device_s'] / ref['outcome']['device_s']:.2f}"
                rel = o["error"] / abs(o["estimate"]) if o["estimate"] else float("nan")
                cov = {True: "yes", False: "**NO**", None: "-"}[r.get("covered")]
                regs = kern["regs_per_thread"] if kern and kern["regs_per_thread"] is not None else "-"
                occ = f"{kern['occupancy'] * 100:.0f} %" if kern and kern["occupancy"] is not None else "-"
                print(f"| {k[1]} | {k[2]} | {k[3]:.0e} | {b} | {o['status']} | {fmt_s(o['total_s'])} | {fmt_s(o['device_s'])} | "
                      f"{o['evaluations']:.3g} | {rel:.2e} | {r['true_rel_err']:.2e} | {cov} | {ratio} | {regs} | {occ} |")
    claimed = [r for r in rows.values() if r.get("covered") is not None]
    for method in ["pagani", "mcubes"]:
        c = [r for r in claimed if r["method"] == method]
        ok = sum(1 for r in c if r["covered"])
        print(f"\n{method}: {ok} of {len(c)} runs that claim convergence have |true error| ≤ reported error.")


if __name__ == "__main__":
    main(sys.argv[1:])
