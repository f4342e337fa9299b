#!/usr/bin/env python3
"""Converts sht_ref_vectors.npz (beside this script, made by make_vectors.py: healpy 1.20.1, ducc0 0.42,
mpmath) into sht_vectors.json, which the Rust tests read. Standard library only: an .npz is a zip of .npy
files (header: magic, version, a dict literal with descr, fortran_order and shape, then raw data). Floats are
written with repr(), which round-trips float64 exactly; arrays keep their shape as nested lists.

    python3 npz_to_json.py            (reads sht_ref_vectors.npz beside it)
"""
import ast
import json
import os
import struct
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))


def read_npy(raw):
    assert raw[:6] == b"\x93NUMPY", "not an .npy file"
    major = raw[6]
    hlen_size = 2 if major == 1 else 4
    hlen = int.from_bytes(raw[8:8 + hlen_size], "little")
    start = 8 + hlen_size
    header = ast.literal_eval(raw[start:start + hlen].decode("latin1"))
    data = raw[start + hlen:]
    descr, shape = header["descr"], header["shape"]
    assert not header["fortran_order"], "Fortran order not expected"
    count = 1
    for s in shape:
        count *= s
    if descr in ("<f8", "<i8"):
        flat = list(struct.unpack("<%d%s" % (count, "d" if descr == "<f8" else "q"), data[:8 * count]))
    elif descr.startswith("<U"):
        width = int(descr[2:])
        flat = [data[4 * width * i:4 * width * (i + 1)].decode("utf-32-le").rstrip("\x00") for i in range(count)]
    else:
        raise ValueError("unhandled dtype " + descr)

    def nest(values, dims):
        if not dims:
            return values[0]
        if len(dims) == 1:
            return values
        step = len(values) // dims[0]
        return [nest(values[i * step:(i + 1) * step], dims[1:]) for i in range(dims[0])]

    return nest(flat, list(shape))


def main(path):
    z = zipfile.ZipFile(path)
    out = {}
    for info in z.infolist():
        out[info.filename[:-4]] = read_npy(z.read(info))
    with open(os.path.join(HERE, "sht_vectors.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "sht_ref_vectors.npz"))
