"""Every special function ember computes itself, by name: the table behind the CPU backend's
``special_function`` hook when SciPy is absent (or ``EMBER_SPECIAL_FUNCTIONS=numpy``), and for the
functions where ember's version is used even with SciPy installed.

Unary functions take one array, the binary ones two (broadcast): ``zeta(x, q)``, ``gammainc(a, x)``,
``gammaincc(a, x)`` and the orthogonal polynomials ``(x, n)``; ``polygamma(n, x)`` takes an integer n
first, as SciPy's does. All accept any float dtype and return it (integers compute in float64).

Example:
    >>> import numpy as np
    >>> from ember.ops.special_table import FUNCTIONS
    >>> float(FUNCTIONS["i0"](np.array(0.0))), float(FUNCTIONS["zeta"](np.array(2.0), np.array(1.0)))
    (1.0, 1.6449340668482264)
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ember.ops import special_bessel, special_math, special_poly, special_zeta
from ember.ops.special_math import _wrap

_SQRT_HALF = math.sqrt(0.5)
_HALF_LOG_PI = 0.5 * math.log(math.pi)


# 1/sqrt(2) = _SQRT_HALF + _SQRT_HALF_TAIL (the float's error, from the exact value)
_SQRT_HALF_TAIL = -4.833646656726457e-17


def _ndtr(x: np.ndarray, low: bool) -> np.ndarray:
    """The standard normal CDF, 0.5 erfc(-x / sqrt 2), to full relative accuracy in the lower tail: there
    erfc's condition number is 2 t^2 (1e3 at x = -38), so t = -x / sqrt 2 is carried as t_hi + t_lo and
    erfc(t_hi + t_lo) = erfc(t_hi) - t_lo 2/sqrt(pi) exp(-t_hi^2) (SciPy rounds t: ~1e-13 off there)."""
    value = 0.5 * special_math._erfc(x * -_SQRT_HALF, low)
    tail = np.nonzero((x < -3.0) & (x > -40.0))  # where x^2 eps matters; beyond -40 the result is 0
    if not low and tail[0].size:
        xt = x[tail]
        t_hi, err = special_bessel._two_prod(xt, np.full_like(xt, -_SQRT_HALF))
        t_lo = err - xt * _SQRT_HALF_TAIL
        value[tail] = 0.5 * (special_math._erfc(t_hi, low) - t_lo * (2.0 / math.sqrt(math.pi)) * np.exp(-t_hi * t_hi))
    return value


def _log_ndtr(x: np.ndarray, low: bool) -> np.ndarray:
    """log of the normal CDF: log(erfcx(t) / 2) - t^2 for t = -x/sqrt 2 >= 1/sqrt 2 (no underflow:
    log_ndtr(-40) = -804.6), log1p(-erfc(x / sqrt 2) / 2) above x = -1 (no cancellation near 0)."""
    out = np.empty_like(x)
    low_side = x < -1.0
    where = np.nonzero(low_side)
    if where[0].size:
        t = x[where] * -_SQRT_HALF
        out[where] = np.log(special_math._erfcx(t, low) * 0.5) - t * t
    where = np.nonzero(~low_side)
    if where[0].size:
        out[where] = np.log1p(special_math._erfc(x[where] * _SQRT_HALF, low) * -0.5)
    return out


FUNCTIONS: dict[str, Callable] = {
    **special_math.FUNCTIONS, **special_bessel.FUNCTIONS, **special_zeta.FUNCTIONS, **special_poly.FUNCTIONS,
    "ndtr": _wrap(_ndtr), "log_ndtr": _wrap(_log_ndtr), "polygamma": special_zeta.polygamma,
}
