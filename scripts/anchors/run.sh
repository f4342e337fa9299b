#!/usr/bin/env bash
# HOTPANTS and SFFT on astroport's synthetic fields, every tool's difference image detected and scored by
# astroport (`subtract --difference`: same variance, mask, PSF model, detector and truth for all), issue 15.
#
#   scripts/anchors/run.sh OUT [SIZE...]        (default sizes: 1024 2048)
#
# Installs what it needs: cfitsio and SExtractor from Debian (apt, as root), HOTPANTS built from its public
# source (HOTPANTS_SRC=a folder holding it, else a git clone of github.com/acbecker/hotpants), SFFT 1.7.3 in
# a venv under .tools/anchors. SFFT (numpy backend, 2 threads) runs up to SFFT_MAX_SIZE (default 2048: it
# takes about a minute per megapixel here). Writes OUT/<size>/<tool>/ (astroport's outputs and quality.json)
# with seconds.txt (the tool's own wall clock, files to files) and OUT/table.md.
# RESCORE=1 keeps the other tools' difference images already in OUT (and their seconds.txt) and scores them
# again: after a change to astroport's mask, detector or scores.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: scripts/anchors/run.sh OUT [SIZE...]}
shift
if [ $# -eq 0 ]; then sizes=(1024 2048); else sizes=("$@"); fi
tools=$root/.tools/anchors
astroport=${ASTROPORT:-$root/target/release/astroport}
sfft_max=${SFFT_MAX_SIZE:-2048}
mkdir -p "$out" "$tools/bin"

# 1. The tools.
if ! [ -e /usr/include/fitsio.h ] || ! command -v source-extractor >/dev/null; then
    apt-get install -y libcfitsio-dev source-extractor
fi
# SFFT calls SExtractor as `sex` or `sextractor`; Debian names it source-extractor.
ln -sf "$(command -v source-extractor)" "$tools/bin/sex"
if ! [ -x "$tools/hotpants/hotpants" ]; then
    rm -rf "$tools/hotpants"
    if [ -n "${HOTPANTS_SRC:-}" ]; then
        cp -r "$HOTPANTS_SRC" "$tools/hotpants"
    else
        git clone --depth 1 https://github.com/acbecker/hotpants "$tools/hotpants"
    fi
    # -fcommon: HOTPANTS defines its globals in a header (GCC >= 10 refuses that by default).
    make -C "$tools/hotpants" hotpants CFITSIOINCDIR=/usr/include LIBDIR=/usr/lib/x86_64-linux-gnu \
        COPTS="-O3 -funroll-loops -std=c99 -fcommon -D_GNU_SOURCE -I/usr/include" >"$tools/hotpants.build.log"
fi
if ! [ -x "$tools/venv/bin/python" ]; then
    python3 -m venv "$tools/venv"
    # SFFT 1.7.3 calls numpy.in1d (gone in numpy 2) and astropy/scipy/numba releases of that era.
    "$tools/venv/bin/pip" install -q sfft==1.7.3 "numpy<2" "astropy<6.1" "scipy<1.14" "numba<0.61" "sep<1.3"
fi
[ -x "$astroport" ] || (cd "$root" && cargo build --release --bin astroport)
py=$tools/venv/bin/python
helpers=$root/scripts/anchors/anchors.py
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
    echo "astroport: $("$astroport" --version) (commit $(git -C "$root" rev-parse --short HEAD))"
    echo "HOTPANTS: $("$tools/hotpants/hotpants" 2>&1 | grep -m1 Version)"
    echo "SFFT: $("$py" -c 'import sfft; print(sfft.__version__)'); SExtractor: $(source-extractor --version)"
} | tee "$out/versions.txt"
now() { date +%s.%N; }
# Whether a tool's output must be made: always, unless RESCORE is set and it is there.
wanted() { [ -z "${RESCORE:-}" ] || [ ! -e "$1" ]; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f\n", b - a }'; }

for n in "${sizes[@]}"; do
    dir=$out/$n
    field=$dir/field
    mkdir -p "$field" "$dir/astroport" "$dir/hotpants" "$dir/sfft"
    [ -e "$field/truth.csv" ] || "$astroport" field --size "$n" --out "$field" >"$dir/field.log"
    # astroport itself (its file to file, the cpu model).
    "$astroport" subtract --field "$field" --out "$dir/astroport" --backend cpu | tee "$dir/astroport/subtract.log"
    grep -o 'file to file [0-9.]*' "$dir/astroport/subtract.log" | awk '{print $4}' >"$dir/astroport/seconds.txt"

    # HOTPANTS with its defaults except: the reference convolved and D in the science image's units (as
    # astroport and SFFT do), the field's gain, read noise, saturation and masks, a 21 x 21 kernel (astroport's
    # size) of spatial degree 2 and a background of degree 1 (astroport's).
    if wanted "$dir/hotpants/hotpants.nan.fits"; then
        t=$(now)
        "$tools/hotpants/hotpants" -inim "$field/sci.fits" -tmplim "$field/ref.fits" \
            -outim "$dir/hotpants/hotpants.diff.fits" -omi "$dir/hotpants/hotpants.mask.fits" \
            -c t -n i -r 10 -ko 2 -bgo 1 -tu 60000 -iu 60000 -tg 1 -ig 1 -tr 5 -ir 5 \
            -tmi "$field/ref.mask.fits" -imi "$field/sci.mask.fits" -v 0 >"$dir/hotpants/hotpants.log" 2>&1
        since "$t" >"$dir/hotpants/seconds.txt"
        "$py" "$helpers" masked-nan "$dir/hotpants/hotpants.diff.fits" "$dir/hotpants/hotpants.mask.fits" \
            "$dir/hotpants/hotpants.nan.fits"
    fi
    "$astroport" subtract --field "$field" --difference "$dir/hotpants/hotpants.nan.fits" \
        --out "$dir/hotpants" --backend cpu | tee "$dir/hotpants/subtract.log"

    if [ "$n" -le "$sfft_max" ]; then
        # SFFT's crowded flavour marks saturated sources by SExtractor's FLUX_MAX, which is above the
        # background: with the header's SATURATE (the raw clip, 60000 e-) on a 500-860 e- sky it finds none
        # and its fit is pulled by the clipped cores (kernel sum 0.67 for 0.50). Its copies of the images say
        # SATURATE = 59000.
        if wanted "$dir/sfft/sfft.diff.fits"; then
            for side in ref sci; do
                "$py" "$helpers" saturate "$field/$side.fits" 59000 "$dir/sfft/$side.fits"
            done
            t=$(now)
            PATH=$tools/bin:$PATH "$py" "$helpers" sfft "$dir/sfft/ref.fits" "$dir/sfft/sci.fits" \
                "$dir/sfft/sfft.diff.fits" 2 >"$dir/sfft/sfft.log" 2>&1
            since "$t" >"$dir/sfft/seconds.txt"
            rm -f "$dir/sfft/ref.fits" "$dir/sfft/sci.fits"
        fi
        "$astroport" subtract --field "$field" --difference "$dir/sfft/sfft.diff.fits" \
            --out "$dir/sfft" --backend cpu | tee "$dir/sfft/subtract.log"
    else
        echo "SFFT not run at $n (SFFT_MAX_SIZE=$sfft_max)" | tee "$dir/sfft/not-run.txt"
    fi
done
"$py" "$helpers" table "$out" | tee "$out/table.md"
