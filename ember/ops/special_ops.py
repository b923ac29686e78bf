"""Op records for ``torch.special``'s functions (and torch.lgamma/digamma/polygamma/i0/igamma/igammac).

Each forward asks the device's backend for the function (``special_function(xp, name)``: ember's
vectorized NumPy versions in :mod:`ember.ops.special_table`, SciPy's where faster, CuPy's on GPU), so
the same record runs on every device. Gradients are PyTorch's, written in ember ops (differentiable
again); the functions PyTorch gives no gradient (Bessel J/Y/K, Airy, the orthogonal polynomials,
zeta in x, igamma in a) have none here either.

Example:
    >>> import ember
    >>> x = ember.tensor([0.5, 2.0], requires_grad=True)
    >>> ember.special.i0(x).sum().backward(); [round(v, 4) for v in x.grad.tolist()]  # i0' = i1
    [0.2579, 1.5906]
"""
from __future__ import annotations

import math
from typing import Any

from ember.backends import special_function
from ember.onnx import special_emitters as to_onnx
from ember.ops import dispatch, elementwise as ew
from ember.ops.elementwise import elementwise_rule
from ember.ops.registry import OpDef, register

_SQRT_2PI = math.sqrt(2.0 * math.pi)


def _unary_impl(fname: str, op: str) -> Any:
    return lambda xp, x: ew.real_only(op, x) or special_function(xp, fname)(x).astype(x.dtype, copy=False)


def _binary_impl(fname: str, op: str) -> Any:
    def impl(xp: Any, a: Any, b: Any) -> Any:
        ew.real_only(op, a, b)
        dtype = a.dtype if hasattr(a, "dtype") else b.dtype  # dispatch made both operands this dtype
        return special_function(xp, fname)(a, b).astype(dtype, copy=False)

    return impl


def _unary(name: str, fname: str, vjp: Any = None, save: str = "inputs", onnx: Any = None) -> OpDef:
    return register(OpDef(name=name, category="unary", impl=_unary_impl(fname, name), vjp=vjp, save=save, onnx=onnx,
                          shape_rule=elementwise_rule(), float_only=True, doc=f"torch.special's {name}"))


def _binary(name: str, fname: str, vjp: Any = None, nondiff: tuple = ()) -> OpDef:
    return register(OpDef(name=name, category="binary", impl=_binary_impl(fname, name), vjp=vjp,
                          shape_rule=elementwise_rule(), float_only=True, nondiff_inputs=nondiff,
                          doc=f"torch.special's {name}"))


# ---- gamma family -------------------------------------------------------------------------------------------
def _polygamma_impl(xp: Any, x: Any, n: int) -> Any:
    ew.real_only("polygamma", x)
    return special_function(xp, "polygamma")(n, x).astype(x.dtype, copy=False)


LGAMMA = _unary("lgamma", "lgamma", lambda ctx, g: (g * digamma(ctx.inputs[0]),), onnx=to_onnx.lgamma)
DIGAMMA = _unary("digamma", "digamma", lambda ctx, g: (g * polygamma(1, ctx.inputs[0]),), onnx=to_onnx.digamma)
POLYGAMMA = register(OpDef(
    name="polygamma", category="unary", impl=_polygamma_impl, shape_rule=elementwise_rule(), float_only=True,
    vjp=lambda ctx, g: (g * polygamma(ctx.attrs["n"] + 1, ctx.inputs[0]),), doc="torch.special.polygamma"))


def lgamma(input: Any) -> Any:
    """log |Gamma(x)| (``torch.lgamma``): +inf at the poles 0, -1, -2, ... and at -inf."""
    return dispatch.unary(LGAMMA, input)


def digamma(input: Any) -> Any:
    """psi(x) = d/dx lgamma(x) (``torch.digamma``): -inf at +0, NaN at the negative integers."""
    return dispatch.unary(DIGAMMA, input)


def polygamma(n: int, input: Any) -> Any:
    """The n-th derivative of digamma (``torch.polygamma``; n = 0 is digamma)."""
    if int(n) != n or n < 0:
        raise RuntimeError(f"polygamma(n, x) does not support negative n. Got n={n}" if n < 0 else
                           f"polygamma(n, x): n must be a non-negative integer, got {n!r}")
    if int(n) == 0:
        return digamma(input)
    return dispatch.unary(POLYGAMMA, input, {"n": int(n)})


def _igamma_density(a: Any, x: Any) -> Any:
    """x^(a-1) e^-x / Gamma(a), the derivative of P(a, x) in x."""
    return ew.exp((a - 1) * ew.log(x) - x - lgamma(a))


IGAMMA = _binary("igamma", "gammainc", (None, lambda ctx, g: g * _igamma_density(*ctx.inputs)), nondiff=(0,))
IGAMMAC = _binary("igammac", "gammaincc", (None, lambda ctx, g: -g * _igamma_density(*ctx.inputs)), nondiff=(0,))
ZETA = _binary("zeta", "zeta", (None, lambda ctx, g: -g * ctx.inputs[0] * zeta(ctx.inputs[0] + 1, ctx.inputs[1])),
               nondiff=(0,))


def igamma(input: Any, other: Any) -> Any:
    """The regularized lower incomplete gamma P(a, x) (``torch.special.gammainc``); gradient in x only."""
    return dispatch.binary(IGAMMA, input, other)


def igammac(input: Any, other: Any) -> Any:
    """The regularized upper incomplete gamma Q(a, x) (``torch.special.gammaincc``); gradient in x only."""
    return dispatch.binary(IGAMMAC, input, other)


def zeta(input: Any, other: Any) -> Any:
    """The Hurwitz zeta function sum_k (q + k)^-x (``torch.special.zeta``); gradient in q only."""
    return dispatch.binary(ZETA, input, other)


# ---- modified Bessel functions with gradients (torch.i0, torch.special.i0e/i1/i1e) -----------------------------
def _safe(x: Any) -> Any:
    return ew.where(x == 0, 1.0, x)


I0 = _unary("i0", "i0", lambda ctx, g: (g * i1(ctx.inputs[0]),), onnx=to_onnx.bessel_i(0, False))
I0E = _unary("i0e", "i0e", lambda ctx, g: (g * (i1e(ctx.inputs[0]) - ew.sign(ctx.inputs[0]) * ctx.out),), save="both",
             onnx=to_onnx.bessel_i(0, True))
I1 = _unary("i1", "i1", lambda ctx, g: (g * ew.where(ctx.inputs[0] == 0, 0.5,
                                                     i0(ctx.inputs[0]) - ctx.out / _safe(ctx.inputs[0])),), save="both",
            onnx=to_onnx.bessel_i(1, False))
# i1e' = i0e - i1e (sgn(x) + 1/x), with i1e/x formed as a quotient: 1/x overflows at subnormal x
I1E = _unary("i1e", "i1e", lambda ctx, g: (g * ew.where(
    ctx.inputs[0] == 0, 0.5, i0e(ctx.inputs[0]) - ctx.out * ew.sign(ctx.inputs[0]) - ctx.out / _safe(ctx.inputs[0])),),
    save="both", onnx=to_onnx.bessel_i(1, True))


def i0(input: Any) -> Any:
    """Modified Bessel function of the first kind, order 0 (``torch.i0``)."""
    return dispatch.unary(I0, input)


def i0e(input: Any) -> Any:
    """exp(-|x|) i0(x) (``torch.special.i0e``)."""
    return dispatch.unary(I0E, input)


def i1(input: Any) -> Any:
    """Modified Bessel function of the first kind, order 1 (``torch.special.i1``)."""
    return dispatch.unary(I1, input)


def i1e(input: Any) -> Any:
    """exp(-|x|) i1(x) (``torch.special.i1e``)."""
    return dispatch.unary(I1E, input)


# ---- the normal distribution and entropy -------------------------------------------------------------------------
NDTR = _unary("ndtr", "ndtr", lambda ctx, g: (g * ew.exp(ctx.inputs[0] * ctx.inputs[0] * -0.5) / _SQRT_2PI,),
              onnx=to_onnx.ndtr)
LOG_NDTR = _unary("log_ndtr", "log_ndtr", lambda ctx, g: (
    g * ew.exp(-(ctx.out + ctx.inputs[0] * ctx.inputs[0] * 0.5)) / _SQRT_2PI,), save="both", onnx=to_onnx.log_ndtr)
NDTRI = _unary("ndtri", "ndtri", lambda ctx, g: (g * ew.exp(ctx.out * ctx.out * 0.5) * _SQRT_2PI,), save="output",
               onnx=to_onnx.ndtri)


def _entr_impl(xp: Any, x: Any) -> Any:
    ew.real_only("entr", x)
    safe = xp.where(x > 0, x, 1)
    return xp.where(x > 0, -x * xp.log(safe), xp.where(x == 0, 0.0, xp.where(x < 0, float("-inf"), x))).astype(x.dtype)


# torch's gradient everywhere: -(log x + 1), +inf at 0 (the one-sided slope), NaN below 0.
ENTR = register(OpDef(name="entr", category="unary", impl=_entr_impl, shape_rule=elementwise_rule(), float_only=True,
                      onnx=to_onnx.entr,
                      vjp=lambda ctx, g: (g * -(ew.log(ctx.inputs[0]) + 1),), doc="torch.special.entr"))


def _xlog1py_impl(xp: Any, x: Any, y: Any) -> Any:
    ew.real_only("xlog1py", x, y)
    # a Python number takes the tensor's dtype (x * log1p(1) was a float64 NumPy scalar: float64 results)
    if not hasattr(x, "dtype"):
        x = y.dtype.type(x)
    elif not hasattr(y, "dtype"):
        y = x.dtype.type(y)
    if x.dtype.itemsize == 2 and x.dtype.kind in "fV":  # torch: log1p(y) rounded to the half dtype, the product in
        # float32 rounded once (the record skips the generic float32 opmath: ember/ops/opmath.py OPMATH_SKIP)
        log = xp.log1p(y.astype(xp.float32)).astype(x.dtype).astype(xp.float32)
        out = (x.astype(xp.float32) * log).astype(x.dtype)
        return xp.where((x == 0) & ~xp.isnan(y), xp.zeros((), dtype=x.dtype), out)
    out = x * xp.log1p(y)
    return xp.where((x == 0) & ~xp.isnan(y), 0.0, out)


def _xlog1py_dx(ctx: Any, g: Any) -> Any:
    x, y = ctx.inputs
    return ew.where((x == 0) & (y <= -1), 0.0, g * ew.log1p(y))


XLOG1PY = register(OpDef(name="xlog1py", category="binary", impl=_xlog1py_impl, shape_rule=elementwise_rule(),
                         float_only=True, onnx=to_onnx.xlog1py, vjp=(_xlog1py_dx, lambda ctx, g: g * ctx.inputs[0] / (ctx.inputs[1] + 1)),
                         doc="torch.special.xlog1py"))


def ndtr(input: Any) -> Any:
    """The standard normal CDF (``torch.special.ndtr``)."""
    return dispatch.unary(NDTR, input)


def log_ndtr(input: Any) -> Any:
    """log of the standard normal CDF without underflow (``torch.special.log_ndtr(-40)`` = -804.6)."""
    return dispatch.unary(LOG_NDTR, input)


def ndtri(input: Any) -> Any:
    """The inverse of the standard normal CDF (``torch.special.ndtri``)."""
    return dispatch.unary(NDTRI, input)


def entr(input: Any) -> Any:
    """-x log x elementwise: 0 at 0, -inf for negative x (``torch.special.entr``)."""
    return dispatch.unary(ENTR, input)


def xlog1py(input: Any, other: Any) -> Any:
    """x * log1p(y), 0 where x == 0 unless y is NaN (``torch.special.xlog1py``; torch names them input, other)."""
    return dispatch.binary(XLOG1PY, input, other)


# ---- functions PyTorch gives no gradient -------------------------------------------------------------------------
def _spherical_j0_impl(xp: Any, x: Any) -> Any:
    ew.real_only("spherical_bessel_j0", x)
    wide = x.astype(xp.float64)
    safe = xp.where(wide == 0, 1.0, wide)
    value = xp.where(wide == 0, 1.0, xp.sin(safe) / safe)
    return xp.where(xp.isinf(wide), 0.0, value).astype(x.dtype)


_BESSEL_ONNX = {"i0": to_onnx.bessel_i(0, False), "i1": to_onnx.bessel_i(1, False), "k0": to_onnx.bessel_k(0, False),
                "k1": to_onnx.bessel_k(1, False), "k0e": to_onnx.bessel_k(0, True), "k1e": to_onnx.bessel_k(1, True)}
NO_GRAD_UNARY = {name: _unary(name, fname, onnx=_BESSEL_ONNX.get(fname)) for name, fname in (
    ("bessel_j0", "j0"), ("bessel_j1", "j1"), ("bessel_y0", "y0"), ("bessel_y1", "y1"),
    ("modified_bessel_i0", "i0"), ("modified_bessel_i1", "i1"), ("modified_bessel_k0", "k0"),
    ("modified_bessel_k1", "k1"), ("scaled_modified_bessel_k0", "k0e"), ("scaled_modified_bessel_k1", "k1e"),
    ("airy_ai", "airy_ai"))}
NO_GRAD_UNARY["spherical_bessel_j0"] = register(OpDef(
    name="spherical_bessel_j0", category="unary", impl=_spherical_j0_impl, shape_rule=elementwise_rule(),
    float_only=True, doc="torch.special.spherical_bessel_j0"))
POLYNOMIALS = {name: _binary(name, name) for name in (
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
    "legendre_polynomial_p")}
