"""dPIE (LENSTOOL type 81) deflections where float arithmetic cancels: near the two foci (0, +-2 r sqrt(eps))
of both radii, far along the +v and -v axes, and over the field, for ellipticities on both sides of the
small-eps switch (0.1) of cl/common/lens_model.h. Evaluated with mpmath at 50 digits from the textbook
formula (Kassiola & Kovner 1993; Eliasdottir et al. 2007, App. A), which needs no care at that precision.

Each halo sits at the origin with theta = 0, so the point (x, y) is the halo-frame (u, v). Every input
(point, eps, radii, scale) is a float32 value written exactly, so one file serves the float64 and the float32
tests. Run: python3 make_dpie_focus_vectors.py (needs mpmath only)."""
import json
import math
import os
import random
import struct

import mpmath as mp

mp.mp.dps = 50


def f32(v):
    return struct.unpack('f', struct.pack('f', v))[0]


def term(u, v, e, r):
    sqe = mp.sqrt(e)
    cx1 = (1 - e) / (1 + e)
    rho2 = u * u / (1 + e) ** 2 + v * v / (1 - e) ** 2
    znum = mp.mpc(cx1 * u, 2 * sqe * mp.sqrt(r * r + rho2) - v / cx1)
    zden = mp.mpc(u, 2 * r * sqe - v)
    return mp.log(znum / zden)


def deflection(u, v, e, rc, rcut, scale):
    u, v, e, rc, rcut, scale = map(mp.mpf, (u, v, e, rc, rcut, scale))
    k = (1 - e * e) / (2 * mp.sqrt(e))
    z = term(u, v, e, rc) - term(u, v, e, rcut)
    # deflection = K scale (arg, -ln|.|) of w(rc)/w(rcut), as LENSTOOL's ci05 times -i K
    return k * scale * z.imag, -k * scale * z.real


def main():
    rng = random.Random(81)
    halos = []  # eps, r_core, r_cut, scale (b r_cut / (r_cut - r_core))
    for eps, rc, rcut, b in ((0.0005, 1.0, 100.0, 15.0), (0.01, 0.05, 10.0, 0.5), (0.05, 10.0, 300.0, 40.0),
                             (0.2, 1.5, 150.0, 15.0), (0.4, 10.0, 300.0, 40.0), (0.8, 5.0, 200.0, 30.0),
                             (0.15, 0.0, 50.0, 5.0)):
        eps, rc, rcut = f32(eps), f32(rc), f32(rcut)
        scale = f32(b * rcut / (rcut - rc))
        pts = []
        for r in (rc, rcut):
            focus = 2 * r * math.sqrt(eps)
            for sign in (1.0, -1.0):
                for _ in range(12):
                    d = 10 ** rng.uniform(-6, 0.5)
                    a = rng.uniform(0, 2 * math.pi)
                    pts.append((f32(d * math.cos(a)), f32(sign * focus + d * math.sin(a)), "focus"))
        for sign in (1.0, -1.0):
            for dist in (30.0, 150.0, 399.0):
                pts.append((f32(rng.uniform(-0.5, 0.5)), f32(sign * dist), "axis"))
        for _ in range(24):
            pts.append((f32(rng.uniform(-400, 400)), f32(rng.uniform(-400, 400)), "field"))
        rows = []
        for u, v, kind in pts:
            gx, gy = deflection(u, v, eps, rc, rcut, scale)
            rows.append([repr(u), repr(v), mp.nstr(gx, 25), mp.nstr(gy, 25), kind])
        halos.append(dict(eps=repr(eps), r_core=repr(rc), r_cut=repr(rcut), scale=repr(scale), points=rows))
    out = dict(description=__doc__, columns=["u", "v", "grad_u", "grad_v", "kind"], halos=halos,
               generator=f"mpmath {mp.__version__} at 50 digits, Python random seed 81")
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dpie_focus_vectors.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=0)
    print(f"wrote {path}: {sum(len(h['points']) for h in halos)} points")


if __name__ == "__main__":
    main()
