#!/usr/bin/env python3
"""Markdown tables of the porting study from astroport's cubature rows (JSON Lines: astroport.row/2 rows of the
cubature workload, or the older astroport.cubature/1 rows).

Usage: scripts/cubature_tables.py ROWS.jsonl [more.jsonl ...] > tables.md
       scripts/cubature_tables.py --upstream RUN1.jsonl [RUN2.jsonl ...] > vs-upstream.md
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


def cubature_rows(path):
    """The cubature rows of a file, each in the astroport.cubature/1 shape this script reads."""
    for line in open(path):
        if not line.strip():
            continue
        r = json.loads(line)
        if r.get("schema") == "astroport.cubature/1":
            yield r
        elif r.get("workload") == "cubature":
            yield from_row2(r)


def from_row2(r):
    """An astroport.row/2 cubature row in the older shape: `size` is "METHOD F DIMD epsrel EPS"."""
    method, f, dim, _, eps = r["size"].split()
    d = r.get("details")
    outcome = None
    if d:
        outcome = dict(d, status=d["stop"], total_s=r["time_s"]["median"])
    kernels = [
        {
            "kernel": s["name"],
            "device_s": s["median_s"],
            "regs_per_thread": (s.get("resources") or {}).get("regs_per_thread"),
            "occupancy": (s.get("resources") or {}).get("occupancy"),
        }
        for s in r.get("steps", [])
    ]
    return {
        "method": method,
        "integrand": f,
        "dim": int(dim.rstrip("D")),
        "epsrel": float(eps),
        "backend": r["backend"],
        "run": "ok" if d else f"{r['status']}: {r['reason']}",
        "outcome": outcome,
        "true_rel_err": d.get("true_rel_error") if d else None,
        "covered": d.get("covered") if d else None,
        "kernels": kernels,
    }


def main(paths):
    rows = {}
    for p in paths:
        for r in cubature_rows(p):
            rows[(r["method"], r["integrand"], r["dim"], r["epsrel"], r["backend"])] = r
    order = ["sum", "f1", "f2", "f3", "f4", "f5", "f6"]
    keys = sorted({k[:4] for k in rows}, key=lambda k: (k[0], k[2], order.index(k[1]), -k[3]))
    backends = sorted({k[4] for k in rows}, key=lambda b: (not b.startswith("cuda"), b))
    for method in ["pagani", "mcubes"]:
        mk = [k for k in keys if k[0] == method]
        if not mk:
            continue
        print(f"\n### {method}\n")
        print("| f | d | epsrel | backend | status | wall | kernels | evals | reported rel | true rel | covered | busiest-kernel ratio | regs | occupancy |")
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
                    # The busiest kernel against the same kernel of the reference (PAGANI: Evaluate); all
                    # kernels together where the reference has no such kernel (the cpu model).
                    ref_k = {x["kernel"]: x["device_s"] for x in ref["kernels"]}
                    if kern and ref_k.get(kern["kernel"], 0) > 0:
                        ratio = f"{kern['device_s'] / ref_k[kern['kernel']]:.2f}"
                    else:
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


# The seed's own CUDA PAGANI (github.com/marcpaterno/gpuintegration) run on an H200: wall seconds (the median of the three
# repeats where they were run), and whether it converged (status 0).
UPSTREAM = {
    ("f1", 5): [(1e-3, 0.000636, True), (1e-4, 0.001303, True), (1e-5, 0.001398, True), (1e-6, 0.002115, True)],
    ("f2", 5): [(1e-3, 0.0138, True), (1e-4, 0.0191, True), (1e-5, 0.04442, True), (1e-6, 0.1092, True)],
    ("f3", 5): [(1e-3, 0.002205, True), (1e-4, 0.003173, True), (1e-5, 0.005008, True), (1e-6, 0.004067, True)],
    ("f4", 5): [(1e-3, 0.1391, True), (1e-4, 0.1408, True), (1e-5, 0.1538, True), (1e-6, 1.068, True)],
    ("f5", 5): [(1e-3, 0.001931, True), (1e-4, 0.00248, True), (1e-5, 0.004541, True), (1e-6, 0.005078, True)],
    ("f6", 5): [(1e-3, 0.006956, True), (1e-4, 0.008288, True), (1e-5, 0.01233, True), (1e-6, 0.01162, True)],
    ("f1", 8): [(1e-3, 0.08984, True), (1e-4, 0.7096, True), (1e-5, 0.5528, False)],
    ("f2", 8): [(1e-3, 7.668, False)],
    ("f3", 8): [(1e-3, 0.01075, True), (1e-4, 0.01058, True), (1e-5, 0.01017, True), (1e-6, 0.01831, True)],
    ("f4", 8): [(1e-3, 3.043, True), (1e-4, 3.357, True), (1e-5, 9.919, True), (1e-6, 8.256, False)],
    ("f5", 8): [(1e-3, 0.05968, True), (1e-4, 0.06443, True), (1e-5, 0.4367, True), (1e-6, 0.8811, True)],
    ("f6", 8): [(1e-3, 0.1928, True), (1e-4, 0.4311, True), (1e-5, 1.328, False)],
}


def upstream(paths):
    """Our CUDA PAGANI against the seed's code: every (integrand, dim, epsrel) upstream ran."""
    runs = []
    for p in paths:
        rows = {}
        for r in cubature_rows(p):
            if r["method"] == "pagani" and r["backend"].startswith("cuda") and r.get("outcome"):
                rows[(r["integrand"], r["dim"], r["epsrel"])] = r
        runs.append(rows)
    print("| f | d | epsrel | upstream (H200) | ours, CUDA (H200): status | wall, each run | ours / upstream | true rel err | covered |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (f, d), cases in UPSTREAM.items():
        for eps, t_up, ok_up in cases:
            rs = [run.get((f, d, eps)) for run in runs]
            rs = [r for r in rs if r]
            if not rs:
                continue
            o = rs[0]["outcome"]
            walls = [r["outcome"]["total_s"] for r in rs]
            up = fmt_s(t_up) + ("" if ok_up else " **not converged**")
            ratio = f"{min(walls) / t_up:.2f}" if ok_up else "-"
            cov = {True: "yes", False: "**NO**", None: "-"}[rs[0].get("covered")]
            print(f"| {f} | {d} | {eps:.0e} | {up} | {o['status']} | {', '.join(fmt_s(w) for w in walls)} | "
                  f"{ratio} | {rs[0]['true_rel_err']:.1e} | {cov} |")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--upstream"]:
        upstream(sys.argv[2:])
    else:
        main(sys.argv[1:])
