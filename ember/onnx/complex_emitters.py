"""ONNX export of complex tensors and of the Fourier transform records (``fft_c2c``, ``fft_r2c``, ``fft_c2r``).

ONNX Runtime computes with no complex element type (its Cast, Mul, MatMul... have no complex kernels), so a
complex value of shape ``S`` travels through an exported graph as a real tensor of shape ``S + (2,)``: real
and imaginary parts along a trailing axis, ``view_as_real``'s layout and the layout of ONNX's own ``DFT``
(opset 17). Complex graph inputs and outputs have that shape too; the model's metadata names them
(``ember.complex_values``) and :func:`ember.onnx.run` converts complex arrays in and out.

An emitter that understands this layout is marked with :func:`pairs`; the exporter refuses any other op on
a complex value with an error naming it, instead of running a real op on the pairs (``Mul`` of two pairs is
not the complex product). Ops whose ONNX op is linear and elementwise (``Add``, ``Sub``, ``Neg``,
``Identity``) act on the pairs correctly as they are.

The transforms are ``DFT`` along one axis at a time. Inverse transforms run as ``conj(DFT(conj(x)))``:
ONNX Runtime's inverse ``DFT`` of a non-power-of-two length is only ~1e-7 accurate in float64, its forward
one is exact to rounding. ``fft_c2r`` rebuilds the full Hermitian spectrum (the half spectrum, then the
conjugated mirror of its entries 1 .. n - n//2 - 1) and keeps the real part of its inverse, as NumPy's
``irfftn`` (the imaginary parts of the zero and Nyquist entries are ignored).

Example:
    >>> import ember, ember.onnx, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "spectrum.onnx")
    >>> _ = ember.onnx.export(lambda x: ember.fft.rfft(x).abs(), (ember.randn(2, 8),), path)  # doctest: +SKIP
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from ember import dtypes
from ember.onnx.builder import GraphBuilder, static

# ONNX ops that act on each real number alone and linearly: correct on (..., 2) pairs as they are.
LINEAR_ONNX_OPS = frozenset({"Add", "Sub", "Neg", "Identity"})
METADATA_KEY = "ember.complex_values"


def pairs(emit: Callable) -> Callable:
    """Mark an emitter as handling complex values in the (..., 2) pair layout."""
    emit.complex_pairs = True
    return emit


def handles_complex(emitter: Callable, onnx_field: Any, node: Any) -> bool:
    """Whether ``emitter`` may run on ``node``, some of whose values are complex."""
    if getattr(emitter, "complex_pairs", False):
        return True
    tensor_specs = [s for s in node.in_specs if s is not None]
    return isinstance(onnx_field, str) and onnx_field in LINEAR_ONNX_OPS and all(
        s.dtype.is_complex for s in tensor_specs + list(node.out_specs))


def is_complex(spec: Any) -> bool:
    return spec is not None and spec.dtype.is_complex


def pair_shape(spec: Any) -> list:
    """The ONNX shape of a value: its own, with the trailing 2 of the pair layout when complex."""
    return list(spec.shape) + ([2] if is_complex(spec) else [])


# ---- helpers on pairs ------------------------------------------------------------------------------------------
def part(b: GraphBuilder, x: str, k: int) -> str:
    """The real (k = 0) or imaginary (k = 1) part of a pair tensor."""
    return b.node("Gather", [x, b.const(np.array(k, dtype=np.int64))], axis=-1)


def stack(b: GraphBuilder, re: str, im: str) -> str:
    """Two real tensors of one shape as a pair tensor."""
    last = b.ints([-1])
    return b.node("Concat", [b.node("Unsqueeze", [re, last]), b.node("Unsqueeze", [im, last])], axis=-1)


def as_pair(b: GraphBuilder, x: str, spec: Any) -> str:
    """A pair tensor for ``x``: itself when complex, else ``x`` with a zero imaginary part (Pad, not a multiply
    by 0, which would turn inf into NaN)."""
    if is_complex(spec):
        return x
    rank = len(spec.shape) + 1
    return b.node("Pad", [b.node("Unsqueeze", [x, b.ints([-1])]), b.ints([0] * rank + [0] * (rank - 1) + [1])],
                  mode="constant")


def conj(b: GraphBuilder, x: str, real_dtype: Any) -> str:
    return b.node("Mul", [x, b.const(np.array([1.0, -1.0]), real_dtype)])


def _real_dtype(spec: Any) -> Any:
    return spec.dtype.to_real() if spec.dtype.is_complex else spec.dtype


def _multiply(b: GraphBuilder, x: str, y: str) -> str:
    """The complex product of two (broadcastable) pair tensors."""
    xr, xi, yr, yi = part(b, x, 0), part(b, x, 1), part(b, y, 0), part(b, y, 1)
    re = b.node("Sub", [b.node("Mul", [xr, yr]), b.node("Mul", [xi, yi])])
    im = b.node("Add", [b.node("Mul", [xr, yi]), b.node("Mul", [xi, yr])])
    return stack(b, re, im)


def _atan2(b: GraphBuilder, y: str, x: str, dtype: Any) -> str:
    """atan2(y, x) from Atan: +-pi added where x < 0 (by the sign of y, -0.0 included), +-pi/2 at x == 0 through atan(+-inf), and 0
    where both are 0 (ember's angle(0) = 0; Atan(0/0) is NaN). ONNX Runtime's Atan is float32 only: in float64
    the float32 angle is refined by two Newton steps on x sin(t) - y cos(t) = 0 (with x, y scaled to at most 1)."""
    zero = b.scalar(0, dtype)
    ratio = b.node("Div", [y, x])
    if dtype is dtypes.float64:
        base = b.node("Cast", [b.node("Atan", [b.node("Cast", [ratio], to=dtypes.float32.onnx)])], to=dtype.onnx)
    else:
        base = b.node("Atan", [ratio])
    negative_y = b.node("Less", [b.node("Div", [b.scalar(1, dtype), y]), zero])  # -0.0 counts: atan2(-0, -1) = -pi
    pi = b.node("Where", [negative_y, b.scalar(-math.pi, dtype), b.scalar(math.pi, dtype)])
    out = b.node("Add", [base, b.node("Where", [b.node("Less", [x, zero]), pi, zero])])
    if dtype is dtypes.float64:
        largest = b.node("Max", [b.node("Abs", [x]), b.node("Abs", [y])])
        xs, ys = b.node("Div", [x, largest]), b.node("Div", [y, largest])
        for _ in range(2):
            sin, cos = b.node("Sin", [out]), b.node("Cos", [out])
            f = b.node("Sub", [b.node("Mul", [xs, sin]), b.node("Mul", [ys, cos])])
            slope = b.node("Add", [b.node("Mul", [xs, cos]), b.node("Mul", [ys, sin])])
            step = b.node("Div", [f, slope])
            finite = b.node("Not", [b.node("Or", [b.node("IsNaN", [step]), b.node("IsInf", [step])])])
            out = b.node("Where", [finite, b.node("Sub", [out, step]), out])  # inf/NaN parts keep the first guess
    both_zero = b.node("And", [b.node("Equal", [x, zero]), b.node("Equal", [y, zero])])
    return b.node("Where", [both_zero, zero, out])


# ---- the complex records ---------------------------------------------------------------------------------------
@pairs
def real(b: GraphBuilder, n: Any) -> str:
    return part(b, n.inputs[0], 0)


@pairs
def imag(b: GraphBuilder, n: Any) -> str:
    return part(b, n.inputs[0], 1)


@pairs
def conjugate(b: GraphBuilder, n: Any) -> str:
    if not is_complex(n.in_specs[0]):
        return b.node("Identity", [n.inputs[0]])
    return conj(b, n.inputs[0], _real_dtype(n.in_specs[0]))


@pairs
def same_pairs(b: GraphBuilder, n: Any) -> str:
    """``view_as_real``/``view_as_complex``: the pair layout is view_as_real's, so nothing moves."""
    return b.node("Identity", [n.inputs[0]])


def _broadcast(b: GraphBuilder, x: str, shape: Sequence) -> str:
    return b.node("Expand", [x, b.ints(list(shape))])


@pairs
def complex_from_parts(b: GraphBuilder, n: Any) -> str:
    """``complex(re, im)``: both broadcast to the result's shape, then stacked."""
    shape = n.out_specs[0].shape
    return stack(b, _broadcast(b, n.inputs[0], shape), _broadcast(b, n.inputs[1], shape))


@pairs
def polar(b: GraphBuilder, n: Any) -> str:
    """``polar(r, theta)``: r cos(theta) + i r sin(theta)."""
    r, theta = n.inputs
    shape = n.out_specs[0].shape
    re = b.node("Mul", [r, b.node("Cos", [theta])])
    im = b.node("Mul", [r, b.node("Sin", [theta])])
    return stack(b, _broadcast(b, re, shape), _broadcast(b, im, shape))


@pairs
def angle(b: GraphBuilder, n: Any) -> str:
    """atan2(imag, real) of complex values; pi where a real value is negative, NaN kept, else 0."""
    x, spec = n.inputs[0], n.in_specs[0]
    dtype = _real_dtype(spec)
    if is_complex(spec):
        return _atan2(b, part(b, x, 1), part(b, x, 0), dtype)
    zero = b.scalar(0, dtype)
    kept = b.node("Where", [b.node("IsNaN", [x]), x, zero])
    return b.node("Where", [b.node("Less", [x, zero]), b.scalar(math.pi, dtype), kept])


@pairs
def absolute(b: GraphBuilder, n: Any) -> str:
    """|z| = sqrt(re^2 + im^2) for complex values (overflows above ~1.8e19 in float32, where ember's hypot does
    not); ONNX Abs for real ones."""
    x = n.inputs[0]
    if not is_complex(n.in_specs[0]):
        return b.node("Abs", [x])
    squares = b.node("ReduceSumSquare", [x, b.ints([-1])] if b.opset >= 18 else [x], keepdims=0,
                     **({} if b.opset >= 18 else {"axes": [-1]}))
    return b.node("Sqrt", [squares])


@pairs
def multiply(b: GraphBuilder, n: Any) -> str:
    """Mul, or the complex product (a b - c d, a d + c b) when the result is complex."""
    if not is_complex(n.out_specs[0]):
        return b.node("Mul", n.inputs)
    x, y = (as_pair(b, name, spec) if spec is not None else name for name, spec in zip(n.inputs, n.in_specs))
    return _multiply(b, x, y)


@pairs
def divide(b: GraphBuilder, n: Any) -> str:
    """Div, or x conj(y) / |y|^2 when the result is complex (NumPy scales by the larger part of y first: this
    overflows for |y| above ~1.8e19 in float32)."""
    if not is_complex(n.out_specs[0]):
        return b.node("Div", n.inputs)
    x, y = (as_pair(b, name, spec) if spec is not None else name for name, spec in zip(n.inputs, n.in_specs))
    dtype = n.out_specs[0].dtype.to_real()
    numerator = _multiply(b, x, conj(b, y, dtype))
    yr, yi = part(b, y, 0), part(b, y, 1)
    magnitude2 = b.node("Add", [b.node("Mul", [yr, yr]), b.node("Mul", [yi, yi])])
    return b.node("Div", [numerator, b.node("Unsqueeze", [magnitude2, b.ints([-1])])])


@pairs
def select(b: GraphBuilder, n: Any) -> str:
    """``where(c, x, y)``: Where, with the condition given a trailing axis against complex pairs."""
    if not is_complex(n.out_specs[0]):
        return b.node("Where", n.inputs)
    cond, x, y = n.inputs
    cond = b.node("Unsqueeze", [cond, b.ints([-1])])
    x, y = (as_pair(b, name, spec) if spec is not None else name for name, spec in zip((x, y), n.in_specs[1:]))
    return b.node("Where", [cond, x, y])


@pairs
def matmul(b: GraphBuilder, n: Any) -> str:
    """MatMul, or (A + iB)(C + iD) = (AC - BD) + i(AD + BC) from four real MatMuls."""
    if not is_complex(n.out_specs[0]):
        return b.node("MatMul", n.inputs)
    x, y = (as_pair(b, name, spec) for name, spec in zip(n.inputs, n.in_specs))
    xr, xi, yr, yi = part(b, x, 0), part(b, x, 1), part(b, y, 0), part(b, y, 1)
    re = b.node("Sub", [b.node("MatMul", [xr, yr]), b.node("MatMul", [xi, yi])])
    im = b.node("Add", [b.node("MatMul", [xr, yi]), b.node("MatMul", [xi, yr])])
    return stack(b, re, im)


# ---- the Fourier transforms -------------------------------------------------------------------------------------
def _dft(b: GraphBuilder, x: str, axis: int, inverse: bool, real_dtype: Any, onesided: bool = False) -> str:
    """One unnormalized DFT along ``axis`` (>= 0) of a (..., 1) real or (..., 2) pair tensor; the inverse is
    conj(DFT(conj(x))) (ONNX Runtime's inverse divides by n and loses float64 accuracy for odd lengths)."""
    if inverse:
        x = conj(b, x, real_dtype)
    attrs = {"onesided": 1} if onesided else {}
    if b.opset >= 20:  # the axis became an input in opset 20
        out = b.node("DFT", [x, "", b.const(np.array(axis, dtype=np.int64))], **attrs)
    else:
        out = b.node("DFT", [x], axis=axis, **attrs)
    return conj(b, out, real_dtype) if inverse else out


def _scale(b: GraphBuilder, x: str, norm: str, inverse: bool, size: int, real_dtype: Any) -> str:
    """NumPy's norm modes on an unnormalized transform of ``size`` points."""
    divisor = {"ortho": math.sqrt(size), "backward": size if inverse else 1, "forward": 1 if inverse else size}[norm]
    if divisor == 1:
        return x
    return b.node("Mul", [x, b.scalar(1.0 / divisor, real_dtype)])


def _sizes(shape: Sequence, dims: Sequence, n: Any) -> int:
    return math.prod(static([shape[d] for d in dims], n, "transform length")) if dims else 1


@pairs
def fft_c2c(b: GraphBuilder, n: Any) -> str:
    spec = n.in_specs[0]
    rank, dtype = len(spec.shape), spec.dtype.to_real()
    dims = [int(d) % rank for d in n.attrs["dims"]]
    inverse = not n.attrs["forward"]
    x = n.inputs[0]
    for d in dims:
        x = _dft(b, x, d, inverse, dtype)
    out = _scale(b, x, n.attrs["norm"], inverse, _sizes(spec.shape, dims, n), dtype)
    return out if out != n.inputs[0] else b.node("Identity", [out])


@pairs
def fft_r2c(b: GraphBuilder, n: Any) -> str:
    """The last of ``dims`` first (one-sided when asked: ONNX's DFT of real input), then the others."""
    spec = n.in_specs[0]
    rank, dtype = len(spec.shape), spec.dtype
    dims = [int(d) % rank for d in n.attrs["dims"]]
    x = b.node("Unsqueeze", [n.inputs[0], b.ints([-1])])  # (..., 1): a real signal for DFT
    if not dims:
        return as_pair(b, n.inputs[0], spec)
    x = _dft(b, x, dims[-1], False, dtype, onesided=bool(n.attrs["onesided"]))
    for d in dims[:-1]:
        x = _dft(b, x, d, False, dtype)
    return _scale(b, x, n.attrs["norm"], False, _sizes(spec.shape, dims, n), dtype)


@pairs
def fft_c2r(b: GraphBuilder, n: Any) -> str:
    """Inverse complex transforms over all but the last of ``dims``, then the half spectrum along the last made
    whole (its first ``L//2 + 1`` entries, zero-padded or trimmed, followed by the conjugates of entries
    ``L - L//2 - 1 .. 1``), its inverse transform, and the real part."""
    spec = n.in_specs[0]
    rank, dtype = len(spec.shape), spec.dtype.to_real()
    dims = [int(d) % rank for d in n.attrs["dims"]]
    (length,) = static([n.attrs["last_dim_size"]], n, "last_dim_size")
    x = n.inputs[0]
    for d in dims[:-1]:
        x = _dft(b, x, d, True, dtype)
    last = dims[-1]
    have, keep = int(spec.shape[last]), length // 2 + 1
    if have < keep:  # zero entries beyond the given half spectrum (irfft's n larger than 2 (m - 1))
        pads = [0] * (rank + 1) * 2
        pads[rank + 1 + last] = keep - have
        x = b.node("Pad", [x, b.ints(pads)], mode="constant")
    elif have > keep:
        x = b.node("Slice", [x, b.ints([0]), b.ints([keep]), b.ints([last])])
    mirrored = length - keep
    if mirrored > 0:  # entries keep-1-(length%2==0) .. 1, i.e. indices mirrored .. 1 of the half spectrum
        tail = b.node("Slice", [x, b.ints([mirrored]), b.ints([0]), b.ints([last]), b.ints([-1])])
        x = b.node("Concat", [x, conj(b, tail, dtype)], axis=last)
    x = _dft(b, x, last, True, dtype)
    size = _sizes(spec.shape, dims[:-1], n) * length
    return _scale(b, part(b, x, 0), n.attrs["norm"], True, size, dtype)


def complex_dtype_error(op_name: str) -> NotImplementedError:
    return NotImplementedError(
        f"ember.onnx.export: op {op_name!r} on complex tensors is not exported. ONNX Runtime has no complex "
        "kernels, so ember carries complex values as (..., 2) real pairs, which only the Fourier transforms, "
        "real/imag/conj/abs/angle, view_as_real/view_as_complex, complex/polar, add/sub/neg/mul/div, matmul, where, "
        "exp/log/sqrt/pow, sin/cos/tan, sinh/cosh/tanh, einsum, prod, cumsum, "
        "casts, sums and means and the movement ops (reshape, permute, indexing, cat, expand, flip) understand "
        "(docs/complex-fft.md). Take the real and imaginary parts before this op, or export without it.")


def as_onnx_constant(array: np.ndarray) -> np.ndarray:
    """A complex constant in the pair layout (float32 for complex64, float64 for complex128)."""
    real_type = np.float32 if array.dtype == np.complex64 else np.float64
    return np.stack([array.real, array.imag], axis=-1).astype(real_type)


# ---- elementwise functions of complex values (pairs in, pairs out) -----------------------------------------------
def _negative(b: GraphBuilder, v: str, dtype: Any) -> str:
    """v < 0, -0.0 included (1 / -0.0 = -inf): the sign bit, which ONNX's Sign drops."""
    return b.node("Less", [b.node("Div", [b.scalar(1, dtype), v]), b.scalar(0, dtype)])


def _exp_pair(b: GraphBuilder, x: str, y: str, dtype: Any) -> tuple:
    """e^x (cos y + i sin y); a zero imaginary part stays exactly itself (exp(inf + 0j) = inf + 0j, as NumPy)."""
    scale = b.node("Exp", [x])
    im = b.node("Mul", [scale, b.node("Sin", [y])])
    return b.node("Mul", [scale, b.node("Cos", [y])]), b.node("Where", [b.node("Equal", [y, b.scalar(0, dtype)]), y, im])


def _log_pair(b: GraphBuilder, x: str, y: str, dtype: Any) -> tuple:
    """log|z| + i atan2(y, x), with |z| scaled by max(|x|, |y|) so squares cannot overflow."""
    big = b.node("Max", [b.node("Abs", [x]), b.node("Abs", [y])])
    safe = b.node("Where", [b.node("Equal", [big, b.scalar(0, dtype)]), b.scalar(1, dtype), big])
    safe = b.node("Where", [b.node("IsInf", [safe]), b.scalar(1, dtype), safe])
    xs, ys = b.node("Div", [x, safe]), b.node("Div", [y, safe])
    half = b.node("Mul", [b.scalar(0.5, dtype), b.node("Log", [b.node("Add", [b.node("Mul", [xs, xs]),
                                                                              b.node("Mul", [ys, ys])])])])
    re = b.node("Add", [b.node("Log", [big]), half])
    re = b.node("Where", [b.node("IsInf", [big]), big, re])  # |z| = inf: log is inf
    return re, _atan2(b, y, x, dtype)


def _sinh_cosh(b: GraphBuilder, v: str, dtype: Any) -> tuple:
    """(sinh v, cosh v) from Exp (ONNX Runtime has no float64 Sinh/Cosh); sinh by its series below |v| = 0.5,
    where (e^v - e^-v) / 2 would lose the relative precision (terms to v^15: error below 3e-17)."""
    up, down = b.node("Exp", [v]), b.node("Exp", [b.node("Neg", [v])])
    half = b.scalar(0.5, dtype)
    cosh = b.node("Mul", [b.node("Add", [up, down]), half])
    square = b.node("Mul", [v, v])
    series = b.scalar(1.0 / math.factorial(15), dtype)
    for k in (13, 11, 9, 7, 5, 3, 1):  # Horner: sum v^k / k!
        series = b.node("Add", [b.node("Mul", [series, square]), b.scalar(1.0 / math.factorial(k), dtype)])
    small = b.node("Less", [b.node("Abs", [v]), half])
    sinh = b.node("Where", [small, b.node("Mul", [series, v]), b.node("Mul", [b.node("Sub", [up, down]), half])])
    return sinh, cosh


def _tanh_pair(b: GraphBuilder, x: str, y: str, dtype: Any) -> tuple:
    """(sinh 2x + i sin 2y) / (cosh 2x + cos 2y); for |x| > 20 the value is sign(x) + 0i to rounding, where the
    ratio would be inf / inf."""
    two_x, two_y = b.node("Mul", [x, b.scalar(2, dtype)]), b.node("Mul", [y, b.scalar(2, dtype)])
    s, c = _sinh_cosh(b, two_x, dtype)
    den = b.node("Add", [c, b.node("Cos", [two_y])])
    far = b.node("Greater", [b.node("Abs", [x]), b.scalar(20, dtype)])
    re = b.node("Where", [far, b.node("Sign", [x]), b.node("Div", [s, den])])
    im = b.node("Where", [far, b.node("Mul", [b.node("Sin", [two_y]), b.scalar(0, dtype)]),
                          b.node("Div", [b.node("Sin", [two_y]), den])])
    return re, im


def _modulus(b: GraphBuilder, x: str, y: str, dtype: Any) -> str:
    """|z| scaled by max(|x|, |y|): no overflow or underflow of the squares (hypot)."""
    big = b.node("Max", [b.node("Abs", [x]), b.node("Abs", [y])])
    safe = b.node("Where", [b.node("Equal", [big, b.scalar(0, dtype)]), b.scalar(1, dtype), big])
    safe = b.node("Where", [b.node("IsInf", [safe]), b.scalar(1, dtype), safe])
    xs, ys = b.node("Div", [x, safe]), b.node("Div", [y, safe])
    scaled = b.node("Mul", [big, b.node("Sqrt", [b.node("Add", [b.node("Mul", [xs, xs]), b.node("Mul", [ys, ys])])])])
    return b.node("Where", [b.node("IsInf", [big]), big, scaled])


def _sqrt_pair(b: GraphBuilder, x: str, y: str, dtype: Any) -> tuple:
    """The principal root without cancellation (C99's csqrt): t = sqrt((|x| + |z|) / 2); x >= 0: (t, y / 2t),
    else (|y| / 2t, t with y's sign)."""
    zero = b.scalar(0, dtype)
    modulus = _modulus(b, x, y, dtype)
    # (|x| + |z|) / 2 halved before the sum, so it cannot overflow
    t = b.node("Sqrt", [b.node("Add", [b.node("Mul", [b.node("Abs", [x]), b.scalar(0.5, dtype)]),
                                       b.node("Mul", [modulus, b.scalar(0.5, dtype)])])])
    twice = b.node("Mul", [t, b.scalar(2, dtype)])
    other = b.node("Where", [b.node("Equal", [t, zero]), zero, b.node("Div", [y, twice])])
    other_abs = b.node("Abs", [other])
    signed_t = b.node("Where", [_negative(b, y, dtype), b.node("Neg", [t]), t])
    nonneg = b.node("Not", [b.node("Less", [x, zero])])
    return b.node("Where", [nonneg, t, other_abs]), b.node("Where", [nonneg, other, signed_t])


def _sin_pair(b, x, y, dtype):
    sh, ch = _sinh_cosh(b, y, dtype)
    return b.node("Mul", [b.node("Sin", [x]), ch]), b.node("Mul", [b.node("Cos", [x]), sh])


def _cos_pair(b, x, y, dtype):
    sh, ch = _sinh_cosh(b, y, dtype)
    return b.node("Mul", [b.node("Cos", [x]), ch]), b.node("Neg", [b.node("Mul", [b.node("Sin", [x]), sh])])


def _sinh_pair(b, x, y, dtype):
    sh, ch = _sinh_cosh(b, x, dtype)
    return b.node("Mul", [sh, b.node("Cos", [y])]), b.node("Mul", [ch, b.node("Sin", [y])])


def _cosh_pair(b, x, y, dtype):
    sh, ch = _sinh_cosh(b, x, dtype)
    return b.node("Mul", [ch, b.node("Cos", [y])]), b.node("Mul", [sh, b.node("Sin", [y])])


def _tan_pair(b, x, y, dtype):
    """tan z = -i tanh(iz): with tanh(-y + ix) = a + ib, tan z = b - ia."""
    a, im = _tanh_pair(b, b.node("Neg", [y]), x, dtype)
    return im, b.node("Neg", [a])


def elementwise(onnx_op: str, formula: Callable, float64: Callable | None = None) -> Callable:
    """An emitter: ``onnx_op`` on real values (``float64(b, x)`` instead for float64 ones, where ONNX Runtime has
    no kernel), ``formula(b, re, im, dtype) -> (re, im)`` on complex pairs."""
    @pairs
    def emit(b: GraphBuilder, n: Any) -> str:
        if not is_complex(n.in_specs[0]):
            if float64 is not None and n.in_specs[0] is not None and n.in_specs[0].dtype is dtypes.float64:
                return float64(b, n.inputs[0])
            return b.node(onnx_op, list(n.inputs))
        x = n.inputs[0]
        dtype = _real_dtype(n.in_specs[0])
        return stack(b, *formula(b, part(b, x, 0), part(b, x, 1), dtype))

    emit.__name__ = f"complex_{onnx_op.lower()}"
    emit.__doc__ = f"ONNX {onnx_op}, or its complex formula on (..., 2) pairs."
    return emit


exp = elementwise("Exp", _exp_pair)
log = elementwise("Log", _log_pair)
sqrt = elementwise("Sqrt", _sqrt_pair)
sin = elementwise("Sin", _sin_pair)
cos = elementwise("Cos", _cos_pair)
tan = elementwise("Tan", _tan_pair, lambda b, x: b.node("Div", [b.node("Sin", [x]), b.node("Cos", [x])]))
sinh = elementwise("Sinh", _sinh_pair, lambda b, x: _sinh_cosh(b, x, dtypes.float64)[0])
cosh = elementwise("Cosh", _cosh_pair, lambda b, x: _sinh_cosh(b, x, dtypes.float64)[1])
tanh = elementwise("Tanh", _tanh_pair)


@pairs
def power(b: GraphBuilder, n: Any) -> str:
    """Pow, or exp(w log z) for a complex result (NumPy computes small integer powers by products: they agree to
    rounding; 0 ** w is exp(-inf ...) here, NaN or 0 by the exponent)."""
    if not is_complex(n.out_specs[0]):
        return b.node("Pow", list(n.inputs))
    dtype = n.out_specs[0].dtype.to_real()
    z, w = (as_pair(b, name, spec) if spec is not None else name for name, spec in zip(n.inputs, n.in_specs))
    re, im = _log_pair(b, part(b, z, 0), part(b, z, 1), dtype)
    product = _multiply(b, w, stack(b, re, im))
    return stack(b, *_exp_pair(b, part(b, product, 0), part(b, product, 1), dtype))


# ---- einsum, prod and cumsum of complex values ------------------------------------------------------------------
_MAX_COMPLEX_EINSUM_OPERANDS = 4  # 2^k real Einsums for k complex operands: 16 at most


def einsum_pairs(b: GraphBuilder, inputs: Sequence[str], specs: Sequence[Any], equation: str) -> str:
    """A complex einsum as real Einsums: it is linear in each operand, so with z_j = x_j + i y_j the result is the
    sum over every choice of part per operand of i^(number of imaginary parts) times the real Einsum of those parts
    (2^k terms for k complex operands; a real operand contributes its only part)."""
    complex_count = sum(is_complex(s) for s in specs)
    if complex_count > _MAX_COMPLEX_EINSUM_OPERANDS:
        raise NotImplementedError(
            f"ember.onnx.export: einsum of {complex_count} complex operands is not exported (its pair translation "
            f"takes 2^{complex_count} real Einsums; at most {_MAX_COMPLEX_EINSUM_OPERANDS} complex operands). Split "
            "the einsum into several with fewer complex operands each.")
    choices: list = [[]]
    for name, spec in zip(inputs, specs):
        parts = [(part(b, name, 0), 0), (part(b, name, 1), 1)] if is_complex(spec) else [(name, 0)]
        choices = [c + [p] for c in choices for p in parts]
    terms: dict = {0: [], 1: [], 2: [], 3: []}  # by the power of i: +re, +im, -re, -im
    for chosen in choices:
        power = sum(k for _, k in chosen) % 4
        terms[power].append(b.node("Einsum", [name for name, _ in chosen], equation=equation))

    def total(plus: list, minus: list) -> str:
        out = plus[0] if plus else b.node("Neg", [minus.pop(0)])
        for t in plus[1:]:
            out = b.node("Add", [out, t])
        for t in minus:
            out = b.node("Sub", [out, t])
        return out

    # a complex operand's imaginary part alone makes a power-1 term, so both sums have terms
    return stack(b, total(terms[0], terms[2]), total(terms[1], terms[3]))


def prod_pairs(b: GraphBuilder, x: str, spec: Any, dims: Any, keepdim: bool, n: Any) -> str:
    """The complex product over ``dims`` (None: all) of a pair tensor: per axis, a tree of complex multiplies of
    its even and odd halves (log2(L) levels; an odd leftover multiplied in at the end), so the graph grows with
    the logarithm of the reduced length. An empty axis gives 1 + 0i."""
    shape = static(list(spec.shape), n, "shape of a complex prod")
    rank = len(shape)
    axes = sorted(range(rank) if dims is None else {int(d) % rank for d in dims})
    dtype = _real_dtype(spec)
    for axis in axes:
        length = shape[axis]
        if length == 0:
            reduced = shape[:axis] + [1] + shape[axis + 1:]
            x = b.node("Expand", [b.const(np.array([1.0, 0.0]), dtype), b.ints(reduced + [2])])
        else:
            leftover = None
            while length > 1:
                if length % 2:
                    tail = b.node("Slice", [x, b.ints([length - 1]), b.ints([length]), b.ints([axis])])
                    leftover = tail if leftover is None else _multiply(b, leftover, tail)
                    length -= 1
                    x = b.node("Slice", [x, b.ints([0]), b.ints([length]), b.ints([axis])])
                even = b.node("Slice", [x, b.ints([0]), b.ints([length]), b.ints([axis]), b.ints([2])])
                odd = b.node("Slice", [x, b.ints([1]), b.ints([length]), b.ints([axis]), b.ints([2])])
                x = _multiply(b, even, odd)
                length //= 2
            if leftover is not None:
                x = _multiply(b, x, leftover)
        shape[axis] = 1
    if not keepdim and axes:
        x = b.node("Squeeze", [x, b.ints(axes)])
    return x if axes else b.node("Identity", [x])


def cumsum_pairs(b: GraphBuilder, x: str, spec: Any, dim: int) -> str:
    """CumSum along a logical axis of a pair tensor: a sum acts on real and imaginary parts alike (the axis taken
    non-negative, so it never counts the pair axis)."""
    rank = len(spec.shape)
    if rank == 0:
        return b.node("Identity", [x])
    return b.node("CumSum", [x, b.const(np.array(int(dim) % rank, dtype=np.int64))])


# ---- reciprocal, rsqrt, sigmoid, log2/log10, log1p, expm1 of complex values ------------------------------------------
def _reciprocal_pair(b: GraphBuilder, x: str, y: str, dtype: Any) -> tuple:
    """1 / z = conj(z) / |z|^2, with z scaled by max(|x|, |y|) first so the squares cannot overflow or underflow."""
    big = b.node("Max", [b.node("Abs", [x]), b.node("Abs", [y])])
    xs, ys = b.node("Div", [x, big]), b.node("Div", [y, big])
    scale = b.node("Mul", [b.node("Add", [b.node("Mul", [xs, xs]), b.node("Mul", [ys, ys])]), big])
    return b.node("Div", [xs, scale]), b.node("Neg", [b.node("Div", [ys, scale])])


def _rsqrt_pair(b: GraphBuilder, x: str, y: str, dtype: Any) -> tuple:
    return _reciprocal_pair(b, *_sqrt_pair(b, x, y, dtype), dtype)


def _sigmoid_pair(b: GraphBuilder, x: str, y: str, dtype: Any) -> tuple:
    """1 / (1 + exp(-z)), ember's (and PyTorch's) formula."""
    er, ei = _exp_pair(b, b.node("Neg", [x]), b.node("Neg", [y]), dtype)
    return _reciprocal_pair(b, b.node("Add", [er, b.scalar(1, dtype)]), ei, dtype)


def _log1p_pair(b: GraphBuilder, x: str, y: str, dtype: Any) -> tuple:
    """log(1 + z) (as the real export, log(1 + x): near 0 it keeps the absolute, not the relative, precision)."""
    return _log_pair(b, b.node("Add", [x, b.scalar(1, dtype)]), y, dtype)


def _expm1_pair(b: GraphBuilder, x: str, y: str, dtype: Any) -> tuple:
    """exp(z) - 1 (as the real export)."""
    re, im = _exp_pair(b, x, y, dtype)
    return b.node("Sub", [re, b.scalar(1, dtype)]), im


def _log_base_pair(base: float) -> Callable:
    def formula(b: GraphBuilder, x: str, y: str, dtype: Any) -> tuple:
        re, im = _log_pair(b, x, y, dtype)
        factor = b.scalar(1.0 / math.log(base), dtype)
        return b.node("Mul", [re, factor]), b.node("Mul", [im, factor])

    return formula


COMPLEX_FORMULAS = {"reciprocal": _reciprocal_pair, "rsqrt": _rsqrt_pair, "sigmoid": _sigmoid_pair,
                    "log1p": _log1p_pair, "expm1": _expm1_pair, "log2": _log_base_pair(2.0),
                    "log10": _log_base_pair(10.0)}


def with_complex_formula(name: str, real: Callable) -> Callable:
    """An emitter: ``real(b, n)`` for real inputs, ``COMPLEX_FORMULAS[name]`` on the (..., 2) pairs of complex ones."""
    formula = COMPLEX_FORMULAS[name]

    @pairs
    def emit(b: GraphBuilder, n: Any) -> str:
        if not is_complex(n.in_specs[0]):
            return real(b, n)
        x = n.inputs[0]
        return stack(b, *formula(b, part(b, x, 0), part(b, x, 1), _real_dtype(n.in_specs[0])))

    emit.__name__ = f"complex_{name}"
    emit.__doc__ = f"{name}: the real emitter, or its complex formula on (..., 2) pairs."
    return emit
