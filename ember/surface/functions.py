"""Top-level PyTorch functions written as compositions of ember ops (so autograd, tracing and export
come for free), plus a few integer/boolean ones computed on the device's array namespace (no gradient).

Example:
    >>> import ember
    >>> ember.take_along_dim(ember.tensor([[3., 1.], [0., 2.]]), ember.tensor([[1], [0]]), dim=1).tolist()
    [[1.0], [0.0]]
"""
from __future__ import annotations

import builtins
import math
from typing import Any, Sequence

import numpy as np

from ember import creation
from ember.creation import arange, empty, eye, full, full_like, ones_like, tensor, zeros, zeros_like
from ember import dtypes, factory_options as _factory_options, return_types
from ember.dtypes import bfloat16, bool_, float64, get_default_dtype, int64, result_type, to_dtype
from ember.ops.opmath_composite import float32_composite
from ember.ops import complex_ops, elementwise, reductions, unsigned_ops, value_check, views
from ember.ops.elementwise import (ceil, clamp, erf, floor, floor_divide, gt, isnan, logical_xor, lt, maximum,
    minimum, mul, neg, sin, sub, where)
from ember.ops.elementwise import imag_part
from ember.ops.extra_math import diag, diagonal, logaddexp, meshgrid, tensordot
from ember.ops.linalg import dot
from ember.ops.reductions import amax, amin, cumsum
from ember.ops.sorting import sort
from ember.ops.views import (cat, chunk, flip, gather, hstack, index_select, narrow, scatter, scatter_add, split,
    stack, unbind, vstack)
from ember.tensor import Size
from ember.surface import deprecated_linalg as _deprecated_linalg
from ember.ops import dispatch as _dispatch, extra_math as _extra_math, grad_join as _grad_join
from ember.surface.scatter_reduce_grad import ScatterReduceExtreme
from ember.tensor import Tensor

__all__ = [
    "absolute", "negative", "positive", "atleast_1d", "atleast_2d", "atleast_3d", "block_diag", "broadcast_tensors",
    "broadcast_shapes", "cartesian_prod", "cdist", "column_stack", "row_stack", "dstack", "tensor_split", "hsplit",
    "vsplit", "dsplit", "cov", "corrcoef", "cross", "diff", "diagflat", "dist", "fliplr", "flipud", "float_power",
    "fmax", "fmin", "heaviside", "inner", "vdot", "kron", "ldexp", "logcumsumexp", "nansum", "nanmean", "ravel",
    "repeat_interleave", "rot90", "rsub", "sinc", "std_mean", "take", "take_along_dim", "tile", "trapezoid", "trapz",
    "cumulative_trapezoid", "vander", "quantile", "nanquantile", "median", "nanmedian", "msort", "aminmax",
    "renorm", "index_add", "index_fill", "index_copy", "select_scatter", "slice_scatter", "diagonal_scatter",
    "masked_scatter", "scatter_reduce", "copysign", "signbit", "isneginf", "isposinf", "isreal", "isin", "argwhere",
    "nonzero", "bincount", "histc", "histogram", "gcd", "lcm", "tril_indices", "triu_indices", "unique_consecutive",
    "unravel_index", "scalar_tensor", "hann_window", "hamming_window", "blackman_window", "bartlett_window",
    "kaiser_window", "combinations", "is_nonzero", "is_same_size", "is_signed", "chain_matmul", "mode", "frexp",
    "nextafter", "fill", "zero_", "split_with_sizes", "unsafe_chunk", "unsafe_split", "erfc", "matrix_power",
    "square_", "subtract", "multiply", "swapaxes", "greater", "less",
]


def _t(x: Any, like: Tensor | None = None) -> Tensor:
    if isinstance(x, Tensor):
        return x
    return tensor(x, device=like.device if like is not None else None)


def _xp(t: Tensor) -> Any:
    return t._device.xp


def _wrap(array: Any, like: Tensor) -> Tensor:
    return Tensor._make(array, like._device, False)


# ---- simple spellings ------------------------------------------------------------------------------------
def absolute(input: Tensor) -> Tensor:
    return elementwise.abs(input)


def negative(input: Tensor) -> Tensor:
    return neg(input)


def positive(input: Tensor) -> Tensor:
    if input.dtype is bool_:
        raise TypeError("positive: the `+` operator, on a bool tensor is not supported")
    return input


subtract = sub
multiply = mul
swapaxes = views.swapaxes
greater = gt
less = lt


def ravel(input: Tensor) -> Tensor:
    """torch's ``contiguous().view(-1)``: a view of a contiguous tensor, else a copy (never a strided view that
    would carry writes back into ``input``, which reshape gives for ``x[:, ::2]``)."""
    return input.contiguous().reshape(-1)


def fliplr(input: Tensor) -> Tensor:
    if input.ndim < 2:
        raise RuntimeError(f"fliplr: input must be >= 2-d, got {input.ndim}-d")
    return flip(input, (1,))


def flipud(input: Tensor) -> Tensor:
    if input.ndim < 1:
        raise RuntimeError("flipud: input must be >= 1-d")
    return flip(input, (0,))


def rsub(input: Tensor, other: Any, alpha: Any = 1) -> Tensor:
    return other - input * alpha if alpha != 1 else other - input


def erfc(input: Tensor) -> Tensor:
    """1 - erf(x), computed without cancellation (a primitive: erfc(6.0) is 2.15e-17, not 0)."""
    return _extra_math.erfc(input if input.is_floating_point() or input.is_complex() else input.to(get_default_dtype()))


def square_(input: Tensor) -> Tensor:
    return input.mul_(input.clone())


# ---- shapes -------------------------------------------------------------------------------------------------
def _each(tensors: tuple, fn: Any) -> Any:
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(fn(t) for t in tensors[0])
    out = tuple(fn(t) for t in tensors)
    return out[0] if len(out) == 1 else out


def atleast_1d(*tensors: Any) -> Any:
    return _each(tensors, lambda t: t.reshape(1) if t.ndim == 0 else t)


def atleast_2d(*tensors: Any) -> Any:
    return _each(tensors, lambda t: t.reshape(1, 1) if t.ndim == 0 else t.unsqueeze(0) if t.ndim == 1 else t)


def atleast_3d(*tensors: Any) -> Any:
    def lift(t: Tensor) -> Tensor:
        if t.ndim == 0:
            return t.reshape(1, 1, 1)
        if t.ndim == 1:
            return t.reshape(1, -1, 1)
        if t.ndim == 2:
            return t.unsqueeze(-1)
        return t
    return _each(tensors, lift)


def broadcast_shapes(*shapes: Any) -> Size:
    import numpy as np

    try:
        return Size(np.broadcast_shapes(*[tuple(s) if not isinstance(s, int) else (s,) for s in shapes]))
    except ValueError as error:
        raise RuntimeError(f"broadcast_shapes: shapes {list(shapes)} cannot be broadcast together ({error})") from None


def broadcast_tensors(*tensors: Tensor) -> tuple:
    shape = broadcast_shapes(*[t.shape for t in tensors])
    return tuple(t.expand(shape) for t in tensors)


def block_diag(*tensors: Tensor) -> Tensor:
    # the dtype from the tensors as given: a 0-d tensor promotes as a number (uint8 with a 0-d int32 is uint8)
    dtype = result_type(*tensors) if tensors else get_default_dtype()
    mats = [t.reshape(1, -1) if t.ndim == 1 else t.reshape(1, 1) if t.ndim == 0 else t for t in tensors]
    for t in mats:
        if t.ndim != 2:
            raise RuntimeError(f"block_diag: Input tensors must have 2 or fewer dimensions. Input has {t.ndim}")
    rows = builtins.sum(t.shape[0] for t in mats)
    cols = builtins.sum(t.shape[1] for t in mats)
    out = zeros(rows, cols, dtype=dtype, device=mats[0].device if mats else None)
    r = c = 0
    for t in mats:
        h, w = t.shape
        pad_left = zeros(h, c, dtype=dtype)
        pad_right = zeros(h, cols - c - w, dtype=dtype)
        out = slice_scatter(out, cat([pad_left, t.to(dtype), pad_right], dim=1), 0, r, r + h)
        r, c = r + h, c + w
    return out


def cartesian_prod(*tensors: Tensor) -> Tensor:
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([g.reshape(-1) for g in grids], dim=1)


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    import itertools

    n = input.shape[0]
    chooser = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(chooser(range(n), r))
    if not rows:  # an empty result that requires grad when the input does (torch's)
        result = empty(0, r, dtype=input.dtype) if r > 0 else empty(0, dtype=input.dtype)
        return _grad_join.zero_grad_join(result, input)
    index = tensor(rows, dtype=int64, device=input.device)
    return input[index]


def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    views.not_a_tensor_sequence(tensors, "column_stack")
    return hstack([t.reshape(-1, 1) if t.ndim <= 1 else t for t in tensors])


def row_stack(tensors: Sequence[Tensor]) -> Tensor:
    views.not_a_tensor_sequence(tensors, "row_stack")
    return vstack(list(tensors))


def dstack(tensors: Sequence[Tensor]) -> Tensor:
    views.not_a_tensor_sequence(tensors, "dstack")
    return cat(list(atleast_3d(list(tensors))), dim=2)


def tensor_split(input: Tensor, sections: Any = None, dim: int = 0, *, indices: Any = None,
                 tensor_indices_or_sections: Any = None, indices_or_sections: Any = None) -> tuple:
    """Split into ``n`` nearly equal parts (the first ``size % n`` one longer), or at the given indices.

    torch's three overloads name the second argument ``sections``, ``indices`` or ``tensor_indices_or_sections``.
    """
    given = [v for v in (indices_or_sections, sections, indices, tensor_indices_or_sections) if v is not None]
    if len(given) != 1:
        raise TypeError("tensor_split() takes one of sections, indices or tensor_indices_or_sections")
    indices_or_sections = given[0]
    size = input.shape[dim]
    if isinstance(indices_or_sections, Tensor):
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, int):
        n = indices_or_sections
        if n <= 0:
            raise RuntimeError(f"tensor_split: number of sections must be larger than 0, got {n}")
        base, extra = divmod(size, n)
        bounds, start = [], 0
        for k in range(n):
            stop = start + base + (1 if k < extra else 0)
            bounds.append((start, stop))
            start = stop
    else:
        points = [0] + [int(i) for i in indices_or_sections] + [size]
        bounds = [(min(max(a, 0), size), min(max(b, a, 0), size)) for a, b in zip(points[:-1], points[1:])]
    return tuple(narrow(input, dim, a, max(b - a, 0)) for a, b in bounds)


def _split_named(input: Tensor, sections: Any, dim: int, name: str, min_dims: int) -> tuple:
    if input.ndim < min_dims:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {min_dims} dimension, but got a tensor "
                           f"with {input.ndim} dimensions!")
    if isinstance(sections, int) and input.shape[dim] % sections:
        raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the size of the dimension "
                           f"{input.shape[dim]} is not divisible by the split_size {sections}!")
    return tensor_split(input, sections, dim)


def hsplit(input: Tensor, sections: Any = None, *, indices: Any = None) -> tuple:
    return _split_named(input, indices if sections is None else sections, 1 if input.ndim > 1 else 0, "hsplit", 1)


def vsplit(input: Tensor, sections: Any = None, *, indices: Any = None) -> tuple:
    return _split_named(input, indices if sections is None else sections, 0, "vsplit", 2)


def dsplit(input: Tensor, sections: Any = None, *, indices: Any = None) -> tuple:
    return _split_named(input, indices if sections is None else sections, 2, "dsplit", 3)


def split_with_sizes(input: Tensor, split_sizes: Sequence[int], dim: int = 0) -> tuple:
    return tuple(split(input, list(split_sizes), dim))


def unsafe_split(input: Tensor, split_size: Any, dim: int = 0) -> tuple:
    return tuple(split(input, split_size, dim))


def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    return tuple(chunk(input, chunks, dim))


def tile(input: Tensor, *sizes: Any, dims: Sequence[int] | int | None = None) -> Tensor:
    """``torch.tile(x, dims)`` and ``x.tile(*dims)``: ``dims`` may be an int, a sequence or varargs, as PyTorch's."""
    if dims is None:
        if not sizes:
            raise TypeError("tile() missing required argument 'dims'")
        dims = sizes[0] if len(sizes) == 1 else sizes
    elif sizes:
        raise TypeError(f"tile() received an invalid combination of arguments: dims given both positionally "
                        f"{tuple(sizes)} and as dims={dims!r}; pass one of them")
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(dims) < input.ndim:
        dims = (1,) * (input.ndim - len(dims)) + dims
    return input.reshape((1,) * (len(dims) - input.ndim) + tuple(input.shape)).repeat(*dims)


def rot90(input: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    d0, d1 = dims
    k %= 4
    if k == 1:
        return flip(input, (d1,)).transpose(d0, d1)
    if k == 2:
        return flip(input, (d0, d1))
    if k == 3:
        return flip(input, (d0,)).transpose(d0, d1)
    return input.clone()


def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    return diag(input.reshape(-1), offset)


def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:
    n = x.shape[0] if N is None else N
    powers = arange(n, device=x.device)
    if not increasing:
        powers = flip(powers, (0,))
    if n == 0:
        return empty(x.shape[0], 0, dtype=x.dtype)
    return x.unsqueeze(-1) ** powers.to(x.dtype if x.is_floating_point() else int64)


def repeat_interleave(input: Any, repeats: Any = None, dim: int | None = None, *,
                      output_size: int | None = None) -> Tensor:
    """Repeat each element ``repeats`` times along ``dim`` (flattened when ``dim`` is None)."""
    if repeats is None:  # repeat_interleave(repeats): indices 0..n-1 repeated by the given counts
        counts = input
        return repeat_interleave(arange(counts.shape[0], device=counts.device), counts, 0)
    if dim is None:
        input, dim = input.reshape(-1), 0
    dim = dim % input.ndim if input.ndim else 0
    size = input.shape[dim]
    if isinstance(repeats, Tensor) and repeats.numel() == 1 and repeats.ndim <= 1:
        repeats = int(repeats.item())
    if isinstance(repeats, int):
        if repeats < 0:
            raise RuntimeError("repeat_interleave: repeats can not be negative")
        index = arange(size, device=input.device).reshape(-1, 1).expand(size, repeats).reshape(-1)
    else:
        counts = repeats.tolist() if isinstance(repeats, Tensor) else list(repeats)
        if len(counts) != size:
            raise RuntimeError(f"repeat_interleave: repeats must have the same size as input along dim, but got "
                               f"repeats.size(0) = {len(counts)} and input.size({dim}) = {size}")
        if any(c < 0 for c in counts):
            raise RuntimeError("repeat_interleave: repeats can not be negative")
        index = tensor([i for i, c in enumerate(counts) for _ in range(int(c))], dtype=int64,
                             device=input.device)
    return index_select(input, dim, index)


# ---- math written in ember ops ------------------------------------------------------------------------------
def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    a, b = broadcast_tensors(input, other)
    if dim is None:
        dim = next((d for d, s in enumerate(a.shape) if s == 3), None)
        if dim is None:
            raise RuntimeError(f"cross: no dimension of size 3 in input (shape {list(a.shape)})")
    if a.shape[dim] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {a.shape[dim]} and "
                           f"{b.shape[dim]}")
    a0, a1, a2 = unbind(a, dim)
    b0, b1, b2 = unbind(b, dim)
    return stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], dim=dim)


def diff(input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None,
         append: Tensor | None = None) -> Tensor:
    if n == 0:  # torch: a copy of input, prepend/append ignored (not input itself: writes must not reach it)
        return input.clone()
    parts = [p for p in (prepend, input, append) if p is not None]
    x = cat(parts, dim=dim) if len(parts) > 1 else input
    for _ in range(n):
        length = x.shape[dim]
        if length == 0:  # nothing to difference: stays empty, as PyTorch
            break
        hi, lo = narrow(x, dim, 1, max(length - 1, 0)), narrow(x, dim, 0, max(length - 1, 0))
        x = logical_xor(hi, lo) if x.dtype is bool_ else hi - lo
    return x


def dist(input: Tensor, other: Tensor, p: float = 2) -> Tensor:
    return reductions.norm(input - other, p=p)


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str | None = None) -> Tensor:
    """Pairwise p-norm distances between the rows of ``x1`` (.., P, M) and ``x2`` (.., R, M)."""
    for name, x in (("X1", x1), ("X2", x2)):
        if not x.is_floating_point():
            raise RuntimeError(f"cdist: only supports floating-point dtypes, {name} got {x.dtype}")
    if x1.dtype is not x2.dtype:
        raise RuntimeError(f"cdist: X1 and X2 must have the same dtype, got {x1.dtype} and {x2.dtype}")
    if x1.dtype.itemsize == 2 and x1.device.type == "cpu":  # torch 2.13 has no half CPU kernel for cdist
        raise RuntimeError(f'"cdist" not implemented for \'{"Half" if x1.dtype.name == "float16" else "BFloat16"}\' '
                           f"on the CPU (as in PyTorch); compute in float32: torch.cdist(x1.float(), x2.float())")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"cdist: X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} "
                           f"X2: {x2.shape[-1]}")
    difference = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    return reductions.norm(difference, p=p, dim=-1)


def float_power(input: Any, exponent: Any) -> Tensor:
    """``input ** exponent`` in double precision: float64, or complex128 when either operand is complex
    (PyTorch's; the imaginary part was dropped before)."""
    complex_ = any(isinstance(v, complex) or (isinstance(v, Tensor) and v.dtype.is_complex) for v in (input, exponent))
    target = dtypes.complex128 if complex_ else float64
    base = _t(input).to(target)
    return base ** (exponent.to(target) if isinstance(exponent, Tensor) else exponent)


def fmax(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise maximum that ignores a NaN when the other value is a number. At a tie the whole gradient
    goes to ``input`` (torch's ``self >= other`` mask; ``maximum`` splits it)."""
    return where((input >= other) | isnan(other), input, other)


def fmin(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise minimum that ignores a NaN when the other value is a number (ties: gradient to ``input``)."""
    return where((input <= other) | isnan(other), input, other)


def heaviside(input: Tensor, values: Tensor) -> Tensor:
    """0 below 0, ``values`` at 0, 1 above; PyTorch refuses complex tensors and two dtypes."""
    if input.dtype.is_complex or values.dtype.is_complex:
        raise RuntimeError("heaviside is not yet implemented for complex tensors.")
    if input.dtype is not values.dtype:
        raise RuntimeError(f"heaviside is not yet implemented for tensors with different dtypes ({input.dtype} and "
                           f"{values.dtype}); convert one with .to()")
    dtype = input.dtype
    return where(input == 0, values.to(dtype), (input > 0).to(dtype))


def copysign(input: Any, other: Any) -> Tensor:
    a, b = dtypes.python_scalar(input), dtypes.python_scalar(other)
    target = result_type(a, b)  # torch's promotion: 0-d operands and weak Python numbers (float16 with 2.5: float16)
    x, y = _t(a), _t(b, _t(a))
    if target.is_complex:
        raise RuntimeError(f"copysign: not implemented for complex tensors (got {x.dtype} and {y.dtype}); complex "
                           "numbers have no sign bit: use x.real / x.imag or x.sgn()")
    x = x.to(target if target.is_floating_point else get_default_dtype())
    negative_sign = signbit(y)
    out = where(negative_sign, -x.abs(), x.abs())
    # torch differentiates other too (zeros), so the result requires grad when only other does
    if isinstance(y, Tensor) and y.requires_grad and y.dtype.is_floating_point:
        out = _grad_join.zero_grad_join(out, y if y.dtype == out.dtype else y.to(out.dtype))
    return out


def inner(input: Tensor, other: Tensor) -> Tensor:
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.ndim == 1 and other.ndim == 1:  # a dot product, as PyTorch (float32 under autocast, like dot)
        return dot(input, other)
    return tensordot(input, other, dims=([-1], [-1]))


def vdot(input: Tensor, other: Tensor) -> Tensor:
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    return dot(elementwise.conj_if_complex(input), other)  # the first argument conjugated, as torch.vdot


def kron(input: Tensor, other: Tensor) -> Tensor:
    nd = max(input.ndim, other.ndim)
    a = input.reshape((1,) * (nd - input.ndim) + tuple(input.shape))
    b = other.reshape((1,) * (nd - other.ndim) + tuple(other.shape))
    # a[i..] * b[j..] laid out as (i0, j0, i1, j1, ...), then merged pairwise
    a_exp = a.reshape([s for d in a.shape for s in (d, 1)])
    b_exp = b.reshape([s for d in b.shape for s in (1, d)])
    return (a_exp * b_exp).reshape([x * y for x, y in zip(a.shape, b.shape)])


def chain_matmul(*matrices: Tensor) -> Tensor:
    _deprecated_linalg.warn_deprecated("chain_matmul")
    out = matrices[0]
    for m in matrices[1:]:
        out = out @ m
    return out


def matrix_power(input: Tensor, n: int) -> Tensor:
    if n < 0:
        raise NotImplementedError("matrix_power: negative powers need a matrix inverse, which ember does not have")
    out = eye(input.shape[-1], dtype=input.dtype, device=input.device).expand(input.shape).clone()
    base = input
    while n:
        if n & 1:
            out = out @ base
        n >>= 1
        if n:
            base = base @ base
    return _grad_join.zero_grad_join(out, input) if out is not input else out  # A**0: torch's zero gradient


def ldexp(input: Tensor, other: Tensor) -> Tensor:
    """``input * 2 ** other`` as PyTorch computes it: ``2.0 ** other`` takes other's float dtype (the default one
    for integers), then the product promotes (bfloat16 x float32 exponent is float32, complex stays complex)."""
    x, e = _t(input), _t(other, _t(input))
    common = dtypes.result_type(x, e)
    if common.category <= 1:  # integer and bool operands give the default float dtype
        common = dtypes.float32
    if x.dtype.category == 2 and x.dtype.itemsize == 2 and e.dtype.category <= 1:
        return x * elementwise.pow(2.0, e).to(common)  # bfloat16 * int exponent stays bfloat16 (torch's kernel)
    return x * elementwise.pow(2.0, e)


@float32_composite
def logcumsumexp(input: Tensor, dim: int) -> Tensor:
    """log(cumsum(exp(x))) as a running ``logaddexp`` (a single shift would underflow for wide ranges)."""
    if input.numel() == 0 or input.ndim == 0:
        return input.clone()
    slices = unbind(input, dim)
    running = [slices[0] + 0.0]  # log(exp(-0.)) is +0 in PyTorch: -0 + 0 is +0, every other value unchanged
    for x in slices[1:]:
        running.append(logaddexp(running[-1], x))
    return stack(running, dim=dim)


@float32_composite  # float16/bfloat16 in float32, rounded once (torch's opmath: pi * x rounded to half lost the period)
def sinc(input: Tensor) -> Tensor:
    """sin(pi x) / (pi x), 1 at 0. Below |x| = 1e-4 (where the quotient's gradient divides rounding noise by
    x^2, NaN for denormals) the Taylor form 1 - (pi x)^2 / 6 is exact to the last bit, gradient included."""
    x = input if input.is_floating_point() or input.is_complex() else input.to(get_default_dtype())
    small = elementwise.abs(x) < 1e-4
    safe = where(small, ones_like(x), x)
    tiny = where(small, x, zeros_like(x)) * math.pi
    return where(small, 1 - tiny * tiny / 6, sin(math.pi * safe) / (math.pi * safe))


def nansum(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    if dim is None and keepdim and input.ndim:  # every dim, kept: (1, 1) as torch's (was a 0-d tensor)
        dim = tuple(range(input.ndim))
    x = where(isnan(input), zeros_like(input), input) if input.is_floating_point() else input
    if x is not input and input.requires_grad and not input.is_complex():
        # torch's nansum backward is g * ~isnan(x): an infinite upstream (nanmean of an all-NaN row divides by a
        # count of 0) makes NaN at the NaN positions, where the where() above would give 0
        mask = (~isnan(input.detach())).to(input.dtype)
        x = _grad_join.scaled_grad_join(x.detach(), input, mask)
    if dtype is not None:  # PyTorch casts the input, then sums in dtype (inf -> int32 is INT_MIN, then added)
        return reductions.sum(x, dim=dim, keepdim=keepdim, dtype=dtype) if dim is not None else reductions.sum(
            x, dtype=dtype)
    return reductions.sum(x, dim=dim, keepdim=keepdim) if dim is not None else reductions.sum(x)


def nanmean(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """torch's ``nansum(input, dim, keepdim, dtype) / count``: a ``dtype`` is the type the sum is taken in (a float32
    input with ``dtype=float64`` sums in float64; it summed in float32 and cast, ~1e-8 relative off)."""
    if not input.is_floating_point():
        raise RuntimeError(f"nanmean(): expected input to have floating point dtype but got {input.dtype}")
    if dtype is not None:
        dtype = to_dtype(dtype)
        if not (dtype.is_floating_point or dtype.is_complex):
            raise RuntimeError(f"nanmean(): could not infer output dtype. Optional dtype must be either a floating "
                               f"point or complex dtype. Got: {dtype}")
        input = input.to(dtype)
    if dim is None and keepdim and input.ndim:  # every dim, kept: (1, 1) as torch's
        dim = tuple(range(input.ndim))
    count = (~isnan(input)).sum(dim=dim, keepdim=keepdim) if dim is not None else (~isnan(input)).sum()
    return nansum(input, dim, keepdim) / count


def std_mean(input: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
             correction: Any = None) -> tuple:
    """``(std, mean)`` over ``dim``, with PyTorch's overloads (``(dim, unbiased, keepdim)``, ``correction=``, a bool
    ``unbiased`` in dim's place)."""
    dim, correction = reductions._bessel(dim, unbiased, correction, "std_mean")
    std = reductions.std(input, dim, correction=correction, keepdim=keepdim)
    if dim is not None:
        mean = reductions.mean(input, dim=dim, keepdim=keepdim)
    elif keepdim and input.ndim:  # every dim reduced and kept: (1, 1), as the std beside it
        mean = reductions.mean(input, dim=tuple(range(input.ndim)), keepdim=True)
    else:
        mean = reductions.mean(input)
    return (std, mean)  # a plain tuple, as PyTorch's (no return type)


def aminmax(input: Tensor, *, dim: int | None = None, keepdim: bool = False) -> tuple:
    if dim is None:
        return return_types.make(return_types.aminmax, amin(input).reshape(()) if not keepdim else amin(input),
                                 amax(input).reshape(()) if not keepdim else amax(input))
    return return_types.make(return_types.aminmax, amin(input, dim=dim, keepdim=keepdim),
                             amax(input, dim=dim, keepdim=keepdim))


def take(input: Tensor, index: Tensor) -> Tensor:
    flat = input.reshape(-1)
    n = flat.shape[0]
    if index.numel() and (int(index.max()) >= n or int(index.min()) < -n):
        raise IndexError(f"take: index out of range for tensor of size {list(input.shape)} ({n} elements)")
    return flat[index]


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    if dim is not None and input.ndim != indices.ndim:
        raise RuntimeError(f"torch.take_along_dim(): input and indices should have the same number of dimensions, but "
                           f"got {input.ndim} dimensions for input, and {indices.ndim} dimensions for indices; "
                           f"unsqueeze the indices to the input's rank")
    size = input.numel() if dim is None else input.shape[dim % input.ndim]
    lowest = 0 if dim is None else -size  # torch wraps negative indices along a dim; the flat gather refuses them
    if indices.numel() and (int(indices.max()) >= size or int(indices.min()) < lowest):
        bad = int(indices.max()) if int(indices.max()) >= size else int(indices.min())
        raise RuntimeError(f"take_along_dim: index {bad} is out of bounds for dimension {dim or 0} with size {size}")
    if dim is None:
        return input.reshape(-1)[indices.reshape(-1)]
    dim = dim % input.ndim
    if indices.numel() and int(indices.min()) < 0:
        indices = indices + (indices < 0).to(indices.dtype) * size
    shape = list(broadcast_shapes(input.shape[:dim] + (1,) + input.shape[dim + 1:],
                                  indices.shape[:dim] + (1,) + indices.shape[dim + 1:]))
    src_shape, idx_shape = list(shape), list(shape)
    src_shape[dim], idx_shape[dim] = input.shape[dim], indices.shape[dim]
    return gather(input.expand(src_shape), dim, indices.expand(idx_shape))


def _trapezoid_input(y: Tensor, name: str) -> Tensor:
    """``y`` ready for the trapezoid sums: bool refused (as torch), integers widened to int64 so that
    ``left + right`` cannot wrap (uint8 255 + 255 is 510, as torch's int64 sum)."""
    if y.dtype is bool_:
        raise RuntimeError(f"{name}: received a bool input for `y`, but bool is not supported; convert it with "
                           ".int() or .float()")
    return y.to(int64) if y.dtype.category == 1 else y


def trapezoid(y: Tensor, x: Any = None, *, dx: float | None = None, dim: int = -1) -> Tensor:
    """The trapezoid rule along ``dim`` (spacing ``x`` or ``dx``), as torch.trapezoid.

    Example:
        >>> ember.trapezoid(ember.tensor([1.0, 2.0, 3.0]))
        tensor(4.)
    """
    n = y.shape[dim]
    if n == 0:  # torch: zeros of y's dtype without the dim, not connected to y
        _trapezoid_input(y, "trapezoid")
        return zeros([s for d, s in enumerate(y.shape) if d != dim % y.ndim], dtype=y.dtype, device=y.device)
    raw, y = y, _trapezoid_input(y, "trapezoid")
    left, right = narrow(y, dim, 0, n - 1), narrow(y, dim, 1, n - 1)
    if isinstance(x, Tensor):
        spacing = diff(x, dim=-1 if x.ndim == 1 else dim)
        if x.ndim == 1:
            spacing = spacing.reshape([-1 if d == dim % y.ndim else 1 for d in range(y.ndim)])
        return reductions.sum((left + right) * spacing, dim=dim) / 2
    step = dx if dx is not None else (x if x is not None else 1.0)
    # torch's formula for a constant step, (sum(y) - (y[0] + y[-1]) / 2) * dx, on y's own dtype: its rounding, its
    # NaN for infinite ends of a one-element dim (inf - inf) and its wrap of y[0] + y[-1] in small integer dtypes
    ends = raw.select(dim, 0) + raw.select(dim, -1)
    return (reductions.sum(raw, dim=dim) - ends * 0.5) * step


trapz = trapezoid


def cumulative_trapezoid(y: Tensor, x: Any = None, *, dx: float | None = None, dim: int = -1) -> Tensor:
    n = y.shape[dim]
    y = _trapezoid_input(y, "cumulative_trapezoid")
    if n == 0:  # an empty dim stays empty (in the result's dtype: integers give the default float dtype)
        return (y * 1.0).clone()
    left, right = narrow(y, dim, 0, n - 1), narrow(y, dim, 1, n - 1)
    if isinstance(x, Tensor):
        spacing = diff(x, dim=-1 if x.ndim == 1 else dim)
        if x.ndim == 1:
            spacing = spacing.reshape([-1 if d == dim % y.ndim else 1 for d in range(y.ndim)])
        return cumsum((left + right) * spacing / 2, dim=dim)
    step = dx if dx is not None else (x if x is not None else 1.0)
    return cumsum((left + right) * (step / 2), dim=dim)


def cov(input: Tensor, *, correction: int = 1, fweights: Tensor | None = None,
        aweights: Tensor | None = None) -> Tensor:
    """Covariance of the rows (variables) of ``input`` over its columns (observations), as torch.cov."""
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not x.is_floating_point() and not x.dtype.is_complex:
        x = x.to(get_default_dtype())
    n = x.shape[1]
    w = None  # the weights keep their dtypes, as torch's (float32 aweights make a float16 input's cov float32)
    if fweights is not None:
        w = fweights
    if aweights is not None:
        w = aweights if w is None else w * aweights
    if w is None:
        mean = x.mean(dim=1, keepdim=True)
        norm = n - correction
        centred = x - mean
        out = centred @ elementwise.conj_if_complex(centred.transpose(0, 1)) / max(norm, 0)
    else:
        w_sum = w.sum()
        mean = (x * w).sum(dim=1, keepdim=True) / w_sum
        if correction == 0:
            norm = w_sum
        elif aweights is None:
            norm = w_sum - correction
        else:
            norm = w_sum - correction * (w * aweights).sum() / w_sum
        centred = x - mean
        out = (centred * w) @ elementwise.conj_if_complex(centred.transpose(0, 1)) / clamp(norm, min=0)
    return out.squeeze()  # as torch: one variable (a vector or a (1, N) matrix) gives a 0-d result


def corrcoef(input: Tensor) -> Tensor:
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = diagonal(c)
    stddev = (d.real if d.dtype.is_complex else d).sqrt()
    out = c / stddev.unsqueeze(1) / stddev.unsqueeze(0)
    if out.dtype.is_complex:  # PyTorch clips the real and imaginary parts separately
        return complex_ops.complex(clamp(out.real, -1, 1), clamp(out.imag, -1, 1))
    return clamp(out, -1, 1)


def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    if input.ndim < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} dimensions")
    dims = tuple(d for d in range(input.ndim) if d != dim % input.ndim)
    norms = reductions.norm(input, p=p, dim=dims, keepdim=True)
    factor = where(norms > maxnorm, maxnorm / (norms + 1e-7), ones_like(norms))
    return input * factor


# ---- order statistics -------------------------------------------------------------------------------------
def _evenly(flat: Tensor, value: Tensor) -> Tensor:
    """``value`` (one of ``flat``'s elements) whose gradient is shared evenly by every element equal to it (NaN:
    every NaN), as PyTorch's full max/min/median backward (evenly_distribute_backward); the value is exact."""
    if not (flat.requires_grad and flat.is_floating_point()):
        return value
    v = value.detach()
    if not bool(isnan(v)):  # the equal elements' amax: exact, its gradient split evenly (no inf - inf at +-inf)
        return flat[flat == v].amax()
    mask = isnan(flat)
    share = where(mask, flat - flat.detach(), zeros_like(flat)).sum() / mask.sum().to(flat.dtype)
    return v + share


def _median(input: Tensor, dim: Any, keepdim: bool, ignore_nan: bool) -> Any:
    kind = return_types.nanmedian if ignore_nan else return_types.median
    if dim is None:
        flat = input.reshape(-1)
        if ignore_nan:
            flat = flat[~isnan(flat)] if flat.is_floating_point() else flat
        elif flat.is_floating_point() and bool(isnan(flat).any()):
            return _evenly(flat, flat[isnan(flat).nonzero()[0, 0]])
        n = flat.shape[0]
        if n == 0:  # NaN, still connected to the input when it requires grad (its gradient: empty zeros)
            if flat.requires_grad and flat.is_floating_point():
                return flat.sum() + math.nan
            if not (input.is_floating_point() or input.is_complex()):  # torch's NaN converted as x86 does: INT_MIN
                # for 32/64-bit integers, its low byte(s) 0 for int8/int16/uint8, True for bool
                low = {8: -(1 << 63), 4: -(1 << 31)}.get(input.dtype.itemsize, 0)
                return tensor(True) if input.dtype == bool_ else tensor(low, dtype=input.dtype)
            return tensor(math.nan, dtype=input.dtype)
        values = sort(flat).values
        return _evenly(flat, values[(n - 1) // 2])
    dim = dim % max(input.ndim, 1)
    if input.ndim == 0:
        return return_types.make(kind, input.clone(), zeros((), dtype=int64))
    values, indices = sort(input, dim=dim, stable=True)
    if input.is_floating_point():
        nan_count = isnan(input).sum(dim=dim, keepdim=True)
        valid = input.shape[dim] - nan_count
        if ignore_nan:
            k = clamp((valid - 1) // 2, min=0)
        else:  # a NaN in the slice is the median, its first one (PyTorch's index); the stable sort puts NaNs last
            k = where(nan_count > 0, valid, (valid - 1) // 2)
    else:
        k = full([s if d != dim else 1 for d, s in enumerate(input.shape)], (input.shape[dim] - 1) // 2,
                       dtype=int64)
    out_v, out_i = gather(values, dim, k), gather(indices, dim, k)
    if not keepdim:
        out_v, out_i = out_v.squeeze(dim), out_i.squeeze(dim)
    return return_types.make(kind, out_v, out_i)


def median(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """The lower median (as PyTorch: no averaging); with ``dim``, ``(values, indices)``."""
    return _median(input, dim, keepdim, ignore_nan=False)


def nanmedian(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    return _median(input, dim, keepdim, ignore_nan=True)


def mode(input: Tensor, dim: int = -1, keepdim: bool = False) -> tuple:
    """Most frequent value along ``dim`` (the smallest on ties) and the index of its last occurrence."""
    if input.ndim == 0:  # a 0-d tensor is its own mode, at index 0 (dim -1 and 0 are accepted, as PyTorch)
        _ = reductions.normalize_dims(dim, 0, "mode")
        return return_types.make(return_types.mode, input.clone(), zeros((), dtype=int64, device=input.device))
    xp = _xp(input)
    data = xp.moveaxis(input._data, dim, -1)
    flat = data.reshape(-1, data.shape[-1])
    values = xp.empty(flat.shape[0], dtype=flat.dtype)
    indices = xp.empty(flat.shape[0], dtype=xp.int64)
    for row in range(flat.shape[0]):
        uniq, counts = xp.unique(flat[row], return_counts=True)
        best = uniq[int(xp.argmax(counts))]
        values[row] = best
        same = (flat[row] == best) | ((flat[row] != flat[row]) & (best != best))  # NaN is its own value
        indices[row] = int(xp.nonzero(same)[0][-1])
    shape = data.shape[:-1]
    v, i = _wrap(values.reshape(shape), input), _wrap(indices.reshape(shape), input)
    if _dispatch.grad_mode.STATE.enabled and input.requires_grad:
        # the value read back at its index: the gradient reaches that element, as torch's (was detached)
        v = input.gather(dim, i.unsqueeze(dim)).squeeze(dim)
    if keepdim:
        v, i = v.unsqueeze(dim), i.unsqueeze(dim)
    return return_types.make(return_types.mode, v, i)


def msort(input: Tensor) -> Tensor:
    return sort(input, dim=0).values


def _quantile(input: Tensor, q: Any, dim: Any, keepdim: bool, interpolation: str, ignore_nan: bool) -> Tensor:
    if not input.is_floating_point() or input.dtype.itemsize < 4:
        raise RuntimeError(f"quantile() input tensor must be either float or double dtype, got {input.dtype}")
    if input.numel() == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    q_t = q if isinstance(q, Tensor) else tensor(q, dtype=input.dtype)
    if q_t.ndim > 1:
        raise RuntimeError("quantile() q must be a scalar or 1D tensor")
    if bool(((q_t < 0) | (q_t > 1)).any()):
        raise RuntimeError("quantile() q values must be in the range [0, 1]")
    if interpolation not in ("linear", "lower", "higher", "midpoint", "nearest"):
        raise ValueError(f"quantile() interpolation must be one of linear, lower, higher, midpoint or nearest. "
                         f"Got {interpolation}")
    x = input.reshape(-1) if dim is None or input.ndim == 0 else input
    d = 0 if dim is None or input.ndim == 0 else dim % input.ndim
    values = sort(x, dim=d).values  # NaNs sort last
    nan_count = isnan(x).sum(dim=d, keepdim=True)
    n = x.shape[d]
    valid = (n - nan_count) if ignore_nan else full_like(nan_count, n)
    qs = q_t.reshape(-1).to(input.dtype)
    outs = []
    for k in range(qs.shape[0]):
        rank = qs[k] * (valid - 1).to(input.dtype).clamp(min=0)
        lo = floor(rank)
        hi = ceil(rank)
        if interpolation == "lower":
            hi = lo
        elif interpolation == "higher":
            lo = hi
        elif interpolation == "nearest":
            lo = hi = elementwise.round(rank)
        lo_v = gather(values, d, lo.to(int64))
        hi_v = gather(values, d, hi.to(int64))
        if interpolation == "midpoint":
            out = lo_v + (hi_v - lo_v) * 0.5 * (hi > lo).to(input.dtype)
        elif interpolation == "linear":  # PyTorch's lerp, two-sided (its NaN/inf results at infinities too)
            weight = rank - lo
            diff = hi_v - lo_v
            out = where(weight < 0.5, lo_v + weight * diff, hi_v - diff * (1 - weight))
        else:
            out = lo_v
        nan_mask = (valid == 0) if ignore_nan else (nan_count > 0)
        out = where(nan_mask, full_like(out, math.nan), out)
        if not keepdim or dim is None:
            out = out.squeeze(d) if dim is not None else out.reshape(())
        if keepdim and dim is None:
            out = out.reshape((1,) * input.ndim)
        if input.ndim == 0:  # a 0-d input's dim 0 kept is still 0-d, as torch
            out = out.reshape(())
        outs.append(out)
    return stack(outs) if q_t.ndim == 1 else outs[0]


def quantile(input: Tensor, q: Any, dim: int | None = None, keepdim: bool = False, *,
             interpolation: str = "linear") -> Tensor:
    return _quantile(input, q, dim, keepdim, interpolation, ignore_nan=False)


def nanquantile(input: Tensor, q: Any, dim: int | None = None, keepdim: bool = False, *,
                interpolation: str = "linear") -> Tensor:
    return _quantile(input, q, dim, keepdim, interpolation, ignore_nan=True)


# ---- scatter family ---------------------------------------------------------------------------------------
def _dim_key(ndim: int, dim: int, index: Any) -> tuple:
    return (slice(None),) * (dim % ndim) + (index,)


def _check_index(op: str, input: Tensor, dim: int, index: Any, error: type = IndexError,
                 negative: bool = False) -> None:
    """``index`` (a tensor) must hold integers in [0, size) of ``dim``, as PyTorch's index_* ops require
    (``negative``: [-size, size), index_fill's range)."""
    if not isinstance(index, Tensor):
        return
    if index.is_floating_point() or index.dtype is bool_:
        raise RuntimeError(f"{op}(): Expected dtype int64 for index, got {index.dtype}")
    size = input.shape[dim % input.ndim] if input.ndim else 1
    if index.numel() and not _dispatch.is_symbolic(index):
        lo, hi = int(index.min()), int(index.max())
        if lo < (-size if negative else 0) or hi >= size:
            raise error(f"{op}(): index {hi if hi >= size else lo} is out of bounds for dimension {dim} with "
                             f"size {size} (input shape {list(input.shape)})")


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: Any = 1) -> Tensor:
    if input.ndim == 0 and isinstance(source, Tensor) and source.ndim == 0:  # one element of a vector, as torch
        return index_add(input.reshape(1), 0, index.reshape(-1), source.reshape(1), alpha=alpha).reshape(())
    _check_index("index_add", input, dim, index)
    value_check.check_index_source("index_add", input, dim, index, source)
    if isinstance(source, Tensor) and source.dtype is not input.dtype:
        raise RuntimeError(f"index_add_(): self ({input.dtype}) and source ({source.dtype}) must have the same scalar "
                           "type")
    out = input.clone()
    out.index_put_(_dim_key(input.ndim, dim, index), source * alpha if alpha != 1 else source, accumulate=True)
    return out


def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    if input.ndim == 0 and isinstance(source, Tensor) and source.ndim == 0:  # one element of a vector, as torch
        return index_copy(input.reshape(1), 0, index.reshape(-1), source.reshape(1)).reshape(())
    _check_index("index_copy", input, dim, index)
    value_check.check_index_source("index_copy", input, dim, index, source)
    out = input.clone()
    out[_dim_key(input.ndim, dim, index)] = source
    return out


def index_fill(input: Tensor, dim: int, index: Tensor, value: Any) -> Tensor:
    value_check.require_number(value, "index_fill")
    if input.ndim == 0:  # a 0-d tensor is filled as one element of a vector, as PyTorch
        return index_fill(input.reshape(1), 0, index.reshape(-1), value).reshape(())
    _check_index("index_fill", input, dim, index, negative=True)  # PyTorch's index_fill counts from the end
    if isinstance(value, Tensor) and value.requires_grad and isinstance(index, Tensor):
        # a position filled twice is filled once: value's gradient sums each filled position once (torch's unique
        # index), not once per duplicate
        index = index.remainder(input.shape[dim]).unique() if input.ndim else index.unique()
    out = input.clone()
    out[_dim_key(input.ndim, dim, index)] = value
    return out


def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    out = input.clone()
    out[_dim_key(input.ndim, dim, index)] = src
    return out


def slice_scatter(input: Tensor, src: Tensor, dim: int = 0, start: int | None = None, end: int | None = None,
                  step: int = 1) -> Tensor:
    out = input.clone()
    out[_dim_key(input.ndim, dim, slice(start, end, step))] = src
    return out


def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    out = input.clone()
    diagonal(out, offset, dim1, dim2).copy_(src)
    return out


def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    if source.dtype is not input.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but got {input.dtype} and "
                           f"{source.dtype}; convert source with .to({input.dtype})")
    shape = elementwise._broadcast_shapes(tuple(input.shape), tuple(mask.shape))
    if shape != tuple(input.shape):  # out of place, torch broadcasts input against a larger mask
        input = input.expand(shape)
    mask_b = mask.expand(input.shape) if tuple(mask.shape) != tuple(input.shape) else mask
    count = int(mask_b.sum())
    if source.numel() < count:
        raise RuntimeError(f"masked_scatter: expected source to have at least {count} elements, got "
                           f"{source.numel()}")
    out = input.clone()
    out[mask_b] = source.reshape(-1)[:count]
    return out


def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                   include_self: bool = True) -> Tensor:
    """``reduce`` in sum, prod, mean, amax, amin (prod/amax/amin computed on the arrays, with torch's gradient)."""
    if input.ndim == 0 and isinstance(index, Tensor) and index.numel() == 1:
        return views.on_one_element(scatter_reduce, "scatter_reduce", input, dim, index, src, reduce,
                                    include_self=include_self)
    _check_index("scatter_reduce", input, dim, index, RuntimeError)  # torch's class here (index_* raise IndexError)
    views._scatter_shapes("scatter_reduce", input, dim, index, src)
    if src.dtype is not input.dtype:
        raise RuntimeError(f"scatter_reduce(): Expected self.dtype to be equal to src.dtype, got {input.dtype} and "
                           f"{src.dtype}; convert src with .to({input.dtype})")
    if reduce == "sum":
        base = input.clone() if include_self else scatter(input, dim, index, zeros_like(src))
        return scatter_add(base, dim, index, src)
    if reduce == "mean":
        ones = ones_like(src)
        total = scatter_reduce(input, dim, index, src, "sum", include_self=include_self)
        counts = scatter_reduce(ones_like(input) if include_self else zeros_like(input), dim, index,
                                ones, "sum", include_self=True)
        counts = where(counts == 0, ones_like(counts), counts)
        out = total / counts
        return out if input.is_floating_point() else floor_divide(total, counts).to(input.dtype)
    if reduce not in ("prod", "amax", "amin"):
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if _dispatch.grad_mode.STATE.enabled and (input.requires_grad or src.requires_grad):
        return ScatterReduceExtreme.apply(input, src, dim, index, reduce, include_self, _scatter_reduce_arrays)
    return _scatter_reduce_arrays(input, dim, index, src, reduce, include_self)


def _scatter_reduce_arrays(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str,
                           include_self: bool) -> Tensor:
    """scatter_reduce prod/amax/amin on the arrays (no autograd: see ember/surface/scatter_reduce_grad.py)."""
    if input.dtype is bfloat16:  # NumPy's ufunc.at has no loop for ml_dtypes' bfloat16: float32, rounded back
        return _scatter_reduce_arrays(input.float(), dim, index, src.float(), reduce, include_self).to(bfloat16)
    xp = _xp(input)
    data = input._data.copy()
    idx = index._data
    grids = list(xp.indices(idx.shape, sparse=True))
    grids[dim % input.ndim] = idx
    target = tuple(grids)
    values = src._data[tuple(slice(0, s) for s in idx.shape)]
    ufunc = {"prod": xp.multiply, "amax": xp.maximum, "amin": xp.minimum}[reduce]
    if not include_self:
        if data.dtype.kind == "b":
            fill = {"prod": True, "amax": False, "amin": True}[reduce]
        else:
            fill = {"prod": 1, "amax": -xp.inf if data.dtype.kind == "f" else xp.iinfo(data.dtype).min,
                    "amin": xp.inf if data.dtype.kind == "f" else xp.iinfo(data.dtype).max}[reduce]
        touched = xp.zeros(data.shape, dtype=bool)
        touched[target] = True
        data[touched] = fill
    ufunc.at(data, target, values)
    return _wrap(data, input)


# ---- integer / boolean results (no gradient) ----------------------------------------------------------------
def signbit(input: Any) -> Tensor:
    x = _t(input)
    data = x._data
    if data.dtype.kind == "V":  # bfloat16: NumPy's signbit does not read ml_dtypes' bits
        data = data.astype(_xp(x).float32)
    return _wrap(_xp(x).signbit(data), x)


def isneginf(input: Tensor) -> Tensor:
    if input.dtype.is_complex:  # torch's refusal: -inf is not a point of the complex plane's order
        raise RuntimeError(f"isneginf does not support complex inputs (got {input.dtype}); test .real or .imag")
    return input == -math.inf if input.is_floating_point() else zeros_like(input, dtype=bool_)


def isposinf(input: Tensor) -> Tensor:
    if input.dtype.is_complex:  # torch's refusal
        raise RuntimeError(f"isposinf does not support complex inputs (got {input.dtype}); test .real or .imag")
    return input == math.inf if input.is_floating_point() else zeros_like(input, dtype=bool_)


def isreal(input: Tensor) -> Tensor:
    """True where the imaginary part is 0 (everywhere for real tensors)."""
    if input.dtype.is_complex:
        return imag_part(input) == 0
    return ones_like(input, dtype=bool_)


def isin(elements: Any, test_elements: Any, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    e, t = _t(elements), _t(test_elements)
    ref = e if isinstance(elements, Tensor) else t
    result = _xp(ref).isin(e._data, t._data, invert=invert)
    return _wrap(result, ref)


def nonzero(input: Tensor, *, as_tuple: bool = False) -> Any:
    return input.nonzero(as_tuple=as_tuple) if as_tuple else input.nonzero()


def argwhere(input: Tensor) -> Tensor:
    return input.nonzero()


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    if input.ndim != 1 or input.is_floating_point():
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if input.numel() and int(input.min()) < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    xp = _xp(input)
    counts = xp.bincount(input._data, weights=None if weights is None else weights._data, minlength=minlength)
    if weights is None:
        return _wrap(counts.astype(xp.int64), input)
    dtype = weights.dtype if weights.is_floating_point() else float64
    return _wrap(counts.astype(dtype.np), input)


def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:  # noqa: A002
    if not input.is_floating_point():
        raise RuntimeError(f"torch.histc: input tensor and weight tensor should have the same dtype, but got input "
                           f"{input.dtype}")
    if bins <= 0:
        raise RuntimeError(f"torch.histc: bins must be > 0, but got {bins}")
    if float(min) > float(max):
        raise RuntimeError(f"torch.histc: max must be larger than min, got min={min}, max={max}")
    xp = _xp(input)
    data = input._data
    lo, hi = float(min), float(max)
    if lo == hi and data.size:
        lo, hi = float(data.min()), float(data.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    # PyTorch's binning: bin = (x - min) / (max - min) * bins in the input's dtype, x == max in the last bin
    # (np.histogram compares with exact edges, so -1e-30 lands one bin lower than PyTorch puts it)
    flat = data.reshape(-1)
    low, high = flat.dtype.type(lo), flat.dtype.type(hi)
    inside = flat[(flat >= low) & (flat <= high)]
    with np.errstate(invalid="ignore", over="ignore"):
        position = ((inside - low) / (high - low) * flat.dtype.type(bins)).astype(xp.int64)
    position = xp.minimum(position, bins - 1)
    counts = xp.bincount(position, minlength=bins)[:bins]
    return _wrap(counts.astype(input.dtype.np), input)


def histogram(input: Tensor, bins: Any = 100, *, range: Any = None, weight: Tensor | None = None,  # noqa: A002
              density: bool = False) -> tuple:
    xp = _xp(input)
    edges_in = bins._data if isinstance(bins, Tensor) else bins
    hist, edges = xp.histogram(input._data, bins=edges_in, range=range,
                               weights=None if weight is None else weight._data, density=density)
    return return_types.make(return_types.histogram, _wrap(hist.astype(input.dtype.np), input),
                             _wrap(edges.astype(input.dtype.np), input))


def _integer_operands(op: str, input: Tensor, other: Any) -> tuple:
    """``input``, ``other`` as arrays of PyTorch's promoted dtype; refuses what torch has no gcd/lcm kernel for:
    floating/complex operands, and two bools (one bool operand promotes to the other's integer dtype)."""
    other = _t(other, input)
    for t in (input, other):
        if t.is_floating_point() or t.is_complex():
            raise RuntimeError(f"{op}: only integer tensors are supported, got {t.dtype}; convert with .long()")
    target = result_type(input, other)  # PyTorch's promotion: a 0-d operand does not widen the result
    if target is bool_:
        raise NotImplementedError(f"\"{op}_cpu\" not implemented for 'Bool': {op} of two bool tensors; "
                                  f"convert one with .long()")
    return input._data.astype(target.np, copy=False), other._data.astype(target.np, copy=False)


def _c_gcd(xp: Any, a: Any, b: Any) -> Any:
    """PyTorch's gcd: Euclid on ``abs`` of each operand with C's truncated remainder. It equals NumPy's gcd except
    at a signed dtype's minimum, whose abs wraps to itself (torch's ``gcd(INT64_MIN, 7)`` is -1, NumPy's 1)."""
    if a.dtype.kind != "i" or not (bool((a == np.iinfo(a.dtype).min).any())
                                   or bool((b == np.iinfo(b.dtype).min).any())):
        return xp.gcd(a, b)
    with np.errstate(over="ignore"):
        a, b = xp.abs(a), xp.abs(b)  # wraps at the minimum, as C's abs
    a, b = (xp.array(v, copy=True) for v in xp.broadcast_arrays(a, b))
    while True:
        live = a != 0
        if not bool(live.any()):
            return b
        rest = xp.fmod(b, xp.where(live, a, 1))  # C's % (the sign of the dividend)
        b = xp.where(live, a, b)
        a = xp.where(live, rest, 0).astype(a.dtype, copy=False)


def gcd(input: Tensor, other: Tensor) -> Tensor:
    """PyTorch's gcd (integer and bool operands, promoted; see :func:`_c_gcd` for the minimum's wrap).

    Example: ``ember.gcd(ember.tensor([4, 6]), ember.tensor(True))`` is ``tensor([1, 1])``."""
    a, b = _integer_operands("gcd", input, other)
    return _wrap(_c_gcd(_xp(input), a, b), input)


def lcm(input: Tensor, other: Tensor) -> Tensor:
    """PyTorch's ``abs(a / gcd(a, b) * b)`` (0 where the gcd is 0): the abs is taken after the product wraps."""
    xp = _xp(input)
    a, b = _integer_operands("lcm", input, other)
    g = _c_gcd(xp, a, b)
    with np.errstate(over="ignore", divide="ignore"):
        out = xp.abs((a // xp.where(g == 0, 1, g)) * b)
    return _wrap(xp.where(g == 0, 0, out).astype(a.dtype, copy=False), input)


def nextafter(input: Tensor, other: Tensor) -> Tensor:
    """torch's gradient: ``g`` to ``input`` where it differs from ``other`` (0 where equal), zeros to ``other``."""
    other = _t(other, input)
    target = result_type(input, other).np  # torch's promotion: a 0-d operand does not widen the result
    out = _wrap(_xp(input).nextafter(input._data.astype(target, copy=False), other._data.astype(target, copy=False)),
                input)
    # joined through casts to the result's dtype, so each gradient comes back in its input's dtype (a float32 input
    # next to a 0-d float64 other got a float64 gradient)
    x = input if input._data.dtype == target else input.to(out.dtype)
    y = other if other._data.dtype == target else other.to(out.dtype)
    if not x.requires_grad:
        return _grad_join.zero_grad_join(out, y)
    # g where input != other, 0 where they are equal (torch 2.13's gradient; NaN on either side passes g)
    differs = _xp(input).not_equal(input._data, other._data).astype(target)
    out = _grad_join.scaled_grad_join(out, x, _wrap(differs, input))
    return _grad_join.zero_grad_join(out, y)




def frexp(input: Tensor) -> tuple:
    if not input.is_floating_point():
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    xp = _xp(input)
    mantissa, exponent = xp.frexp(input._data)
    # torch's gradient of the mantissa: g / exp2(exponent), its int32 exponent's exp2 taken in float32 (so float64
    # inputs beyond float32's range get 0 above 2**128 and inf below 2**-149, as in torch)
    with np.errstate(over="ignore", under="ignore"):
        scale = _wrap(xp.ldexp(xp.ones((), dtype=xp.float32), exponent), input)
    mantissa = _grad_join.scaled_grad_join(_wrap(mantissa, input), input, scale, divide=True)
    return return_types.make(return_types.frexp, mantissa, _wrap(exponent.astype(xp.int32), input))


def _tri_indices(row: int, col: int, offset: int, upper: bool, dtype: Any, device: Any) -> Tensor:
    import numpy as np

    r, c = (np.triu_indices if upper else np.tril_indices)(row, offset, col)
    return tensor(np.stack([r, c]).astype(np.int64), dtype=dtype or int64, device=device)


def _check_tri_size(op: str, row: int, col: int) -> None:
    for name, value in (("row", row), ("col", col)):
        if value < 0:
            raise RuntimeError(f"{op}: {name} must be non-negative, got {value}")


def tril_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None,
                 layout: Any = None) -> Tensor:
    _check_tri_size("tril_indices", row, col)
    return _tri_indices(row, col, offset, False, dtype, device)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None,
                 layout: Any = None) -> Tensor:
    _check_tri_size("triu_indices", row, col)
    return _tri_indices(row, col, offset, True, dtype, device)


def unique_consecutive(input: Tensor, return_inverse: bool = False, return_counts: bool = False,
                       dim: int | None = None) -> Any:
    if dim is not None:
        raise NotImplementedError("unique_consecutive: dim= is not supported by ember; flatten first")
    xp = _xp(input)
    flat = input._data.reshape(-1)
    if flat.size == 0:
        starts = xp.zeros(0, dtype=bool)
    else:
        starts = xp.concatenate([xp.ones(1, dtype=bool), flat[1:] != flat[:-1]])
    values = flat[starts]
    out: list = [_wrap(values, input)]
    if return_inverse:
        out.append(_wrap((xp.cumsum(starts) - 1).reshape(input._data.shape).astype(xp.int64), input))
    if return_counts:
        positions = xp.nonzero(starts)[0]
        out.append(_wrap(xp.diff(xp.append(positions, flat.size)).astype(xp.int64), input))
    return out[0] if len(out) == 1 else tuple(out)


def unravel_index(indices: Any, shape: Any) -> tuple:
    idx = _t(indices)
    if idx.is_floating_point() or idx.dtype is bool_:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {idx.dtype}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    total = math.prod(shape)  # out-of-range indices wrap around, as in PyTorch
    xp = _xp(idx)
    parts = xp.unravel_index(idx._data % total if total else idx._data, shape)
    return tuple(_wrap(p.astype(xp.int64), idx) for p in parts)


def scalar_tensor(s: Any, *, dtype: Any = None, layout: Any = None, device: Any = None, requires_grad: bool = False,
                  pin_memory: bool = False) -> Tensor:
    result = tensor(float(s) if not isinstance(s, bool) else s, dtype=dtype or get_default_dtype(), device=device)
    return _factory_options.finish("scalar_tensor", result, layout=layout, requires_grad=requires_grad)


# ---- windows (signal processing) ---------------------------------------------------------------------------
def _window(name: str, length: int, periodic: bool, dtype: Any, device: Any, fn: Any,
            options: dict | None = None) -> Tensor:
    """A window of ``length`` samples; ``options``: the factory keywords (``layout``, ``requires_grad``,
    ``pin_memory``), which PyTorch's windows take like every factory."""
    import numpy as np

    options = options or {}
    unknown = set(options) - {"layout", "requires_grad", "pin_memory"}
    if unknown:
        raise TypeError(f"{name}() got an unexpected keyword argument '{sorted(unknown)[0]}'")
    if length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={length}")
    if length <= 1:
        result = creation.ones(length, dtype=dtype, device=device)
    else:
        values = fn(length + 1)[:-1] if periodic else fn(length)
        result = tensor(np.asarray(values, dtype=np.float64), dtype=dtype or get_default_dtype(), device=device)
    return _factory_options.finish(name, result, layout=options.get("layout"),
                                   requires_grad=bool(options.get("requires_grad", False)))


def hann_window(window_length: int, periodic: bool = True, *, dtype: Any = None, device: Any = None,
                **options: Any) -> Tensor:
    import numpy as np

    return _window("hann_window", window_length, periodic, dtype, device, np.hanning, options)


def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54, beta: float = 0.46, *,
                   dtype: Any = None, device: Any = None, **options: Any) -> Tensor:
    import numpy as np

    return _window("hamming_window", window_length, periodic, dtype, device,
                   lambda n: alpha - beta * np.cos(2 * np.pi * np.arange(n) / (n - 1)), options)


def blackman_window(window_length: int, periodic: bool = True, *, dtype: Any = None, device: Any = None,
                    **options: Any) -> Tensor:
    import numpy as np

    return _window("blackman_window", window_length, periodic, dtype, device, np.blackman, options)


def bartlett_window(window_length: int, periodic: bool = True, *, dtype: Any = None, device: Any = None,
                    **options: Any) -> Tensor:
    import numpy as np

    return _window("bartlett_window", window_length, periodic, dtype, device, np.bartlett, options)


def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *, dtype: Any = None,
                  device: Any = None, **options: Any) -> Tensor:
    import numpy as np

    return _window("kaiser_window", window_length, periodic, dtype, device, lambda n: np.kaiser(n, beta), options)


# ---- predicates and in-place helpers ------------------------------------------------------------------------
def is_nonzero(input: Tensor) -> bool:
    if input.numel() != 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous" if input.numel() else
                           "Boolean value of Tensor with no values is ambiguous")
    return bool(input.item())


def is_same_size(input: Tensor, other: Tensor) -> bool:
    return tuple(input.shape) == tuple(other.shape)


def is_signed(input: Tensor) -> bool:
    return input.dtype.is_signed


def fill(input: Tensor, value: Any) -> Tensor:
    """torch's gradient: zeros to ``input``, the sum of ``g`` to a tensor ``value``."""
    out = _grad_join.zero_grad_join(full_like(input, value.item() if isinstance(value, Tensor) else value), input)
    if isinstance(value, Tensor):
        out = _grad_join.scaled_grad_join(out, value, ones_like(out, requires_grad=False))
    return out


def zero_(input: Tensor) -> Tensor:
    return input.zero_()


# ---- bit shifts (integers; no gradient) -----------------------------------------------------------------------
def _shift(input: Any, other: Any, left: bool) -> Tensor:
    """PyTorch's shifts: the operands promote as for ``+`` (an int scalar takes the tensor's dtype, wrapping);
    a count below 0 or at least the width gives 0 (left) or the sign fill (right), where C is undefined."""
    name = "lshift" if left else "rshift"
    args = [v if isinstance(v, Tensor) else dtypes.python_scalar(v) for v in (input, other)]
    dtype = result_type(*args)
    if dtype.category != 1:
        kind = {0: "Bool", 2: "Float", 3: "Complex"}[dtype.category]
        raise RuntimeError(f"\"{name}_cpu\" not implemented for '{kind}' ({dtype}): bit shifts take integer tensors")
    like = next(v for v in args if isinstance(v, Tensor))
    xp = _xp(like)
    x, y = (xp.asarray(v._data if isinstance(v, Tensor) else dtypes.wrap_int(v, dtype.np)).astype(dtype.np)
            for v in args)
    bits = 8 * dtype.itemsize
    out_of_range = (y < 0) | (y >= bits)
    count = xp.where(out_of_range, 0, y).astype(dtype.np)
    if left:
        result = xp.where(out_of_range, 0, xp.left_shift(x, count))
    else:
        result = xp.where(out_of_range, xp.where(x < 0, -1, 0), xp.right_shift(x, count))
    return _wrap(xp.asarray(result).astype(dtype.np), like)


def bitwise_left_shift(input: Any, other: Any) -> Tensor:
    unsigned_ops.refuse("lshift", input, other)
    return _shift(input, other, True)


def bitwise_right_shift(input: Any, other: Any) -> Tensor:
    unsigned_ops.refuse("rshift", input, other)
    return _shift(input, other, False)


def can_cast(from_: Any, to: Any) -> bool:
    """PyTorch's casting rule: no float -> int, no non-bool -> bool (same-kind casting)."""
    import numpy as np

    a, b = to_dtype(from_), to_dtype(to)
    if a.is_floating_point and not b.is_floating_point:
        return False
    if a is not bool_ and b is bool_:
        return False
    return bool(np.can_cast(a.np, b.np, casting="same_kind")) or a.category <= b.category


__all__ += ["bitwise_left_shift", "bitwise_right_shift", "can_cast"]
