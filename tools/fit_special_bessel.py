"""Generate ember/ops/_bessel_coeffs.py: polynomial fits used by ember/ops/special_bessel.py.

Each fit is a Chebyshev least-squares fit (mpmath.chebyfit at 40 digits) of a smooth, well-scaled
function of a variable that runs over [-1, 1] (or [0, 1] for the asymptotic variables u = (x0/x)**2),
written as monomial coefficients, highest degree first (Horner order). The script evaluates every fit
in float64 Horner arithmetic against mpmath and prints, per fit, the worst error relative to the
function's largest value on the interval (the oscillating ones have zeros, where only absolute
accuracy is meaningful); rerun it after changing an interval or a degree:

    python tools/fit_special_bessel.py > ember/ops/_bessel_coeffs.py
"""
from __future__ import annotations

import sys

import mpmath as mp
import numpy as np

mp.mp.dps = 40
OUT: dict[str, list[float]] = {}


def fit(name, f, a, b, degree, *, centered=True):
    """Fit g(s) = f(mid + half * s), s in [-1, 1] (centered) or g(u) = f(a + (b - a) u), u in [0, 1]."""
    a, b = mp.mpf(a), mp.mpf(b)
    if centered:
        mid, half = (a + b) / 2, (b - a) / 2
        g, lo, hi = (lambda s: f(mid + half * s)), -1, 1
    else:
        g, lo, hi = (lambda u: f(a + (b - a) * u)), 0, 1
    poly, _ = mp.chebyfit(g, [lo, hi], degree + 1, error=True)
    coeffs = [float(c) for c in poly]
    xs = np.linspace(lo, hi, 1201)
    acc = np.zeros_like(xs)
    for c in coeffs:
        acc = acc * xs + c
    truth = [g(mp.mpf(float(v))) for v in xs]
    scale = max(abs(t) for t in truth)
    worst = max(abs(acc[i] - truth[i]) for i in range(len(xs))) / scale
    print(f"# {name}: degree {degree} on [{mp.nstr(a, 6)}, {mp.nstr(b, 6)}], worst float64 error "
          f"{mp.nstr(worst, 3)} of the largest |value|", file=sys.stderr)
    OUT[name] = coeffs


def modulus_phase(nu, x):
    """P and x*Q of Hankel's form J = sqrt(2/(pi x)) (P cos chi - Q sin chi), Y = ... (P sin chi + Q cos chi)."""
    chi = x - (2 * nu + 1) * mp.pi / 4
    s = mp.sqrt(mp.pi * x / 2)
    j, y = mp.besselj(nu, x), mp.bessely(nu, x)
    return s * (j * mp.cos(chi) + y * mp.sin(chi)), x * s * (-j * mp.sin(chi) + y * mp.cos(chi))


def bessel_fits():
    x0 = 8
    for nu in (0, 1):
        p_limit, q_limit = mp.mpf(1), (4 * nu * nu - 1) / mp.mpf(8)
        fit(f"J{nu}_P", lambda u: modulus_phase(nu, x0 / mp.sqrt(u))[0] if u else p_limit, 0, 1, 14, centered=False)
        fit(f"J{nu}_Q", lambda u: modulus_phase(nu, x0 / mp.sqrt(u))[1] if u else q_limit, 0, 1, 14, centered=False)
    # |x| <= 8, as functions of t = x**2: J0(x), J1(x)/x, and the entire parts of Y0, Y1
    # (Y0 = 2/pi log(x) J0 + R0, Y1 = 2/pi (log(x) J1 - 1/x) + x R1).
    sq = lambda t: mp.sqrt(t)
    j0 = lambda t: mp.besselj(0, sq(t))
    j1x = lambda t: mp.besselj(1, sq(t)) / sq(t) if t else mp.mpf(0.5)
    r0 = lambda t: (mp.bessely(0, sq(t)) - 2 / mp.pi * mp.log(sq(t)) * mp.besselj(0, sq(t))) if t else \
        2 / mp.pi * (mp.euler - mp.log(2))
    r1 = lambda t: ((mp.bessely(1, sq(t)) - 2 / mp.pi * (mp.log(sq(t)) * mp.besselj(1, sq(t)) - 1 / sq(t))) / sq(t)
                    if t else mp.limit(lambda s: (mp.bessely(1, mp.sqrt(s)) - 2 / mp.pi * (mp.log(mp.sqrt(s))
                        * mp.besselj(1, mp.sqrt(s)) - 1 / mp.sqrt(s))) / mp.sqrt(s), 0))
    for name, f in (("J0", j0), ("J1X", j1x), ("R0", r0), ("R1", r1)):
        fit(f"{name}_A", f, 0, 16, 16)
        fit(f"{name}_B", f, 16, 64, 22)


def modified_fits():
    # sqrt(x) exp(-x) I(x) for x > 8 in u = 8 / x; sqrt(x) exp(x) K(x) for x > 2 in u = 2 / x.
    i_limit = 1 / mp.sqrt(2 * mp.pi)
    k_limit = mp.sqrt(mp.pi / 2)
    for nu in (0, 1):
        fit(f"I{nu}E_BIG", lambda u: mp.sqrt(8 / u) * mp.exp(-8 / u) * mp.besseli(nu, 8 / u) if u else i_limit,
            0, 1, 24, centered=False)
        fit(f"K{nu}E_BIG", lambda u: mp.sqrt(2 / u) * mp.exp(2 / u) * mp.besselk(nu, 2 / u) if u else k_limit,
            0, 1, 26, centered=False)


def airy_fits():
    # x <= -X: Ai(x) = |x|^(-1/4) / sqrt(pi) (P sin(z + pi/4) - Q cos(z + pi/4)), z = 2/3 |x|^(3/2), fitted in
    # u = (z0 / z)^2; x >= 2: Ai(x) = exp(-z) x^(-1/4) G / (2 sqrt(pi)) in u = z0 / z; in between, Ai itself.
    def pq(x):
        z = mp.mpf(2) / 3 * x ** mp.mpf(1.5)
        a = mp.airyai(-x)
        b = mp.airybi(-x)
        s = x ** mp.mpf(0.25) * mp.sqrt(mp.pi)
        # Ai(-x) = (P sin th - Q cos th) / s, Bi(-x) = (P cos th + Q sin th) / s, th = z + pi/4
        th = z + mp.pi / 4
        return s * (a * mp.sin(th) + b * mp.cos(th)), z * s * (b * mp.sin(th) - a * mp.cos(th))

    zneg = mp.mpf(8)
    xneg = (mp.mpf(1.5) * zneg) ** (mp.mpf(2) / 3)
    print(f"AIRY_NEG_X = {float(xneg)!r}")
    fit("AI_NEG_P", lambda u: pq((1.5 * zneg / mp.sqrt(u)) ** (mp.mpf(2) / 3))[0] if u else mp.mpf(1), 0, 1, 14,
        centered=False)
    fit("AI_NEG_Q", lambda u: pq((1.5 * zneg / mp.sqrt(u)) ** (mp.mpf(2) / 3))[1] if u else mp.mpf(5) / 72, 0, 1, 14,
        centered=False)
    zpos = mp.mpf(2) / 3 * mp.mpf(2) ** mp.mpf(1.5)

    def g(u):
        if not u:
            return mp.mpf(1)
        z = zpos / u
        x = (1.5 * z) ** (mp.mpf(2) / 3)
        return mp.airyai(x) * mp.exp(z) * x ** mp.mpf(0.25) * 2 * mp.sqrt(mp.pi)

    fit("AI_POS_G", g, 0, 1, 26, centered=False)
    edges = [float(-xneg), -3.5, -1.5, 0.25, 2.0]
    print(f"AIRY_MID_EDGES = {tuple(edges)!r}")
    for i, (lo, hi) in enumerate(zip(edges[:-1], edges[1:])):
        fit(f"AI_MID_{i}", mp.airyai, lo, hi, 22)


if __name__ == "__main__":
    print('"""Polynomial coefficients for ember/ops/special_bessel.py (highest degree first).\n\n'
          'Generated by tools/fit_special_bessel.py (Chebyshev fits with mpmath); do not edit by hand.\n"""\n')
    bessel_fits()
    modified_fits()
    airy_fits()
    for name, coeffs in OUT.items():
        print(f"{name} = (")
        for c in coeffs:
            print(f"    {c!r},")
        print(")")
