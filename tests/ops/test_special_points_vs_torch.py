"""Values and gradients at special points (0, -0, kinks, +-large, +-inf, nan, denormals, domain edges)
against PyTorch, for every registered op that has a PyTorch counterpart and the composite functional ops
(activations, losses, norms).

Each entry is one callable ``fn(lib, *tensors)`` run with ``lib = ember`` and ``lib = torch`` (ember
speaks PyTorch's API, so the same line calls both), on the same NumPy inputs, in float32 and float64.
The result and the gradient of ``out.backward(ones)`` must agree: NaN at the same positions, the same
infinities, finite values close. Deliberate differences are listed in docs/special-points.md and
marked ``xfail`` here with the reason, so that a fix shows up.

Example: ``softplus`` at x = 0 must have gradient 0.5 (PyTorch), not 0 (what a composite built from
``abs`` and ``relu`` gives through their subgradients).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pytest

import ember
from ember.ops.registry import OPS

torch = pytest.importorskip("torch")

DTYPES = ("float32", "float64")
# Finite values are close when |a - b| <= atol + rtol * |b|; atol is the smallest normal number, so
# results in the denormal range (e.g. sigmoid(-100) in float32) may differ by flushing to 0.
RTOL = {"float32": 2e-5, "float64": 1e-10}


def points(dtype: str) -> np.ndarray:
    """The special points shared by every elementwise op (0, -0, denormals, kinks, tails, inf, nan)."""
    big = {"float32": [88.0, -88.0, 89.0, -104.0, 1e30, -1e30, 3e38, -3e38],
           "float64": [709.0, -709.0, 710.0, -746.0, 1e300, -1e300, 1.7e308, -1.7e308]}[dtype]
    denormal = {"float32": 1e-40, "float64": 5e-320}[dtype]
    values = [0.0, -0.0, denormal, -denormal, 1e-20, -1e-20, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 6.0,
              -6.0, 20.0, -20.0, 21.0, 30.0, -30.0, 100.0, -100.0, *big, np.inf, -np.inf, np.nan]
    return np.array(values, dtype=dtype)


def small_points(dtype: str) -> np.ndarray:
    """A shorter list for binary ops, which see every pair."""
    denormal = {"float32": 1e-40, "float64": 5e-320}[dtype]
    big = {"float32": 1e30, "float64": 1e300}[dtype]
    return np.array([0.0, -0.0, denormal, 0.5, -1.0, 1.0, 2.0, -2.5, 100.0, -100.0, big, -big, np.inf, -np.inf,
                     np.nan], dtype=dtype)


# ---- input builders: each takes the dtype name and returns the list of input arrays ----------------
def unary(*extra: float) -> Callable[[str], list]:
    return lambda dtype: [np.concatenate([points(dtype), np.array(extra, dtype=dtype)])]


def on(values: list) -> Callable[[str], list]:
    """A fixed list of inputs (scalars or arrays) converted to the dtype."""
    return lambda dtype: [np.array(v, dtype=dtype) for v in values]


def binary(dtype: str) -> list:
    p = small_points(dtype)
    a, b = np.meshgrid(p, p, indexing="ij")
    return [a.reshape(-1), b.reshape(-1)]


def rows(dtype: str, drop: tuple = (), no_ties: bool = False) -> list:
    """Rows (reduced along the last dim) of special vectors: zeros, ties, inf, nan, huge, tiny.

    ``drop`` leaves out rows by index (a documented difference, see the entry); ``no_ties`` adds a
    distinct tiny offset per column, for ops whose gradient at ties picks one of equal elements."""
    denormal = {"float32": 1e-40, "float64": 5e-320}[dtype]
    big = {"float32": 1e30, "float64": 1e300}[dtype]
    inf, nan = np.inf, np.nan
    table = [
        [0.0, 0.0, 0.0, 0.0], [-0.0, 0.0, -0.0, 0.0], [1.0, 1.0, 1.0, 1.0], [1.0, -2.0, 3.0, 0.5],
        [2.0, 2.0, -1.0, 0.0], [inf, 1.0, 2.0, 3.0], [-inf, 1.0, 2.0, 3.0], [inf, -inf, 1.0, 0.0],
        [-inf, -inf, -inf, -inf], [inf, inf, 1.0, 1.0], [nan, 1.0, 2.0, 3.0], [nan, inf, -inf, 0.0],
        [big, big, -big, 1.0], [denormal, -denormal, denormal, 0.0], [1e-20, 2e-20, -1e-20, 0.0],
        [100.0, -100.0, 50.0, 0.0],
    ]
    table = [row for i, row in enumerate(table) if i not in drop]
    values = np.array(table, dtype=np.float64)
    if no_ties:
        values = values + np.array([0.0, 0.25, 0.5, 0.75]) * np.isfinite(values) * (np.abs(values) < 1e10)
    return [values.astype(dtype)]


def large_rows(dtype: str) -> list:
    """Rows whose squares or sums overflow the dtype, and rows with a large mean and a small spread
    (where a float32 accumulator loses the spread): float32 variances accumulate in float64 as torch's."""
    if dtype == "float32":
        big, top, half, offset = 1e20, 3e38, 1e19, 1e7
    else:
        big, top, half, offset = 1e160, 1.7e308, 1e153, 1e15
    table = [[big, -big, big, 0.0], [top, -top, 1.0, 0.0], [top, top, top, top], [-top, -top, -top, -top],
             [half, 2 * half, -half, 0.0], [2 * half, 2 * half, 2 * half, 2 * half],
             [offset, offset + 1, offset + 2, offset + 3], [1e4, 1e4 + 1, 1e4 + 2, 1e4 + 3], [1e-30, 2e-30, 0.0, 0.0]]
    return [np.array(table, dtype=dtype)]


def no_zero_inf_rows(dtype: str) -> list:
    """Rows with infinities and no zero anywhere in the tensor (torch's prod backward divides there)."""
    inf = np.inf
    table = [[inf, 1.0, 2.0, 3.0], [-inf, 1.0, 2.0, 3.0], [-inf, -inf, -inf, -inf], [inf, inf, 1.0, 1.0],
             [inf, -2.0, inf, 0.5], [1e30, 1e30, -1e30, 1.0], [1.0, 2.0, 3.0, 4.0]]
    return [np.array(table, dtype=dtype)]


def zero_rows(dtype: str) -> list:
    """One, two and three zeros at every place in a row (prod's and cumprod's gradients without division)."""
    table = [[0.0, 2.0, 3.0, 4.0], [2.0, 0.0, 3.0, 4.0], [2.0, 3.0, 0.0, 4.0], [2.0, 3.0, 4.0, 0.0],
             [0.0, 0.0, 3.0, 4.0], [0.0, 2.0, 0.0, 4.0], [2.0, 0.0, 3.0, 0.0], [2.0, 3.0, 0.0, 0.0],
             [0.0, 0.0, 0.0, 4.0], [-0.0, -2.0, 0.5, -4.0], [0.0, 0.0, 0.0, 0.0], [1e-40, 0.0, 1e20, 3.0]]
    return [np.array(table, dtype=dtype)]


def rows_except(*drop: int, no_ties: bool = False) -> Callable[[str], list]:
    return lambda dtype: rows(dtype, drop, no_ties)


BIG_ROW = 12       # [big, big, -big, 1]: squares overflow


def binary_moderate(dtype: str) -> list:
    """Pairs of special points without denormals or huge values (see addcdiv)."""
    a, b = binary(dtype)
    keep = (np.abs(np.nan_to_num(a, posinf=1, neginf=1)) < 1e10) & (np.abs(np.nan_to_num(b, posinf=1, neginf=1)) < 1e10)
    keep &= ((a == 0) | (np.abs(a) > 1e-30)) & ((b == 0) | (np.abs(b) > 1e-30))
    return [a[keep], b[keep]]


def unit_interval(dtype: str) -> list:
    """Probabilities at and near the domain edges, plus values outside it (for BCE's checks)."""
    denormal = {"float32": 1e-40, "float64": 5e-320}[dtype]
    eps = np.finfo(dtype).eps
    return [np.array([0.0, -0.0, denormal, 1e-20, 0.25, 0.5, 0.75, 1.0 - eps, 1.0], dtype=dtype)]


def with_targets(builder: Callable, targets: list) -> Callable[[str], list]:
    """Pair every input of ``builder`` with every target value (grid, flattened)."""

    def build(dtype: str) -> list:
        (x,) = builder(dtype)
        t = np.array(targets, dtype=dtype)
        a, b = np.meshgrid(x, t, indexing="ij")
        return [a.reshape(-1), b.reshape(-1)]

    return build


@dataclass
class Entry:
    name: str
    fn: Callable[..., Any]                 # fn(lib, *tensors) with lib = ember or torch
    inputs: Callable[[str], list]          # dtype -> input arrays
    ops: tuple = ()                        # registry ops this entry exercises
    diff: tuple = (0,)                     # inputs that get requires_grad
    grad: bool = True
    xfail: str = ""                        # a deliberate difference (documented in docs/special-points.md)
    # A documented class of deliberate differences: where torch's kernel overflows to NaN (inf / inf,
    # 0 * inf) and ember's formula gives the limit (finite, or inf where the limit is). The reason is the
    # value; positions where torch is NaN and ember is not are then accepted, every other one is compared.
    finite_where_torch_nan: str = ""
    dtypes: tuple = DTYPES
    rtol: dict = field(default_factory=dict)
    atol: dict = field(default_factory=dict)
    # An independent float64 NumPy formula of the value: ember also passes where it is at least as close
    # to it as torch is (torch's formula loses digits where ember's does not).
    exact: Callable[..., Any] | None = None
    # The same for the gradients of an elementwise op: one derivative per input in ``diff`` (the test
    # applies the upstream gradient).
    exact_grad: Callable[..., Any] | None = None
    # (reason, predicate): positions (of the float64 inputs) where a documented difference is not compared.
    known: tuple | None = None
    # A scan along the last dim (cumprod): the gradient of x_k sums over the outputs at and after k, so
    # where one of those is NaN the gradient carries no information and is not compared (as for values).
    scan: bool = False


def _f(lib: Any) -> Any:
    return lib.nn.functional


def u(name: str, *extra: float, ops: tuple | None = None, **kw: Any) -> Entry:
    """A unary function of the top-level namespace (ember.exp / torch.exp)."""
    return Entry(name, lambda lib, x: getattr(lib, name)(x), unary(*extra),
                 ops=(name,) if ops is None else ops, **kw)


def act(name: str, *extra: float, ops: tuple = (), call: Callable | None = None, **kw: Any) -> Entry:
    """An activation from nn.functional, optionally with arguments (``call(F, x)``)."""
    fn = (lambda lib, x: call(_f(lib), x)) if call else (lambda lib, x: getattr(_f(lib), name.split("[")[0])(x))
    return Entry(name, fn, unary(*extra), ops=ops, **kw)


def b(name: str, ops: tuple | None = None, **kw: Any) -> Entry:
    return Entry(name, lambda lib, x, y: getattr(lib, name)(x, y), binary, ops=(name,) if ops is None else ops,
                 diff=(0, 1), **kw)


def red(name: str, call: Callable, ops: tuple = (), inputs: Callable = rows, **kw: Any) -> Entry:
    return Entry(name, call, inputs, ops=ops, **kw)


def _expit(x: np.ndarray) -> np.ndarray:
    """The logistic function in float64 without overflow (an independent reference)."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _erfcx_slope(x: np.ndarray) -> np.ndarray:
    """d/dx erfcx(x) = 2 x erfcx(x) - 2 / sqrt(pi) in float64, from its asymptotic series above 30 (the direct
    form cancels there; torch's overflows to inf at 1.7e308)."""
    big = np.maximum(x, 30.0)
    r = 1.0 / (big * big)
    series = -2 / np.sqrt(np.pi) * r * (0.5 - r * (0.75 - r * (1.875 - r * (6.5625 - r * 29.53125))))
    return np.where(x > 30, series, 2 * x * __import__("scipy.special").special.erfcx(x) - 2 / np.sqrt(np.pi))


NORM_ATOL = {"float32": 1e-6, "float64": 1e-10}
# float32 variances accumulate as torch's (a float64 redo where float32 cannot be trusted); their gradient is
# torch's closed form 2 (x - mean) / (n - correction).
LARGE_VAR = dict(dtypes=("float32",))

ENTRIES: list[Entry] = [
    # ---- unary math ----
    u("neg"), u("exp"), u("log"), u("log1p", -1.0, -1.5), u("sqrt"), u("rsqrt"), u("sin"), u("cos"), u("tanh"),
    u("sigmoid", -40.0, -17.0, 17.0, 40.0), u("relu"), u("abs"), u("reciprocal"), u("erf"),
    # sign(NaN) is NaN in ember (IEEE propagation, NumPy), 0 in torch: documented; compared without NaN.
    Entry("sign", lambda lib, x: lib.sign(x), lambda dtype: [points(dtype)[:-1]], ops=("sign",)), u("floor"), u("ceil"), u("round", 2.5, -2.5, 0.49999997), u("trunc"), u("tan"),
    u("asin", 1.0000001, -1.0000001), u("acos", 1.0000001, -1.0000001), u("atan"), u("sinh", exact=np.sinh, exact_grad=lambda x: (np.cosh(x),)),
    u("cosh", exact=np.cosh, exact_grad=lambda x: (np.sinh(x),)),  # torch overflows at 710 in float64
    
    u("asinh"), u("acosh", 1.0000001, 0.9999999), u("atanh", 0.9999999, -0.9999999), u("expm1", exact_grad=lambda x: (np.exp(x),)),  # torch's gradient expm1(x) + 1 loses the tail
    u("log2"), u("log2"),
    u("log10"), u("exp2"), u("erfinv", 0.9999999, -0.9999999), u("square", ops=("mul",)), u("erfc", 5.0, 10.0, 27.0),
    # erfcx's tail and slope against SciPy (torch's float64 slope overflows to inf at 1.7e308, where it is -0)
    Entry("erfcx", lambda lib, x: lib.special.erfcx(x), unary(5.0, 27.0, 1e4), ops=("erfcx",),
          exact=lambda x: __import__("scipy.special").special.erfcx(x), exact_grad=lambda x: (_erfcx_slope(x),),
          finite_where_torch_nan="gradient at +inf: torch inf * 0 = NaN, ember the limit -0"),
    u("frac", ops=("trunc", "sub")), u("logit", 0.25, 0.75, 0.9999999, ops=()), u("deg2rad", ops=("mul",)),
    u("rad2deg", ops=("mul",)),
    u("isnan", grad=False), u("isinf", grad=False), u("isfinite", grad=False, ops=()),
    u("logical_not", grad=False),
    Entry("nan_to_num", lambda lib, x: lib.nan_to_num(x), unary(), ops=("where",)),
    Entry("nan_to_num_args", lambda lib, x: lib.nan_to_num(x, nan=0.5, posinf=9.0, neginf=-9.0), unary(),
          ops=("where",)),
    Entry("clamp", lambda lib, x: lib.clamp(x, -1.0, 2.0), unary(), ops=("clamp",)),
    Entry("clamp_min", lambda lib, x: lib.clamp_min(x, 0.5), unary(), ops=("clamp",)),
    Entry("clamp_max", lambda lib, x: x.clamp(max=-1.0), unary(), ops=("clamp",)),
    Entry("pow_2", lambda lib, x: x ** 2, unary(), ops=("pow",)),
    Entry("pow_3", lambda lib, x: x ** 3, unary(), ops=("pow",)),
    Entry("pow_half", lambda lib, x: x ** 0.5, unary(), ops=("pow",),
          known=("gradient at -0: torch -inf (sqrt's 1 / (2 sqrt(-0))), ember +inf (pow(-0, -0.5))",
                 lambda x: (x == 0) & np.signbit(x))),
    Entry("pow_neg1", lambda lib, x: x ** -1, unary(), ops=("pow",)),
    Entry("pow_0", lambda lib, x: x ** 0, unary(), ops=("pow",)),
    Entry("pow_1_5", lambda lib, x: x ** 1.5, unary(), ops=("pow",)),
    Entry("rpow_2", lambda lib, x: 2.0 ** x, unary(), ops=("pow",)),
    Entry("to_float64", lambda lib, x: x.to(lib.float64), unary(), ops=("to_dtype",)),
    Entry("to_float32", lambda lib, x: x.to(lib.float32), unary(), ops=("to_dtype",)),
    # ---- activations (nn.functional) ----
    act("F.relu", ops=("relu",), call=lambda F, x: F.relu(x)), act("relu6", 6.0), act("gelu", ops=("gelu",)),
    act("gelu[tanh]", call=lambda F, x: F.gelu(x, approximate="tanh"), ops=("gelu",)),
    act("silu", ops=("silu",)), act("leaky_relu", ops=("piecewise_linear",)), act("hardshrink"), act("softshrink[0.25]", 0.25, -0.25,
    call=lambda F, x: F.softshrink(x, 0.25)), act("elu", ops=("expm1",)),
    act("elu[alpha=0.5]", call=lambda F, x: F.elu(x, 0.5)), act("selu"), act("celu"),
    act("celu[alpha=2]", call=lambda F, x: F.celu(x, 2.0)), act("softplus", 20.0, 19.999),
    act("softplus[beta=2,threshold=5]", 2.5, 2.4, call=lambda F, x: F.softplus(x, beta=2.0, threshold=5.0)),
    act("softplus[beta=0.5]", 40.0, call=lambda F, x: F.softplus(x, beta=0.5)),
    act("logsigmoid", ops=("logsigmoid",)), act("hardtanh", ops=("hardtanh",)), act("hardsigmoid", rtol={"float64": 1e-7}),  # torch's float64 slope is float32(1/6)
    act("hardswish", finite_where_torch_nan="hardswish(-inf): torch -inf * 0 = NaN, ember the limit 0",
        exact=lambda x: np.where(x <= -3, 0.0, np.where(x < 3, x * (x + 3) / 6, x))), act("mish", 1e38, -1e38, 40.0, -40.0, ops=("mish",),
        finite_where_torch_nan="gradient at +inf: torch inf * 0 = NaN, ember 1 (the limit)"),
    act("softsign"), act("tanhshrink"), act("F.sigmoid", call=lambda F, x: F.sigmoid(x)), act("F.tanh", call=lambda F, x: F.tanh(x)),
    act("threshold", 0.5, call=lambda F, x: F.threshold(x, 0.5, -1.0), ops=("piecewise_linear",)),
    Entry("prelu", lambda lib, x: _f(lib).prelu(x, lib.tensor([0.25], dtype=x.dtype)), unary()),
    act("softmax_1d", call=lambda F, x: F.softmax(x[..., None], -1), ops=("softmax",)),
    # ---- binary elementwise (every pair of special points) ----
    b("add"), b("sub"), b("mul"), b("div"), b("pow"), b("maximum"), b("minimum"), b("remainder", finite_where_torch_nan="a denormal divisor: torch's a / b overflows to NaN, NumPy's is exact"),
    b("fmod", finite_where_torch_nan="a denormal divisor: torch's a / b overflows to NaN, NumPy's is exact"),
    b("atan2"), b("hypot", finite_where_torch_nan="gradient at (0, 0): torch 0 / 0, ember 0 (as norm's)"), b("logaddexp", ops=(), finite_where_torch_nan="gradient at (inf, inf): torch inf - inf = NaN, ember 0.5"), b("logaddexp2", ops=(), exact=np.logaddexp2,
      finite_where_torch_nan="gradient at (inf, inf): torch inf - inf = NaN, ember 0.5"), b("xlogy", ops=(), finite_where_torch_nan="gradient in y at x = y = 0: torch 0 / 0, ember 0 (x log y is 0 near x = 0)",
      known=("gradient in x at x = 0, y = inf: torch log(inf) = inf, ember 0 (the value is 0)",
             lambda x, y: (x == 0) & (y == np.inf))),
    b("floor_divide", grad=False),
    Entry("div_floor", lambda lib, x, y: lib.div(x, y, rounding_mode="floor"), binary, ops=("floor_divide",),
          grad=False),
    Entry("div_trunc", lambda lib, x, y: lib.div(x, y, rounding_mode="trunc"), binary, grad=False),
    *[b(name, grad=False) for name in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
                                       "logical_xor")],
    Entry("where", lambda lib, x, y: lib.where(x > y, x, y), binary, ops=("where",), diff=(0, 1)),
    Entry("lerp", lambda lib, x, y: lib.lerp(x, y, 0.25), binary, diff=(0, 1)),
    Entry("addcmul", lambda lib, x, y: lib.addcmul(x, x, y, value=0.5), binary, diff=(0, 1)),
    Entry("add_alpha", lambda lib, x, y: lib.add(x, y, alpha=0.3), binary, ops=("fma",), diff=(0, 1)),
    # torch's addcdiv gradient divides by b * b (which underflows / overflows): compared where it does not.
    Entry("addcdiv", lambda lib, x, y: lib.addcdiv(x, x, y, value=0.5), binary_moderate, diff=(0, 1)),
    Entry("clamp_tensor", lambda lib, x, y: lib.clamp(x, min=y), binary, diff=(0, 1)),
    Entry("isclose", lambda lib, x, y: lib.isclose(x, y, equal_nan=True), binary, grad=False),
    # ---- reductions / scans / softmax along the last dim of special rows ----
    red("sum", lambda lib, x: x.sum(-1), ops=("sum",)),
    red("mean", lambda lib, x: x.mean(-1), ops=("mean",)),
    red("prod", lambda lib, x: x.prod(-1), ops=("prod",)),
    red("prod_dim0", lambda lib, x: x.t().prod(0), ops=("prod",)),
    red("prod_all", lambda lib, x: x.prod(), ops=("prod",), inputs=on([[[1.0, 0.0, 2.0], [3.0, 0.0, 4.0]]])),
    red("amax", lambda lib, x: x.amax(-1), ops=("amax",)),
    red("amin", lambda lib, x: x.amin(-1), ops=("amin",)),
    red("max_dim", lambda lib, x: x.max(-1)[0], ops=("max_dim",)),
    red("max_dim_indices", lambda lib, x: x.max(-1)[1], ops=("max_dim",), grad=False),
    red("min_dim", lambda lib, x: x.min(-1)[0], ops=("min_dim",)),
    red("max_all", lambda lib, x: x[:3].max(), ops=("amax",)),
    red("argmax", lambda lib, x: x.argmax(-1), ops=("argmax",), grad=False),
    red("argmin", lambda lib, x: x.argmin(-1), ops=("argmin",), grad=False),
    red("all", lambda lib, x: x.all(-1), ops=("all",), grad=False),
    red("any", lambda lib, x: x.any(-1), ops=("any",), grad=False),
    red("cumsum", lambda lib, x: x.cumsum(-1), ops=("cumsum",)),
    red("cumprod", lambda lib, x: x.cumprod(-1), ops=("cumprod",), scan=True),
    red("cumprod_zeros", lambda lib, x: x.cumprod(-1), ops=("cumprod",), inputs=zero_rows, scan=True),
    red("cummax", lambda lib, x: x.cummax(-1)[0], ops=("cummax",)),
    red("cummin", lambda lib, x: x.cummin(-1)[0], ops=("cummin",)),
    red("cummax_indices", lambda lib, x: x.cummax(-1)[1], grad=False),
    red("logsumexp", lambda lib, x: lib.logsumexp(x, -1), ops=("logsumexp",), inputs=rows_except(BIG_ROW)),
    red("var", lambda lib, x: x.var(-1), ops=("var",)),
    red("std", lambda lib, x: x.std(-1)),
    red("var_correction0", lambda lib, x: x.var(-1, correction=0)),
    red("norm", lambda lib, x: x.norm(dim=-1)),
    red("norm_all_zero", lambda lib, x: (x[:2] * 1).norm()),
    red("norm_p1", lambda lib, x: x.norm(p=1, dim=-1)),
    red("norm_p3", lambda lib, x: x.norm(p=3, dim=-1)),
    red("norm_inf", lambda lib, x: x.norm(p=float("inf"), dim=-1)),
    red("norm_p0_5", lambda lib, x: x.norm(p=0.5, dim=-1),
        finite_where_torch_nan="gradient at an exact 0 in a nonzero vector: torch 0 * inf, ember 0"),
    red("softmax", lambda lib, x: _f(lib).softmax(x, -1), ops=("softmax",)),
    red("log_softmax", lambda lib, x: _f(lib).log_softmax(x, -1), ops=("log_softmax",)),
    red("softmin", lambda lib, x: _f(lib).softmin(x, -1)),
    red("normalize", lambda lib, x: _f(lib).normalize(x, dim=-1)),
    # Normalizing rows of 1e-20 (far below eps) leaves gradients that are rounding noise around 0: atol.
    red("layer_norm", lambda lib, x: _f(lib).layer_norm(x, (4,)), ops=("layer_norm",), inputs=rows_except(BIG_ROW),
        atol=NORM_ATOL),
    red("rms_norm", lambda lib, x: _f(lib).rms_norm(x, (4,))),
    red("group_norm", lambda lib, x: _f(lib).group_norm(x.reshape(3, 4, 5), 2), inputs=rows_except(BIG_ROW),
        atol=NORM_ATOL),
    red("instance_norm", lambda lib, x: _f(lib).instance_norm(x.reshape(3, 2, 10)), inputs=rows_except(BIG_ROW),
        atol=NORM_ATOL),
    red("batch_norm", lambda lib, x: _f(lib).batch_norm(x.t(), None, None, training=True), atol=NORM_ATOL,
        inputs=rows_except(BIG_ROW), ops=("batch_norm",)),
    red("sort", lambda lib, x: x.sort(-1)[0], ops=("sort",)),
    red("sort_indices", lambda lib, x: x.sort(dim=-1, stable=True)[1], ops=("sort",), grad=False),
    red("sort_descending", lambda lib, x: x.sort(-1, descending=True)[0], ops=("sort",)),
    red("topk", lambda lib, x: x.topk(2, -1)[0], inputs=rows_except(8, 9, BIG_ROW, no_ties=True)),
    red("kthvalue", lambda lib, x: x.kthvalue(2, -1)[0], inputs=rows_except(8, 9, BIG_ROW, no_ties=True)),
    red("matmul", lambda lib, x: x @ x.t(), ops=("matmul",)),
    red("matmul_vec", lambda lib, x: x @ x[0], ops=("matmul",)),
    red("linear", lambda lib, x: _f(lib).linear(x, x[:3]), ops=("linear",)),
    red("einsum", lambda lib, x: lib.einsum("ij,kj->ik", x, x), ops=("einsum",)),
    red("cosine_similarity", lambda lib, x: _f(lib).cosine_similarity(x, x.flip(0), dim=-1)),
    red("pairwise_distance", lambda lib, x: _f(lib).pairwise_distance(x, x.flip(0))),
    red("pairwise_distance_same", lambda lib, x: _f(lib).pairwise_distance(x, x * 1)),
    red("cross_entropy", lambda lib, x: _f(lib).cross_entropy(x, lib.tensor([i % 4 for i in range(16)]),
                                                             reduction="none")),
    red("nll_loss", lambda lib, x: _f(lib).nll_loss(x, lib.tensor([i % 4 for i in range(16)]), reduction="none")),
    # the fused class-index cross entropy (ember/ops/losses_cross_entropy.py): forward and its fused backward
    red("cross_entropy", lambda lib, x: _f(lib).cross_entropy(x, lib.tensor([i % 4 for i in range(16)]), reduction="none"),
        ops=("cross_entropy", "cross_entropy_backward")),
    red("flip", lambda lib, x: x.flip(-1), ops=("flip",)),
    red("tril", lambda lib, x: x.tril(), ops=("tril",)),
    red("cat", lambda lib, x: lib.cat([x, x * 2], -1), ops=("cat",)),
    red("gather", lambda lib, x: x.gather(1, lib.tensor([[3, 0]] * 16)), ops=("gather",)),
    red("pad", lambda lib, x: _f(lib).pad(x, (1, 1), value=float("nan")), ops=("pad",)),
    red("avg_pool1d_as_2d", lambda lib, x: _f(lib).avg_pool2d(x[None, None], (1, 2)), ops=("avg_pool2d",)),
    red("max_pool1d_as_2d", lambda lib, x: _f(lib).max_pool2d(x[None, None], (1, 2)), ops=("max_pool2d",)),
    red("conv2d", lambda lib, x: _f(lib).conv2d(x[None, None], x[None, None, :2, :2]), ops=("conv2d",), diff=(0,)),
    # ---- the same reductions and normalizations on rows that overflow a float32 accumulator ----
    red("var_large", lambda lib, x: x.var(-1), inputs=large_rows, **LARGE_VAR),
    red("std_large", lambda lib, x: x.std(-1), inputs=large_rows, **LARGE_VAR),
    red("var_correction0_large", lambda lib, x: x.var(-1, correction=0), inputs=large_rows, **LARGE_VAR),
    red("var_mean_large", lambda lib, x: lib.var_mean(x, -1)[0], inputs=large_rows, **LARGE_VAR),
    red("std_mean_large", lambda lib, x: lib.std_mean(x, -1)[0], inputs=large_rows, **LARGE_VAR),
    red("mean_large", lambda lib, x: x.mean(-1), inputs=large_rows, dtypes=("float32",)),
    red("sum_large", lambda lib, x: x.sum(-1), inputs=large_rows, dtypes=("float32",)),
    red("logsumexp_large", lambda lib, x: lib.logsumexp(x, -1), inputs=large_rows, dtypes=("float32",),
        known=("gradient where the result absorbs log(n) (|max| >= 1e7 in float32): torch's exp(x - lse) sums to "
               "more than 1, ember's is the softmax", lambda x: np.abs(x).max(-1, keepdims=True) + 0 * x >= 1e7)),
    red("softmax_large", lambda lib, x: _f(lib).softmax(x, -1), inputs=large_rows, dtypes=("float32",)),
    red("log_softmax_large", lambda lib, x: _f(lib).log_softmax(x, -1), inputs=large_rows, dtypes=("float32",)),
    red("norm_large", lambda lib, x: x.norm(dim=-1), inputs=large_rows, dtypes=("float32",)),
    red("norm_p1_large", lambda lib, x: x.norm(p=1, dim=-1), inputs=large_rows, dtypes=("float32",)),
    red("norm_p3_large", lambda lib, x: x.norm(p=3, dim=-1), inputs=large_rows, dtypes=("float32",)),
    red("normalize_large", lambda lib, x: _f(lib).normalize(x, dim=-1), inputs=large_rows, dtypes=("float32",)),
    red("rms_norm_large", lambda lib, x: _f(lib).rms_norm(x, (4,)), inputs=large_rows, dtypes=("float32",)),
    # torch's float32 layer_norm/group_norm give NaN on rows 0-5 and lose the spread of row 6; ember's
    # agree with torch's float64 (atol: values 1e-19 of their group's largest are rounding noise there).
    red("layer_norm_large", lambda lib, x: _f(lib).layer_norm(x, (4,)), inputs=large_rows, dtypes=("float32",),
        atol=NORM_ATOL),
    red("group_norm_large", lambda lib, x: _f(lib).group_norm(x.reshape(3, 4, 3), 2), inputs=large_rows,
        dtypes=("float32",), atol=NORM_ATOL),
    red("instance_norm_large", lambda lib, x: _f(lib).instance_norm(x.reshape(3, 3, 4)), inputs=large_rows,
        dtypes=("float32",), atol=NORM_ATOL),
    # batch_norm's statistics are float32 (a fused primitive): rows 0-5 overflow its squares (ember 0; torch 0 for
    # a contiguous input, the right value for this transposed one) and row 6 (1e7 + 0..3) loses its spread
    # in the float32 mean (docs/special-points.md). Its gradients at 1e15 scale are compared below.
    red("batch_norm_large", lambda lib, x: _f(lib).batch_norm(x.t(), None, None, training=True),
        inputs=lambda dtype: [large_rows(dtype)[0][7:]], dtypes=("float32",)),
    red("batch_norm_scaled", lambda lib, x: _f(lib).batch_norm(x.t() * 1e15, None, None, training=True),
        inputs=rows_except(*range(5, 13)), dtypes=("float32",), atol={"float32": 1e-20}),
    red("cosine_similarity_large", lambda lib, x: _f(lib).cosine_similarity(x, x.flip(0), dim=-1), inputs=large_rows,
        dtypes=("float32",)),
    red("cross_entropy_large", lambda lib, x: _f(lib).cross_entropy(x, lib.tensor([i % 4 for i in range(9)]),
                                                                   reduction="none"), inputs=large_rows,
        dtypes=("float32",)),
    # ---- losses: every input against every target, reduction='none' ----
    Entry("mse_loss", lambda lib, x, t: _f(lib).mse_loss(x, t, reduction="none"), with_targets(unary(), [0.0, 1.0]),
          diff=(0, 1)),
    Entry("l1_loss", lambda lib, x, t: _f(lib).l1_loss(x, t, reduction="none"), with_targets(unary(), [0.0, 1.0]),
          diff=(0, 1)),
    Entry("smooth_l1_loss", lambda lib, x, t: _f(lib).smooth_l1_loss(x, t, reduction="none"),
          with_targets(unary(), [0.0, 1.0]), diff=(0, 1)),
    Entry("huber_loss", lambda lib, x, t: _f(lib).huber_loss(x, t, reduction="none", delta=2.0),
          with_targets(unary(), [0.0, 1.0]), diff=(0, 1)),
    Entry("bce_with_logits", lambda lib, x, t: _f(lib).binary_cross_entropy_with_logits(x, t, reduction="none"),
          with_targets(unary(), [0.0, 1.0, 0.5]), diff=(0, 1), ops=("binary_cross_entropy_with_logits",),
          exact=lambda x, t: np.logaddexp(0, x) - np.where(t == 0, 0.0, t * x),
          exact_grad=lambda x, t: (np.where(t == 1, -_expit(-x), _expit(x) - t), -x)),
    Entry("bce_with_logits_pos_weight", lambda lib, x, t: _f(lib).binary_cross_entropy_with_logits(
        x, t, reduction="none", pos_weight=lib.ones_like(x) * 3), with_targets(unary(), [0.0, 1.0, 0.5]),
        diff=(0, 1), exact=lambda x, t: (2 * t + 1) * np.logaddexp(0, x) - np.where(t == 0, 0.0, 3 * t * x),
        exact_grad=lambda x, t: (np.where(t == 1, -3 * _expit(-x), (2 * t + 1) * _expit(x) - 3 * t),
                                -x + 2 * np.logaddexp(0, -x))),
    Entry("bce_with_logits_mean", lambda lib, x, t: _f(lib).binary_cross_entropy_with_logits(x, t),
          on([[0.0, 0.0, 0.0], [0.0, 1.0, 1.0]])),
    Entry("binary_cross_entropy", lambda lib, x, t: _f(lib).binary_cross_entropy(x, t, reduction="none"),
          with_targets(unit_interval, [0.0, 1.0, 0.5]), diff=(0, 1), ops=("binary_cross_entropy",),
          rtol={"float64": 1e-8}),  # torch's float64 gradient clamps at float32(1e-12)
    Entry("kl_div", lambda lib, x, t: _f(lib).kl_div(x, t, reduction="none"),
          with_targets(unary(), [0.0, 0.5, 1.0]), diff=(0, 1),
          finite_where_torch_nan="gradient in the target at target 0: torch 0 / 0 (xlogy), ember the limit"),
    Entry("kl_div_log_target", lambda lib, x, t: _f(lib).kl_div(x, t, reduction="none", log_target=True),
          with_targets(unary(), [0.0, -np.inf, -1.0]), diff=(0, 1)),
    Entry("poisson_nll_loss", lambda lib, x, t: _f(lib).poisson_nll_loss(x, t, reduction="none"),
          with_targets(unary(), [0.0, 2.0]), diff=(0, 1)),
    Entry("poisson_nll_loss_rate", lambda lib, x, t: _f(lib).poisson_nll_loss(x, t, log_input=False,
                                                                             reduction="none"),
          with_targets(unary(), [0.0, 2.0]), diff=(0, 1)),
    Entry("soft_margin_loss", lambda lib, x, t: _f(lib).soft_margin_loss(x, t, reduction="none"),
          with_targets(unary(), [1.0, -1.0]),
          finite_where_torch_nan="gradient for -y x > 88 (float32): torch exp overflows to inf / inf",
          exact=lambda x, t: np.logaddexp(0, -t * x)),
    Entry("hinge_embedding_loss", lambda lib, x, t: _f(lib).hinge_embedding_loss(x, t, reduction="none"),
          with_targets(unary(), [1.0, -1.0])),
    Entry("margin_ranking_loss", lambda lib, x, y: _f(lib).margin_ranking_loss(x, y, lib.ones_like(x),
                                                                               reduction="none"),
          binary, diff=(0, 1)),
]

NOT_IN_TABLE = {
    # Ops with no PyTorch counterpart to compare against, or whose values carry no special points.
    "grad_mask": "internal backward helper of relu/clamp (masked multiply); checked through their gradients",
    "host_pow": "optimizers' 0-d factors with the C library's pow (ember/ops/host_pow.py); torch computes them in "
                "Python floats, compared in tests/optim/test_optimizer_trajectories_bitwise.py",
    "relu_grad": "internal backward helper of relu; checked through relu's gradient",
    "zero_grad_join": "internal: a value with torch's zero gradient (frexp, nextafter, fill, norm p=0, trunc division); "
                      "special points in tests/trust/test_trust_zero_gradients_vs_torch.py",
    "scaled_grad_join": "internal: a value with torch's scaled gradient (frexp's mantissa, nextafter); special points in "
                        "tests/trust/test_trust_zero_gradients_vs_torch.py",
    "sum_to": "internal unbroadcast of gradients; checked through every broadcasting binary op's gradient",
    "matmul_t": "internal transposed matmul for backward; checked through matmul/linear gradients",
    "index_backward": "internal backward of indexing; checked through gather/getitem gradients",
    "conv2d_input_grad": "backward of conv2d; checked through conv2d's gradient",
    "conv2d_weight_grad": "backward of conv2d; checked through conv2d's gradient",
    "layer_norm_backward": "backward of layer_norm; checked through layer_norm's gradient",
    "gelu_backward": "backward of gelu; checked through gelu's gradient",
    "softmax_backward": "backward of softmax; checked through softmax's gradient and tests/nn/test_softmax_native.py",
    "log_softmax_backward": "backward of log_softmax; checked through log_softmax's gradient and "
                            "tests/nn/test_softmax_native.py",
    "scaled_dot_product_attention": "special points (inf/NaN inputs, saturated softmax) in tests/nn/test_attention_record.py",
    "scaled_dot_product_attention_backward": "backward of attention; checked through its gradient there",
    "batch_norm_backward": "backward of batch_norm; checked through batch_norm's gradient",
    "max_pool2d_backward": "backward of max_pool2d; checked through max_pool2d's gradient",
    "avg_pool2d_backward": "backward of avg_pool2d; checked through avg_pool2d's gradient",
    "copy_slices": "in-place-on-view bookkeeping; no arithmetic",
    "view_replay": "in-place-on-view bookkeeping; no arithmetic",
    "assign": "graph state update; no arithmetic",
    "group": "graph control node; no values",
    "send": "distributed transfer; no arithmetic",
    "recv": "distributed transfer; no arithmetic",
    "to_device": "device transfer; no arithmetic",
    "random_uniform": "random sampling: no deterministic values to compare",
    "random_normal": "random sampling: no deterministic values to compare",
    "random_bernoulli": "random sampling: no deterministic values to compare",
    "random_integers": "random sampling: no deterministic values to compare",
    "random_permutation": "random sampling: no deterministic values to compare",
    "random_multinomial": "random sampling: no deterministic values to compare",
    "bitwise_not": "integer-only op: no floating special points",
    "bitwise_and": "integer-only op: no floating special points",
    "bitwise_or": "integer-only op: no floating special points",
    "bitwise_xor": "integer-only op: no floating special points",
    "reshape": "pure data movement (no arithmetic): nan/inf pass through bit for bit",
    "stack": "pure data movement (no arithmetic): nan/inf pass through bit for bit",
    "permute": "pure data movement (no arithmetic): nan/inf pass through bit for bit",
    "expand": "pure data movement (no arithmetic): nan/inf pass through bit for bit",
    "contiguous": "pure data movement (no arithmetic): nan/inf pass through bit for bit",
    "clone": "pure data movement (no arithmetic): nan/inf pass through bit for bit",
    "diagonal": "pure data movement (no arithmetic): nan/inf pass through bit for bit",
    "unfold": "pure data movement (a strided view): nan/inf pass through bit for bit",
    "as_strided": "pure data movement (a strided view of the storage): nan/inf pass through bit for bit",
    "getitem": "pure data movement (no arithmetic): nan/inf pass through bit for bit",
    "triu": "the same code path as tril (in the table)",
    "index_put": "pure data movement (no arithmetic): nan/inf pass through bit for bit",
    "scatter_add": "addition into a buffer; the special points of add are in the table",
    "unique": "nan handling in unique differs between torch versions; no gradient",
    "searchsorted": "integer results on sorted inputs; no gradient",
}
NOT_IN_TABLE.update({name: "fused recurrent layers: special inputs (+-inf, NaN, +-1e30, 0) through nn.LSTM/GRU/RNN "
                           "vs torch in tests/nn/test_rnn_layers_fused_vs_torch.py"
                     for name in ("lstm_layer", "lstm_layer_backward", "gru_layer", "gru_layer_backward", "rnn_layer",
                                  "rnn_layer_backward")})
# The linear-algebra records' special inputs (singular, zero, identity, rank-deficient, inf, empty) are
# matrices, not elementwise points: tests/torch_surface/linalg_cases.py (SPECIAL) compares them with torch.
NOT_IN_TABLE.update({name: "torch.special's functions: special points vs torch in tests/ops/test_special_points_surface_vs_torch.py "
                           "and tests/ops/test_special_functions_vs_scipy.py"
                     for name in ("airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "chebyshev_polynomial_t",
                                  "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w", "digamma",
                                  "entr", "hermite_polynomial_h", "hermite_polynomial_he", "i0", "i0e", "i1", "i1e",
                                  "igamma", "igammac", "laguerre_polynomial_l", "legendre_polynomial_p", "lgamma",
                                  "log_ndtr", "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0",
                                  "modified_bessel_k1", "ndtr", "ndtri", "polygamma", "scaled_modified_bessel_k0",
                                  "scaled_modified_bessel_k1", "shifted_chebyshev_polynomial_t",
                                  "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
                                  "shifted_chebyshev_polynomial_w", "spherical_bessel_j0", "xlog1py", "zeta")})
NOT_IN_TABLE.update({name: "matrix special inputs are compared in tests/torch_surface/linalg_cases.py (SPECIAL)"
                     for name in ("linalg_svd", "linalg_eigh", "linalg_qr", "linalg_lu_factor", "lu_permutation",
                                  "linalg_cholesky", "geqrf", "linalg_inv", "linalg_det", "linalg_slogdet",
                                  "linalg_solve", "linalg_solve_triangular", "linalg_pinv", "linalg_matrix_exp")})


NOT_IN_TABLE.update({name: "complex special points (every pair of 0, -0, 1.5, -2, +-inf, NaN, 1e30 as real and "
                           "imaginary parts) are compared in tests/ops/test_complex_vs_torch.py"
                     for name in ("conj", "real", "imag", "angle", "complex", "polar", "view_as_real", "view_as_complex",
                                  "linalg_eig", "linalg_slogdet_complex")})
NOT_IN_TABLE.update({name: "inf/NaN inputs of the transforms are compared in tests/ops/test_fft_vs_torch.py"
                     for name in ("fft_c2c", "fft_r2c", "fft_c2r")})
NOT_IN_TABLE.update({name: "sparse products at 0, inf and NaN (a stored 0 times inf is NaN, an unstored entry adds "
                           "nothing) are compared with torch in tests/sparse/test_sparse_coo_vs_torch.py"
                     for name in ("sparse_coo_mm", "sparse_sddmm")})


def _covered() -> set:
    return {op for e in ENTRIES for op in e.ops}


def test_every_registered_op_has_special_points_or_a_reason() -> None:
    missing = sorted(set(OPS) - _covered() - set(NOT_IN_TABLE))
    assert not missing, f"ops without a special-points entry (add one to ENTRIES or a reason to NOT_IN_TABLE): {missing}"


def test_entries_exercise_the_ops_they_claim() -> None:
    """Each entry's ``ops`` really run (forward or backward) when the entry runs: the coverage above counts
    only what is compared. Every op's impl is wrapped for the duration of this test."""
    hits: set = set()
    originals = {name: op.impl for name, op in list(OPS.items())}

    def wrapped(name: str, impl: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            hits.add(name)
            return impl(*args, **kwargs)
        return run

    failures = []
    try:
        for name, op in OPS.items():
            op.impl = wrapped(name, originals[name])
        for entry in ENTRIES:
            hits.clear()
            for dtype in entry.dtypes:
                with np.errstate(all="ignore"):
                    _run(ember, entry, entry.inputs(dtype))
            if not set(entry.ops) <= hits:
                failures.append(f"{entry.name}: claims {sorted(entry.ops)}, ran {sorted(hits)}")
    finally:
        for name, op in OPS.items():
            op.impl = originals[name]
    assert not failures, "\n".join(failures)


# ---- the comparison -----------------------------------------------------------------------------------
def _input_at(a: np.ndarray, key: tuple, shape: tuple) -> str:
    """The input value (elementwise) or row (reductions) behind a result position, for messages."""
    try:
        if a.shape == shape:
            return repr(float(a[key]))
        return "row " + np.array2string(a[key[:a.ndim - 1]], precision=3)
    except IndexError:
        return "-"


def _agree(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """Elementwise: both NaN, the same infinity, or finite and within atol + rtol * |want|."""
    with np.errstate(all="ignore"):
        close = np.abs(got - want) <= atol + rtol * np.abs(want)
    both_nan = np.isnan(got) & np.isnan(want)
    same_inf = np.isinf(want) & (got == want)
    return both_nan | same_inf | (np.isfinite(want) & close)


def assert_same(what: str, got: np.ndarray, want: np.ndarray, exact: np.ndarray | None, dtype: str, inputs: list,
                rtol: float, atol: float, skip: np.ndarray | None = None, finite_ok: bool = False) -> None:
    """NaN at the same places, the same infinities, finite values within ``atol + rtol * |torch|``.

    ``exact`` is torch's result in float64 on the same (float32) inputs: a float32 value also passes when
    it is at least as close to that as torch's own float32 value is (e.g. gelu(-3), where torch's float32
    erf loses digits). ``skip`` masks positions not compared (gradients where the value is NaN).
    """
    assert got.shape == want.shape, f"{what}: shape {got.shape} != torch's {want.shape}"
    if want.dtype.kind == "b" or want.dtype.kind in "iu":
        bad = got != want
    else:
        got, want = got.astype(np.float64), want.astype(np.float64)
        atol = float(np.finfo(dtype).tiny) + atol
        bad = ~_agree(got, want, rtol, atol)
        if exact is not None:
            exact = np.broadcast_to(np.asarray(exact, dtype=np.float64), got.shape)
            with np.errstate(all="ignore"):
                closer = np.abs(got - exact) <= np.abs(want - exact) + atol + rtol * np.abs(exact)
            bad &= ~(_agree(got, exact, rtol, atol) | (np.isfinite(got) & closer))
    if skip is not None:
        bad &= ~skip
    if finite_ok:
        bad &= ~(np.isnan(want) & ~np.isnan(got))
    if bad.any():
        idx = np.argwhere(bad) if bad.ndim else np.zeros((1, 0), dtype=int)
        lines = []
        for i in idx[:8]:
            key = tuple(int(k) for k in i)
            ins = ", ".join(_input_at(a, key, got.shape) for a in inputs)
            lines.append(f"{key}: ember {got[key]!r} torch {want[key]!r}   inputs: {ins}")
        details = "\n  ".join(lines)
        raise AssertionError(f"{what} differs from torch at {int(bad.sum())} of {bad.size} positions:\n  {details}")


def _grad_weights(shape: tuple) -> np.ndarray:
    """Upstream gradient 1, 1.25, 1.5, ... (exact in binary): not all ones, so that the analytic zeros of
    e.g. softmax's gradient against a uniform upstream do not turn the check into comparing rounding noise."""
    return (1.0 + 0.25 * (np.arange(int(np.prod(shape))) % 3)).reshape(shape)


def _run(lib: Any, entry: Entry, arrays: list) -> tuple:
    if lib is torch:
        tensors = [torch.from_numpy(a.copy()) for a in arrays]
    else:
        tensors = [ember.tensor(a.copy()) for a in arrays]
    if entry.grad:
        for i in entry.diff:
            tensors[i].requires_grad_(True)
    out = entry.fn(lib, *tensors)
    out_np = np.asarray(out.detach().numpy())
    grads = []
    if entry.grad and out.requires_grad:
        weights = _grad_weights(tuple(out.shape)).astype(out_np.dtype)
        out.backward(torch.from_numpy(weights) if lib is torch else ember.tensor(weights))
        for i in entry.diff:
            g = tensors[i].grad
            if g is not None and lib is torch and g._is_zerotensor():  # torch's symbolic zero gradient
                g = torch.zeros(g.shape, dtype=g.dtype)
            grads.append(None if g is None else np.asarray(g.numpy()))
    return out_np, grads


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_special_points(entry: Entry, dtype: str) -> None:
    if dtype not in entry.dtypes:
        pytest.skip(f"{entry.name} not compared in {dtype}")
    if entry.xfail:
        pytest.xfail(entry.xfail)
    compare_with_torch(entry, dtype)


def compare_with_torch(entry: Entry, dtype: str) -> None:
    """Run ``entry`` with torch and ember in ``dtype`` and compare values and gradients (see the module doc)."""
    arrays = entry.inputs(dtype)
    with np.errstate(all="ignore"):
        want, want_grads = _run(torch, entry, arrays)
        got, got_grads = _run(ember, entry, arrays)
        exact, exact_grads = (None, [None] * len(want_grads))
        if dtype == "float32":
            exact, exact_grads = _run(torch, entry, [a.astype(np.float64) for a in arrays])
        if entry.exact is not None:
            exact = np.asarray(entry.exact(*[a.astype(np.float64) for a in arrays]))
        if entry.exact_grad is not None:
            derivatives = entry.exact_grad(*[a.astype(np.float64) for a in arrays])
            exact_grads = [np.asarray(d) * _grad_weights(np.shape(d)) for d in derivatives]
        known = None
        if entry.known is not None:
            known = np.asarray(entry.known[1](*[a.astype(np.float64) for a in arrays]))
    rtol = entry.rtol.get(dtype, RTOL[dtype])
    atol = entry.atol.get(dtype, 0.0)
    finite_ok = bool(entry.finite_where_torch_nan)
    value_known = known if known is not None and known.shape == got.shape else None
    assert_same(f"{entry.name}({dtype}) value", got, want, exact, dtype, arrays, rtol, atol, value_known, finite_ok)
    assert len(got_grads) == len(want_grads), f"{entry.name}: ember computed {len(got_grads)} gradients"
    for i, (g, w, e) in enumerate(zip(got_grads, want_grads, exact_grads)):
        if w is None:
            continue
        assert g is not None, f"{entry.name}({dtype}): no gradient for input {entry.diff[i]}"
        # Where the value is NaN (NaN or out-of-domain inputs of elementwise ops), the gradient carries no
        # information and each framework's is an artefact of its kernel's comparison order: not compared.
        skip = None
        if want.dtype.kind == "f" and want.shape == w.shape and entry.scan:
            skip = np.flip(np.logical_or.accumulate(np.flip(np.isnan(want), -1), axis=-1), -1)
        elif want.dtype.kind == "f" and want.shape == w.shape:
            skip = np.isnan(want)
        elif want.dtype.kind == "f" and want.shape == w.shape[:-1]:  # a reduction over the last dim
            skip = np.broadcast_to(np.isnan(want)[..., None], w.shape)
        if known is not None and known.shape == w.shape:
            skip = known if skip is None else (skip | known)
        assert_same(f"{entry.name}({dtype}) gradient of input {entry.diff[i]}", g, w, e, dtype, arrays, rtol, atol,
                    skip, finite_ok)


# ---- the issue's own examples, spelled out ----------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_cumsum_accumulates_like_torch(dtype: str) -> None:
    """20,000 x 0.1 in a 16-bit float: PyTorch accumulates in float32 and ends at 2000 (a float16 running
    sum would stall at 256). Every prefix must equal torch's bit for bit."""
    got = ember.full((20000,), 0.1, dtype=getattr(ember, dtype)).cumsum(0).float().numpy()
    want = torch.full((20000,), 0.1, dtype=getattr(torch, dtype)).cumsum(0).float().numpy()
    assert got[-1] == 2000.0
    np.testing.assert_array_equal(got, want)


def test_zero_initialized_classifier_gets_torch_bias_gradient() -> None:
    """A zero-initialized Linear + BCEWithLogitsLoss: the bias gradient is mean(sigmoid(0) - t) = 0 for
    balanced targets (it was 0.5 when the loss's gradient at logit 0 came from abs/relu subgradients)."""
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    t = np.array([[0.0], [1.0], [0.0], [1.0]], dtype=np.float32)
    grads = []
    for lib in (ember, torch):
        model = lib.nn.Linear(3, 1)
        with lib.no_grad():
            model.weight.zero_()
            model.bias.zero_()
        loss = lib.nn.BCEWithLogitsLoss()(model(lib.tensor(x)), lib.tensor(t))
        loss.backward()
        grads.append(np.asarray(model.bias.grad.numpy()))
    np.testing.assert_allclose(grads[0], grads[1], atol=1e-7)
    assert abs(float(grads[0][0])) < 1e-7


def test_norm_of_zero_vector_has_zero_gradient() -> None:
    x = ember.zeros(3, requires_grad=True)
    x.norm().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


def test_sigmoid_keeps_its_float32_tail() -> None:
    assert float(ember.sigmoid(ember.tensor(-20.0))) == pytest.approx(float(torch.sigmoid(torch.tensor(-20.0))), rel=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_prod_gradient_at_infinities_without_zeros(dtype: str) -> None:
    """Without a zero anywhere in the tensor, torch's prod backward is ``result / x``: inf / inf = NaN at
    an infinite element. ember gives the product of the other elements there (what torch gives as soon
    as the tensor holds a zero, and the limit); everywhere else both agree."""
    (x,) = no_zero_inf_rows(dtype)
    with np.errstate(all="ignore"):
        want = np.array([[np.prod(np.delete(row.astype(np.float64), i)) for i in range(row.size)] for row in x])
        want = want.astype(dtype)  # the product of the others, rounded once (these products are exact)
    e = ember.tensor(x, requires_grad=True)
    e.prod(-1).sum().backward()
    np.testing.assert_array_equal(e.grad.numpy(), want)
    t = torch.from_numpy(x.copy()).requires_grad_(True)
    t.prod(-1).sum().backward()
    torch_nan = np.isnan(t.grad.numpy())
    assert torch_nan.any() and (torch_nan == (np.isinf(x) & ~np.isnan(want))).all()
    np.testing.assert_array_equal(e.grad.numpy()[~torch_nan], t.grad.numpy()[~torch_nan])
