"""Vectorized Hurwitz zeta, polygamma and regularized incomplete gamma functions in plain NumPy.

* ``zeta(x, q)`` = sum_k (q + k)**-x: the first terms summed directly (until q + k >= 9), the rest by
  Euler-Maclaurin with 12 Bernoulli corrections (truncation far below float64 rounding for k >= 9);
* ``polygamma(n, x)`` = (-1)**(n+1) n! zeta(n + 1, x) for n >= 1 (digamma for n = 0);
* ``gammainc(a, x)`` / ``gammaincc(a, x)``: the power series of P for x < a + 1, Legendre's continued
  fraction (modified Lentz) of Q for x >= a + 1, and the small-a series of Q for x <= 1.1 (where
  Q = 1 - P would cancel). The prefactor x**a exp(-x) / Gamma(a) is formed, for a >= 10, as
  sqrt(a / 2 pi) exp(a log1pmx((x - a) / a) - mu(a)) (mu: Stirling's correction), which keeps its
  digits where a log x, x and lgamma(a) are each far larger than their sum.

Each iteration runs over whole arrays (only the elements still converging stay in the loop), never a
Python loop per element. Special points follow PyTorch: zeta(1, q) = inf, zeta(x < 1, q) = NaN, poles
at non-positive integer q; gammainc(0, x > 0) = 1, gammainc(a, 0) = 0, NaN for negative arguments.

Example:
    >>> import numpy as np
    >>> from ember.ops import special_zeta
    >>> round(float(special_zeta.zeta(np.array(2.0), np.array(1.0))), 12)  # pi**2 / 6
    1.644934066848
"""
from __future__ import annotations

import math

import numpy as np

from ember.ops.special_math import _digamma, _erfc, _lgamma, _lgamma2

_EPS = np.finfo(np.float64).eps
# B_2j / (2j)! for j = 1..12 (Bernoulli numbers as exact fractions, then rounded once).
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798,
              -174611 / 330, 854513 / 138, -236364091 / 2730)
_EM = tuple(b / math.factorial(2 * j + 2) for j, b in enumerate(_BERNOULLI))
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _float64(*arrays: np.ndarray) -> list:
    return [np.array(a, dtype=np.float64, order="C") for a in np.broadcast_arrays(*arrays)]  # keeps 0-d


def _result_dtype(*arrays: np.ndarray) -> np.dtype:
    floats = [a.dtype for a in arrays if a.dtype.kind == "f" or a.dtype.name == "bfloat16"]
    return np.result_type(*floats) if floats else np.dtype(np.float64)


def _finish(result: np.ndarray, dtype: np.dtype, shape: tuple) -> np.ndarray:
    result = result.reshape(shape).astype(dtype, copy=False)
    return result if result.ndim else dtype.type(result)


# ---- Hurwitz zeta -------------------------------------------------------------------------------------
def _zeta_sum(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    """sum_{k >= 0} (q + k)^-x for x > 1 and q not a non-positive integer (q < 0 only for integer x)."""
    terms = max(9, int(math.ceil(9.0 - float(q.min()))) + 1) if q.size else 9
    total = np.zeros_like(x)
    a = q.copy()
    for _ in range(terms):  # the direct part, until every a = q + k is >= 9
        total += np.power(a, -x)
        a += 1.0
    # Euler-Maclaurin tail from a: a^(1-x) / (x-1) + a^-x / 2 + sum_j B_2j/(2j)! x(x+1)..(x+2j-2) a^(-x-2j+1)
    b = np.power(a, -x)
    total += np.power(a, 1.0 - x) / (x - 1.0) + 0.5 * b  # not a * b: b underflows first (trigamma(1e300) = 1e-300)
    t = b / a * x
    total += t * _EM[0]
    inv_a2 = 1.0 / (a * a)
    for j in range(1, len(_EM)):
        t *= (x + (2 * j - 1)) * (x + 2 * j) * inv_a2
        total += t * _EM[j]
    return total


def _zeta_core(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    """PyTorch's (Cephes') case order: x == 1 -> inf, x < 1 -> NaN, q a non-positive integer -> inf (NaN x
    included), q < 0 with x not an integer -> NaN; x = +inf -> 1 at q = 1, inf where some |q + k| < 1;
    q = +inf -> NaN (PyTorch's value, through inf * 0 in its tail)."""
    out = np.full(x.shape, np.nan)
    out[x == 1.0] = np.inf
    pole = (q <= 0.0) & (q == np.floor(q)) & ~(x < 1.0) & (x != 1.0)
    out[pole] = np.inf
    infinite = (x == np.inf) & ~pole
    out[infinite & (q == 1.0)] = 1.0
    out[infinite & (((q > 0.0) & (q < 1.0)) | ((q < 0.0) & (q > -np.inf)))] = np.inf
    ok = (x > 1.0) & ~infinite & ~pole & ((q > 0.0) | ((x == np.floor(x)) & (q > -np.inf))) & (q < np.inf)
    where = np.nonzero(ok)
    if where[0].size:
        out[where] = _zeta_sum(x[where], q[where])
    return out


def zeta(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The Hurwitz zeta function sum_k (q + k)^-x (``torch.special.zeta``; zeta(x, 1) is Riemann's)."""
    x, q = np.asarray(x), np.asarray(q)
    dtype = _result_dtype(x, q)
    xf, qf = _float64(x, q)
    with np.errstate(all="ignore"):
        return _finish(_zeta_core(xf.reshape(-1), qf.reshape(-1)), dtype, xf.shape)


def polygamma(n: int, x: np.ndarray) -> np.ndarray:
    """The n-th derivative of digamma: (-1)^(n+1) n! zeta(n + 1, x); +-inf at the poles."""
    x = np.asarray(x)
    dtype = _result_dtype(x)
    flat = np.ascontiguousarray(x, dtype=np.float64).reshape(-1)
    with np.errstate(all="ignore"):
        if n == 0:
            values = _digamma(flat, False)
        else:
            values = (-1.0) ** (n + 1) * float(math.factorial(n)) * _zeta_core(np.full_like(flat, n + 1.0), flat)
            values[np.isnan(flat)] = np.nan
            if n == 1:  # PyTorch's trigamma: 0 at +inf, NaN at -inf (its polygamma(n >= 2) goes through zeta)
                values[flat == np.inf] = 0.0
                values[flat == -np.inf] = np.nan
    return _finish(values, dtype, x.shape)


# ---- incomplete gamma ---------------------------------------------------------------------------------
def _log1pmx(d: np.ndarray) -> np.ndarray:
    """log(1 + d) - d without cancellation near 0: -d^2/(2 + d) + 2 y^3 sum y^2k/(2k+3), y = d/(2 + d)."""
    out = np.log1p(d) - d
    near = np.nonzero(np.abs(d) < 0.5)
    if near[0].size:
        v = d[near]
        y = v / (2.0 + v)
        y2 = y * y
        acc = np.full_like(y, 1.0 / 43.0)
        for k in range(20, 0, -1):  # acc = sum_{k>=1} y^(2k-2) / (2k+1), |y| <= 1/3
            acc = acc * y2 + 1.0 / (2 * k + 1)
        # log1p(v) - v = 2 atanh(y) - v = 2 y^3 acc + (2 y - v), and 2 y - v = -v^2 / (2 + v)
        out[near] = 2.0 * y * y2 * acc - v * v / (2.0 + v)
    return out


def _stirling_mu(a: np.ndarray) -> np.ndarray:
    """lgamma(a) - ((a - 1/2) log a - a + log(2 pi)/2) for a >= 10, by its asymptotic series."""
    inv = 1.0 / a
    inv2 = inv * inv
    acc = np.zeros_like(a)
    for j in range(len(_BERNOULLI[:8]) - 1, -1, -1):
        acc = acc * inv2 + _BERNOULLI[j] / ((2 * j + 2) * (2 * j + 1))
    return acc * inv


def _log_prefactor(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """log(x^a e^-x / Gamma(a)), accurate where its three terms are large and cancel (a >= 10)."""
    out = a * np.log(x) - x - _lgamma(a, False)
    big = np.nonzero(a >= 10.0)
    if big[0].size:
        ab, xb = a[big], x[big]
        out[big] = ab * _log1pmx((xb - ab) / ab) - _stirling_mu(ab) + 0.5 * np.log(ab) - _HALF_LOG_2PI
    return out


def _p_series(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """P(a, x) = x^a e^-x / Gamma(a + 1) sum_k x^k / ((a+1)...(a+k)), for x < a + 1."""
    total = np.ones_like(a)
    active = np.arange(a.size)
    xx, tt, den, sub = x, np.ones_like(a), a.copy(), total
    while active.size:
        den = den + 1.0
        tt = tt * xx / den
        sub += tt
        going = tt > _EPS * sub
        count = np.count_nonzero(going)
        if count <= going.size // 2:  # compact only when it pays: extra terms on converged elements are harmless
            total[active] = sub
            keep = np.nonzero(going)
            active, xx, tt, den, sub = active[keep], xx[keep], tt[keep], den[keep], sub[keep]
    total[active] = sub
    return np.exp(_log_prefactor(a, x)) / a * total


def _q_fraction(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Q(a, x) by Legendre's continued fraction (modified Lentz), for x >= a + 1."""
    tiny = 1e-300
    b = x + 1.0 - a
    c = np.full_like(a, 1.0 / tiny)
    d = 1.0 / b
    h = d.copy()
    active = np.arange(a.size)
    aa, bb, cc, dd, hh = a, b, c, d, h
    i = 0
    while active.size:
        i += 1
        an = -i * (i - aa)
        bb = bb + 2.0
        dd = an * dd + bb
        dd[np.abs(dd) < tiny] = tiny
        cc = bb + an / cc
        cc[np.abs(cc) < tiny] = tiny
        dd = 1.0 / dd
        delta = dd * cc
        hh = hh * delta
        going = np.abs(delta - 1.0) > _EPS
        if np.count_nonzero(going) <= going.size // 2:  # converged elements may take more steps meanwhile
            h[active] = hh
            keep = np.nonzero(going)
            active, aa, bb, cc, dd, hh = active[keep], aa[keep], bb[keep], cc[keep], dd[keep], hh[keep]
    h[active] = hh
    return np.exp(_log_prefactor(a, x)) * h


def _lgamma1p(a: np.ndarray) -> np.ndarray:
    """lgamma(1 + a) for a >= 0, keeping a's relative digits near 0 (lgamma(2 + a) is fitted around a = 0)."""
    return np.where(a <= 0.5, _lgamma2(np.minimum(a, 0.5)) - np.log1p(a), _lgamma(1.0 + a, False))


def _q_small_a(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Q(a, x) for x <= 1.1 and small a: 1 - x^a/Gamma(a+1) - x^a/Gamma(a) sum_{k>=1} (-x)^k / (k! (a+k))."""
    first = -np.expm1(a * np.log(x) - _lgamma1p(a))
    total = np.zeros_like(a)
    term = np.ones_like(a)
    for k in range(1, 40):  # x <= 1.1: x^k / k! < 1e-17 by k = 25
        term = term * (-x) / k
        total += term / (a + k)
    return first - np.exp(a * np.log(x) - _lgamma1p(a)) * a * total


def _temme(a: np.ndarray, x: np.ndarray, upper: bool) -> np.ndarray:
    """P or Q for large a with x near a (where the series and the fraction need ~sqrt(a) steps): Temme's
    uniform expansion Q = erfc(eta sqrt(a/2)) / 2 + exp(-a eta^2 / 2) / sqrt(2 pi a) (c0 + c1 / a), with
    eta^2 / 2 = (x/a - 1) - log(x/a); truncation ~ eta / a^2 relative, far below rounding for a >= 1e5."""
    d = (x - a) / a
    half_eta2 = -_log1pmx(d)
    eta = np.copysign(np.sqrt(2.0 * half_eta2), d)
    with np.errstate(all="ignore"):
        closed = 1.0 / d - 1.0 / eta  # c0 = 1/(lambda - 1) - 1/eta: cancels near eta = 0, its series there
    c0 = np.where(np.abs(eta) < 1e-3, -1.0 / 3.0 + eta / 12.0 - eta * eta * (2.0 / 135.0), closed)
    c1 = -1.0 / 540.0 - eta / 288.0
    r = np.exp(-a * half_eta2) / np.sqrt(2.0 * math.pi * a) * (c0 + c1 / a)
    z = eta * np.sqrt(0.5 * a)
    if upper:
        return np.where(eta >= 0, 0.5 * _erfc(z, False) + r, 1.0 - (0.5 * _erfc(-z, False) - r))
    return np.where(eta < 0, 0.5 * _erfc(-z, False) - r, 1.0 - (0.5 * _erfc(z, False) + r))


def _gammainc_core(a: np.ndarray, x: np.ndarray, upper: bool) -> np.ndarray:
    out = np.full(a.shape, np.nan)
    bad = (x < 0.0) | (a < 0.0)
    edge_lower = np.where(a == 0.0, np.where(x > 0.0, 1.0, np.nan),
                 np.where(x == 0.0, 0.0,
                 np.where(np.isinf(a), np.where(np.isinf(x), np.nan, 0.0), np.where(np.isinf(x), 1.0, np.nan))))
    edge = ~bad & ((a == 0.0) | (x == 0.0) | np.isinf(a) | np.isinf(x))
    out[edge] = (1.0 - edge_lower[edge]) if upper else edge_lower[edge]
    inner = ~bad & ~edge & ~np.isnan(a) & ~np.isnan(x)
    small_a = inner & (x <= 1.1) & np.where(x <= 0.5, a < -0.4 / np.log(x), a < 1.1 * x)
    near = inner & (a > 1e5) & (np.abs(x - a) < 30.0 * np.sqrt(a))
    if near.any():
        out[near] = _temme(a[near], x[near], upper)
    series = inner & ~small_a & ~near & (x < a + 1.0)
    fraction = inner & ~small_a & ~near & ~series
    for mask, fn, gives_upper in ((small_a, _q_small_a, True), (series, _p_series, False),
                                  (fraction, _q_fraction, True)):
        where = np.nonzero(mask)
        if where[0].size:
            value = fn(a[where], x[where])
            out[where] = value if gives_upper == upper else 1.0 - value
    return out


def _gammainc_public(upper: bool):
    def fn(a: np.ndarray, x: np.ndarray) -> np.ndarray:
        a, x = np.asarray(a), np.asarray(x)
        dtype = _result_dtype(a, x)
        af, xf = _float64(a, x)
        with np.errstate(all="ignore"):
            return _finish(_gammainc_core(af.reshape(-1), xf.reshape(-1), upper), dtype, af.shape)

    fn.__name__ = "gammaincc" if upper else "gammainc"
    fn.__doc__ = ("The regularized upper incomplete gamma function Q(a, x) = Gamma(a, x) / Gamma(a)." if upper else
                  "The regularized lower incomplete gamma function P(a, x) = gamma(a, x) / Gamma(a).")
    return fn


gammainc = _gammainc_public(False)
gammaincc = _gammainc_public(True)

FUNCTIONS = {"zeta": zeta, "gammainc": gammainc, "gammaincc": gammaincc}
