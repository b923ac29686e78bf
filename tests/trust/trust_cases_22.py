"""Seeded case generators for the trust fuzzer's eighth wave (trust22): one-input functions over every dtype.

``unary_dtypes`` draws one of ~150 functions of one tensor (math and special functions, rounding, activations,
bitwise and logical ops, casts and predicates, scans, reductions, shape functions, the in-place forms) and runs it
on an input of any dtype (bool, the integers with their extremes, the half floats, complex) and shape (0-d, empty,
1-d, 2-d), then compares the value, the result dtype (integer inputs promote to float32 or keep their dtype, bool
becomes int64 in sums...) and the error: ember must refuse where torch refuses (``abs`` of bool, ``sign`` of
complex, a float-only function of an integer in place). A second draw applies the function through ``out=`` of
another dtype.

Example:
    >>> case = unary_dtypes_case(np.random.default_rng(3)); print(case.code)
"""
from __future__ import annotations

import numpy as np

from trust_cases import ALL_DTYPES, GENERATORS, pick, values
from trust_diff import Case

FUNCTIONS = [
    # math
    "L.abs(x)", "L.neg(x)", "L.sign(x)", "L.sgn(x)", "L.exp(x)", "L.exp2(x)", "L.expm1(x)", "L.log(x)", "L.log2(x)",
    "L.log10(x)", "L.log1p(x)", "L.sqrt(x)", "L.rsqrt(x)", "L.square(x)", "L.reciprocal(x)", "L.sin(x)", "L.cos(x)",
    "L.tan(x)", "L.asin(x)", "L.acos(x)", "L.atan(x)", "L.sinh(x)", "L.cosh(x)", "L.tanh(x)", "L.asinh(x)",
    "L.acosh(x)", "L.atanh(x)", "L.sigmoid(x)", "L.erf(x)", "L.erfc(x)", "L.erfinv(x)", "L.lgamma(x)",
    "L.digamma(x)", "L.i0(x)", "L.sinc(x)", "L.logit(x)", "L.deg2rad(x)", "L.rad2deg(x)", "L.angle(x)",
    "L.positive(x)", "L.frac(x)", "L.special.expit(x)", "L.special.i0e(x)", "L.special.i1(x)", "L.special.ndtr(x)",
    "L.special.ndtri(x)", "L.special.log_ndtr(x)", "L.special.entr(x)", "L.special.erfcx(x)", "L.nan_to_num(x)",
    "L.xlogy(x, 2)", "L.special.xlog1py(x, x)", "x ** 2", "x ** 0.5", "2 ** x", "x ** -1", "x ** 0", "x / 2",
    "x // 2", "x % 3", "-x", "x * 1.5", "x + True", "x - 1", "1 - x", "x * x", "x / x", "x ** x",
    # rounding and predicates
    "L.round(x)", "L.round(x, decimals=1)", "L.floor(x)", "L.ceil(x)", "L.trunc(x)", "L.fix(x)", "L.isnan(x)",
    "L.isinf(x)", "L.isfinite(x)", "L.isposinf(x)", "L.isneginf(x)", "L.isreal(x)", "L.signbit(x)",
    "L.logical_not(x)", "L.bitwise_not(x)", "x << 1", "x >> 1", "x & 3", "x | 1", "x ^ 2", "~x", "x == 0", "x > 0",
    "L.is_nonzero(x.reshape(-1)[:1].reshape(()))", "L.is_floating_point(x)", "L.is_complex(x)",
    # activations
    "L.relu(x)", "L.nn.functional.relu6(x)", "L.nn.functional.leaky_relu(x)", "L.nn.functional.hardtanh(x)",
    "L.nn.functional.elu(x)", "L.nn.functional.gelu(x)", "L.nn.functional.silu(x)", "L.nn.functional.softplus(x)",
    "L.nn.functional.hardsigmoid(x)", "L.nn.functional.hardswish(x)", "L.nn.functional.threshold(x, 1, 5)",
    "L.nn.functional.hardshrink(x)", "L.nn.functional.softshrink(x)", "L.nn.functional.logsigmoid(x)",
    "L.nn.functional.softsign(x)", "L.nn.functional.tanhshrink(x)", "L.nn.functional.mish(x)",
    "L.nn.functional.celu(x)", "L.nn.functional.selu(x)", "L.nn.functional.relu(x)",
    "L.clamp(x, 0, 2)", "L.clamp(x, min=0.5)", "L.clamp(x, max=-1)", "L.clip(x, -1, 1)",
    # casts
    "x.float()", "x.double()", "x.half()", "x.bool()", "x.long()", "x.int()", "x.short()", "x.char()", "x.byte()",
    "x.to(L.bfloat16)", "x.to(L.complex64)", "x.type(L.int16)", "x.to(x.dtype)",
    # reductions and scans
    "x.sum()", "x.prod()", "x.mean()", "x.amax()", "x.max()", "x.min()", "x.argmax()", "x.std()", "x.var()",
    "x.norm()", "x.cumsum(0)", "x.cumprod(0)", "x.cummax(0)", "x.logcumsumexp(0)", "x.any()", "x.all()",
    "x.count_nonzero()", "x.nansum()", "x.nanmean()", "x.median()", "x.sort(0)", "x.argsort(0)", "x.unique()",
    "x.diff(dim=0)", "L.softmax(x, 0)", "L.log_softmax(x, 0)", "x.logsumexp(0)", "x.sum(dtype=L.int8)",
    "L.histc(x, 4)", "L.bincount(x.reshape(-1))", "x.trace()", "L.aminmax(x)", "x.msort()",
    # shape functions (no dtype change, but empty and 0-d inputs)
    "x.flip(0)", "x.roll(1)", "x.t()", "x.ravel()", "x.unsqueeze(0)", "x.tril()", "x.triu()", "x.repeat(2)",
    "L.atleast_2d(x)", "x.flatten()", "L.diag(x)", "x.nonzero()", "L.argwhere(x)", "L.where(x)",
]
INPLACE = ["abs_", "neg_", "sign_", "exp_", "sqrt_", "floor_", "round_", "sigmoid_", "relu_", "clamp_(0, 1)",
           "bitwise_not_", "logical_not_", "reciprocal_", "square_", "trunc_", "frac_", "nan_to_num_", "sin_",
           "erf_", "tanh_", "log1p_", "mul_(2)", "div_(2)", "add_(1.5)", "pow_(2)", "fill_(3.7)", "zero_",
           "clamp_(min=0.5)", "fmod_(2)", "remainder_(-2)", "floor_divide_(2)", "lerp_(x, 0.5)"]
SHAPES = [(), (0,), (5,), (2, 3), (2, 0), (1, 1)]
OUT_DTYPES = ["float32", "float64", "int64", "int32", "bool", "float16", "complex64", "uint8"]


def unary_dtypes_case(rng: np.random.Generator) -> Case:
    """One function of one tensor of a drawn dtype and shape: value, dtype and error as torch."""
    dtype = pick(rng, ALL_DTYPES)
    shape = pick(rng, SHAPES)
    inputs = {"x": (values(rng, dtype, shape), dtype)}
    u = rng.random()
    if u < 0.7:
        return Case(f"out = {pick(rng, FUNCTIONS)}", inputs, zero_sign=False)
    if u < 0.85:
        op = pick(rng, INPLACE)
        call = f"x.{op}" if "(" in op else f"x.{op}()"
        return Case(f"r = {call}\nout = (r, r is x, x)", inputs, zero_sign=False)
    fn = pick(rng, [f for f in FUNCTIONS if f.startswith("L.") and f.endswith("(x)") and "functional" not in f
                    and not f.startswith(("L.is_", "L.where", "L.argwhere", "L.bincount", "L.atleast", "L.diag"))])
    odt = pick(rng, OUT_DTYPES)
    inputs["o"] = (np.zeros(pick(rng, [shape, (0,)])), odt)
    return Case(f"r = {fn[:-1]}, out=o)\nout = (r, r is o, o)", inputs, zero_sign=False)


GENERATORS["unary_dtypes"] = unary_dtypes_case
