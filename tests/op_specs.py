"""The op-spec table behind tests/ops/test_ops_generated.py: one entry per op record (or public composite).

Each :class:`OpSpec` says how to call the op on ember tensors (``fn``), what NumPy computes for the
same inputs (``ref``, always evaluated in float64 or the input's own integer dtype), which input
shapes to try and from which domain to draw values. The harness checks forward, gradients against
finite differences of ``ref`` (so the reference is independent of ember) and second order.

Example:
    OpSpec("exp", ("exp",), ember.exp, np.exp, UNARY_SHAPES)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

import ember
from ember.ops import dispatch, host_pow as _host_pow  # noqa: F401  (registers the record)
from ember.ops.registry import OPS
import ember.ops.gru_rnn_layer  # noqa: F401  (the fused recurrent layers' specs call them by their modules:
import ember.ops.lstm_layer  # noqa: F401  no torch form)

from scipy.special import erf as _np_erf  # scipy is a test extra (references only; no np.vectorize fallback)


@dataclass
class OpSpec:
    name: str                        # test id
    ops: tuple                       # registry op names this spec exercises
    fn: Callable[..., Any]           # ember callable on tensors
    ref: Callable[..., Any]          # NumPy reference on arrays
    shapes: Sequence[tuple]          # each case: one shape per input
    domain: Any = "real"             # str, or one str per input (see sample())
    float_dtypes: tuple = ("float32", "float64")
    int_dtypes: tuple = ()           # forward-only integer/bool dtypes
    int_out: str | None = None       # expected result dtype for integer inputs: name, 'same' or None
    complex_dtypes: tuple = ()       # complex dtypes run too (forward, gradients with PyTorch's convention, axes)
    complex_out: str | None = "same"  # result dtype for complex inputs: "same", "real" (abs, angle), a name, None
    float_out: str = "same"          # expected result dtype for float inputs: 'same', 'bool', 'int64'
    grad: bool = True
    gradgrad: bool = True
    diff: tuple | None = None        # positions of differentiable inputs (default: all float inputs)
    fixed: dict = field(default_factory=dict)  # position -> callable(rng, shapes) making a non-float input
    low_precision: bool = True       # also check float16 / bfloat16 forward at loose tolerance
    eps: float = 1e-6
    atol: float = 1e-5
    rtol: float = 1e-4


def sample(rng: np.random.Generator, shape: tuple, domain: str, np_dtype: Any) -> np.ndarray:
    """Draw test values from a domain where the op is smooth (away from kinks and poles)."""
    kind = np.dtype(np_dtype).kind
    if kind == "c":  # the real part from the domain, an imaginary part in [-0.5, 0.5] (off the branch cuts)
        real_dtype = np.float32 if np.dtype(np_dtype) == np.complex64 else np.float64
        re = sample(rng, shape, domain, real_dtype)
        im = rng.uniform(-0.5, 0.5, shape).astype(real_dtype) if domain != "special" else \
            rng.choice([np.nan, np.inf, -np.inf, 0.0, 1.5], size=shape).astype(real_dtype)
        return (re + 1j * im).astype(np_dtype)
    if kind == "b":
        return rng.random(shape) < 0.5
    if kind in "iu":
        n = int(np.prod(shape))
        if domain == "distinct" and 0 < n <= 100:  # no ties: torch orders ties as its sort algorithms leave them
            return (rng.permutation(n) - (0 if kind == "u" else n // 2)).reshape(shape).astype(np_dtype)
        low = 1 if domain in ("positive", "nonzero") else (0 if kind == "u" else -5)
        values = rng.integers(low, 6, size=shape)
        if domain == "nonzero" and kind == "i":
            values = values * rng.choice([-1, 1], size=shape)
        return values.astype(np_dtype)
    if domain == "real":
        values = rng.standard_normal(shape)
    elif domain == "positive":
        values = rng.uniform(0.5, 2.0, shape)
    elif domain in ("nonzero", "away0"):
        values = rng.uniform(0.3, 2.0, shape) * rng.choice([-1.0, 1.0], size=shape)
    elif domain == "unit":
        values = rng.uniform(-0.9, 0.9, shape)
    elif domain == "distinct":  # well separated values: no ties for max/min/sort-like ops
        n = int(np.prod(shape))
        values = (rng.permutation(n) * 0.5 - n * 0.25 + rng.uniform(-0.05, 0.05, n)).reshape(shape)
    elif domain == "smallint":  # values with many ties, for comparisons
        values = rng.integers(-2, 3, size=shape).astype(np.float64)
    elif domain == "special":  # nan / inf / finite mix, for isnan & co.
        values = rng.choice([np.nan, np.inf, -np.inf, 0.0, 1.5, -2.0], size=shape)
    else:
        raise ValueError(domain)
    return np.asarray(values, dtype=np_dtype)


# ---- shapes ---------------------------------------------------------------------------------------
UNARY_SHAPES = [((),), ((3,),), ((2, 3),), ((0,),), ((2, 0, 3),)]
BINARY_SHAPES = [
    ((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 3)), ((3,), ()), ((), ()),
    ((0, 3), (3,)), ((2, 1, 3), (4, 1)),
]
REDUCE_SHAPES = [((2, 3, 4),), ((3,),), ((),)]


def _index(rng: np.random.Generator, shapes: tuple) -> np.ndarray:  # noqa: ARG001
    return np.array([2, 0, 2, 1], dtype=np.int64)


def _mask(rng: np.random.Generator, shapes: tuple) -> np.ndarray:
    return np.array([[True, False, True], [False, False, True]])


def _gather_index(rng: np.random.Generator, shapes: tuple) -> np.ndarray:
    return rng.integers(0, 3, size=(2, 4)).astype(np.int64)


def _bool_cond(rng: np.random.Generator, shapes: tuple) -> np.ndarray:
    return rng.random(shapes[0]) < 0.5


def _cast(dtype: Any) -> Callable:
    return lambda x: x.to(dtype)


def _setitem(index: Any) -> Callable:
    def fn(x: Any, v: Any) -> Any:
        y = x * 1.0  # a non-leaf: in-place writes into it are recorded
        y[index] = v
        return y

    return fn


def _setitem_ref(index: Any) -> Callable:
    def ref(x: np.ndarray, v: np.ndarray) -> np.ndarray:
        y = x.copy()
        y[index] = v
        return y

    return ref


def _scatter_add_ref(x: np.ndarray, index: np.ndarray, src: np.ndarray) -> np.ndarray:
    out = x.copy()
    for i in range(index.shape[0]):
        for j in range(index.shape[1]):
            out[i, index[i, j]] += src[i, j]
    return out


def _pad(pad: tuple, value: float = 0.0) -> Callable:
    return lambda x: dispatch.apply(OPS["pad"], (x,), {"pad": pad, "value": value})


def _logsumexp_ref(a: np.ndarray, axis: Any, keepdims: bool = False) -> np.ndarray:
    m = np.max(a, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def _norm_ref(p: Any, axis: Any = None) -> Callable:
    def ref(a: np.ndarray) -> np.ndarray:
        if p == float("inf"):
            return np.max(np.abs(a), axis=axis)
        return np.sum(np.abs(a) ** p, axis=axis) ** (1.0 / p)

    return ref


def _sigmoid_ref(a: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-a))


def _max_dim_ref(fn: str, dim: int, keepdim: bool = False) -> Callable:
    def ref(a: np.ndarray) -> tuple:
        idx = getattr(np, "arg" + fn)(a, axis=dim)
        values = np.take_along_axis(a, np.expand_dims(idx, dim), axis=dim)
        return (values if keepdim else np.squeeze(values, dim)), (np.expand_dims(idx, dim) if keepdim else idx)

    return ref


def _fmod_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.fmod(a, b)


# ---- the table ------------------------------------------------------------------------------------
INT = ("int32", "int64")
INTB = ("bool", "uint8", "int32", "int64")

SPECS: list[OpSpec] = [
    # unary math
    OpSpec("neg", ("neg",), ember.neg, np.negative, UNARY_SHAPES, int_dtypes=INT, int_out="same"),
    OpSpec("exp", ("exp",), ember.exp, np.exp, UNARY_SHAPES, int_dtypes=INT, int_out="float32"),
    OpSpec("log", ("log",), ember.log, np.log, UNARY_SHAPES, domain="positive", int_dtypes=INT,
           int_out="float32"),
    OpSpec("log1p", ("log1p",), ember.log1p, np.log1p, UNARY_SHAPES, domain="positive"),
    OpSpec("sqrt", ("sqrt",), ember.sqrt, np.sqrt, UNARY_SHAPES, domain="positive", int_dtypes=INT,
           int_out="float32"),
    OpSpec("rsqrt", ("rsqrt",), ember.rsqrt, lambda a: 1 / np.sqrt(a), UNARY_SHAPES, domain="positive"),
    OpSpec("sin", ("sin",), ember.sin, np.sin, UNARY_SHAPES, int_dtypes=INT, int_out="float32"),
    OpSpec("cos", ("cos",), ember.cos, np.cos, UNARY_SHAPES),
    OpSpec("tanh", ("tanh",), ember.tanh, np.tanh, UNARY_SHAPES),
    OpSpec("sigmoid", ("sigmoid",), ember.sigmoid, _sigmoid_ref, UNARY_SHAPES, int_dtypes=INT,
           int_out="float32"),
    OpSpec("relu", ("relu",), ember.relu, lambda a: np.maximum(a, 0), UNARY_SHAPES, domain="away0",
           int_dtypes=INT, int_out="same"),
    OpSpec("abs", ("abs",), ember.abs, np.abs, UNARY_SHAPES, domain="away0", int_dtypes=INT, int_out="same"),
    OpSpec("reciprocal", ("reciprocal",), ember.reciprocal, lambda a: 1 / a, UNARY_SHAPES, domain="nonzero",
           int_dtypes=INT, int_out="float32"),
    OpSpec("erf", ("erf",), ember.erf, _np_erf, UNARY_SHAPES),
    OpSpec("sign", ("sign",), ember.sign, np.sign, UNARY_SHAPES, domain="away0", int_dtypes=INT, int_out="same"),
    OpSpec("floor", ("floor",), ember.floor, np.floor, UNARY_SHAPES, int_dtypes=INT, int_out="same"),
    OpSpec("ceil", ("ceil",), ember.ceil, np.ceil, UNARY_SHAPES),
    OpSpec("round", ("round",), ember.round, np.round, UNARY_SHAPES),
    OpSpec("round_decimals", ("round",), lambda x: ember.round(x * 10, decimals=1),
           lambda a: np.round(a * 10, 1), UNARY_SHAPES, low_precision=False),
    OpSpec("logical_not", ("logical_not",), ember.logical_not, np.logical_not, UNARY_SHAPES, grad=False,
           int_dtypes=INTB, int_out="bool", float_out="bool"),
    OpSpec("isnan", ("isnan",), ember.isnan, np.isnan, UNARY_SHAPES, domain="special", grad=False,
           float_out="bool"),
    OpSpec("isinf", ("isinf",), ember.isinf, np.isinf, UNARY_SHAPES, domain="special", grad=False,
           float_out="bool"),
    OpSpec("isfinite", (), ember.isfinite, np.isfinite, UNARY_SHAPES, domain="special", grad=False,
           float_out="bool"),
    OpSpec("bitwise_not", ("bitwise_not",), ember.bitwise_not, np.invert, UNARY_SHAPES, float_dtypes=(),
           grad=False, int_dtypes=INTB, int_out="same"),
    # binary arithmetic
    OpSpec("add", ("add",), ember.add, np.add, BINARY_SHAPES, int_dtypes=INTB[1:], int_out="same"),
    OpSpec("add_alpha", ("fma",), lambda a, b: ember.add(a, b, alpha=2), lambda a, b: a + 2 * b, BINARY_SHAPES),
    OpSpec("fma", ("fma",), lambda a, b, c: ember.addcmul(c, a, b), lambda a, b, c: a * b + c,
           [((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), (2, 1)), ((), (), ())]),
    OpSpec("host_pow", ("host_pow",), lambda a, b: dispatch.apply(OPS["host_pow"], (a, b)), np.power, [((3,), (3,)), ((), ())],
           domain=("positive", "real"), float_dtypes=("float64",), grad=False, gradgrad=False, low_precision=False),
    OpSpec("add_scalar", ("add",), lambda a: a + 2.5, lambda a: a + 2.5, UNARY_SHAPES),
    OpSpec("sub", ("sub",), ember.sub, np.subtract, BINARY_SHAPES, int_dtypes=INT, int_out="same"),
    OpSpec("rsub_scalar", ("sub",), lambda a: 3 - a, lambda a: 3 - a, UNARY_SHAPES, int_dtypes=INT,
           int_out="same"),
    OpSpec("mul", ("mul",), ember.mul, np.multiply, BINARY_SHAPES, int_dtypes=INTB[1:], int_out="same"),
    OpSpec("mul_scalar", ("mul",), lambda a: a * -1.5, lambda a: a * -1.5, UNARY_SHAPES),
    OpSpec("div", ("div",), ember.div, np.true_divide, BINARY_SHAPES, domain=("real", "nonzero"),
           int_dtypes=INT, int_out="float32"),
    OpSpec("rdiv_scalar", ("div",), lambda a: 2 / a, lambda a: 2 / a, UNARY_SHAPES, domain="nonzero"),
    OpSpec("pow", ("pow",), ember.pow, np.power, BINARY_SHAPES, domain=("positive", "real")),
    OpSpec("pow_scalar", ("pow",), lambda a: a ** 3, lambda a: a ** 3, UNARY_SHAPES, int_dtypes=INT,
           int_out="same"),
    OpSpec("pow_square", ("pow",), lambda a: a ** 2, lambda a: a ** 2, UNARY_SHAPES),
    OpSpec("pow_frac", ("pow",), lambda a: a ** 0.5, np.sqrt, UNARY_SHAPES, domain="positive"),
    OpSpec("rpow_scalar", ("pow",), lambda a: 2.0 ** a, lambda a: 2.0 ** a, UNARY_SHAPES),
    OpSpec("maximum", ("maximum",), ember.maximum, np.maximum, BINARY_SHAPES[:4], domain="distinct",
           int_dtypes=INT, int_out="same"),
    OpSpec("minimum", ("minimum",), ember.minimum, np.minimum, BINARY_SHAPES[:4], domain="distinct"),
    OpSpec("floor_divide", ("floor_divide",), ember.floor_divide, np.floor_divide, BINARY_SHAPES,
           domain=("real", "nonzero"), grad=False, int_dtypes=INT, int_out="same"),
    OpSpec("remainder", ("remainder",), ember.remainder, np.remainder, BINARY_SHAPES,
           domain=("real", "nonzero"), int_dtypes=INT, int_out="same"),
    OpSpec("fmod", ("fmod",), ember.fmod, _fmod_ref, BINARY_SHAPES, domain=("real", "nonzero"), int_dtypes=INT,
           int_out="same"),
]

for _name, _np in [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                   ("gt", np.greater), ("ge", np.greater_equal)]:
    SPECS.append(OpSpec(_name, (_name,), getattr(ember, _name), _np, BINARY_SHAPES, domain="smallint", grad=False,
                        int_dtypes=INTB, int_out="bool", float_out="bool"))
for _name in ("logical_and", "logical_or", "logical_xor"):
    SPECS.append(OpSpec(_name, (_name,), getattr(ember, _name), getattr(np, _name), BINARY_SHAPES,
                        domain="smallint", grad=False, int_dtypes=INTB, int_out="bool", float_out="bool"))
for _name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    SPECS.append(OpSpec(_name, (_name,), getattr(ember, _name), getattr(np, _name), BINARY_SHAPES,
                        float_dtypes=(), grad=False, int_dtypes=INTB, int_out="same"))

SPECS += [
    # where / clamp / casts
    OpSpec("where", ("where",), ember.where, np.where,
           [((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), (2, 1)), ((), (), ()), ((0, 3), (3,), ())],
           fixed={0: _bool_cond}, int_dtypes=INT, int_out="same"),
    OpSpec("grad_mask", ("grad_mask",), lambda g, m: ember.ops.elementwise.grad_mask(g, m),
           lambda g, m: g * m, [((3, 4), (3, 4)), ((2, 3), (3,)), ((), ())], diff=(0,),
           fixed={1: lambda rng, shapes: rng.random(shapes[1]) < 0.5}),
    # internal joins (ember/ops/grad_join.py): the value unchanged; d/dx is 0 (zero join) or a scale no finite
    # difference sees (the scaled join's own check: tests/trust/test_trust_zero_gradients_vs_torch.py)
    OpSpec("zero_grad_join", ("zero_grad_join",), lambda v, x: ember.ops.grad_join.dispatch.apply(
        ember.ops.grad_join.ZERO_GRAD_JOIN, (v, x)), lambda v, x: v, [((3, 4), (3, 4)), ((2, 3), (3,)), ((), ())],
        low_precision=False),
    OpSpec("scaled_grad_join", ("scaled_grad_join",), lambda v, x, s: ember.ops.grad_join.dispatch.apply(
        ember.ops.grad_join.SCALED_GRAD_JOIN, (v, x, s)), lambda v, x, s: v, [((3, 4), (3, 4), (3, 4)), ((), (), ())],
        diff=(0,), low_precision=False),
    OpSpec("relu_grad", ("relu_grad",), lambda g, o: ember.ops.elementwise.relu_grad(g, o),
           lambda g, o: np.where(o > 0, g, 0), [((3, 4), (3, 4)), ((), ()), ((0, 2), (0, 2))], diff=(0,)),
    # leaky_relu / threshold / hardshrink / softshrink: one record (kinks at 0, 0.1, +-0.2: away0 draws |x| >= 0.3)
    OpSpec("leaky_relu", ("piecewise_linear",), lambda x: ember.nn.functional.leaky_relu(x, 0.1),
           lambda a: np.where(a > 0, a, a * 0.1), UNARY_SHAPES, domain="away0"),
    OpSpec("threshold", ("piecewise_linear",), lambda x: ember.nn.functional.threshold(x, 0.1, -2.0),
           lambda a: np.where(a <= 0.1, -2.0, a), UNARY_SHAPES, domain="away0"),
    OpSpec("hardshrink", ("piecewise_linear",), lambda x: ember.nn.functional.hardshrink(x, 0.2),
           lambda a: np.where(np.abs(a) <= 0.2, 0.0, a), UNARY_SHAPES, domain="away0"),
    OpSpec("softshrink", ("piecewise_linear",), lambda x: ember.nn.functional.softshrink(x, 0.2),
           lambda a: a - np.clip(a, -0.2, 0.2), UNARY_SHAPES, domain="away0"),
    OpSpec("where_scalar", ("where",), lambda c, x: ember.where(c, x, 0.5), lambda c, x: np.where(c, x, 0.5),
           [((2, 3), (2, 3)), ((3,), ())], fixed={0: _bool_cond}),
    OpSpec("clamp", ("clamp",), lambda x: ember.clamp(x, -0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5),
           UNARY_SHAPES, domain="away0", int_dtypes=INT, int_out="float32"),  # float bounds promote
    OpSpec("clamp_int_bounds", ("clamp",), lambda x: ember.clamp(x, -1, 2), lambda a: np.clip(a, -1, 2),
           UNARY_SHAPES, int_dtypes=INT, int_out="same"),
    OpSpec("clamp_min", ("clamp",), lambda x: x.clamp(min=0.1), lambda a: np.maximum(a, 0.1), UNARY_SHAPES,
           domain="away0"),
    OpSpec("clamp_max", ("clamp",), lambda x: x.clamp(max=-0.1), lambda a: np.minimum(a, -0.1), UNARY_SHAPES,
           domain="away0"),
    OpSpec("clamp_tensor", ("where",), lambda x, lo: ember.clamp(x, lo, lo + 1.0),
           lambda a, lo: np.minimum(np.maximum(a, lo), lo + 1.0), [((2, 3), (3,))], domain="distinct"),
    OpSpec("to_float32", ("to_dtype",), _cast(ember.float32), lambda a: a.astype(np.float32), UNARY_SHAPES,
           eps=1e-2, atol=1e-4, int_dtypes=INTB, int_out="float32", float_out="float32"),
    OpSpec("to_float64", ("to_dtype",), _cast(ember.float64), lambda a: a.astype(np.float64), UNARY_SHAPES,
           int_dtypes=INTB, int_out="float64", float_out="float64"),
    OpSpec("to_int64", ("to_dtype",), _cast(ember.int64), lambda a: a.astype(np.int64), UNARY_SHAPES,
           grad=False, int_dtypes=INTB, int_out="int64", float_out="int64", low_precision=False),
    # reductions
    OpSpec("sum", ("sum",), ember.sum, np.sum, REDUCE_SHAPES + [((0, 3),)], int_dtypes=INTB, int_out="int64"),
    OpSpec("sum_dim", ("sum",), lambda x: x.sum(1), lambda a: a.sum(1), [((2, 3, 4),), ((2, 0),)],
           int_dtypes=INT, int_out="int64"),
    OpSpec("sum_dims_keepdim", ("sum",), lambda x: x.sum((0, -1), keepdim=True),
           lambda a: a.sum((0, -1), keepdims=True), [((2, 3, 4),)]),
    OpSpec("sum_0d_dim", ("sum",), lambda x: x.sum(0), lambda a: a.sum(), [((),)]),
    OpSpec("sum_to_size", ("sum_to",), lambda x: x.sum_to_size(1, 3), lambda a: a.sum(0, keepdims=True),
           [((4, 3),), ((1, 3),)]),
    OpSpec("mean", ("mean",), ember.mean, np.mean, REDUCE_SHAPES),
    OpSpec("mean_dims", ("mean",), lambda x: x.mean((0, 2)), lambda a: a.mean((0, 2)), [((2, 3, 4),)]),
    OpSpec("mean_keepdim", ("mean",), lambda x: x.mean(-1, keepdim=True), lambda a: a.mean(-1, keepdims=True),
           [((2, 3),), ((3,),)]),
    OpSpec("prod", ("prod",), ember.prod, np.prod, REDUCE_SHAPES, domain="nonzero", int_dtypes=INT,
           int_out="int64"),
    OpSpec("prod_dim", ("prod",), lambda x: x.prod(1), lambda a: a.prod(1), [((2, 3),)], domain="nonzero"),
    OpSpec("prod_with_zero", ("prod",), lambda x: (x * ember.tensor([[1.0, 0.0, 1.0], [1.0, 1.0, 1.0]],
                                                                    dtype=x.dtype, device=x.device)).prod(1),
           lambda a: (a * np.array([[1.0, 0.0, 1.0], [1.0, 1.0, 1.0]])).prod(1), [((2, 3),)],
           domain="nonzero", low_precision=False),
    OpSpec("prod_two_zeros", ("prod",), lambda x: (x * ember.tensor([0.0, 0.0, 1.0], dtype=x.dtype, device=x.device)).prod(),
           lambda a: (a * np.array([0.0, 0.0, 1.0])).prod(), [((3,),)], domain="nonzero", low_precision=False),
    OpSpec("amax", ("amax",), lambda x: ember.amax(x, (0, 2)), lambda a: np.amax(a, (0, 2)), [((2, 3, 4),)],
           domain="distinct", int_dtypes=INT, int_out="same"),
    OpSpec("amax_all", ("amax",), ember.amax, np.amax, REDUCE_SHAPES, domain="distinct"),
    OpSpec("amax_ties", ("amax",), lambda x: (x * 0 + ember.tensor([1.0, 3.0, 3.0], dtype=x.dtype, device=x.device) + x * 0).amax(),
           lambda a: np.float64(3.0) + 0 * a.sum(), [((3,),)], gradgrad=False),
    OpSpec("amin", ("amin",), lambda x: ember.amin(x, 1, keepdim=True), lambda a: np.amin(a, 1, keepdims=True),
           [((2, 3, 4),), ((2, 3),)], domain="distinct"),
    OpSpec("max_all", ("amax",), ember.max, np.max, REDUCE_SHAPES, domain="distinct"),
    OpSpec("min_all", ("amin",), ember.min, np.min, REDUCE_SHAPES, domain="distinct"),
    OpSpec("max_dim", ("max_dim",), lambda x: tuple(ember.max(x, 1)), _max_dim_ref("max", 1), [((2, 3, 4),), ((3, 2),)],
           domain="distinct", int_dtypes=INT, int_out="same"),
    OpSpec("max_dim_keepdim", ("max_dim",), lambda x: tuple(x.max(-1, keepdim=True)),
           _max_dim_ref("max", -1, True), [((2, 3),)], domain="distinct"),
    OpSpec("min_dim", ("min_dim",), lambda x: tuple(ember.min(x, 0)), _max_dim_ref("min", 0), [((3, 2),), ((4,),)],
           domain="distinct"),
    OpSpec("argmax", ("argmax",), lambda x: ember.argmax(x, 1), lambda a: np.argmax(a, 1), [((2, 3, 4),)],
           domain="distinct", grad=False, float_out="int64", int_dtypes=INT, int_out="int64"),
    OpSpec("argmax_all", ("argmax",), ember.argmax, np.argmax, REDUCE_SHAPES, domain="distinct", grad=False,
           float_out="int64"),
    OpSpec("argmin", ("argmin",), lambda x: x.argmin(0, keepdim=True),
           lambda a: np.expand_dims(np.argmin(a, 0), 0), [((3, 4),)], domain="distinct", grad=False,
           float_out="int64"),
    OpSpec("all", ("all",), ember.all, np.all, REDUCE_SHAPES + [((0,),)], domain="smallint", grad=False,
           float_out="bool", int_dtypes=("bool", "int32", "int64"), int_out="bool"),
    OpSpec("any_dim", ("any",), lambda x: x.any(1), lambda a: a.any(1), [((2, 3),), ((2, 0),)],
           domain="smallint", grad=False, float_out="bool", int_dtypes=("bool", "int32", "int64"), int_out="bool"),
    # uint8 in, uint8 out (PyTorch's exception for all/any)
    OpSpec("all_uint8", ("all",), ember.all, lambda a: np.all(a).astype(np.uint8), REDUCE_SHAPES + [((0,),)],
           float_dtypes=(), grad=False, int_dtypes=("uint8",), int_out="uint8"),
    OpSpec("any_dim_uint8", ("any",), lambda x: x.any(1), lambda a: a.any(1).astype(np.uint8), [((2, 3),), ((2, 0),)],
           float_dtypes=(), grad=False, int_dtypes=("uint8",), int_out="uint8"),
    OpSpec("cumsum", ("cumsum",), lambda x: x.cumsum(-1), lambda a: np.cumsum(a, -1), [((2, 3),), ((4,),), ((2, 0),)],
           int_dtypes=INTB, int_out="int64"),
    OpSpec("cumsum_0d", ("cumsum",), lambda x: x.cumsum(0), lambda a: a.reshape(()), [((),)]),
    OpSpec("var", ("var",), ember.var, lambda a: np.var(a, ddof=1), [((2, 3),), ((5,),)]),
    OpSpec("var_dim_correction0", (), lambda x: x.var(1, correction=0, keepdim=True),
           lambda a: np.var(a, 1, ddof=0, keepdims=True), [((2, 3),)]),
    OpSpec("std", ("var",), lambda x: ember.std(x, (0, 1)), lambda a: np.std(a, (0, 1), ddof=1), [((2, 3, 2),)]),
    OpSpec("logsumexp", ("logsumexp",), lambda x: ember.logsumexp(x, 1), lambda a: _logsumexp_ref(a, 1), [((2, 3),), ((2, 3, 2),)]),
    OpSpec("logsumexp_keepdim", ("logsumexp",), lambda x: ember.logsumexp(x, (0, 1), keepdim=True),
           lambda a: _logsumexp_ref(a, (0, 1), True), [((2, 3),)]),
    OpSpec("norm", (), ember.norm, _norm_ref(2), [((2, 3),), ((4,),)]),
    OpSpec("norm_p1_dim", (), lambda x: ember.norm(x, 1, dim=1), _norm_ref(1, 1), [((2, 3),)], domain="away0"),
    OpSpec("norm_p3", (), lambda x: x.norm(3), _norm_ref(3), [((2, 3),)], domain="away0"),
    OpSpec("norm_inf", (), lambda x: x.norm(float("inf")), _norm_ref(float("inf")), [((2, 3),)], domain="distinct"),
    # movement and views
    OpSpec("reshape", ("reshape",), lambda x: x.reshape(-1, 2), lambda a: a.reshape(-1, 2), [((2, 3),), ((4,),), ((0, 2),)],
           int_dtypes=INTB, int_out="same"),
    OpSpec("reshape_0d", ("reshape",), lambda x: x.reshape(1, 1), lambda a: a.reshape(1, 1), [((),)]),
    OpSpec("view_noncontig", ("reshape", "permute"), lambda x: x.t().reshape(6), lambda a: a.T.reshape(6), [((2, 3),)]),
    OpSpec("squeeze_unsqueeze", ("reshape",), lambda x: x.squeeze().unsqueeze(0).unsqueeze(-1),
           lambda a: a.squeeze()[None, ..., None], [((2, 1, 3),), ((1,),)]),
    OpSpec("flatten", ("reshape",), lambda x: x.flatten(1), lambda a: a.reshape(a.shape[0], -1), [((2, 3, 4),)]),
    OpSpec("permute", ("permute",), lambda x: x.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1), [((2, 3, 4),),
                                                                                                     ((0, 1, 2),)],
           int_dtypes=INT, int_out="same"),
    OpSpec("transpose", ("permute",), lambda x: x.transpose(0, -1), lambda a: np.swapaxes(a, 0, -1), [((2, 3),)]),
    OpSpec("mT", ("permute",), lambda x: x.mT, lambda a: np.swapaxes(a, -1, -2), [((2, 3, 4),)]),
    OpSpec("expand", ("expand",), lambda x: x.expand(2, 3, 4), lambda a: np.broadcast_to(a, (2, 3, 4)),
           [((3, 1),), ((4,),), ((),)], int_dtypes=INT, int_out="same"),
    OpSpec("repeat", ("reshape", "expand"), lambda x: x.repeat(2, 3), lambda a: np.tile(a, (2, 3)), [((2, 3),), ((2,),)]),
    OpSpec("flip", ("flip",), lambda x: x.flip((0, -1)), lambda a: np.flip(a, (0, -1)), [((2, 3),), ((2, 3, 2),)],
           int_dtypes=INT, int_out="same"),
    OpSpec("roll", ("cat",), lambda x: x.roll(1, 1), lambda a: np.roll(a, 1, 1), [((2, 3),)]),
    OpSpec("contiguous", ("contiguous",), lambda x: x.t().contiguous(), lambda a: np.ascontiguousarray(a.T),
           [((2, 3),)]),
    OpSpec("clone", ("clone",), lambda x: x.clone(), lambda a: a.copy(), UNARY_SHAPES, int_dtypes=INTB, int_out="same"),
    OpSpec("tril", ("tril",), lambda x: x.tril(), np.tril, [((3, 3),), ((2, 3, 4),)], int_dtypes=INT, int_out="same"),
    OpSpec("triu", ("triu",), lambda x: x.triu(1), lambda a: np.triu(a, 1), [((3, 4),)]),
    OpSpec("getitem_basic", ("getitem",), lambda x: x[1:, ::2, None, -1], lambda a: a[1:, ::2, None, -1],
           [((3, 4, 2),)], int_dtypes=INT, int_out="same"),
    OpSpec("getitem_int", ("getitem",), lambda x: x[1], lambda a: a[1], [((3, 2),), ((3,),)]),
    OpSpec("getitem_ellipsis", ("getitem",), lambda x: x[..., 0], lambda a: a[..., 0], [((2, 3, 2),)]),
    OpSpec("getitem_advanced", ("getitem",), lambda x, i: x[i], lambda a, i: a[i], [((3, 2), None)],
           fixed={1: _index}, int_dtypes=INT, int_out="same"),
    OpSpec("getitem_advanced_list", ("getitem",), lambda x: x[:, [0, 0, 2]], lambda a: a[:, [0, 0, 2]], [((2, 3),)]),
    OpSpec("getitem_bool", ("getitem",), lambda x, m: x[m], lambda a, m: a[m], [((2, 3), None)], fixed={1: _mask}),
    OpSpec("getitem_bool_cmp", ("getitem",), lambda x: x[x > 0], lambda a: a[a > 0], [((2, 3),)], domain="away0"),
    OpSpec("setitem_slice", ("index_put",), _setitem((slice(None), 1)), _setitem_ref((slice(None), 1)),
           [((2, 3), (2,)), ((2, 3), ())]),
    OpSpec("setitem_advanced", ("index_put",), _setitem(([0, 1], [2, 0])), _setitem_ref(([0, 1], [2, 0])),
           [((2, 3), (2,))]),
    OpSpec("setitem_mask", ("index_put",), lambda x, v: _setitem(x > 0)(x, v),
           lambda a, v: _setitem_ref(a > 0)(a, v), [((2, 3), ())], domain="away0"),
    OpSpec("index_put_accumulate", ("index_put",),
           lambda x, v: (x * 1.0).index_put_((ember.tensor([0, 0, 2]),), v, accumulate=True),
           lambda a, v: a + _acc_ref(a, v), [((3, 2), (3, 2))]),
    OpSpec("cat", ("cat",), lambda a, b: ember.cat([a, b], 1), lambda a, b: np.concatenate([a, b], 1),
           [((2, 3), (2, 1)), ((2, 0), (2, 2))], int_dtypes=INT, int_out="same"),
    OpSpec("cat_3", ("cat",), lambda a, b, c: ember.cat((a, b, c)), lambda a, b, c: np.concatenate([a, b, c]),
           [((1, 2), (2, 2), (1, 2))]),
    OpSpec("stack", ("stack",), lambda a, b: ember.stack([a, b], -1), lambda a, b: np.stack([a, b], -1),
           [((2, 3), (2, 3)), ((), ())], int_dtypes=INT, int_out="same"),
    OpSpec("stack_3", ("stack",), lambda a, b, c: ember.stack((a, b, c), 1), lambda a, b, c: np.stack([a, b, c], 1),
           [((2, 2), (2, 2), (2, 2)), ((0, 2), (0, 2), (0, 2))]),
    OpSpec("split", ("getitem",), lambda x: x.split(2, 1), lambda a: tuple(np.split(a, [2, 4], 1)), [((2, 5),)]),
    OpSpec("split_sections", ("getitem",), lambda x: ember.split(x, [1, 3]), lambda a: tuple(np.split(a, [1])),
           [((4, 2),)]),
    OpSpec("chunk", ("getitem",), lambda x: x.chunk(3, 0), lambda a: tuple(np.split(a, [2, 4])), [((5, 2),)]),
    OpSpec("unbind", ("getitem",), lambda x: x.unbind(1), lambda a: tuple(a[:, i] for i in range(a.shape[1])),
           [((2, 3),)]),
    OpSpec("narrow", ("getitem",), lambda x: x.narrow(1, 1, 2), lambda a: a[:, 1:3], [((2, 4),)]),
    OpSpec("index_select", ("getitem",), lambda x, i: ember.index_select(x, 1, i), lambda a, i: a[:, i],
           [((2, 3), None)], fixed={1: _index}),
    OpSpec("gather", ("gather",), lambda x, i: ember.gather(x, 1, i), lambda a, i: np.take_along_axis(a, i, 1),
           [((2, 3), None)], fixed={1: _gather_index}, int_dtypes=INT, int_out="same"),
    OpSpec("scatter_add", ("scatter_add",), lambda x, i, s: ember.scatter_add(x, 1, i, s), _scatter_add_ref,
           [((2, 3), None, (2, 4))], fixed={1: _gather_index}),
    OpSpec("pad", ("pad",), _pad((1, 2, 0, 1)), lambda a: np.pad(a, ((0, 0),) * (a.ndim - 2) + ((0, 1), (1, 2))),
           [((2, 3),), ((1, 2, 3),)]),
    OpSpec("pad_negative", ("pad",), _pad((-1, 1)), lambda a: np.pad(a[..., 1:], ((0, 0), (0, 1))), [((2, 3),)]),
    OpSpec("pad_value", ("pad",), _pad((1, 1), 2.5), lambda a: np.pad(a, ((0, 0), (1, 1)), constant_values=2.5),
           [((2, 3),)]),
    OpSpec("to_device_cpu", ("to_device",),
           lambda x: dispatch.apply(OPS["to_device"], (x,), {"device": "cpu", "source": "cpu"}),
           lambda a: a.copy(), [((2, 3),)]),
    # linear algebra
    OpSpec("matmul", ("matmul",), ember.matmul, np.matmul,
           [((2, 3), (3, 4)), ((3,), (3, 2)), ((2, 3), (3,)), ((3,), (3,)), ((2, 2, 3), (3, 2)),
            ((2, 1, 2, 3), (3, 3, 2)), ((0, 3), (3, 2)), ((2, 0), (0, 3))],
           int_dtypes=INT, int_out="same"),
    OpSpec("mm", ("matmul",), ember.mm, np.matmul, [((2, 3), (3, 2))]),
    OpSpec("bmm", ("matmul",), ember.bmm, np.matmul, [((2, 2, 3), (2, 3, 1))]),
    OpSpec("dot", ("matmul",), ember.dot, np.dot, [((3,), (3,))]),
    OpSpec("einsum_matmul", ("einsum",), lambda a, b: ember.einsum("ij,jk->ik", a, b),
           lambda a, b: np.einsum("ij,jk->ik", a, b), [((2, 3), (3, 2))]),
    OpSpec("einsum_batch_trace", ("einsum",), lambda a, b: ember.einsum("bij,bjk->b", a, b),
           lambda a, b: np.einsum("bij,bjk->b", a, b), [((2, 2, 3), (2, 3, 2))]),
    OpSpec("einsum_outer_implicit", ("einsum",), lambda a, b: ember.einsum("i,j", a, b),
           lambda a, b: np.einsum("i,j", a, b), [((2,), (3,))]),
    OpSpec("einsum_sum_out", ("einsum",), lambda a: ember.einsum("ij->j", a), lambda a: np.einsum("ij->j", a),
           [((2, 3),)]),
    # (one operand, nothing summed: torch's einsum returns a view, ember's the diagonal op's: trust24)
    OpSpec("einsum_diag", ("diagonal",), lambda a: ember.einsum("ii->i", a), lambda a: np.einsum("ii->i", a),
           [((3, 3),)]),
    OpSpec("einsum_three", ("einsum",), lambda a, b, c: ember.einsum("ij,jk,kl->il", a, b, c),
           lambda a, b, c: np.einsum("ij,jk,kl->il", a, b, c), [((2, 3), (3, 2), (2, 2))]),
]


# Graph-only records (ember.graph): the ones with an eager meaning get specs; `group` has none.
try:
    import ember.graph  # noqa: F401  (registers assign, group, matmul_t)
except ImportError:  # pragma: no cover - the static-graph package is optional here
    pass
else:
    def _matmul_t(ta: bool, tb: bool) -> Callable:
        return lambda a, b: dispatch.apply(OPS["matmul_t"], (a, b), {"transpose_a": ta, "transpose_b": tb})

    SPECS += [
        OpSpec("matmul_t_a", ("matmul_t",), _matmul_t(True, False), lambda a, b: np.swapaxes(a, -1, -2) @ b,
               [((3, 2), (3, 4)), ((2, 3, 2), (2, 3, 1))]),
        OpSpec("matmul_t_b", ("matmul_t",), _matmul_t(False, True), lambda a, b: a @ np.swapaxes(b, -1, -2),
               [((2, 3), (4, 3)), ((2, 2, 3), (4, 3))]),
        OpSpec("matmul_t_ab", ("matmul_t",), _matmul_t(True, True),
               lambda a, b: np.swapaxes(a, -1, -2) @ np.swapaxes(b, -1, -2), [((3, 2), (4, 3))]),
        OpSpec("assign", ("assign",), lambda t, v: dispatch.apply(OPS["assign"], (t, v)), lambda t, v: v.copy(),
               [((2, 3), (2, 3))], grad=False, int_dtypes=INT, int_out="same"),
    ]

# Ops with no eager meaning, tested where they are used.
GRAPH_ONLY_OPS = {"group": "tests/graph/test_*.py",
                  **{f"random_{k}": "tests/graph/test_compile_random_ops.py"
                     for k in ("uniform", "normal", "bernoulli", "integers", "permutation", "multinomial")},
                  "send": "tests/graph/test_graph_partition_placement.py", "recv": "tests/graph/test_graph_partition_placement.py"}


def _acc_ref(a: np.ndarray, v: np.ndarray) -> np.ndarray:
    out = np.zeros_like(a)
    np.add.at(out, np.array([0, 0, 2]), v)
    return out


# Ops whose only reachable public path is another op's backward: covered by the second-order checks
# of the specs named here (index_backward is getitem's vjp).
COVERED_BY_BACKWARD = {"index_backward": ("getitem_advanced", "getitem_basic", "getitem_bool"),
                       "lstm_layer_backward": ("lstm_layer",), "gru_layer_backward": ("gru_layer",),
                       "rnn_layer_backward": ("rnn_layer_tanh", "rnn_layer_relu")}

# Ops that back ember.nn.functional (conv, pooling, activations ...) are tested, forward and
# backward, in tests/nn/test_functional_vs_torch.py; each maps to the public name that file must exercise.
FUNCTIONAL_TESTS = "tests/nn/test_functional_vs_torch.py"
FUNCTIONAL_OPS = {
    "conv2d": "conv2d", "conv2d_input_grad": "conv2d", "conv2d_weight_grad": "conv2d",
    "max_pool2d": "max_pool2d", "max_pool2d_backward": "max_pool2d",
    "avg_pool2d": "avg_pool2d", "avg_pool2d_backward": "avg_pool2d",
    "gelu": "gelu", "silu": "silu", "softmax": "softmax", "log_softmax": "log_softmax",
    "layer_norm": "layer_norm", "layer_norm_backward": "layer_norm", "linear": "linear",
}
# Records defined in these modules belong to ember.nn's helper too: allowlisted under their public name
# (suffixes like _backward stripped) when tests/nn/test_functional_vs_torch.py mentions that name.
FUNCTIONAL_MODULES = ("ember.nn", "ember.ops.conv", "ember.ops.pooling", "ember.ops.nn_ops", "ember.ops.losses",
                      "ember.ops.normalization", "ember.ops.attention")


def functional_name(op_name: str, module: str) -> str | None:
    """The public ember.nn.functional name an op record backs, or None if it is a core op."""
    if op_name in FUNCTIONAL_OPS:
        return FUNCTIONAL_OPS[op_name]
    if module.startswith(FUNCTIONAL_MODULES):
        for suffix in ("_backward", "_input_grad", "_weight_grad", "_grad"):
            if op_name.endswith(suffix):
                return op_name[: -len(suffix)]
        return op_name
    return None


def spec_by_name(name: str) -> OpSpec:
    for spec in SPECS:
        if spec.name == name:
            return spec
    raise KeyError(name)


# ---- sorting and extra math (ember/ops/sorting.py, ember/ops/extra_math.py) ----------------------
def _sort_ref(dim: int = -1, descending: bool = False) -> Callable:
    def ref(a: np.ndarray) -> tuple:
        if a.ndim == 0:
            return a.copy(), np.array(0, dtype=np.int64)
        if descending:  # stable descending: ties keep input order
            n = a.shape[dim]
            idx = (n - 1) - np.flip(np.argsort(np.flip(a, dim), axis=dim, kind="stable"), dim)
        else:
            idx = np.argsort(a, axis=dim, kind="stable")
        return np.take_along_axis(a, idx, dim), idx.astype(np.int64)

    return ref


def _topk_ref(k: int, dim: int = -1, largest: bool = True) -> Callable:
    def ref(a: np.ndarray) -> tuple:
        values, idx = _sort_ref(dim, largest)(a)
        take = [slice(None)] * a.ndim
        take[dim] = slice(0, k)
        return values[tuple(take)], idx[tuple(take)]

    return ref


def _cum_extreme_ref(better: Callable, dim: int) -> Callable:
    """Running extreme by an explicit loop (ties: the later index wins)."""
    def ref(a: np.ndarray) -> tuple:
        if a.ndim == 0:
            return a.copy(), np.array(0, dtype=np.int64)
        moved = np.moveaxis(a, dim, -1)
        values, idx = np.empty_like(moved), np.zeros(moved.shape, dtype=np.int64)
        for pos in np.ndindex(moved.shape[:-1]):
            best, where = moved[pos][0], 0
            for i, v in enumerate(moved[pos]):
                if i == 0 or better(v, best) or v == best:
                    best, where = v, i
                values[pos + (i,)], idx[pos + (i,)] = best, where
        return np.moveaxis(values, -1, dim), np.moveaxis(idx, -1, dim)

    return ref


def _unique_ref(a: np.ndarray) -> tuple:
    values, inverse, counts = np.unique(a.reshape(-1), return_inverse=True, return_counts=True)
    return values, inverse.reshape(a.shape).astype(np.int64), counts.astype(np.int64)


def _searchsorted_ref(s: np.ndarray, v: np.ndarray) -> np.ndarray:
    s = np.sort(s, -1)
    if s.ndim == 1:
        return np.searchsorted(s, v).astype(np.int64)
    return np.stack([np.searchsorted(s[i], v[i]) for i in range(s.shape[0])]).astype(np.int64)


def _mask_2x3_zero() -> Any:
    return np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])


def _diagonal_ref(offset: int, axis1: int = 0, axis2: int = 1) -> Callable:
    return lambda a: np.diagonal(a, offset, axis1, axis2).copy()


def _diag_embed_ref(a: np.ndarray) -> np.ndarray:
    out = np.zeros(a.shape + (a.shape[-1],))
    for pos in np.ndindex(a.shape[:-1]):
        out[pos] = np.diag(a[pos])
    return out


def _xlogy_ref(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.where(x == 0, 0.0, x * np.log(y))


def _isclose_mixed(rng: np.random.Generator, shapes: tuple) -> np.ndarray:  # noqa: ARG001
    return np.array([0.0, 1.0, np.inf, -np.inf, np.nan, 1.0 + 1e-7])


_FLOATS = ("float32", "float64")
SPECS += [
    # unary primitives
    OpSpec("tan", ("tan",), ember.tan, np.tan, UNARY_SHAPES, domain="unit"),
    OpSpec("asin", ("asin",), ember.asin, np.arcsin, UNARY_SHAPES, domain="unit"),
    OpSpec("acos", ("acos",), ember.acos, np.arccos, UNARY_SHAPES, domain="unit"),
    OpSpec("atan", ("atan",), ember.atan, np.arctan, UNARY_SHAPES, int_dtypes=INT, int_out="float32"),
    OpSpec("sinh", ("sinh",), ember.sinh, np.sinh, UNARY_SHAPES),
    OpSpec("cosh", ("cosh",), ember.cosh, np.cosh, UNARY_SHAPES),
    OpSpec("asinh", ("asinh",), ember.asinh, np.arcsinh, UNARY_SHAPES),
    OpSpec("acosh", ("acosh", "add"), lambda x: ember.acosh(x + 1.5), lambda a: np.arccosh(a + 1.5), UNARY_SHAPES,
           domain="positive"),
    OpSpec("atanh", ("atanh",), ember.atanh, np.arctanh, UNARY_SHAPES, domain="unit"),
    OpSpec("expm1", ("expm1",), ember.expm1, np.expm1, UNARY_SHAPES, int_dtypes=INT, int_out="float32"),
    OpSpec("log2", ("log2",), ember.log2, np.log2, UNARY_SHAPES, domain="positive", int_dtypes=INT,
           int_out="float32"),
    OpSpec("log10", ("log10",), ember.log10, np.log10, UNARY_SHAPES, domain="positive"),
    OpSpec("exp2", ("exp2",), ember.exp2, np.exp2, UNARY_SHAPES, int_dtypes=INT, int_out="float32"),
    OpSpec("trunc", ("trunc",), ember.trunc, np.trunc, UNARY_SHAPES, int_dtypes=INT, int_out="same"),
    OpSpec("erfinv", ("erfinv",), ember.erfinv, __import__("scipy.special").special.erfinv, UNARY_SHAPES,
           domain="unit"),
    OpSpec("erfc", ("erfc",), ember.erfc, __import__("scipy.special").special.erfc, UNARY_SHAPES),
    OpSpec("erfcx", ("erfcx",), ember.special.erfcx, __import__("scipy.special").special.erfcx, UNARY_SHAPES),
    OpSpec("atan2", ("atan2",), ember.atan2, np.arctan2, BINARY_SHAPES, domain="nonzero", int_dtypes=INT,
           int_out="float32"),
    # elementwise composites
    OpSpec("square", ("mul",), ember.square, np.square, UNARY_SHAPES, int_dtypes=INT, int_out="same"),
    OpSpec("frac", ("trunc", "sub"), ember.frac, lambda a: a - np.trunc(a), UNARY_SHAPES, domain="away0"),
    OpSpec("hypot", ("hypot",), ember.hypot, np.hypot, BINARY_SHAPES, domain="nonzero"),
    OpSpec("logaddexp", (), ember.logaddexp, np.logaddexp, BINARY_SHAPES),
    OpSpec("logaddexp2", (), ember.logaddexp2, np.logaddexp2, BINARY_SHAPES[:3]),
    OpSpec("xlogy", (), ember.xlogy, _xlogy_ref, BINARY_SHAPES, domain=("real", "positive")),
    OpSpec("xlogy_zeros", (), lambda x, y: ember.xlogy(x * ember.tensor(_mask_2x3_zero(), dtype=x.dtype, device=x.device), y),
           lambda a, b: _xlogy_ref(a * _mask_2x3_zero(), b), [((2, 3), (2, 3))], domain=("real", "positive"),
           low_precision=False),
    OpSpec("logit", (), lambda x: ember.logit(x * 0.4 + 0.5), lambda a: np.log((a * 0.4 + 0.5) / (0.5 - a * 0.4)),
           UNARY_SHAPES, domain="unit"),
    OpSpec("deg2rad", (), ember.deg2rad, np.deg2rad, UNARY_SHAPES[:3]),
    OpSpec("rad2deg", (), ember.rad2deg, np.rad2deg, UNARY_SHAPES[:3], atol=1e-4),
    OpSpec("clamp_min_fn", ("clamp",), lambda x: ember.clamp_min(x, 0.2), lambda a: np.maximum(a, 0.2),
           UNARY_SHAPES, domain="away0"),
    OpSpec("clamp_max_fn", ("clamp",), lambda x: ember.clamp_max(x, -0.2), lambda a: np.minimum(a, -0.2),
           UNARY_SHAPES, domain="away0"),
    OpSpec("nan_to_num", ("where",), lambda x: ember.nan_to_num(x, nan=0.5, posinf=9.0, neginf=-9.0),
           lambda a: np.nan_to_num(a, nan=0.5, posinf=9.0, neginf=-9.0), UNARY_SHAPES, domain="special", grad=False),
    OpSpec("nan_to_num_default", ("where",), ember.nan_to_num, np.nan_to_num, [((6,),)], domain="special",
           grad=False, float_dtypes=("float64",)),
    OpSpec("nan_to_num_grad", ("where",), ember.nan_to_num, np.nan_to_num, UNARY_SHAPES[:3]),
    OpSpec("lerp", ("where",), ember.lerp, lambda a, b, w: a + w * (b - a),
           [((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), ()), ((), (), ())]),
    OpSpec("lerp_scalar_low", (), lambda a, b: ember.lerp(a, b, 0.25), lambda a, b: a + 0.25 * (b - a),
           BINARY_SHAPES[:4]),
    OpSpec("lerp_scalar_high", (), lambda a, b: ember.lerp(a, b, 0.75), lambda a, b: a + 0.75 * (b - a),
           BINARY_SHAPES[:4]),
    OpSpec("addcmul", (), lambda x, a, b: ember.addcmul(x, a, b, value=0.5), lambda x, a, b: x + 0.5 * a * b,
           [((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), (2, 1)), ((), (), ())]),
    OpSpec("addcdiv", (), lambda x, a, b: ember.addcdiv(x, a, b, value=-2), lambda x, a, b: x - 2 * a / b,
           [((2, 3), (2, 3), (2, 3)), ((3,), (2, 3), ())], domain=("real", "real", "nonzero")),
    # matrix composites
    OpSpec("addmm", ("matmul",), ember.addmm, lambda x, a, b: x + a @ b,
           [((2, 3), (2, 4), (4, 3)), ((3,), (2, 4), (4, 3)), ((), (1, 2), (2, 2))]),
    OpSpec("addmm_beta_alpha", ("matmul",), lambda x, a, b: ember.addmm(x, a, b, beta=0.5, alpha=-2.0),
           lambda x, a, b: 0.5 * x + -2.0 * (a @ b), [((2, 3), (2, 4), (4, 3))]),
    OpSpec("addmm_beta0", ("matmul",), lambda x, a, b: ember.addmm(x + np.nan, a, b, beta=0),
           lambda x, a, b: a @ b + 0 * x.sum(), [((2, 3), (2, 4), (4, 3))], low_precision=False),
    OpSpec("addmv", ("matmul",), lambda x, m, v: ember.addmv(x, m, v, beta=2.0), lambda x, m, v: 2 * x + m @ v,
           [((2,), (2, 3), (3,)), ((), (2, 3), (3,))]),
    OpSpec("addr", (), lambda x, a, b: ember.addr(x, a, b, alpha=3), lambda x, a, b: x + 3 * np.outer(a, b),
           [((2, 3), (2,), (3,))]),
    OpSpec("baddbmm", ("matmul",), lambda x, a, b: ember.baddbmm(x, a, b, beta=0.5),
           lambda x, a, b: 0.5 * x + a @ b, [((2, 2, 3), (2, 2, 4), (2, 4, 3)), ((3,), (2, 2, 4), (2, 4, 3))]),
    OpSpec("addbmm", ("matmul", "sum"), ember.addbmm, lambda x, a, b: x + (a @ b).sum(0),
           [((2, 3), (2, 2, 4), (2, 4, 3))]),
    OpSpec("outer", ("mul",), ember.outer, np.outer, [((3,), (2,)), ((0,), (2,))], int_dtypes=INT, int_out="same"),
    OpSpec("tensordot", ("matmul",), ember.tensordot, lambda a, b: np.tensordot(a, b, 2),
           [((2, 3, 4), (3, 4, 2)), ((3, 4), (3, 4))]),
    OpSpec("tensordot_dims", ("matmul",), lambda a, b: ember.tensordot(a, b, ([1, 2], [2, 0])),
           lambda a, b: np.tensordot(a, b, ([1, 2], [2, 0])), [((2, 3, 4), (4, 2, 3))]),
    OpSpec("tensordot_0", ("matmul",), lambda a, b: ember.tensordot(a, b, 0), lambda a, b: np.tensordot(a, b, 0),
           [((2,), (3,))]),
    OpSpec("diagonal", ("getitem",), ember.diagonal, _diagonal_ref(0), [((3, 3),), ((3, 4),), ((4, 2),)],
           int_dtypes=INT, int_out="same"),
    OpSpec("diagonal_offset", ("getitem",), lambda x: x.diagonal(1), _diagonal_ref(1), [((3, 3),), ((2, 4),)]),
    OpSpec("diagonal_neg_offset", ("getitem",), lambda x: x.diagonal(-2), _diagonal_ref(-2), [((3, 3),), ((4, 2),),
                                                                                              ((1, 3),)]),
    OpSpec("diagonal_dims", ("getitem",), lambda x: ember.diagonal(x, 0, 2, 0), _diagonal_ref(0, 2, 0),
           [((3, 2, 4),)]),
    OpSpec("diag_vector", ("index_put",), ember.diag, np.diag, [((3,),), ((1,),)], int_dtypes=INT, int_out="same"),
    OpSpec("diag_vector_offset", ("index_put",), lambda x: ember.diag(x, -1), lambda a: np.diag(a, -1), [((3,),)]),
    OpSpec("diag_matrix", ("getitem",), lambda x: x.diag(1), lambda a: np.diag(a, 1).copy(), [((3, 4),)]),
    OpSpec("diag_embed", ("where",), ember.diag_embed, _diag_embed_ref, [((2, 3),), ((2,),)]),  # offset 0: a select
    OpSpec("diag_embed_offset", ("index_put",), lambda a: ember.diag_embed(a, 1),
           lambda a: np.stack([np.diag(v, 1) for v in a.reshape(-1, a.shape[-1])]).reshape(
               a.shape[:-1] + (a.shape[-1] + 1, a.shape[-1] + 1)), [((2, 3),), ((2,),)]),
    OpSpec("trace", ("getitem", "sum"), ember.trace, np.trace, [((3, 3),), ((2, 4),)], int_dtypes=INT,
           int_out="int64"),
    OpSpec("meshgrid_ij", ("reshape", "expand"), lambda a, b: ember.meshgrid(a, b, indexing="ij"),
           lambda a, b: tuple(np.meshgrid(a, b, indexing="ij")), [((2,), (3,)), ((0,), (2,))]),
    OpSpec("meshgrid_xy", ("reshape", "expand"), lambda a, b, c: ember.meshgrid([a, b, c], indexing="xy"),
           lambda a, b, c: tuple(np.meshgrid(a, b, c, indexing="xy")), [((2,), (3,), (1,))]),
    OpSpec("masked_select", ("getitem",), ember.masked_select, lambda a, m: a[m], [((2, 3), None)],
           fixed={1: _mask}),
    OpSpec("masked_select_broadcast", ("getitem", "expand"), ember.masked_select,
           lambda a, m: np.broadcast_to(a, m.shape)[m], [((3,), None)], fixed={1: _mask}),
    OpSpec("count_nonzero", ("ne", "sum"), ember.count_nonzero, np.count_nonzero, REDUCE_SHAPES, domain="smallint",
           grad=False, float_out="int64", int_dtypes=INTB, int_out="int64"),
    OpSpec("count_nonzero_dim", ("ne", "sum"), lambda x: ember.count_nonzero(x, 1),
           lambda a: np.count_nonzero(a, 1), [((2, 3, 4),)], domain="smallint", grad=False, float_out="int64"),
    OpSpec("isclose", ("le",), lambda a, b: ember.isclose(a, b, rtol=0.1, atol=0.5),
           lambda a, b: np.isclose(a, b, rtol=0.1, atol=0.5), BINARY_SHAPES, grad=False, float_out="bool",
           low_precision=False),
    OpSpec("isclose_special", ("eq",), lambda a, b: ember.isclose(a, b, equal_nan=True),
           lambda a, b: np.isclose(a, b, equal_nan=True), [((6,), (6,)), ((6, 1), (6,))], domain="special",
           grad=False, float_out="bool"),
    OpSpec("isclose_int", ("eq",), lambda a, b: ember.isclose(a, b, atol=1), lambda a, b: np.isclose(a, b, atol=1),
           [((2, 3), (2, 3))], float_dtypes=(), grad=False, int_dtypes=INT, int_out="bool"),
    # scans
    OpSpec("cumprod", ("cumprod",), lambda x: x.cumprod(-1), lambda a: np.cumprod(a, -1),
           [((2, 3),), ((4,),), ((2, 0),)], domain="nonzero", int_dtypes=INT, int_out="int64"),
    OpSpec("cumprod_0d", ("cumprod",), lambda x: ember.cumprod(x, 0), lambda a: a.copy(), [((),)]),
    OpSpec("cumprod_zeros", ("cumprod",),
           lambda x: ember.cumprod(x * ember.tensor([[1.0, 0.0, 1.0, 1.0], [0.0, 1.0, 0.0, 1.0]], dtype=x.dtype, device=x.device), 1),
           lambda a: np.cumprod(a * np.array([[1.0, 0.0, 1.0, 1.0], [0.0, 1.0, 0.0, 1.0]]), 1), [((2, 4),)],
           domain="nonzero", low_precision=False),
    OpSpec("cummax", ("cummax",), lambda x: tuple(ember.cummax(x, 1)), _cum_extreme_ref(np.greater, 1),
           [((2, 3),), ((2, 4, 2),)], domain="distinct", int_dtypes=INT, int_out="same"),
    OpSpec("cummax_ties", ("cummax",), lambda x: tuple(x.cummax(0)), _cum_extreme_ref(np.greater, 0), [((6,),)],
           domain="smallint", grad=False),
    OpSpec("cummin", ("cummin",), lambda x: tuple(ember.cummin(x, -1)), _cum_extreme_ref(np.less, -1),
           [((2, 3),), ((5,),), ((),)], domain="distinct"),
    # sorting
    OpSpec("sort", ("sort",), lambda x: tuple(ember.sort(x)), _sort_ref(), [((2, 3),), ((5,),), ((),), ((2, 0),)],
           domain="distinct", int_dtypes=INT, int_out="same"),
    OpSpec("sort_descending_dim0", ("sort",), lambda x: tuple(x.sort(0, descending=True)), _sort_ref(0, True),
           [((3, 2),), ((2, 3, 2),)], domain="distinct"),
    OpSpec("sort_stable_ties", ("sort",), lambda x: tuple(ember.sort(x, stable=True)), _sort_ref(),
           [((2, 6),)], domain="smallint", grad=False, int_dtypes=INTB, int_out="same"),
    OpSpec("sort_stable_ties_descending", ("sort",), lambda x: tuple(ember.sort(x, -1, True, stable=True)),
           _sort_ref(-1, True), [((2, 6),)], domain="smallint", grad=False, int_dtypes=INTB, int_out="same"),
    OpSpec("argsort", ("sort",), lambda x: ember.argsort(x, 1, descending=True),
           lambda a: _sort_ref(1, True)(a)[1], [((2, 4),)], domain="distinct", grad=False, float_out="int64"),
    OpSpec("topk", ("sort", "getitem"), lambda x: tuple(ember.topk(x, 2)), _topk_ref(2), [((2, 4),), ((3,),)],
           domain="distinct", int_dtypes=INT, int_out="same"),
    OpSpec("topk_smallest_dim0", ("sort", "getitem"), lambda x: tuple(x.topk(1, 0, largest=False)),
           _topk_ref(1, 0, False), [((3, 2),)], domain="distinct"),
    OpSpec("kthvalue", ("sort", "getitem"), lambda x: tuple(ember.kthvalue(x, 2, 1)),
           lambda a: tuple(r[:, 1] for r in _sort_ref(1)(a)), [((2, 3),), ((3, 4, 2),)], domain="distinct"),
    OpSpec("kthvalue_keepdim", ("sort", "getitem"), lambda x: tuple(x.kthvalue(3, keepdim=True)),
           lambda a: tuple(r[..., 2:3] for r in _sort_ref(-1)(a)), [((2, 4),)], domain="distinct"),
    OpSpec("unique", ("unique",), lambda x: ember.unique(x, return_inverse=True, return_counts=True), _unique_ref,
           [((2, 3),), ((5,),), ((0,),), ((),)], domain="smallint", grad=False, int_dtypes=INTB, int_out="same"),
    OpSpec("unique_dim", ("unique",), lambda x: ember.unique(ember.cat([x, x[:1]]), dim=0, return_inverse=True),
           lambda a: tuple(r.reshape(-1) if i else r for i, r in enumerate(np.unique(
               np.concatenate([a, a[:1]]), axis=0, return_inverse=True))), [((3, 2),)], domain="smallint",
           grad=False),
    OpSpec("searchsorted", ("searchsorted", "sort"), lambda s, v: ember.searchsorted(ember.sort(s).values, v),
           _searchsorted_ref, [((5,), (2, 3)), ((2, 4), (2, 3)), ((3,), ())], domain="smallint", grad=False,
           float_out="int64", int_dtypes=INT, int_out="int64"),
]


# ---- einsum with '...' (broadcast batch dims, implicit output), and in-place ops on views ---------------
def _einsum_pair(equation: str) -> tuple:
    return (lambda a, b: ember.einsum(equation, a, b)), (lambda a, b: np.einsum(equation, a, b))


SPECS += [
    OpSpec("einsum_ellipsis_matmul", ("einsum", "expand"), *_einsum_pair("...ij,...jk"),
           [((2, 2, 3), (3, 2)), ((2, 1, 2, 3), (3, 3, 2)), ((2, 3), (3, 2))]),
    OpSpec("einsum_ellipsis_explicit", ("einsum",), *_einsum_pair("...ij,...j->...i"), [((2, 3, 4), (4,))]),
    OpSpec("einsum_ellipsis_summed", ("einsum",), lambda a, b: ember.einsum("bij,...j->bi", a, b),
           lambda a, b: np.einsum("bij,kj->bi", a, b.reshape(-1, b.shape[-1])),  # NumPy keeps '...' dims
           [((2, 3, 4), (2, 4)), ((2, 3, 4), (4,))]),
    OpSpec("einsum_ellipsis_diagonal", ("diagonal",), lambda a: ember.einsum("...ii->...i", a),  # a view
           lambda a: np.einsum("...ii->...i", a), [((2, 3, 3),), ((3, 3),)]),
    OpSpec("einsum_ellipsis_middle", ("einsum",), lambda a: ember.einsum("i...j->j...", a),
           lambda a: np.einsum("i...j->j...", a), [((2, 3, 1, 4),)]),
    OpSpec("einsum_ellipsis_list_operands", ("einsum",), lambda a, b: ember.einsum("...j,j", [a, b]),
           lambda a, b: np.einsum("...j,j", a, b), [((2, 3), (3,))]),
    OpSpec("einsum_repeated_operand", ("einsum",), lambda a: ember.einsum("...ij,...ij->...", a, a),
           lambda a: np.einsum("...ij,...ij->...", a, a), [((2, 2, 3),)]),
    OpSpec("einsum_broadcast_label", ("einsum", "expand"), *_einsum_pair("i,i->i"), [((3,), (1,))]),
    OpSpec("einsum_sublist", ("einsum",), lambda a, b: ember.einsum(a, [Ellipsis, 0, 1], b, [1, 2], [Ellipsis, 0, 2]),
           lambda a, b: np.einsum("...ij,jk->...ik", a, b), [((2, 2, 3), (3, 2))]),
]


def _inplace_on_views(x: Any) -> Any:
    """PyTorch's CopySlices cases on one non-leaf: setitem, += on a row, a diagonal, a transposed
    slice, a view of a view, a 0-d element."""
    y = x * 1
    y[:, 0] = 0
    y[1] += x[1] * 2
    y.diagonal().mul_(3)
    v = y[2:]
    v.mul_(x[2:])
    y.t()[1:][0].add_(x[:, 1] ** 2)
    y[0, 2].mul_(x[-1, 2])
    return y


def _inplace_on_views_ref(a: np.ndarray) -> np.ndarray:
    y = a * 1
    y[:, 0] = 0
    y[1] += a[1] * 2
    n = min(y.shape)
    y[np.arange(n), np.arange(n)] *= 3
    y[2:] *= a[2:]
    y[:, 1] += a[:, 1] ** 2
    y[0, 2] *= a[-1, 2]
    return y


def _setitem_views(x: Any, z: Any) -> Any:
    """setitem with a value that requires grad, into a base and into a (permuted) view of it."""
    b = ember.zeros(tuple(x.shape), dtype=x.dtype, device=x.device)
    b[1:] = x[1:] * 2
    b.t()[0] = z * z
    b.narrow(0, 1, 2).select(1, 1).copy_(z[:2])
    return b * x


def _setitem_views_ref(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    b = np.zeros_like(a)
    b[1:] = a[1:] * 2
    b[:, 0] = c * c
    b[1:3, 1] = c[:2]
    return b * a


SPECS += [
    OpSpec("inplace_on_views", ("view_replay", "diagonal", "getitem", "permute"), _inplace_on_views,
           _inplace_on_views_ref, [((4, 3),), ((3, 3),)]),
    OpSpec("setitem_views", ("view_replay", "index_put", "permute"), _setitem_views, _setitem_views_ref,
           [((3, 3), (3,))]),
    OpSpec("diagonal_view_op", ("diagonal",), lambda x: x.diagonal(1, -1, 0), _diagonal_ref(1, -1, 0),
           [((3, 2, 4),), ((2, 2),)]),
]
# Tensor.unfold is a view (a strided one: overlapping windows share elements), as PyTorch's.
SPECS += [
    OpSpec("unfold_overlapping", ("unfold",), lambda x: x.unfold(1, 2, 1),
           lambda x: np.lib.stride_tricks.sliding_window_view(x, 2, axis=1), [((3, 4),), ((2, 3, 2),)]),
    OpSpec("unfold_strided", ("unfold",), lambda x: x.unfold(0, 2, 3),
           lambda x: np.moveaxis(np.lib.stride_tricks.sliding_window_view(x, 2, axis=0)[::3], 0, 0),
           [((7, 3),), ((5,),)]),
]
# copy_slices is recorded (not run) by in-place ops on views: its backward is what these specs check.
COVERED_BY_BACKWARD["copy_slices"] = ("inplace_on_views", "setitem_views")
# diagonal became a view op of its own (PyTorch's diagonal is a view): the specs written when it was a
# gather now exercise that record instead of getitem.
for _spec in SPECS:
    if _spec.name in ("diagonal", "diagonal_offset", "diagonal_neg_offset", "diagonal_dims", "diag_matrix", "trace"):
        _spec.ops = tuple("diagonal" if op == "getitem" else op for op in _spec.ops)


# ---- linear algebra records (ember/ops/linalg_factor.py, linalg_solve.py) ------------------------------
# References are NumPy/SciPy's LAPACK wrappers; functions of singular/eigen vectors are gauge-invariant
# (squares, U @ Vh), as differentiating them requires. Square inputs get + 3 I where they must be invertible.
def _eye_like(a: Any) -> Any:
    """Identity matrices matching a's batch, dtype and device, for NumPy, ember or torch (specs also run with
    ``ember`` rebound to ``torch``)."""
    if isinstance(a, np.ndarray):
        return np.eye(a.shape[-1])
    return (a.diagonal(0, -2, -1) * 0 + 1).diag_embed()


def _plus3i(a: Any) -> Any:
    return a + 3 * _eye_like(a)


def _sym(a: Any) -> Any:
    return (a + a.swapaxes(-1, -2)) / 2


def _spd(a: Any) -> Any:
    return a @ a.swapaxes(-1, -2) + 2 * _eye_like(a)


def _svd_gauge(U: Any, S: Any, Vh: Any) -> tuple:
    return S, U * U, Vh * Vh, U @ Vh


def _scipy_lu(a: np.ndarray) -> tuple:
    import scipy.linalg

    flat = a.reshape((-1,) + a.shape[-2:])
    lus, pivs = [], []
    for m in flat:
        p, l, u = scipy.linalg.lu(m)  # A = P L U; rebuild LAPACK's compact form and row swaps from P
        k = min(m.shape)
        lu = np.zeros_like(m)
        lu[:, :k] += np.tril(l, -1)[:, :k]
        lu[:k, :] += np.triu(u)[:k, :]
        perm, swaps = list(np.argmax(p, axis=0)), []
        order = list(range(m.shape[0]))
        for j in range(k):
            i = order.index(perm[j])
            swaps.append(i + 1)
            order[j], order[i] = order[i], order[j]
        lus.append(lu)
        pivs.append(swaps)
    return (np.asarray(lus).reshape(a.shape), np.asarray(pivs, dtype=np.int64).reshape(a.shape[:-2] + (min(a.shape[-2:]),)))


def _scipy_geqrf(a: np.ndarray) -> tuple:
    from scipy.linalg import lapack

    flat = a.reshape((-1,) + a.shape[-2:])
    outs = [lapack.dgeqrf(m)[:2] for m in flat]
    return (np.asarray([o[0] for o in outs]).reshape(a.shape),
            np.asarray([o[1] for o in outs]).reshape(a.shape[:-2] + (min(a.shape[-2:]),)))


def _scipy_expm(a: np.ndarray) -> np.ndarray:
    import scipy.linalg

    return np.asarray([scipy.linalg.expm(m) for m in a.reshape((-1,) + a.shape[-2:])]).reshape(a.shape)


_LINALG = dict(low_precision=False, atol=1e-6, rtol=1e-5)
SPECS += [
    OpSpec("linalg_svd", ("linalg_svd",), lambda a: _svd_gauge(*ember.linalg.svd(a, full_matrices=False)),
           lambda a: _svd_gauge(*np.linalg.svd(a, full_matrices=False)), [((4, 3),), ((2, 2, 4),), ((3, 3),)],
           **_LINALG),
    OpSpec("linalg_svd_full", ("linalg_svd",), lambda a: tuple(o.abs() for o in ember.linalg.svd(a)),
           lambda a: tuple(np.abs(o) for o in np.linalg.svd(a)), [((4, 2),)], grad=False, low_precision=False),
    OpSpec("linalg_eigh", ("linalg_eigh",), lambda a: (lambda w, v: (w, v * v))(*ember.linalg.eigh(_sym(a))),
           lambda a: (lambda w, v: (w, v * v))(*np.linalg.eigh(_sym(a))), [((3, 3),), ((2, 4, 4),)], **_LINALG),
    OpSpec("linalg_qr", ("linalg_qr",), lambda a: tuple(ember.linalg.qr(a)), lambda a: np.linalg.qr(a),
           [((4, 3),), ((2, 3, 3),), ((2, 4),)], **_LINALG),
    OpSpec("linalg_qr_complete", ("linalg_qr",), lambda a: tuple(ember.linalg.qr(a, "complete")),
           lambda a: np.linalg.qr(a, "complete"), [((2, 3),)], **_LINALG),
    # lu_factor_ex: no data-dependent check (compiles), and the broadcast layout's singular inputs factor
    OpSpec("linalg_lu_factor", ("linalg_lu_factor",),
           lambda a: (lambda lu, piv, info: (lu, piv.to(ember.int64)))(*ember.linalg.lu_factor_ex(a)), _scipy_lu,
           [((2, 3, 3),), ((2, 4, 3),), ((2, 3, 4),)], **_LINALG),
    OpSpec("lu_permutation", ("lu_permutation", "linalg_lu_factor"), lambda a: ember.linalg.lu(a).P,
           lambda a: np.stack([__import__("scipy.linalg").linalg.lu(m)[0] for m in a.reshape(-1, *a.shape[-2:])]
                              ).reshape(a.shape[:-2] + (a.shape[-2], a.shape[-2])),
           [((3, 3),), ((2, 4, 2),)], grad=False, low_precision=False),
    OpSpec("linalg_cholesky", ("linalg_cholesky",), lambda a: ember.linalg.cholesky(_spd(a)),
           lambda a: np.linalg.cholesky(_spd(a)), [((3, 3),), ((2, 2, 2),)], **_LINALG),
    OpSpec("geqrf", ("geqrf",), lambda a: tuple(ember.geqrf(a)), _scipy_geqrf, [((4, 3),), ((2, 3, 4),)],
           grad=False, low_precision=False),
    OpSpec("linalg_inv", ("linalg_inv",), lambda a: ember.linalg.inv(_plus3i(a)), lambda a: np.linalg.inv(_plus3i(a)),
           [((3, 3),), ((2, 2, 2),), ((0, 2, 2),)], **_LINALG),
    OpSpec("linalg_det", ("linalg_det",), ember.linalg.det, np.linalg.det, [((3, 3),), ((2, 2, 2),), ((1, 1),)],
           **_LINALG),
    OpSpec("linalg_slogdet", ("linalg_slogdet",), lambda a: ember.linalg.slogdet(a)[1],
           lambda a: np.linalg.slogdet(a)[1], [((2, 3, 3),), ((2, 2, 2),)], **_LINALG),
    OpSpec("linalg_slogdet_sign", ("linalg_slogdet",), lambda a: ember.linalg.slogdet(a)[0],  # no gradient
           lambda a: np.linalg.slogdet(a)[0], [((3, 3),), ((2, 2, 2),)], grad=False, low_precision=False),
    OpSpec("linalg_solve", ("linalg_solve",), lambda a, b: ember.linalg.solve(_plus3i(a), b),
           lambda a, b: np.linalg.solve(_plus3i(a), b), [((3, 3), (3, 2)), ((2, 2, 2), (2, 1)), ((2, 2), (3, 2, 1))],
           **_LINALG),
    OpSpec("linalg_solve_triangular", ("linalg_solve_triangular",),
           lambda a, b: ember.linalg.solve_triangular(_plus3i(a), b, upper=True),
           lambda a, b: np.linalg.solve(np.triu(_plus3i(a)), b), [((3, 3), (3, 2)), ((2, 2, 2), (2, 3))], **_LINALG),
    OpSpec("linalg_solve_triangular_right_unit", ("linalg_solve_triangular",),
           lambda a, b: ember.linalg.solve_triangular(a, b, upper=False, left=False, unitriangular=True),
           lambda a, b: np.swapaxes(np.linalg.solve(np.swapaxes(np.tril(a, -1) + np.eye(3), -1, -2),
                                                    np.swapaxes(b, -1, -2)), -1, -2), [((3, 3), (2, 3))], **_LINALG),
    OpSpec("linalg_pinv", ("linalg_pinv",), ember.linalg.pinv, np.linalg.pinv, [((4, 3),), ((2, 2, 3),)],
           **_LINALG),
    OpSpec("linalg_pinv_hermitian", ("linalg_pinv",), lambda a: ember.linalg.pinv(_spd(a), hermitian=True),
           lambda a: np.linalg.pinv(_spd(a)), [((3, 3),)], **_LINALG),
    OpSpec("linalg_matrix_exp", ("linalg_matrix_exp",), ember.linalg.matrix_exp, _scipy_expm,
           [((3, 3),), ((2, 2, 2),), ((0, 2, 2),)], **_LINALG),
]


# ---- torch.special (ember/ops/special_ops.py): references from scipy.special (a test extra) -------------------------
def _sp(name: str) -> Callable:
    return getattr(__import__("scipy.special").special, name)


def _chebyshev_vw(n: int, sign: int) -> Callable:
    """V_n = U_n - U_{n-1}, W_n = U_n + U_{n-1} (identities of the third/fourth kinds)."""
    return lambda a: _sp("eval_chebyu")(n, a) + sign * _sp("eval_chebyu")(n - 1, a)


_POLY_N = 4  # degree used by the polynomial specs (the recurrence; tests/ops/test_special_functions_vs_scipy.py covers n)
SPECS += [
    OpSpec("lgamma", ("lgamma",), ember.lgamma, _sp("gammaln"), UNARY_SHAPES, domain="positive", int_dtypes=INT,
           int_out="float32"),
    OpSpec("digamma", ("digamma",), ember.digamma, _sp("psi"), UNARY_SHAPES, domain="positive"),
    OpSpec("polygamma", ("polygamma",), lambda x: ember.polygamma(2, x), lambda a: _sp("polygamma")(2, a),
           UNARY_SHAPES, domain="positive"),
    OpSpec("i0", ("i0",), ember.i0, _sp("i0"), UNARY_SHAPES, int_dtypes=INT, int_out="float32"),
    OpSpec("i0e", ("i0e",), lambda *a: ember.special.i0e(*a), _sp("i0e"), UNARY_SHAPES, domain="nonzero"),
    OpSpec("i1", ("i1",), lambda *a: ember.special.i1(*a), _sp("i1"), UNARY_SHAPES),
    OpSpec("i1e", ("i1e",), lambda *a: ember.special.i1e(*a), _sp("i1e"), UNARY_SHAPES, domain="nonzero"),
    OpSpec("ndtr", ("ndtr",), lambda *a: ember.special.ndtr(*a), _sp("ndtr"), UNARY_SHAPES),
    OpSpec("log_ndtr", ("log_ndtr",), lambda *a: ember.special.log_ndtr(*a), _sp("log_ndtr"), UNARY_SHAPES),
    OpSpec("ndtri", ("ndtri", "mul"), lambda p: ember.special.ndtri(p * 0.25), lambda a: _sp("ndtri")(a * 0.25), UNARY_SHAPES,
           domain="positive"),
    OpSpec("entr", ("entr",), lambda *a: ember.special.entr(*a), _sp("entr"), UNARY_SHAPES, domain="positive"),
    OpSpec("xlog1py", ("xlog1py",), lambda *a: ember.special.xlog1py(*a), _sp("xlog1py"), BINARY_SHAPES, domain=("real", "positive")),
    OpSpec("zeta", ("zeta", "add"), lambda x, q: ember.special.zeta(x + 1.0, q), lambda a, b: _sp("zeta")(a + 1.0, b),
           BINARY_SHAPES, domain="positive", diff=(1,)),
    OpSpec("igamma", ("igamma",), lambda *a: ember.special.gammainc(*a), _sp("gammainc"), BINARY_SHAPES, domain="positive", diff=(1,)),
    OpSpec("igammac", ("igammac",), lambda *a: ember.special.gammaincc(*a), _sp("gammaincc"), BINARY_SHAPES, domain="positive", diff=(1,)),
    *[OpSpec(name, (name,), lambda x, n=name: getattr(ember.special, n)(x), ref, UNARY_SHAPES, domain=domain,
             grad=False)
      for name, ref, domain in (
          ("bessel_j0", _sp("j0"), "real"), ("bessel_j1", _sp("j1"), "real"), ("bessel_y0", _sp("y0"), "positive"),
          ("bessel_y1", _sp("y1"), "positive"), ("modified_bessel_i0", _sp("i0"), "real"),
          ("modified_bessel_i1", _sp("i1"), "real"), ("modified_bessel_k0", _sp("k0"), "positive"),
          ("modified_bessel_k1", _sp("k1"), "positive"), ("scaled_modified_bessel_k0", _sp("k0e"), "positive"),
          ("scaled_modified_bessel_k1", _sp("k1e"), "positive"), ("airy_ai", lambda a: _sp("airy")(a)[0], "real"),
          ("spherical_bessel_j0", lambda a: _sp("spherical_jn")(0, a), "real"))],
    *[OpSpec(name, (name,), lambda x, n=name: getattr(ember.special, n)(x, _POLY_N), ref, UNARY_SHAPES,
             domain="unit", grad=False)
      for name, ref in (
          ("chebyshev_polynomial_t", lambda a: _sp("eval_chebyt")(_POLY_N, a)),
          ("chebyshev_polynomial_u", lambda a: _sp("eval_chebyu")(_POLY_N, a)),
          ("chebyshev_polynomial_v", _chebyshev_vw(_POLY_N, -1)), ("chebyshev_polynomial_w", _chebyshev_vw(_POLY_N, 1)),
          ("shifted_chebyshev_polynomial_t", lambda a: _sp("eval_chebyt")(_POLY_N, 2 * a - 1)),
          ("shifted_chebyshev_polynomial_u", lambda a: _sp("eval_chebyu")(_POLY_N, 2 * a - 1)),
          ("shifted_chebyshev_polynomial_v", lambda a: _chebyshev_vw(_POLY_N, -1)(2 * a - 1)),
          ("shifted_chebyshev_polynomial_w", lambda a: _chebyshev_vw(_POLY_N, 1)(2 * a - 1)),
          ("hermite_polynomial_h", lambda a: _sp("eval_hermite")(_POLY_N, a)),
          ("hermite_polynomial_he", lambda a: _sp("eval_hermitenorm")(_POLY_N, a)),
          ("laguerre_polynomial_l", lambda a: _sp("eval_laguerre")(_POLY_N, a)),
          ("legendre_polynomial_p", lambda a: _sp("eval_legendre")(_POLY_N, a)))],
]


# Sparse COO products (ember/ops/sparse_ops.py): a 3x4 sparse matrix from fixed entries, unsorted and with
# repeats (they add), times a dense matrix. sparse_sddmm is the gradient to the values (second order covers it).
def _coo_rows(rng: np.random.Generator, shapes: tuple) -> np.ndarray:
    return np.array([1, 0, 2, 1, 2, 1, 0], dtype=np.int64)[:shapes[2][0]]


def _coo_cols(rng: np.random.Generator, shapes: tuple) -> np.ndarray:
    return np.array([0, 3, 3, 0, 1, 0, 1], dtype=np.int64)[:shapes[2][0]]


def _coo_mm_ref(r: np.ndarray, c: np.ndarray, v: np.ndarray, d: np.ndarray) -> np.ndarray:
    a = np.zeros((3, 4), dtype=np.result_type(v, d))
    np.add.at(a, (r, c), v)
    return a @ d


SPECS += [
    OpSpec("sparse_mm", ("sparse_coo_mm",),
           lambda r, c, v, d: ember.sparse.mm(ember.sparse_coo_tensor(ember.stack([r, c]), v, (3, 4)), d),
           _coo_mm_ref, [(None, None, (7,), (4, 2)), (None, None, (5,), (4, 1)), (None, None, (0,), (4, 3))],
           fixed={0: _coo_rows, 1: _coo_cols}, low_precision=False, complex_dtypes=("complex64", "complex128")),
]
COVERED_BY_BACKWARD["sparse_sddmm"] = ("sparse_mm",)


# ---- complex dtypes and ember.fft (docs/complex-fft.md) ------------------------------------------------
# Complex-only specs have float_dtypes=(); the harness runs them in complex64/complex128 (forward), complex128
# gradients against central differences in the real and imaginary directions (PyTorch's convention), and on
# every axis of tests/ops/test_ops_axes.py. Specs whose float inputs give complex results use float_out="complex".
C = ("complex64", "complex128")
_CX = dict(float_dtypes=(), complex_dtypes=C, low_precision=False)
_TO_C = dict(float_out="complex", low_precision=False)


def _angle_ref(a: np.ndarray) -> np.ndarray:
    return np.angle(a) if a.dtype.kind == "c" else np.where(a < 0, np.pi, 0.0)


def _fft_pair(name: str, **kw: Any) -> tuple:
    return (lambda x: getattr(ember.fft, name)(x, **kw)), (lambda a: getattr(np.fft, name)(a, **_np_fft_kw(kw)))


def _np_fft_kw(kw: dict) -> dict:
    out = dict(kw)
    if "dim" in out:
        dim = out.pop("dim")
        out["axes" if isinstance(dim, tuple) else "axis"] = dim
    return out


SPECS += [
    # elementwise math on complex numbers (holomorphic: the gradient is g * conj(f'(z)))
    OpSpec("neg_complex", ("neg",), ember.neg, np.negative, UNARY_SHAPES, **_CX),
    OpSpec("exp_complex", ("exp",), ember.exp, np.exp, UNARY_SHAPES, **_CX),
    OpSpec("log_complex", ("log",), ember.log, np.log, UNARY_SHAPES, domain="positive", **_CX),
    OpSpec("log1p_complex", ("log1p",), ember.log1p, np.log1p, UNARY_SHAPES, domain="positive", **_CX),
    OpSpec("sqrt_complex", ("sqrt",), ember.sqrt, np.sqrt, UNARY_SHAPES, domain="positive", **_CX),
    OpSpec("rsqrt_complex", ("rsqrt",), ember.rsqrt, lambda a: 1 / np.sqrt(a), UNARY_SHAPES, domain="positive", **_CX),
    OpSpec("sin_complex", ("sin",), ember.sin, np.sin, UNARY_SHAPES, **_CX),
    OpSpec("cos_complex", ("cos",), ember.cos, np.cos, UNARY_SHAPES, **_CX),
    OpSpec("tan_complex", ("tan",), ember.tan, np.tan, UNARY_SHAPES, domain="unit", **_CX),
    OpSpec("tanh_complex", ("tanh",), ember.tanh, np.tanh, UNARY_SHAPES, **_CX),
    OpSpec("sinh_complex", ("sinh",), ember.sinh, np.sinh, UNARY_SHAPES, **_CX),
    OpSpec("cosh_complex", ("cosh",), ember.cosh, np.cosh, UNARY_SHAPES, **_CX),
    OpSpec("asin_complex", ("asin",), ember.asin, np.arcsin, UNARY_SHAPES, domain="unit", **_CX),
    OpSpec("atan_complex", ("atan",), ember.atan, np.arctan, UNARY_SHAPES, domain="unit", **_CX),
    OpSpec("expm1_complex", ("expm1",), ember.expm1, np.expm1, UNARY_SHAPES, **_CX),
    OpSpec("log2_complex", ("log2",), ember.log2, np.log2, UNARY_SHAPES, domain="positive", **_CX),
    OpSpec("sigmoid_complex", ("sigmoid",), ember.sigmoid, lambda a: 1 / (1 + np.exp(-a)), UNARY_SHAPES, **_CX),
    OpSpec("reciprocal_complex", ("reciprocal",), ember.reciprocal, lambda a: 1 / a, UNARY_SHAPES, domain="nonzero",
           **_CX),
    OpSpec("abs_complex", ("abs",), ember.abs, np.abs, UNARY_SHAPES, domain="away0", complex_out="real", **_CX),
    OpSpec("pow_scalar_complex", ("pow",), lambda z: z ** 3, lambda a: a ** 3, UNARY_SHAPES, **_CX),
    OpSpec("pow_complex_exponent", ("pow",), lambda z: z ** (0.5 - 1j), lambda a: a ** (0.5 - 1j), UNARY_SHAPES,
           domain="positive", **_CX),
    OpSpec("add_complex", ("add",), ember.add, np.add, BINARY_SHAPES, **_CX),
    OpSpec("sub_complex", ("sub",), ember.sub, np.subtract, BINARY_SHAPES, **_CX),
    OpSpec("mul_complex", ("mul",), ember.mul, np.multiply, BINARY_SHAPES, **_CX),
    OpSpec("div_complex", ("div",), ember.div, np.true_divide, BINARY_SHAPES, domain=("real", "nonzero"), **_CX),
    OpSpec("pow_complex", ("pow",), ember.pow, np.power, BINARY_SHAPES, domain=("positive", "real"), **_CX),
    OpSpec("mul_by_complex_scalar", ("mul", "to_dtype"), lambda x: x * (1.5 - 2j), lambda a: a * (1.5 - 2j),
           UNARY_SHAPES, **_TO_C),
    OpSpec("to_complex", ("to_dtype",), lambda x: x.to(ember.complex128), lambda a: a.astype(np.complex128),
           UNARY_SHAPES, float_out="complex128", low_precision=False),
    # reductions and products
    OpSpec("sum_complex", ("sum",), lambda z: z.sum(-1), lambda a: a.sum(-1), [((2, 3),), ((4,),)], **_CX),
    OpSpec("mean_complex", ("mean",), ember.mean, np.mean, REDUCE_SHAPES, **_CX),
    OpSpec("prod_complex", ("prod",), lambda z: z.prod(1), lambda a: a.prod(1), [((2, 3),)], domain="nonzero", **_CX),
    OpSpec("cumsum_complex", ("cumsum",), lambda z: z.cumsum(-1), lambda a: np.cumsum(a, -1), [((2, 3),)], **_CX),
    OpSpec("cumprod_complex", ("cumprod",), lambda z: z.cumprod(-1), lambda a: np.cumprod(a, -1), [((2, 3),)],
           domain="nonzero", **_CX),
    OpSpec("var_complex", ("var", "real", "imag"), lambda z: z.var(-1), lambda a: np.var(a, -1, ddof=1),
           [((2, 3),)], complex_out="real", **_CX),
    OpSpec("matmul_complex", ("matmul",), ember.matmul, np.matmul,
           [((2, 3), (3, 4)), ((2, 2, 3), (3, 2)), ((3,), (3, 2))], **_CX),
    OpSpec("einsum_complex", ("einsum",), lambda a, b: ember.einsum("bij,bjk->bik", a, b),
           lambda a, b: np.einsum("bij,bjk->bik", a, b), [((2, 2, 3), (2, 3, 2))], **_CX),
    # the complex records and compositions
    OpSpec("conj", ("conj",), ember.conj, np.conj, UNARY_SHAPES, **_CX),
    OpSpec("real", ("real",), lambda z: z.real, np.real, UNARY_SHAPES, complex_out="real", **_CX),
    OpSpec("imag", ("imag",), lambda z: z.imag, np.imag, UNARY_SHAPES, complex_out="real", **_CX),
    OpSpec("angle", ("angle",), ember.angle, _angle_ref, UNARY_SHAPES, domain="away0", complex_dtypes=C,
           complex_out="real", low_precision=False),
    OpSpec("sgn_complex", ("abs", "div", "where"), ember.sgn, lambda a: a / np.abs(a), UNARY_SHAPES, domain="away0",
           **_CX),
    OpSpec("adjoint", ("conj",), lambda z: z.mH, lambda a: np.conj(np.swapaxes(a, -1, -2)), [((2, 3),), ((2, 3, 4),)],
           **_CX),
    OpSpec("view_as_real", ("view_as_real",), ember.view_as_real, lambda a: np.stack([a.real, a.imag], -1),
           UNARY_SHAPES, complex_out="real", **_CX),
    OpSpec("view_as_complex", ("view_as_complex",), ember.view_as_complex, lambda a: a[..., 0] + 1j * a[..., 1],
           [((3, 2),), ((2, 4, 2),), ((2,),)], **_TO_C),
    OpSpec("complex", ("complex",), ember.complex, lambda a, b: a + 1j * b,
           [((2, 3), (2, 3)), ((2, 1), (1, 3)), ((), ())], **_TO_C),
    OpSpec("polar", ("polar",), ember.polar, lambda r, t: r * np.exp(1j * t), [((2, 3), (2, 3)), ((3,), (2, 3))],
           domain=("positive", "real"), **_TO_C),
    # ember.fft: each function is fft_c2c, fft_r2c or fft_c2r after padding/trimming to n or s
    OpSpec("fft_fft", ("fft_c2c",), *_fft_pair("fft"), [((2, 5),), ((6,),)], **_CX),
    OpSpec("fft_fft_real_input", ("fft_c2c", "to_dtype"), *_fft_pair("fft", n=6), [((2, 5),)], **_TO_C),
    OpSpec("fft_ifft_ortho_trim", ("fft_c2c",), *_fft_pair("ifft", n=3, dim=0, norm="ortho"), [((4, 3),)], **_CX),
    OpSpec("fft_fft2_forward", ("fft_c2c",), *_fft_pair("fft2", norm="forward"), [((3, 4),), ((2, 3, 2),)], **_CX),
    OpSpec("fft_fftn_s", ("fft_c2c",), *_fft_pair("fftn", s=(4, 2)), [((3, 3),)], **_CX),
    OpSpec("fft_rfft", ("fft_r2c",), *_fft_pair("rfft"), [((2, 6),), ((5,),)], **_TO_C),
    OpSpec("fft_rfft_n_ortho", ("fft_r2c",), *_fft_pair("rfft", n=7, norm="ortho"), [((2, 5),)], **_TO_C),
    OpSpec("fft_rfft2", ("fft_r2c",), *_fft_pair("rfft2"), [((3, 4),), ((2, 3, 5),)], **_TO_C),
    OpSpec("fft_irfft", ("fft_c2r",), *_fft_pair("irfft"), [((2, 4),), ((5,),)], complex_out="real", **_CX),
    OpSpec("fft_irfft_odd_n", ("fft_c2r",), *_fft_pair("irfft", n=7, norm="forward"), [((2, 4),)],
           complex_out="real", **_CX),
    OpSpec("fft_irfftn", ("fft_c2r",), *_fft_pair("irfftn", s=(3, 6)), [((3, 4),), ((2, 3, 4),)],
           complex_out="real", **_CX),
    OpSpec("fft_hfft", ("fft_c2r", "conj"), *_fft_pair("hfft", n=6), [((2, 4),)], complex_out="real", **_CX),
    OpSpec("fft_ihfft", ("fft_r2c", "conj"), *_fft_pair("ihfft"), [((2, 6),)], **_TO_C),
    OpSpec("fft_fftshift", (), lambda z: ember.fft.fftshift(z), np.fft.fftshift, [((3, 4),)], **_CX),
    # complex eigen-decomposition of general matrices (gauge-invariant outputs: eigenvalues, |eigenvectors|)
    OpSpec("linalg_eigvals", ("linalg_eig",), ember.linalg.eigvals, np.linalg.eigvals, [((3, 3),), ((2, 2, 2),)],
           complex_dtypes=C, **_TO_C, atol=1e-6, rtol=1e-5),
    OpSpec("linalg_eig_vector_magnitudes", ("linalg_eig",), lambda a: ember.linalg.eig(a)[1].abs(),
           lambda a: np.abs(np.linalg.eig(a)[1]), [((3, 3),)], complex_dtypes=C, complex_out="real",
           low_precision=False, atol=1e-6, rtol=1e-5),
]

SPECS += [  # complex matrices: inv, det and solve take them, with PyTorch's conjugated gradients
    OpSpec("linalg_inv_complex", ("linalg_inv",), lambda a: ember.linalg.inv(_plus3i(a)),
           lambda a: np.linalg.inv(_plus3i(a)), [((3, 3),), ((2, 2, 2),)], **_CX, atol=1e-6, rtol=1e-5),
    OpSpec("linalg_det_complex", ("linalg_det",), ember.linalg.det, np.linalg.det, [((3, 3),), ((2, 2, 2),)], **_CX,
           atol=1e-6, rtol=1e-5),
    OpSpec("linalg_solve_complex", ("linalg_solve",), lambda a, b: ember.linalg.solve(_plus3i(a), b),
           lambda a, b: np.linalg.solve(_plus3i(a), b), [((3, 3), (3, 2)), ((2, 2, 2), (2, 1))], **_CX,
           atol=1e-6, rtol=1e-5),
]


def _herm(a: Any) -> Any:
    return (a + a.conj().swapaxes(-1, -2)) / 2


SPECS += [  # Hermitian matrices: eigh/eigvalsh (real eigenvalues, complex eigenvectors; gauge-invariant outputs)
    OpSpec("linalg_eigvalsh_complex", ("linalg_eigh",), lambda a: ember.linalg.eigvalsh(_herm(a)),
           lambda a: np.linalg.eigvalsh(_herm(a)), [((3, 3),), ((2, 2, 2),)], complex_out="real", **_CX,
           atol=1e-6, rtol=1e-5),
    OpSpec("linalg_eigh_vector_magnitudes_complex", ("linalg_eigh",), lambda a: ember.linalg.eigh(_herm(a))[1].abs(),
           lambda a: np.abs(np.linalg.eigh(_herm(a))[1]), [((3, 3),)], complex_out="real", **_CX,
           atol=1e-6, rtol=1e-5),
]

SPECS += [  # complex svd: singular values and |U| (gauge-invariant), PyTorch's complex svd_backward
    OpSpec("linalg_svdvals_complex", ("linalg_svd",), ember.linalg.svdvals, lambda a: np.linalg.svd(a, compute_uv=False),
           [((3, 3),), ((4, 2),), ((2, 2, 3),)], complex_out="real", **_CX, atol=1e-6, rtol=1e-5),
    OpSpec("linalg_svd_u_magnitudes_complex", ("linalg_svd",), lambda a: ember.linalg.svd(a, full_matrices=False)[0].abs(),
           lambda a: np.abs(np.linalg.svd(a, full_matrices=False)[0]), [((3, 3),), ((4, 2),)], complex_out="real",
           **_CX, atol=1e-6, rtol=1e-5),
]

SPECS += [  # complex slogdet: the phase and log|det| (both differentiable for complex matrices)
    OpSpec("linalg_slogdet_complex", ("linalg_slogdet_complex",), lambda a: tuple(ember.linalg.slogdet(_plus3i(a))),
           lambda a: np.linalg.slogdet(_plus3i(a)), [((3, 3),), ((2, 2, 2),)], complex_out=None, **_CX,  # mixed dtypes
           atol=1e-6, rtol=1e-5),
]


def _hpd(a: Any) -> Any:
    return a @ a.conj().swapaxes(-1, -2) + 3 * _eye_like(a)


SPECS += [  # complex cholesky (Hermitian positive-definite) and triangular solves
    OpSpec("linalg_cholesky_complex", ("linalg_cholesky",), lambda a: ember.linalg.cholesky(_hpd(a)),
           lambda a: np.linalg.cholesky(_hpd(a)), [((3, 3),), ((2, 2, 2),)], **_CX, atol=1e-6, rtol=1e-5),
    OpSpec("linalg_solve_triangular_complex", ("linalg_solve_triangular",),
           lambda a, b: ember.linalg.solve_triangular(_plus3i(a), b, upper=True),
           lambda a, b: np.linalg.solve(np.triu(_plus3i(a)), b), [((3, 3), (3, 2)), ((2, 2, 2), (2, 3))], **_CX,
           atol=1e-6, rtol=1e-5),
]

SPECS += [  # complex qr, lu_factor, pinv, lstsq and matrix_exp (PyTorch's conjugated gradients)
    OpSpec("linalg_qr_complex", ("linalg_qr",), lambda a: tuple(ember.linalg.qr(a)), lambda a: np.linalg.qr(a),
           [((4, 3),), ((2, 3, 3),), ((2, 4),)], **_CX, atol=1e-6, rtol=1e-5),
    OpSpec("linalg_lu_factor_complex", ("linalg_lu_factor",), lambda a: ember.linalg.lu_factor_ex(a)[0],
           lambda a: _scipy_lu(a)[0], [((2, 3, 3),), ((2, 4, 3),), ((2, 3, 4),)], **_CX, atol=1e-6, rtol=1e-5),
    OpSpec("linalg_pinv_complex", ("linalg_pinv",), ember.linalg.pinv, np.linalg.pinv, [((4, 3),), ((2, 2, 3),)],
           **_CX, atol=1e-6, rtol=1e-5),
    OpSpec("linalg_pinv_hermitian_complex", ("linalg_pinv",), lambda a: ember.linalg.pinv(_hpd(a), hermitian=True),
           lambda a: np.linalg.pinv(_hpd(a)), [((3, 3),)], **_CX, atol=1e-6, rtol=1e-5),
    OpSpec("linalg_lstsq_complex", ("linalg_pinv",), lambda a, b: ember.linalg.lstsq(a, b).solution,
           lambda a, b: np.linalg.pinv(a) @ b, [((4, 3), (4, 2)), ((2, 3, 3), (2, 3, 1))], **_CX, atol=1e-6,
           rtol=1e-5),
    OpSpec("linalg_matrix_exp_complex", ("linalg_matrix_exp",), ember.linalg.matrix_exp, _scipy_expm,
           [((3, 3),), ((2, 2, 2),)], **_CX, atol=1e-6, rtol=1e-5),
]


def _lstm_ref(gx: np.ndarray, h: np.ndarray, c: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple:
    """One LSTM direction over a sequence (gates i, f, g, o), written out in NumPy."""
    hidden, outs = h.shape[-1], []
    for t in range(gx.shape[0]):
        z = gx[t] + h @ w.T + b
        i, f, o = (1 / (1 + np.exp(-z[:, k * hidden:(k + 1) * hidden])) for k in (0, 1, 3))
        c = f * c + i * np.tanh(z[:, 2 * hidden:3 * hidden])
        h = o * np.tanh(c)
        outs.append(h)
    return np.stack(outs), h, c


SPECS += [  # the fused LSTM layer (ember/ops/lstm_layer.py); its backward record is covered through it
    OpSpec("lstm_layer", ("lstm_layer",), lambda gx, h, c, w, b: ember.ops.lstm_layer.lstm_layer(gx, h, c, w, b), _lstm_ref,
           [((3, 2, 8), (2, 2), (2, 2), (8, 2), (8,)), ((1, 1, 4), (1, 1), (1, 1), (4, 1), (4,))]),
]


def _gru_ref(gx: np.ndarray, h: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple:
    """One GRU direction over a sequence (gates r, z, n), written out in NumPy."""
    hidden, outs = h.shape[-1], []
    for t in range(gx.shape[0]):
        gh = h @ w.T + b
        r, z = (1 / (1 + np.exp(-(gx[t][:, k * hidden:(k + 1) * hidden] + gh[:, k * hidden:(k + 1) * hidden])))
                for k in (0, 1))
        n = np.tanh(gx[t][:, 2 * hidden:] + r * gh[:, 2 * hidden:])
        h = (1 - z) * n + z * h
        outs.append(h)
    return np.stack(outs), h


def _rnn_ref(nonlinearity: str) -> Callable:
    def ref(gx: np.ndarray, h: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple:
        outs = []
        for t in range(gx.shape[0]):
            pre = gx[t] + h @ w.T + b
            h = np.tanh(pre) if nonlinearity == "tanh" else np.maximum(pre, 0)
            outs.append(h)
        return np.stack(outs), h
    return ref


SPECS += [  # the fused GRU and Elman RNN layers (ember/ops/gru_rnn_layer.py)
    OpSpec("gru_layer", ("gru_layer",), lambda gx, h, w, b: ember.ops.gru_rnn_layer.gru_layer(gx, h, w, b), _gru_ref,
           [((3, 2, 6), (2, 2), (6, 2), (6,)), ((1, 1, 3), (1, 1), (3, 1), (3,))]),
    OpSpec("rnn_layer_tanh", ("rnn_layer",), lambda gx, h, w, b: ember.ops.gru_rnn_layer.rnn_layer(gx, h, w, b, "tanh"),
           _rnn_ref("tanh"), [((3, 2, 2), (2, 2), (2, 2), (2,)), ((1, 1, 1), (1, 1), (1, 1), (1,))]),
    OpSpec("rnn_layer_relu", ("rnn_layer",), lambda gx, h, w, b: ember.ops.gru_rnn_layer.rnn_layer(gx, h, w, b, "relu"),
           _rnn_ref("relu"), [((3, 2, 2), (2, 2), (2, 2), (2,))], domain="positive"),
]
# as_strided: a view of the storage with any sizes/strides/offset (ember/ops/strided.py), overlapping here.
# It reads memory, so its values depend on the input's layout (in PyTorch too): the specs take a contiguous
# input (the layout sweep then checks the record, not a layout rule); tests/ops/test_as_strided_vs_torch.py
# checks views of views, offsets and writes against torch.
def _as_strided_ref(size: tuple, stride: tuple, offset: int) -> Any:
    def ref(x: Any) -> Any:
        flat = np.ascontiguousarray(x).reshape(-1)[offset:]
        return np.lib.stride_tricks.as_strided(flat, size, tuple(s * flat.itemsize for s in stride)).copy()
    return ref


SPECS += [
    OpSpec("as_strided_windows", ("as_strided",), lambda x: x.contiguous().as_strided((3, 3), (2, 1)), _as_strided_ref((3, 3), (2, 1), 0),
           [((3, 4),), ((12,),)]),
    OpSpec("as_strided_offset", ("as_strided",), lambda x: ember.as_strided(x.contiguous(), (2, 2), (4, 1), 1),
           _as_strided_ref((2, 2), (4, 1), 1), [((3, 4),)]),
]
