#!/usr/bin/env python3
"""Markdown tables of one lens GPU run (the folder unpacked from scripts/gpu_lens.sh's lens-gpu.tgz).

    scripts/lens_tables.py reports/nvidia-h200/lens/run

Prints: every mode on CUDA and NVIDIA OpenCL (time, registers, occupancy, ratio, recomputed fraction,
the paper's error budget), every kernel step with its OpenCL/CUDA ratio, energy from the sampled board power
(median power of the busy samples times the median time of the 40-repeat energy run), the χ² rows and the
CPU rows. Only reads the run's own files.
"""
import csv
import json
import statistics
import sys
from pathlib import Path

MODES = ["f32", "f64", "mixed", "mixed-patches", "mixed-paper", "mixed-budget"]
BUSY_WATTS = 200.0  # idle is ~120 W on these boards: samples above this are the kernel's


def rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def extra(row, key):
    """A workload figure: `details` in astroport.row/2, `accuracy.extra` in row/1."""
    if row.get("details"):
        return row["details"].get(key)
    acc = row.get("accuracy") or {}
    return dict(acc.get("extra", [])).get(key)


def chi2_runs(folder):
    """The χ² rows of a run: lens-chi2 rows (astroport.row/2) in the older astroport.chi2/1 shape."""
    if (folder / "chi2.jsonl").exists():
        return rows(folder / "chi2.jsonl")
    if not (folder / "results.jsonl").exists():
        return []
    out = []
    for r in rows(folder / "results.jsonl"):
        d = r.get("details")
        if r.get("workload") != "lens-chi2" or not d:
            continue
        out.append(dict(d, backend=r["backend"], device=r["device"], time_s=r["time_s"]["median"],
                        steps=r.get("steps", []), same_images=r["status"] == "ok"))
    return out


def ms(seconds):
    return f"{seconds * 1e3:.2f} ms"


def res(r):
    x = r.get("resources") or {}
    regs, occ = x.get("regs_per_thread"), x.get("occupancy")
    return f"{regs if regs is not None else 'n/a'} / {f'{occ:.0%}' if occ is not None else 'n/a'}"


def main(folder):
    folder = Path(folder)
    all_rows = rows(folder / "results.jsonl")
    gpu = {(r["precision"], r["model"]): r for r in all_rows if r["device_type"] == "gpu"}
    # (mode, CUDA row, NVIDIA OpenCL row) for every mode the run has on both.
    pairs = [(m, gpu[(m, "cuda")], gpu[(m, "opencl")]) for m in MODES if (m, "cuda") in gpu and (m, "opencl") in gpu]
    print("| mode | CUDA | regs / occ. | NVIDIA OpenCL | regs / occ. | OpenCL/CUDA | recomputed | worst E·M/(h/4) | px over budget | max \\|Δα\\| |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for mode, c, o in pairs:
        tc, to = c["time_s"]["median"], o["time_s"]["median"]
        frac = extra(c, "recomputed_fraction")
        print(
            f"| {mode} | {ms(tc)} | {res(c)} | {ms(to)} | {res(o)} | {to / tc:.2f} | "
            f"{f'{frac:.2%}' if frac is not None else '—'} | {extra(c, 'budget_worst_ratio'):.3g} | "
            f"{extra(c, 'pixels_over_budget'):.0f} | {c['accuracy']['max_abs']:.2g}″ |"
        )
    print()
    print("| mode | step | CUDA | NVIDIA OpenCL | OpenCL/CUDA | regs / occ. CUDA; OpenCL |")
    print("|---|---|---|---|---|---|")
    for mode, c, o in pairs:
        for sc, so in zip(c.get("steps", []), o.get("steps", [])):
            if sc["name"].startswith("fill"):
                continue
            print(
                f"| {mode} | `{sc['name']}` | {ms(sc['median_s'])} | {ms(so['median_s'])} | "
                f"{so['median_s'] / sc['median_s']:.2f} | {res(sc)}; {res(so)} |"
            )
    print()
    print("| mode | busy samples | median power | SM clock | time (40 repeats) | energy |")
    print("|---|---|---|---|---|---|")
    for mode in MODES:
        power = folder / f"power-{mode}.csv"
        run = folder / f"energy-{mode}" / "results.jsonl"
        if not power.exists() or not run.exists():
            continue
        watts, clocks = [], []
        with open(power) as f:
            for rec in csv.reader(f):
                try:
                    w, clk = float(rec[1]), float(rec[2])
                except (IndexError, ValueError):
                    continue
                if w > BUSY_WATTS:
                    watts.append(w)
                    clocks.append(clk)
        if not watts:
            continue
        t = rows(run)[0]["time_s"]["median"]
        p = statistics.median(watts)
        print(
            f"| {mode} | {len(watts)} | {p:.0f} W | {statistics.median(clocks):.0f} MHz | {ms(t)} | "
            f"{p * t:.1f} J |"
        )
    chi2_rows = chi2_runs(folder / "chi2")
    if chi2_rows:
        print()
        print("| χ² backend | device time | grid | flags | recompute | delensing | χ² (ref.) | missing / extra | same images |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in chi2_rows:
            steps = {s["name"]: s["median_s"] for s in r.get("steps", [])}
            print(
                f"| {r['backend']} ({r['device'][:24]}) | {ms(r['time_s'])} | "
                f"{ms(steps.get('lens_grid_f32', 0))} | {ms(steps.get('lens_flag', 0))} | "
                f"{ms(steps.get('lens_recompute', 0))} | {ms(steps.get('lens_delens_f64', 0))} | "
                f"{r['chi2']:.4f} ({r['reference_chi2']:.4f}) | {r['missing']} / {r['extra']} | "
                f"{'yes' if r['same_images'] else 'NO'} (worst shift {r['worst_shift_arcsec']:.3f}″) |"
            )
    cpu = [r for r in all_rows if r["model"] == "cpu"]
    if cpu:
        print()
        print("| CPU | mode | time | interactions/s |")
        print("|---|---|---|---|")
        for r in cpu:
            print(
                f"| {r['device']} | {r['precision']} | {r['time_s']['median']:.3f} s | "
                f"{r['throughput']['value']:.3g} |"
            )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
