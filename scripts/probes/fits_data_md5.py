#!/usr/bin/env python3
"""md5 of each FITS file's data units (headers skipped: they may differ in dates or timings), one line per
file: `md5  name`. Used by the GPU A/B scripts to show that variants wrote the same planes."""
import hashlib
import sys

for path in sys.argv[1:]:
    digest = hashlib.md5()
    with open(path, "rb") as f:
        while True:
            # A header: 2880-byte blocks up to the one holding the END card.
            ended = False
            while not ended:
                block = f.read(2880)
                if not block:
                    break
                ended = any(block[i:i + 8] == b"END     " for i in range(0, 2880, 80))
            if not ended:
                break
            # The data unit: everything up to the next header (the next block starting with XTENSION).
            while True:
                block = f.read(2880)
                if not block:
                    break
                if block[:8] == b"XTENSION":
                    f.seek(-2880, 1)
                    break
                digest.update(block)
    print(f"{digest.hexdigest()}  {path.rsplit('/', 1)[-1]}")
