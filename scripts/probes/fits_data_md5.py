#!/usr/bin/env python3
"""md5 of each FITS file's data units (headers skipped: they may differ in dates or timings), one line per
file: `md5  name`. Used by the GPU A/B scripts to show that variants wrote the same planes. Each data unit's
size comes from its header (BITPIX, NAXISn, PCOUNT, GCOUNT), padded to 2880-byte blocks."""
import hashlib
import sys

BLOCK = 2880


def header(f):
    """The next header's cards as a dict, or None at the end of the file."""
    cards = {}
    while True:
        block = f.read(BLOCK)
        if len(block) < BLOCK:
            return None
        for i in range(0, BLOCK, 80):
            card = block[i:i + 80].decode("ascii", "replace")
            key = card[:8].strip()
            if key == "END":
                return cards
            if card[8:10] == "= ":
                cards[key] = card[10:].split("/")[0].strip()


for path in sys.argv[1:]:
    digest = hashlib.md5()
    with open(path, "rb") as f:
        while (cards := header(f)) is not None:
            naxis = int(cards.get("NAXIS", "0"))
            elements = 0
            if naxis > 0:
                elements = 1
                for k in range(1, naxis + 1):
                    elements *= int(cards[f"NAXIS{k}"])
            size = abs(int(cards["BITPIX"])) // 8 * int(cards.get("GCOUNT", "1")) * (
                int(cards.get("PCOUNT", "0")) + elements)
            data = f.read(size)
            if len(data) < size:
                sys.exit(f"{path}: data unit shorter than its header says ({len(data)} of {size} bytes)")
            digest.update(data)
            f.seek(-size % BLOCK, 1)
    print(f"{digest.hexdigest()}  {path.rsplit('/', 1)[-1]}")
