"""ONNX translations of the special functions ONNX lacks (it has only ``Erf``): erfc, erfcx, ndtr, log_ndtr,
entr, xlog1py.

The erf family is exported as ember computes it (``ember/ops/special_math.py``): the same intervals and the
same fitted polynomials (``ember/ops/_special_coeffs.py``; the float32 sets for float32 inputs), evaluated in
float64 and rounded once, each interval selected by ``Where``. So an exported erfc keeps the upper tail that
``1 - Erf(x)`` loses (erfc(6) is 2.2e-17, not 0), and log_ndtr(-40) is -804.6, not -inf. ``exp(-a^2)`` is
formed from a float32 head of ``a`` (whose square is exact) and the tail, as ember's ``_exp_neg_square``.

Functions with no short, accurate composition (erfinv, ndtri, lgamma, digamma, the Bessel functions, zeta,
the incomplete gammas, the orthogonal polynomials) stay unexported; docs/architecture.md lists them.

Example:
    >>> import ember, ember.onnx, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "tail.onnx")
    >>> _ = ember.onnx.export(lambda x: ember.special.log_ndtr(x), (ember.randn(4),), path)  # doctest: +SKIP
"""
from __future__ import annotations

import math
from typing import Any

from ember import dtypes
from ember.onnx.builder import GraphBuilder
from ember.ops import _bessel_coeffs as B, _special_coeffs as C, special_bessel
from ember.ops.special_math import _DIGAMMA_ASYM, _LGAMMA_STIRLING

_SQRT_HALF = math.sqrt(0.5)


def _c(b: GraphBuilder, value: float) -> str:
    return b.scalar(value, dtypes.float64)


def _wide(b: GraphBuilder, x: str, spec: Any) -> tuple[str, bool]:
    """x in float64 (computed there and rounded once, as ember), and whether float32 accuracy is enough."""
    dtype = spec.dtype
    wide = x if dtype is dtypes.float64 else b.node("Cast", [x], to=dtypes.float64.onnx)
    return wide, dtype.itemsize < 8


def _narrow(b: GraphBuilder, y: str, spec: Any) -> str:
    return y if spec.dtype is dtypes.float64 else b.node("Cast", [y], to=spec.dtype.onnx)


def _horner(b: GraphBuilder, coeffs: tuple, t: str) -> str:
    """sum c_k t^k, coefficients highest degree first."""
    acc = b.node("Add", [b.node("Mul", [t, _c(b, coeffs[0])]), _c(b, coeffs[1])])
    for c in coeffs[2:]:
        acc = b.node("Add", [b.node("Mul", [acc, t]), _c(b, c)])
    return acc


def _affine(b: GraphBuilder, x: str, center: float, half_width: float) -> str:
    return b.node("Div", [b.node("Sub", [x, _c(b, center)]), _c(b, half_width)])


def _where(b: GraphBuilder, condition: str, yes: str, no: str) -> str:
    return b.node("Where", [condition, yes, no])


def _exp_neg_square(b: GraphBuilder, a: str, half: bool = False) -> str:
    """exp(-a^2) (exp(-a^2 / 2) with ``half``) to full relative accuracy: a float32 head z of a has an exact
    square, the tail (a - z)(a + z) is small."""
    z = b.node("Cast", [b.node("Cast", [a], to=dtypes.float32.onnx)], to=dtypes.float64.onnx)
    scale = -0.5 if half else -1.0
    head = b.node("Exp", [b.node("Mul", [b.node("Mul", [z, z]), _c(b, scale)])])
    tail = b.node("Mul", [b.node("Mul", [b.node("Sub", [a, z]), b.node("Add", [a, z])]), _c(b, scale)])
    return b.node("Mul", [head, b.node("Exp", [tail])])


def _erfcx_ge1(b: GraphBuilder, a: str, low: bool) -> str:
    """erfcx(a) for a >= 1 (inf included): three fitted intervals."""
    first, second, asym = (C.ERFCX_1_32, C.ERFCX_2_32, C.ERFCX_ASYM_32) if low else \
        (C.ERFCX_1_64, C.ERFCX_2_64, C.ERFCX_ASYM_64)
    near = _horner(b, first, _affine(b, a, 1.75, 0.75))
    mid = _horner(b, second, _affine(b, a, 3.75, 1.25))
    far = b.node("Div", [_horner(b, asym, b.node("Div", [_c(b, 25.0), b.node("Mul", [a, a])])), a])
    return _where(b, b.node("Less", [a, _c(b, 2.5)]), near, _where(b, b.node("Less", [a, _c(b, 5.0)]), mid, far))


def _erf_small(b: GraphBuilder, x: str, low: bool) -> str:
    return b.node("Mul", [x, _horner(b, C.ERF_SMALL_32 if low else C.ERF_SMALL_64, b.node("Mul", [x, x]))])


def _erfc_ge1(b: GraphBuilder, a: str, low: bool) -> str:
    a = b.node("Min", [a, _c(b, 40.0)])  # erfc underflows long before; keeps inf out of the exp split
    return b.node("Mul", [_exp_neg_square(b, a), _erfcx_ge1(b, a, low)])


def erfc_wide(b: GraphBuilder, x: str, low: bool) -> str:
    """erfc of a float64 tensor: 1 - erf_small below |x| = 1, the fitted tail above, 2 - tail below -1."""
    a = b.node("Abs", [x])
    one = _c(b, 1.0)
    tail = _erfc_ge1(b, b.node("Max", [a, one]), low)  # evaluated at >= 1 everywhere, selected where |x| >= 1
    small = b.node("Sub", [one, _erf_small(b, b.node("Min", [b.node("Max", [x, _c(b, -1.0)]), one]), low)])
    big = _where(b, b.node("Less", [x, _c(b, 0.0)]), b.node("Sub", [_c(b, 2.0), tail]), tail)
    return _where(b, b.node("Less", [a, one]), small, _nan_kept(b, x, big))


def erfcx_wide(b: GraphBuilder, x: str, low: bool) -> str:
    """exp(x^2) erfc(x) without overflow for large x."""
    one = _c(b, 1.0)
    a = b.node("Abs", [x])
    ge1 = _erfcx_ge1(b, b.node("Max", [a, one]), low)
    clipped = b.node("Min", [b.node("Max", [x, _c(b, -1.0)]), one])
    small = b.node("Mul", [b.node("Exp", [b.node("Mul", [clipped, clipped])]),
                           b.node("Sub", [one, _erf_small(b, clipped, low)])])
    negative = b.node("Sub", [b.node("Mul", [_c(b, 2.0), _exp_neg_square_pos(b, b.node("Min", [a, _c(b, 30.0)]))]),
                              ge1])
    out = _where(b, b.node("Less", [a, one]), small, _where(b, b.node("Less", [x, _c(b, 0.0)]), negative, ge1))
    return _nan_kept(b, x, out)


def _exp_neg_square_pos(b: GraphBuilder, a: str) -> str:
    """exp(+a^2), split as :func:`_exp_neg_square`."""
    z = b.node("Cast", [b.node("Cast", [a], to=dtypes.float32.onnx)], to=dtypes.float64.onnx)
    head = b.node("Exp", [b.node("Mul", [z, z])])
    return b.node("Mul", [head, b.node("Exp", [b.node("Mul", [b.node("Sub", [a, z]), b.node("Add", [a, z])])])])


def _nan_kept(b: GraphBuilder, x: str, out: str) -> str:
    return _where(b, b.node("IsNaN", [x]), x, out)


def log1p_wide(b: GraphBuilder, u: str) -> str:
    """log(1 + u) without losing small u: log(w) u / (w - 1) for w = 1 + u (u itself where w rounds to 1)."""
    one = _c(b, 1.0)
    w = b.node("Add", [u, one])
    moved = b.node("Sub", [w, one])
    same = b.node("Equal", [moved, _c(b, 0.0)])
    ratio = b.node("Div", [u, _where(b, same, one, moved)])
    log = b.node("Log", [w])
    return _where(b, same, u, _where(b, b.node("IsInf", [w]), log, b.node("Mul", [log, ratio])))


# ---- emitters named by the records --------------------------------------------------------------------------
def erfc(b: GraphBuilder, n: Any) -> str:
    x, low = _wide(b, n.inputs[0], n.in_specs[0])
    return _narrow(b, erfc_wide(b, x, low), n.in_specs[0])


def erfcx(b: GraphBuilder, n: Any) -> str:
    x, low = _wide(b, n.inputs[0], n.in_specs[0])
    return _narrow(b, erfcx_wide(b, x, low), n.in_specs[0])


def ndtr_wide(b: GraphBuilder, x: str, low: bool) -> str:
    """0.5 erfc(-x / sqrt 2); below x = -1 as 0.5 erfcx(t) exp(-x^2 / 2) with the exponent from x itself (the
    rounding of t = -x / sqrt 2 then only moves the well-conditioned erfcx, not the exponential)."""
    t = b.node("Mul", [x, _c(b, -_SQRT_HALF)])
    direct = b.node("Mul", [erfc_wide(b, t, low), _c(b, 0.5)])
    far = b.node("Max", [t, _c(b, 0.5)])
    tail = b.node("Mul", [b.node("Mul", [erfcx_wide(b, far, low), _exp_neg_square(b, b.node("Max", [
        b.node("Neg", [x]), _c(b, 0.5)]), half=True)]), _c(b, 0.5)])
    tail = _where(b, b.node("Less", [x, _c(b, -40.0)]), _c(b, 0.0), tail)
    return _where(b, b.node("Less", [x, _c(b, -1.0)]), tail, direct)


def ndtr(b: GraphBuilder, n: Any) -> str:
    x, low = _wide(b, n.inputs[0], n.in_specs[0])
    return _narrow(b, ndtr_wide(b, x, low), n.in_specs[0])


def log_ndtr(b: GraphBuilder, n: Any) -> str:
    """log(erfcx(t) / 2) - x^2 / 2 for t = -x / sqrt 2 below x = -1 (no underflow: log_ndtr(-40) = -804.6),
    log1p(-ndtr(-x)) above (no cancellation near 0; the upper tail -ndtr(-x) to full relative accuracy)."""
    x, low = _wide(b, n.inputs[0], n.in_specs[0])
    low_side = b.node("Less", [x, _c(b, -1.0)])
    t = b.node("Max", [b.node("Mul", [x, _c(b, -_SQRT_HALF)]), _c(b, 0.5)])
    square = b.node("Mul", [b.node("Mul", [x, x]), _c(b, 0.5)])
    lower = b.node("Sub", [b.node("Log", [b.node("Mul", [erfcx_wide(b, t, low), _c(b, 0.5)])]), square])
    upper = log1p_wide(b, b.node("Neg", [ndtr_wide(b, b.node("Neg", [x]), low)]))
    return _narrow(b, _nan_kept(b, x, _where(b, low_side, lower, upper)), n.in_specs[0])


def entr(b: GraphBuilder, n: Any) -> str:
    """-x log x for x > 0, 0 at 0, -inf below 0, NaN kept (ember's and PyTorch's entr)."""
    x, dtype = n.inputs[0], n.in_specs[0].dtype
    zero = b.scalar(0, dtype)
    positive = b.node("Greater", [x, zero])
    safe = _where(b, positive, x, b.scalar(1, dtype))
    value = b.node("Neg", [b.node("Mul", [x, b.node("Log", [safe])])])
    negative = _where(b, b.node("Less", [x, zero]), b.scalar(-math.inf, dtype), _where(b, b.node("Equal", [x, zero]),
                                                                                        zero, x))
    return _where(b, positive, value, negative)


def xlog1py(b: GraphBuilder, n: Any) -> str:
    """x log1p(y), 0 where x == 0 unless y is NaN; log1p formed in float64 without losing small y."""
    (x, y), spec = n.inputs, n.out_specs[0]
    wide_y, _ = _wide(b, y, n.in_specs[1] if n.in_specs[1] is not None else spec)
    log = _narrow(b, log1p_wide(b, wide_y), spec)
    out = b.node("Mul", [x, log])
    zero = b.scalar(0, spec.dtype)
    return _where(b, b.node("And", [b.node("Equal", [x, zero]), b.node("Not", [b.node("IsNaN", [y])])]), zero, out)


# ---- inverse error function and the normal quantile ---------------------------------------------------------------
def _erfinv_guess(b: GraphBuilder, a: str, q: str, low: bool) -> str:
    """erfinv(a) for a in [0, 1) from q = 1 - a: ember's fits in w = -log(q (2 - q)) (w < 6.25) and sqrt(w)."""
    near, mid = (C.ERFINV_W, C.ERFINV_S) if low else (C.ERFINV_W_64, C.ERFINV_S_64)
    w = b.node("Neg", [b.node("Log", [b.node("Mul", [b.node("Sub", [_c(b, 2.0), q]), q])])])
    s = b.node("Sqrt", [b.node("Max", [w, _c(b, 6.25)])])
    fit_w = _horner(b, near, _affine(b, b.node("Min", [w, _c(b, 6.25)]), 3.125, 3.125))
    fit_s = _where(b, b.node("Less", [s, _c(b, 6.25)]), _horner(b, mid, _affine(b, s, 4.375, 1.875)),
                   _horner(b, C.ERFINV_S_FAR, _affine(b, s, 16.625, 10.375)))
    return b.node("Mul", [_where(b, b.node("Less", [w, _c(b, 6.25)]), fit_w, fit_s), a])


def _halley_tail(b: GraphBuilder, y: str, q: str) -> str:
    """One Halley step on erfc(y) = q, scaled by exp(y^2) so nothing underflows (ember's _halley_tail)."""
    scaled = b.node("Exp", [b.node("Add", [b.node("Log", [q]), b.node("Mul", [y, y])])])
    d = b.node("Mul", [b.node("Sub", [erfcx_wide(b, y, False), scaled]), _c(b, -math.sqrt(math.pi) / 2.0)])
    return b.node("Sub", [y, b.node("Div", [d, b.node("Add", [_c(b, 1.0), b.node("Mul", [y, d])])])])


def inverse_wide(b: GraphBuilder, sign: str, a: str, q: str, low: bool) -> str:
    """sign(sign) * erfinv(a) given q = 1 - a exactly (float64): inf where q == 0, NaN where q < 0 or NaN; the far
    tail (q < 1.6e-17, beyond the float64 fits) refined by one Halley step, as ember."""
    inside = b.node("Greater", [q, _c(b, 0.0)])
    safe_q = _where(b, inside, q, _c(b, 0.5))
    safe_a = _where(b, inside, a, _c(b, 0.5))
    y = _erfinv_guess(b, safe_a, safe_q, low)
    if not low:
        far_q = b.node("Min", [safe_q, _c(b, 1.6e-17)])
        refined = _halley_tail(b, _erfinv_guess(b, b.node("Sub", [_c(b, 1.0), far_q]), far_q, False), far_q)
        y = _where(b, b.node("Less", [safe_q, _c(b, 1.6e-17)]), refined, y)
    edge = _where(b, b.node("Equal", [q, _c(b, 0.0)]), _c(b, math.inf), _c(b, math.nan))
    magnitude = _where(b, inside, y, edge)
    negative = b.node("Less", [b.node("Div", [_c(b, 1.0), sign]), _c(b, 0.0)])  # -0.0 counts as negative
    return _where(b, negative, b.node("Neg", [magnitude]), magnitude)


def erfinv(b: GraphBuilder, n: Any) -> str:
    x, low = _wide(b, n.inputs[0], n.in_specs[0])
    a = b.node("Abs", [x])
    out = inverse_wide(b, x, a, b.node("Sub", [_c(b, 1.0), a]), low)
    return _narrow(b, _nan_kept(b, x, out), n.in_specs[0])


def ndtri(b: GraphBuilder, n: Any) -> str:
    """sqrt(2) erfinv(2p - 1) with 1 - |2p - 1| formed exactly as 2 min(p, 1 - p) (accurate for tiny p)."""
    p, low = _wide(b, n.inputs[0], n.in_specs[0])
    centered = b.node("Sub", [p, _c(b, 0.5)])
    a = b.node("Mul", [b.node("Abs", [centered]), _c(b, 2.0)])
    q = b.node("Mul", [b.node("Min", [p, b.node("Sub", [_c(b, 1.0), p])]), _c(b, 2.0)])
    out = b.node("Mul", [inverse_wide(b, centered, a, q, low), _c(b, math.sqrt(2.0))])
    return _narrow(b, _nan_kept(b, p, out), n.in_specs[0])


# ---- lgamma and digamma ---------------------------------------------------------------------------------------
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _lgamma2(b: GraphBuilder, z: str) -> str:
    """lgamma(2 + z) for z in [-0.5, 0.5] (the factor z keeps the root at 2 relatively exact)."""
    return b.node("Mul", [z, _horner(b, C.LGAMMA2_64, b.node("Div", [z, _c(b, 0.5)]))])


def _lgamma_pos(b: GraphBuilder, x: str) -> str:
    """log Gamma(x) for x > 0, ember's intervals: the fit around 2 (shifted by one or two), the recurrence up to
    five steps below 7 (unrolled, each step kept where it applies), Stirling's series from 7."""
    one = _c(b, 1.0)
    below_half = b.node("Sub", [b.node("Sub", [_lgamma2(b, x), b.node("Log", [x])]), log1p_wide(b, x)])
    below_1_5 = b.node("Sub", [_lgamma2(b, b.node("Sub", [x, one])), b.node("Log", [x])])
    below_2_5 = _lgamma2(b, b.node("Sub", [x, _c(b, 2.0)]))
    clipped = b.node("Min", [b.node("Max", [x, _c(b, 2.5)]), _c(b, 7.0)])
    steps = b.node("Floor", [b.node("Sub", [clipped, _c(b, 1.5)])])
    y = b.node("Sub", [clipped, steps])
    product = y
    for k in range(1, 5):  # prod_{k < n} (y + k) for n = steps <= 5
        factor = _where(b, b.node("Less", [_c(b, float(k)), steps]), b.node("Add", [y, _c(b, float(k))]), one)
        product = b.node("Mul", [product, factor])
    shifted = b.node("Add", [_lgamma2(b, b.node("Sub", [y, _c(b, 2.0)])), b.node("Log", [product])])
    big = b.node("Max", [x, _c(b, 7.0)])
    series = b.node("Div", [_horner(b, _LGAMMA_STIRLING, b.node("Div", [one, b.node("Mul", [big, big])])), big])
    stirling = b.node("Add", [b.node("Sub", [b.node("Mul", [b.node("Sub", [big, _c(b, 0.5)]), b.node("Log", [big])]),
                                             big]), b.node("Add", [_c(b, _HALF_LOG_2PI), series])])
    stirling = _where(b, b.node("IsInf", [big]), big, stirling)
    out = _where(b, b.node("Less", [x, _c(b, 7.0)]), shifted, stirling)
    out = _where(b, b.node("Less", [x, _c(b, 2.5)]), below_2_5, out)
    out = _where(b, b.node("Less", [x, _c(b, 1.5)]), below_1_5, out)
    return _where(b, b.node("Less", [x, _c(b, 0.5)]), below_half, out)


def _reduced(b: GraphBuilder, x: str) -> str:
    """x - round(x) (exact), so sin(pi x) and tan(pi x) stay accurate for large x."""
    return b.node("Sub", [x, b.node("Round", [x])])


def _pole(b: GraphBuilder, x: str) -> str:
    return b.node("Or", [b.node("Equal", [x, b.node("Round", [x])]), b.node("IsInf", [x])])


def lgamma(b: GraphBuilder, n: Any) -> str:
    """log |Gamma(x)|; at x <= 0 by reflection, log(pi / |sin(pi x)|) - lgamma(1 - x): +inf at the poles."""
    x, _ = _wide(b, n.inputs[0], n.in_specs[0])
    positive = _lgamma_pos(b, b.node("Max", [x, _c(b, 1e-300)]))
    sin = b.node("Abs", [b.node("Sin", [b.node("Mul", [_reduced(b, x), _c(b, math.pi)])])])
    reflected = b.node("Sub", [b.node("Sub", [_c(b, math.log(math.pi)), b.node("Log", [sin])]),
                               _lgamma_pos(b, b.node("Sub", [_c(b, 1.0), b.node("Min", [x, _c(b, 0.0)])]))])
    negative = _where(b, _pole(b, x), _c(b, math.inf), reflected)
    return _narrow(b, _nan_kept(b, x, _where(b, b.node("Greater", [x, _c(b, 0.0)]), positive, negative)), n.in_specs[0])


def _digamma_asymptotic(b: GraphBuilder, v: str) -> str:
    vv = b.node("Div", [_c(b, 1.0), b.node("Mul", [v, v])])
    return b.node("Sub", [b.node("Sub", [b.node("Log", [v]), b.node("Div", [_c(b, 0.5), v])]),
                          b.node("Mul", [vv, _horner(b, _DIGAMMA_ASYM, vv)])])


def _digamma_pos(b: GraphBuilder, x: str) -> str:
    """psi(x) for x > 0: the fit around the root 1.4616..., psi(x + 7) - sum_{k<7} 1/(x + k) below 7 (ember takes
    the smallest step count the whole array needs: the results agree to rounding), the asymptotic series above."""
    near_root = b.node("Mul", [b.node("Sub", [b.node("Sub", [x, _c(b, C.DIGAMMA_ROOT_HI)]), _c(b, C.DIGAMMA_ROOT_LO)]),
                               _horner(b, C.DIGAMMA_ROOT_64, _affine(b, x, 1.5, 0.25))])
    total = b.node("Div", [_c(b, 1.0), x])
    for k in range(1, 7):
        total = b.node("Add", [total, b.node("Div", [_c(b, 1.0), b.node("Add", [x, _c(b, float(k))])])])
    recurrence = b.node("Sub", [_digamma_asymptotic(b, b.node("Add", [x, _c(b, 7.0)])), total])
    big = b.node("Max", [x, _c(b, 7.0)])
    out = _where(b, b.node("Less", [x, _c(b, 7.0)]), recurrence, _digamma_asymptotic(b, big))
    root = b.node("And", [b.node("GreaterOrEqual", [x, _c(b, 1.25)]), b.node("Less", [x, _c(b, 1.75)])])
    return _where(b, root, near_root, out)


def digamma(b: GraphBuilder, n: Any) -> str:
    """psi(x): -inf at +0, +inf at -0, NaN at the negative integers and -inf; psi(1 - x) - pi / tan(pi x) below 0
    (tan as sin / cos: ONNX Runtime's Tan is float32 only)."""
    x, _ = _wide(b, n.inputs[0], n.in_specs[0])
    positive = _digamma_pos(b, b.node("Max", [x, _c(b, 1e-300)]))
    pole = _pole(b, x)
    safe = _where(b, pole, _c(b, -0.5), x)  # (positive x give NaN here, in a branch Where does not take)
    angle = b.node("Mul", [_reduced(b, safe), _c(b, math.pi)])
    cot = b.node("Div", [b.node("Cos", [angle]), b.node("Sin", [angle])])
    reflected = b.node("Sub", [_digamma_pos(b, b.node("Sub", [_c(b, 1.0), safe])), b.node("Mul", [cot, _c(b, math.pi)])])
    negative = _where(b, pole, _c(b, math.nan), reflected)
    at_zero = b.node("Div", [_c(b, -1.0), x])
    out = _where(b, b.node("Greater", [x, _c(b, 0.0)]), positive,
                 _where(b, b.node("Equal", [x, _c(b, 0.0)]), at_zero, negative))
    return _narrow(b, _nan_kept(b, x, out), n.in_specs[0])


# ---- modified Bessel functions I and K (ember/ops/special_bessel.py's zones and fits) -------------------------------
def _bessel_i_small(b: GraphBuilder, x: str, nu: int) -> str:
    """I_nu(x) for |x| <= 8 from the power series in t = x^2 / 4 (odd for nu = 1)."""
    t = b.node("Mul", [b.node("Mul", [x, x]), _c(b, 0.25)])
    if nu == 0:
        return _horner(b, special_bessel._I0_SERIES, t)
    return b.node("Mul", [b.node("Mul", [x, _c(b, 0.5)]), _horner(b, special_bessel._I1_SERIES, t)])


def bessel_i(nu: int, scaled: bool) -> Any:
    """``i0``/``i1`` (and ``modified_bessel_i0/i1``), ``i0e``/``i1e`` with ``scaled``: the series up to |x| = 8,
    exp(|x|) / sqrt(|x|) times a fit in 8 / |x| beyond (the sign of x for I1), inf at +-inf (unscaled)."""

    def emit(b: GraphBuilder, n: Any) -> str:
        x, _ = _wide(b, n.inputs[0], n.in_specs[0])
        a = b.node("Abs", [x])
        near = b.node("Min", [b.node("Max", [x, _c(b, -8.0)]), _c(b, 8.0)])
        small = _bessel_i_small(b, near, nu)
        far = b.node("Max", [a, _c(b, 8.0)])
        big = b.node("Div", [_horner(b, B.I0E_BIG if nu == 0 else B.I1E_BIG, b.node("Div", [_c(b, 8.0), far])),
                             b.node("Sqrt", [far])])
        if scaled:
            small = b.node("Mul", [small, b.node("Exp", [b.node("Neg", [a])])])
        else:  # exp(a / 2) twice: exp(a) alone overflows below a = 713.99, where I0(a) still does not
            half = b.node("Exp", [b.node("Mul", [far, _c(b, 0.5)])])
            big = _where(b, b.node("IsInf", [far]), _c(b, math.inf), b.node("Mul", [b.node("Mul", [big, half]), half]))
        if nu == 1:
            big = _where(b, b.node("Less", [x, _c(b, 0.0)]), b.node("Neg", [big]), big)
        out = _where(b, b.node("LessOrEqual", [a, _c(b, 8.0)]), small, big)
        return _narrow(b, _nan_kept(b, x, out), n.in_specs[0])

    return emit


def bessel_k(nu: int, scaled: bool) -> Any:
    """``modified_bessel_k0/k1`` (``scaled_modified_bessel_k0/k1`` with ``scaled``): the logarithmic series up to
    x = 2, exp(-x) / sqrt(x) times a fit in 2 / x beyond; inf at 0, NaN below."""

    def emit(b: GraphBuilder, n: Any) -> str:
        x, _ = _wide(b, n.inputs[0], n.in_specs[0])
        near = b.node("Min", [b.node("Max", [x, _c(b, 1e-300)]), _c(b, 2.0)])
        t = b.node("Mul", [b.node("Mul", [near, near]), _c(b, 0.25)])
        log_half = b.node("Log", [b.node("Mul", [near, _c(b, 0.5)])])
        if nu == 0:
            small = b.node("Add", [b.node("Mul", [b.node("Neg", [log_half]), _horner(b, special_bessel._I0_SERIES, t)]),
                                   _horner(b, special_bessel._K0_SERIES, t)])
        else:
            i1 = b.node("Mul", [b.node("Mul", [near, _c(b, 0.5)]), _horner(b, special_bessel._I1_SERIES, t)])
            small = b.node("Sub", [b.node("Add", [b.node("Div", [_c(b, 1.0), near]), b.node("Mul", [log_half, i1])]),
                                   b.node("Mul", [b.node("Mul", [near, _c(b, 0.25)]),
                                                  _horner(b, special_bessel._K1_SERIES, t)])])
        far = b.node("Max", [x, _c(b, 2.0)])
        big = b.node("Div", [_horner(b, B.K0E_BIG if nu == 0 else B.K1E_BIG, b.node("Div", [_c(b, 2.0), far])),
                             b.node("Sqrt", [far])])
        if scaled:
            small = b.node("Mul", [small, b.node("Exp", [near])])
        else:
            big = b.node("Mul", [big, b.node("Exp", [b.node("Neg", [far])])])
        out = _where(b, b.node("LessOrEqual", [x, _c(b, 2.0)]), small, big)
        out = _where(b, b.node("Equal", [x, _c(b, 0.0)]), _c(b, math.inf), out)
        out = _where(b, b.node("Less", [x, _c(b, 0.0)]), _c(b, math.nan), out)
        return _narrow(b, _nan_kept(b, x, out), n.in_specs[0])

    return emit
