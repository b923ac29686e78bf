"""The classical orthogonal polynomials of ``torch.special`` as vectorized NumPy functions of (x, n):
Chebyshev T, U, V, W and their shifted forms on [0, 1], Hermite H (physicists') and He
(probabilists'), Laguerre L and Legendre P.

Semantics are PyTorch's: ``n`` is truncated to an integer (NaN, +-inf and out-of-range n count as
negative), negative n gives 0, the endpoints x = +-1 (0 and 1 for the shifted forms) have their exact
values, and for |x| < 1 and larger n the Chebyshev families use their trigonometric closed forms
(cos(n acos x), ...) instead of the recurrence. Otherwise the three-term recurrence runs over whole
arrays: step k updates only the elements whose n is still >= k, so the work is max(n) array passes,
never a Python loop per element. NaN in x gives NaN (PyTorch 2.13's CPU kernels return assorted
finite values there: docs/special.md).

Example:
    >>> import numpy as np
    >>> from ember.ops import special_poly
    >>> special_poly.hermite_polynomial_h(np.array([0.5]), np.array([3.0]))  # 8x^3 - 12x
    array([-5.])
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ember.ops.special_zeta import _finish, _float64, _result_dtype

_N_LIMIT = 2.0 ** 62


def _degree(n: np.ndarray) -> np.ndarray:
    """PyTorch's static_cast<int64_t>(n): truncation; NaN, inf and huge values become negative."""
    ok = np.isfinite(n) & (np.abs(n) < _N_LIMIT)
    return np.where(ok, np.trunc(np.where(ok, n, -1.0)), -1.0).astype(np.int64)


def _recurrence(x: np.ndarray, n: np.ndarray, p1: np.ndarray,
                step: Callable[[int, np.ndarray, np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """P_n(x) for n >= 2 from P_0 = 1, P_1 = p1 and P_m = step(m, x, P_{m-2}, P_{m-1})."""
    out = p1.copy()
    top = int(n.max()) if n.size else 0
    if top < 2:
        return out
    if int(n.min()) == top:  # one degree for all (the usual call): no bookkeeping
        p, q = np.ones_like(x), p1
        for m in range(2, top + 1):
            p, q = q, step(m, x, p, q)
        return q
    active = np.nonzero(n >= 2)[0]
    xs, p, q, ns = x[active], np.ones(active.size), p1[active], n[active]
    m = 2
    while active.size:
        r = step(m, xs, p, q)
        done = (ns == m) | np.isnan(r)  # a NaN stays NaN: no need to carry it further
        if done.any():
            out[active[done]] = r[done]
            keep = ~done
            active, xs, p, q, ns = active[keep], xs[keep], q[keep], r[keep], ns[keep]
        else:
            p, q = q, r
        m += 1
    return out


def _chebyshev_step(m: int, x: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    return (x + x) * q - p


def _evaluate(x: np.ndarray, n: np.ndarray, fixed: list, p1: np.ndarray, step: Callable) -> np.ndarray:
    """Fill the first matching (mask, value) of ``fixed``, then n == 0, n == 1 and the recurrence."""
    out = _recurrence(x, n, p1, step)
    out[n == 0] = 1.0
    out[n == 1] = p1[n == 1]
    for mask, value in reversed(fixed):  # earlier rules win
        out[mask] = value[mask] if isinstance(value, np.ndarray) else value
    out[np.isnan(x) & (n >= 1)] = np.nan
    return out


def _closed_form(kind: str, y: np.ndarray, nf: np.ndarray, sign: np.ndarray) -> np.ndarray:
    """The trigonometric forms for |y| < 1: T = cos(n t), U = sin((n+1) t) / sin t, V = cos((n+1/2) t) /
    cos(t/2), W = sin((n+1/2) t) / sin(t/2), t = acos y, with PyTorch's fallbacks where a denominator is 0."""
    theta = np.arccos(y)
    if kind == "t":
        return np.cos(nf * theta)
    if kind == "u":
        s = np.sin(theta)
        return np.where(s != 0.0, np.sin((nf + 1.0) * theta) / np.where(s != 0.0, s, 1.0),
                        (nf + 1.0) * np.cos((nf + 1.0) * theta) / y)
    if kind == "v":
        return np.where(np.sin(theta / 2.0) != 1.0, np.cos((nf + 0.5) * theta) / np.cos(theta / 2.0),
                        sign * (2.0 * nf + 1.0))
    return np.where(np.cos(theta / 2.0) != 1.0, np.sin((nf + 0.5) * theta) / np.sin(theta / 2.0),
                    np.where(y > 0.0, 2.0 * nf + 1.0, sign))


def _chebyshev(kind: str, shifted: bool) -> Callable:
    trig_from = {"t": 6, "u": 8, "v": 8, "w": 8}[kind]

    def core(x: np.ndarray, n: np.ndarray) -> np.ndarray:
        y = x + x - 1.0 if shifted else x
        top, bottom = (x == 1.0, x == 0.0) if shifted else ((np.abs(x) == 1.0) & (x > 0), (np.abs(x) == 1.0) & (x < 0))
        nf = n.astype(np.float64)
        sign = np.where(n % 2 == 0, 1.0, -1.0)
        ends = {"t": [(top, 1.0), (bottom, sign)], "u": [(top, nf + 1.0), (bottom, sign * (nf + 1.0))],
                "v": [(top, 1.0), (bottom, sign * (2.0 * nf + 1.0))],
                "w": [(top, 2.0 * nf + 1.0), (bottom, sign)]}[kind]
        p1 = {"t": y, "u": y + y, "v": y + y - 1.0, "w": y + y + 1.0}[kind]
        out = _evaluate(y, n, [(n < 0, 0.0), *ends], p1.copy(), _chebyshev_step)
        inside = np.nonzero((n > trig_from) & (np.abs(y) < 1.0))
        if inside[0].size:  # the closed forms, only where they apply
            out[inside] = _closed_form(kind, y[inside], nf[inside], sign[inside])
        return out

    return core


def _hermite_h_step(m: int, x: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    return (x + x) * q - (2 * (m - 1)) * p


def _hermite_he_step(m: int, x: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    return x * q - (m - 1) * p


def _laguerre_step(m: int, x: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    k = m - 1
    return ((k + k + (1.0 - x)) * q - k * p) / (k + 1)


def _legendre_step(m: int, x: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    k = m - 1
    return ((k + k + 1) * x * q - k * p) / (k + 1)


def _hermite_h(x: np.ndarray, n: np.ndarray) -> np.ndarray:
    return _evaluate(x, n, [(n < 0, 0.0)], x + x, _hermite_h_step)


def _hermite_he(x: np.ndarray, n: np.ndarray) -> np.ndarray:
    return _evaluate(x, n, [(n < 0, 0.0)], x.copy(), _hermite_he_step)


def _laguerre(x: np.ndarray, n: np.ndarray) -> np.ndarray:
    return _evaluate(x, n, [(n < 0, 0.0), (x == 0.0, 1.0)], 1.0 - x, _laguerre_step)


def _legendre(x: np.ndarray, n: np.ndarray) -> np.ndarray:
    ends = np.where((x > 0.0) | (n % 2 == 0), 1.0, -1.0)
    return _evaluate(x, n, [(n < 0, 0.0), (np.abs(x) == 1.0, ends)], x.copy(), _legendre_step)


def _public(core: Callable, name: str, doc: str) -> Callable:
    def fn(x: np.ndarray, n: np.ndarray) -> np.ndarray:
        x, n = np.asarray(x), np.asarray(n)
        dtype = _result_dtype(x, n)
        xf, nf = _float64(x, n)
        with np.errstate(all="ignore"):
            return _finish(core(xf.reshape(-1), _degree(nf.reshape(-1))), dtype, xf.shape)

    fn.__name__ = name
    fn.__doc__ = doc
    return fn


FUNCTIONS: dict[str, Callable] = {}
for _kind in "tuvw":
    for _shifted in (False, True):
        _name = f"{'shifted_' if _shifted else ''}chebyshev_polynomial_{_kind}"
        FUNCTIONS[_name] = _public(_chebyshev(_kind, _shifted), _name,
                                   f"The {'shifted ' if _shifted else ''}Chebyshev polynomial "
                                   f"{_kind.upper()}{'*' if _shifted else ''}_n(x).")
FUNCTIONS["hermite_polynomial_h"] = _public(_hermite_h, "hermite_polynomial_h", "The physicists' Hermite polynomial H_n(x).")
FUNCTIONS["hermite_polynomial_he"] = _public(_hermite_he, "hermite_polynomial_he", "The probabilists' Hermite polynomial He_n(x).")
FUNCTIONS["laguerre_polynomial_l"] = _public(_laguerre, "laguerre_polynomial_l", "The Laguerre polynomial L_n(x).")
FUNCTIONS["legendre_polynomial_p"] = _public(_legendre, "legendre_polynomial_p", "The Legendre polynomial P_n(x).")
hermite_polynomial_h = FUNCTIONS["hermite_polynomial_h"]
