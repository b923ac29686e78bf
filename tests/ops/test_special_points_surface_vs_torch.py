"""Special points for every PyTorch-named function ember has beyond its op records: the unary, binary and
reduction functions of ``torch``, ``torch.special`` and ``torch.nn.functional`` (lgamma, erfc, sinc, fmax,
xlog1py, logcumsumexp, nanmean, trapezoid, ...), compared with torch 2.13 by the machinery of
``test_special_points_vs_torch.py`` (values and gradients, 0, -0, kinks, +-large, +-inf, NaN, denormals).

The lists are checked against torch's namespaces: a function that both libraries have and that acts
elementwise (or along a dim) must be listed here or in ``EXCLUDED`` with the reason, so a function added
to ember later cannot skip the comparison.

Example: ``erfc(6.0)`` must be 2.15e-17 in float64 (torch), not the 0 of ``1 - erf(6.0)``.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np
import pytest

import ember
from test_special_points_vs_torch import DTYPES, Entry, _erfcx_slope, binary, compare_with_torch, points, rows

torch = pytest.importorskip("torch")
special = pytest.importorskip("scipy.special")


def _resolve(lib: Any, path: str) -> Callable:
    """``"special.erfc"`` -> ``lib.special.erfc``; ``"F.gelu"`` -> ``lib.nn.functional.gelu``."""
    owner, _, name = path.rpartition(".")
    namespace = {"": lib, "special": getattr(lib, "special", None), "F": lib.nn.functional}[owner]
    return getattr(namespace, name)


def _first(out: Any) -> Any:
    """The values of (values, indices) results."""
    return out[0] if isinstance(out, tuple) else out


def _sinc_slope(x: np.ndarray) -> np.ndarray:
    """d/dx sin(pi x) / (pi x) in float64, with its Taylor form -pi^2 x / 3 near 0."""
    px = np.pi * x
    safe = np.where(np.abs(x) < 1e-4, 1.0, px)
    return np.where(np.abs(x) < 1e-4, -np.pi ** 2 * x / 3, (np.cos(safe) * safe - np.sin(safe)) / (safe * x))


_NO_NAN = lambda dtype: [points(dtype)[:-1]]  # noqa: E731  (sign's NaN is a documented difference)
_ANGLE_LOST = ("gradient at |x| >= 1e20: pi x has no fractional digits left, so cos(pi x) / x (|.| < 1e-20) is "
               "rounding noise in both libraries", lambda x: np.abs(x) >= 1e20)
_TIES = ("gradient among equal values (0 and -0 are equal): each library picks another one of them",
         lambda x: x == 0)

# name -> Entry options (empty: compared with the defaults)
UNARY: dict[str, dict] = {
    **{name: {} for name in (
        "abs", "absolute", "acos", "acosh", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctanh", "asin",
        "asinh", "atan", "atanh", "atleast_1d", "ceil", "celu", "clone", "cos", "deg2rad", "detach", "erf",
        "erfinv", "exp", "exp2", "fix", "flatten", "flipud", "floor", "frac", "hardshrink", "i0", "lgamma",
        "log", "log10", "log1p", "log2", "logit", "nan_to_num", "neg", "negative", "ones_like", "positive",
        "rad2deg", "ravel", "real", "reciprocal", "relu", "round", "rrelu", "rsqrt", "selu", "sigmoid", "sin",
        "sqrt", "square", "squeeze", "t", "tan", "tanh", "trunc", "zeros_like", "erfc",
        "special.entr", "special.erf", "special.erfc", "special.erfinv", "special.exp2", "special.expit",
        "special.gammaln", "special.i0", "special.log1p", "special.logit", "special.round",
        "special.i0e", "special.i1", "special.ndtri", "special.modified_bessel_i0",
        "special.modified_bessel_i1", "special.modified_bessel_k0", "special.modified_bessel_k1",
        "special.scaled_modified_bessel_k0", "special.scaled_modified_bessel_k1", "special.spherical_bessel_j0",
        "F.celu", "F.elu", "F.gelu", "F.hardshrink", "F.hardtanh", "F.leaky_relu", "F.logsigmoid", "F.relu",
        "F.relu6", "F.rrelu", "F.selu", "F.sigmoid", "F.silu", "F.softplus", "F.softshrink", "F.softsign",
        "F.tanh", "F.tanhshrink", "angle", "conj", "conj_physical", "resolve_conj", "resolve_neg")},
    # torch's float64 trigamma (digamma's slope) is 3e-10 off at 0.5 (pi^2 / 2); SciPy's is the reference.
    "digamma": dict(exact_grad=lambda x: (special.polygamma(1, x),)),
    "special.digamma": dict(exact_grad=lambda x: (special.polygamma(1, x),)),
    "special.psi": dict(exact_grad=lambda x: (special.polygamma(1, x),)),
    "cosh": dict(exact=np.cosh, exact_grad=lambda x: (np.sinh(x),)),    # torch overflows at 710 in float64
    "sinh": dict(exact=np.sinh, exact_grad=lambda x: (np.cosh(x),)),
    "expm1": dict(exact_grad=lambda x: (np.exp(x),)), "special.expm1": dict(exact_grad=lambda x: (np.exp(x),)),
    "sign": dict(inputs=_NO_NAN), "sgn": dict(inputs=_NO_NAN),
    "sinc": dict(exact_grad=lambda x: (_sinc_slope(x),), known=_ANGLE_LOST),
    "special.sinc": dict(exact_grad=lambda x: (_sinc_slope(x),), known=_ANGLE_LOST),
    "special.i1e": dict(known=("gradient at a positive subnormal: torch 0.75, ember 0.5 (i1e'(0) = 1/2; torch's "
                               "is 0.5 at the negative one)", lambda x: (x > 0) & (x < 1e-300))),
    "special.ndtr": dict(exact=special.ndtr),                           # torch's lower tail loses digits
    "special.log_ndtr": dict(exact=special.log_ndtr, finite_where_torch_nan=(
        "gradient below -1e30: torch exp(-x^2/2) / ndtr = 0 / 0, ember the limit -x")),
    "special.erfcx": dict(exact=special.erfcx, exact_grad=lambda x: (_erfcx_slope(x),),
                          finite_where_torch_nan="gradient at +inf: torch inf * 0"),
    "msort": dict(known=_TIES),
    "norm_except_dim": dict(finite_where_torch_nan="gradient at +-inf: torch x / |x| = inf / inf, ember sign(x)"),
    "F.hardsigmoid": dict(rtol={"float64": 1e-7}),                      # torch's float64 slope is float32(1/6)
    "F.hardswish": dict(exact=lambda x: np.where(x <= -3, 0.0, np.where(x < 3, x * (x + 3) / 6, x)),
                        finite_where_torch_nan="hardswish(-inf): torch -inf * 0"),
    "F.mish": dict(finite_where_torch_nan="gradient at +inf: torch inf * 0"),
    "F.softmax": dict(), "F.log_softmax": dict(), "F.softmin": dict(),
}

_P_EDGE = ("a = +inf: torch returns 0 (gammainc) / 1 (gammaincc) whatever x, NaN included; ember propagates NaN. "
           "a subnormal, x > 0: torch (and SciPy's gammainc) 0 / 1 (lgamma(a) overflows in their prefactor); ember "
           "the limit P = 1 - a E1(x), Q = a E1(x)",
           lambda a, x: (np.isinf(a) & np.isnan(x)) | ((a > 0) & (a < np.finfo(a.dtype).tiny) & (x > 0)))
_IGAMMA = dict(exact=lambda a, x: special.gammainc(a, x), known=_P_EDGE, diff=(1,))
_IGAMMAC = dict(exact=lambda a, x: special.gammaincc(a, x), known=_P_EDGE, diff=(1,))
_XLOGY_KNOWN = ("gradient in x at x = 0, y = inf: torch log(inf) = inf, ember 0 (the value is 0)",
                lambda x, y: (x == 0) & (y == np.inf))
BINARY: dict[str, dict] = {
    **{name: {} for name in (
        "add", "arctan2", "atan2", "clamp", "clamp_max", "clamp_min", "clip", "div", "divide", "float_power",
        "fmax", "fmin", "ldexp", "max", "maximum", "min", "minimum", "mul", "multiply", "pow",
        "rsub", "sub", "subtract", "true_divide", "special.xlog1py")},
    "floor_divide": dict(grad=False), "heaviside": dict(grad=False),   # torch: "derivative not implemented"
    # torch returns a zero gradient for the sign source, ember none (it is not differentiable): x's compared.
    "copysign": dict(diff=(0,), finite_where_torch_nan="gradient at x = +-inf: torch result / x = inf / inf"),
    "fmod": dict(finite_where_torch_nan="a denormal divisor: torch's a / b overflows to NaN, NumPy's is exact"),
    "remainder": dict(finite_where_torch_nan="a denormal divisor: torch's a / b overflows to NaN, NumPy's is exact"),
    "hypot": dict(finite_where_torch_nan="gradient at (0, 0): torch 0 / 0, ember 0 (as norm's)"),
    "logaddexp": dict(finite_where_torch_nan="gradient at (inf, inf): torch inf - inf, ember 0.5"),
    "logaddexp2": dict(exact=np.logaddexp2, finite_where_torch_nan="gradient at (inf, inf): torch inf - inf"),
    "xlogy": dict(known=_XLOGY_KNOWN, finite_where_torch_nan="gradient in y at x = y = 0: torch 0 / 0, ember 0"),
    "special.xlogy": dict(known=_XLOGY_KNOWN, finite_where_torch_nan="gradient in y at x = y = 0: torch 0 / 0"),
    "igamma": _IGAMMA, "special.gammainc": _IGAMMA, "igammac": _IGAMMAC, "special.gammaincc": _IGAMMAC,
}

_ABSORB = ("gradient where the result absorbs log(n) (a row of 1e30 / 1e300): torch's exp(x - lse) sums to more "
           "than 1, ember's is the softmax", lambda x: (np.abs(x).max(-1, keepdims=True) + 0 * x) >= 1e29)
_ROW_TIES = ("gradient among equal values: each library picks another one of them",
             lambda x: np.array([[np.sum(r == v) > 1 for v in r] for r in x]))
REDUCTIONS: dict[str, dict] = {
    **{name: {} for name in (
        "amax", "amin", "aminmax", "cummax", "cummin", "cumsum", "cumulative_trapezoid", "diff", "frobenius_norm",
        "log_softmax", "mean", "nanmean", "nansum", "norm", "prod", "softmax", "sort", "squeeze", "std",
        "std_mean", "sum", "unbind", "unsqueeze", "var", "var_mean", "special.log_softmax", "special.softmax",
        "F.glu", "F.normalize", "F.softmax", "F.softmin", "F.log_softmax")},
    "max": dict(known=_ROW_TIES), "min": dict(known=_ROW_TIES),
    "median": dict(known=_ROW_TIES), "nanmedian": dict(known=_ROW_TIES),
    "cumprod": dict(scan=True),
    "logsumexp": dict(known=_ABSORB), "special.logsumexp": dict(known=_ABSORB),
    "logcumsumexp": dict(scan=True, known=_ABSORB, finite_where_torch_nan="gradient where the running value is inf: torch "
                                                           "exp(inf - inf), ember the limit"),
    "trapezoid": dict(finite_where_torch_nan="a row with inf: torch sum(y) - (y0 + yn) / 2 = inf - inf, ember the "
                                             "sum of the trapezoids (inf)"),
    "trapz": dict(finite_where_torch_nan="as trapezoid"),
}

EXCLUDED = {
    "dequantize": "a float tensor passes through unchanged; quantized tensors' special values (0, halves, +-inf, NaN) "
                  "are compared with torch in tests/ao/test_quantize_numerics_vs_torch.py",
    # torch's float64 J/Y/Ai are off by up to 1e-6 of their amplitude: compared with that tolerance, and the
    # polynomials over a grid of degrees, in tests/ops/test_special_functions_vs_scipy.py (docs/special.md)
    **{f"special.{name}": "special points and values vs torch in tests/ops/test_special_functions_vs_scipy.py"
       for name in ("airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "zeta",
                    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
                    "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
                    "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
                    "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p")},
    "Tensor": "a constructor", "DoubleTensor": "a constructor", "special.Tensor": "a constructor",
    "tensor": "a constructor (copies its input)", "as_tensor": "a constructor", "asarray": "a constructor",
    "empty_like": "uninitialized memory: no values to compare",
    "rand_like": "random sampling", "randn_like": "random sampling", "F.dropout": "random sampling",
    "normal": "random sampling (normal(mean) with std=1: tests/compat/test_normal_overloads_like_torch.py)",
    "F.dropout3d": "random sampling", "F.alpha_dropout": "random sampling (eval mode is the identity)",
    "F.feature_alpha_dropout": "random sampling", "F.gumbel_softmax": "random sampling",
    "cartesian_prod": "a product of its inputs' elements: no arithmetic",
    "unique": "NaN handling differs between torch versions; no gradient (listed in test_special_points_vs_torch)",
    "unique_consecutive": "as unique", "mode": "integer counts; values are elements of the input, no gradient",
    "gradient": "torch.gradient's spacing/edge semantics are tested in tests/torch_surface",
    "binary_cross_entropy_with_logits": "a loss: compared with reduction='none' in test_special_points_vs_torch",
    "hinge_embedding_loss": "a loss: compared with reduction='none' in test_special_points_vs_torch",
    "kl_div": "a loss: compared with reduction='none' in test_special_points_vs_torch",
    "cross": "needs a dim of size 3; a difference of products (mul/sub are compared)",
    "nextafter": "no gradient; bit-level stepping is exact in both (tests/torch_surface)",
    "slice_scatter": "data movement",
    **{name: "a copy of a view: data movement, no arithmetic (ember/surface/copy_variants.py, tested against torch "
             "in tests/compat/test_copy_variants_vs_torch.py)" for name in ("alias_copy", "detach_copy", "slice_copy", "squeeze_copy",
                                                   "t_copy", "unbind_copy", "unsqueeze_copy")},
    "sym_sum": "symbolic-shape helper: the sum of Python ints (tests/compat)",
}


def _unary_entry(name: str, opts: dict) -> Entry:
    opts = dict(opts)
    inputs = opts.pop("inputs", lambda dtype: [points(dtype)])
    return Entry(name, lambda lib, x: _first(_resolve(lib, name)(x)), inputs, **opts)


def _binary_entry(name: str, opts: dict) -> Entry:
    opts = dict(opts)
    diff = opts.pop("diff", (0, 1))
    return Entry(name, lambda lib, x, y: _resolve(lib, name)(x, y), binary, diff=diff, **opts)


def _reduction_entry(name: str, opts: dict) -> Entry:
    def fn(lib: Any, x: Any) -> Any:
        out = _first(_resolve(lib, name)(x, dim=-1))
        return out if not isinstance(out, (tuple, list)) else lib.stack(list(out))

    return Entry(name, fn, rows, **opts)


ENTRIES = ([_unary_entry(n, o) for n, o in UNARY.items()] + [_binary_entry(n, o) for n, o in BINARY.items()]
           + [_reduction_entry(n, o) for n, o in REDUCTIONS.items()])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_surface_special_points(entry: Entry, dtype: str) -> None:
    compare_with_torch(entry, dtype)


# ---- discovery: every function both libraries have is listed above or excluded with a reason ----------------
_SIDE_EFFECTS = ("set_", "use_", "manual_seed", "seed", "save", "load", "compile", "autocast", "enable_",
                 "disable_", "is_", "get_", "init_", "empty", "from_", "frombuffer", "vmap", "cond")


def _discover(arity: int) -> set:
    """Names callable in both libraries on (arity) float64 vectors [or a (2, 4) matrix with dim=-1] that
    return a floating tensor of the same leading shape."""
    found = set()
    for prefix, ns_t, ns_e in (("", torch, ember), ("special.", torch.special, ember.special),
                               ("F.", torch.nn.functional, ember.nn.functional)):
        for name in dir(ns_t):
            if name.startswith("_") or name.endswith("_") or name.startswith(_SIDE_EFFECTS):
                continue
            ft, fe = getattr(ns_t, name, None), getattr(ns_e, name, None)
            if not callable(ft) or not callable(fe) or isinstance(ft, type):
                continue
            x = np.array([0.5, -0.25, 2.0])
            y = np.array([1.5, 0.75, -2.0])
            m = np.array([[0.5, -0.25, 2.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
            try:
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    if arity == 1:
                        a, _ = ft(torch.tensor(x)), fe(ember.tensor(x))
                        ok = a.shape == (3,)
                    elif arity == 2:
                        a, _ = ft(torch.tensor(x), torch.tensor(y)), fe(ember.tensor(x), ember.tensor(y))
                        ok = a.shape == (3,)
                    else:
                        a, _ = _first(ft(torch.tensor(m), dim=-1)), fe(ember.tensor(m), dim=-1)
                        ok = a.ndim >= 1 and a.shape[0] == 2
            except Exception:  # noqa: BLE001 - not callable this way in one of the libraries
                continue
            if isinstance(a, torch.Tensor) and a.dtype.is_floating_point and ok:
                found.add(prefix + name)
    return found


@pytest.mark.parametrize("arity,listed", [(1, UNARY), (2, BINARY), ("dim", REDUCTIONS)], ids=["unary", "binary",
                                                                                                "reduction"])
def test_every_shared_function_is_compared_or_excluded(arity: Any, listed: dict) -> None:
    missing = sorted(_discover(arity) - set(listed) - set(EXCLUDED))
    assert not missing, (f"functions of torch and ember without special-point comparison: {missing}; add them to "
                         f"{'UNARY' if arity == 1 else 'BINARY' if arity == 2 else 'REDUCTIONS'} (with the options "
                         "for documented differences) or to EXCLUDED with the reason")
