"""Helpers of scripts/anchors/run.sh: the other tools' difference images brought to astroport's input form,
SFFT run, and the scores of every tool gathered into one table.

  anchors.py masked-nan DIFF MASK OUT    D with the tool's masked pixels (MASK != 0) set to NaN
  anchors.py saturate IN LEVEL OUT      a copy of IN whose header says SATURATE = LEVEL
  anchors.py sfft REF SCI OUT THREADS    SFFT's crowded flavour (numpy backend), reference convolved
  anchors.py table RESULTS_DIR           quality.json of every <size>/<tool>/ as a Markdown table
  anchors.py halo SIZE_DIR [RADIUS]      mean D/sqrt(VD) per 1-px ring around the saturated stars, per tool
"""

import csv
import json
import sys
import time
from pathlib import Path

import numpy as np
from astropy.io import fits


def masked_nan(diff, mask, out):
    with fits.open(diff) as d, fits.open(mask) as m:
        data = d[0].data.astype(np.float32)
        data[m[0].data != 0] = np.nan
        fits.PrimaryHDU(data, header=d[0].header).writeto(out, overwrite=True)


def saturate(image, level, out):
    with fits.open(image) as f:
        f[0].header["SATURATE"] = float(level)
        f.writeto(out, overwrite=True)


def sfft(ref, sci, out, threads):
    # Imported here: only this step needs SFFT (and SExtractor on PATH as `sex` or `sextractor`).
    from sfft.EasyCrowdedPacket import Easy_CrowdedPacket

    start = time.time()
    # Absolute paths: SExtractor runs in a folder of its own.
    Easy_CrowdedPacket.ECP(
        FITS_REF=str(Path(ref).resolve()),
        FITS_SCI=str(Path(sci).resolve()),
        FITS_DIFF=str(Path(out).resolve()),
        ForceConv="REF",
        KerPolyOrder=2,
        BGPolyOrder=2,
        BACKEND_4SUBTRACT="Numpy",
        NUM_CPU_THREADS_4SUBTRACT=int(threads),
        VERBOSE_LEVEL=0,
    )
    print(f"sfft: {time.time() - start:.1f} s wall")


def table(results):
    rows = []
    by_size_then_tool = lambda q: (int(q.parent.parent.name), q.parent.name)
    for q in sorted(Path(results).glob("*/*/quality.json"), key=by_size_then_tool):
        size, tool = q.parent.parent.name, q.parent.name
        s = json.loads(q.read_text())
        t = q.parent / "seconds.txt"
        seconds = t.read_text().strip() if t.exists() else "-"
        rows.append(
            f"| {size} | {tool} | {seconds} | {s['sky_noise_ratio']:.3f} | {s['static_nrms']:.3f} "
            f"({s['static_stars']}) | {s['recovered']}/{s['changers']}, {s['recovered_snr7']}/"
            f"{s['changers_snr7']} | {s['false_positives']} (+{s['false_positives_saturated']}) | "
            f"{100 * s['photometry_bias']:+.1f} % / {100 * s['photometry_mad']:.1f} % |"
        )
    print(
        "| size | tool | wall s | sky noise ratio | static NRMS (stars) | recall all, S/N ≥ 7 | "
        "false positives (+ near saturation) | PSF photometry bias / MAD |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


def halo(size_dir, radius=30):
    """The residual that saturated stars leave beyond the grown mask, stacked over every saturated star of
    the truth table: a tool whose rings sit lower everywhere, far out too, has a background offset, not a
    better kernel. VD and the mask are astroport's for every tool (as in the scores)."""
    size_dir, radius = Path(size_dir), int(radius)
    with open(size_dir / "field" / "truth.csv") as f:
        stars = [r for r in csv.DictReader(f) if r["kind"] == "star" and r["saturated"] == "1"]
    variance = fits.getdata(size_dir / "astroport" / "diff.var.fits", memmap=True)
    mask = fits.getdata(size_dir / "astroport" / "diff.mask.fits", memmap=True)
    tools = [t for t in ("astroport", "hotpants", "sfft") if (size_dir / t / "diff.fits").exists()]
    diffs = {t: fits.getdata(size_dir / t / "diff.fits", memmap=True) for t in tools}
    yy, xx = np.mgrid[-radius : radius + 1, -radius : radius + 1]
    ring = np.hypot(xx, yy).astype(int)
    sums = {t: np.zeros(radius + 1) for t in tools}
    counts = np.zeros(radius + 1)
    ny, nx = variance.shape
    for s in stars:
        x, y = round(float(s["x"])), round(float(s["y"]))
        if not (radius <= x < nx - radius and radius <= y < ny - radius):
            continue
        box = np.s_[y - radius : y + radius + 1, x - radius : x + radius + 1]
        sigma = np.sqrt(variance[box])
        usable = mask[box] == 0
        for t in tools:
            usable &= np.isfinite(diffs[t][box])
        counts += np.bincount(ring[usable], minlength=radius + 1)[: radius + 1]
        for t in tools:
            z = diffs[t][box] / sigma
            sums[t] += np.bincount(ring[usable], weights=z[usable], minlength=radius + 1)[: radius + 1]
    print(f"{len(stars)} saturated stars; mean D/sqrt(VD) per ring (pixels unmasked in every tool)")
    print("| radius px | pixels | " + " | ".join(tools) + " |")
    print("|---|---|" + "---|" * len(tools))
    for r in range(radius + 1):
        if counts[r]:
            means = " | ".join(f"{sums[t][r] / counts[r]:+.3f}" for t in tools)
            print(f"| {r} | {int(counts[r])} | {means} |")


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    commands = {"masked-nan": masked_nan, "saturate": saturate, "sfft": sfft, "table": table, "halo": halo}
    commands[command](*args)
