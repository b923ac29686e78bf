"""A second batch of PyTorch's top-level names: in-place functional spellings, ``convolution``,
``constant_pad_nd``, ``gradient``, ``nonzero_static``, ``index_put``/``put``/``index_reduce``, ``real``/
``imag``/``sgn``, deprecated ``range``, ``empty_strided``/``frombuffer``, the autocast/anomaly setters,
and the exception classes scripts catch.

Example:
    >>> import ember
    >>> ember.gradient(ember.tensor([1.0, 4.0, 9.0, 16.0]))[0].tolist()
    [3.0, 4.0, 6.0, 7.0]
"""
from __future__ import annotations

import builtins
import math
from typing import Any, Sequence

import numpy as np

from ember.amp.autocast_mode import set_autocast_dtype, set_autocast_enabled
from ember.autograd import anomaly_mode
from ember.autograd.anomaly_mode import set_detect_anomaly
from ember.creation import empty, from_numpy, full, rand, tensor, zeros_like
from ember.dtypes import get_default_dtype, int64, to_dtype
from ember.nn import functional
from ember.ops import complex_ops, elementwise, layout, value_check, views
from ember.ops.elementwise import imag_part, isnan, real_part, sign, sqrt, where
from ember.ops.reductions import norm
from ember.ops.views import cat, narrow, split
from ember.surface.functions import scatter_reduce
from ember.surface.numeric_gradient import gradient  # noqa: F401  (torch.gradient, re-exported)
from ember.tensor import Tensor

__all__ = [
    "dropout_", "alpha_dropout_", "feature_alpha_dropout_", "feature_dropout", "feature_dropout_",
    "constant_pad_nd", "convolution", "gradient", "nonzero_static", "index_put", "put", "index_reduce", "real",
    "imag", "sgn", "range", "empty_strided", "empty_permuted", "frombuffer", "unsafe_split_with_sizes",
    "frobenius_norm", "norm_except_dim", "is_distributed", "set_autocast_cpu_dtype", "set_autocast_cpu_enabled",
    "set_autocast_gpu_dtype", "is_anomaly_enabled", "is_anomaly_check_nan_enabled", "set_anomaly_enabled",
    "OutOfMemoryError", "AcceleratorError",
]


class OutOfMemoryError(RuntimeError):
    """``torch.OutOfMemoryError`` (``torch.cuda.OutOfMemoryError``): raised when a device runs out of memory."""


class AcceleratorError(RuntimeError):
    """``torch.AcceleratorError``: an error reported by an accelerator's runtime."""


def _F() -> Any:
    return functional


def dropout_(input: Tensor, p: float = 0.5, train: bool = True) -> Tensor:
    return input.copy_(_F().dropout(input, p, train))


def alpha_dropout_(input: Tensor, p: float = 0.5, train: bool = False) -> Tensor:
    return input.copy_(_F().alpha_dropout(input, p, train))


def feature_alpha_dropout_(input: Tensor, p: float = 0.5, train: bool = False) -> Tensor:
    return input.copy_(_F().feature_alpha_dropout(input, p, train))


def feature_dropout(input: Tensor, p: float = 0.5, train: bool = True) -> Tensor:
    """Zero whole channels (dim 1) of (N, C, ...) input with probability p, scaling the rest by 1/(1-p)."""
    if not train or p == 0:
        return input
    keep_shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    keep = (rand(keep_shape, device=input.device) >= p).to(input.dtype)
    return input * keep / (1 - p) if p < 1 else input * 0


def feature_dropout_(input: Tensor, p: float = 0.5, train: bool = True) -> Tensor:
    return input.copy_(feature_dropout(input, p, train))


def constant_pad_nd(input: Tensor, pad: Sequence[int], value: float = 0) -> Tensor:
    return _F().pad(input, list(pad), "constant", value)


def convolution(input: Tensor, weight: Tensor, bias: Tensor | None, stride: Sequence[int], padding: Sequence[int],
                dilation: Sequence[int], transposed: bool, output_padding: Sequence[int], groups: int) -> Tensor:
    """The generic convolution the nn.functional ones dispatch to (dims from the weight)."""
    dims = weight.ndim - 2
    if transposed:
        fn = {1: _F().conv_transpose1d, 2: _F().conv_transpose2d, 3: _F().conv_transpose3d}[dims]
        return fn(input, weight, bias, tuple(stride), tuple(padding), tuple(output_padding), groups, tuple(dilation))
    fn = {1: _F().conv1d, 2: _F().conv2d, 3: _F().conv3d}[dims]
    return fn(input, weight, bias, tuple(stride), tuple(padding), tuple(dilation), groups)


def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:
    """``nonzero`` padded with ``fill_value`` (or truncated) to exactly ``size`` rows."""
    found = input.nonzero()
    if found.shape[0] >= size:
        return found[:size]
    pad = full((size - found.shape[0], input.ndim), fill_value, dtype=int64)
    return cat([found, pad], dim=0)


def index_put(input: Tensor, indices: Sequence[Any], values: Any, accumulate: bool = False) -> Tensor:
    return input.clone().index_put_(tuple(indices), values, accumulate)


def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """Write ``source`` into the flattened ``input`` at ``index`` (summed when ``accumulate``)."""
    n = input.numel()
    if isinstance(source, Tensor) and source.numel() != index.numel():
        raise IndexError(f"put_(): Expected source and index to have the same number of elements, but got "
                         f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    if index.numel() and (int(index.max()) >= n or int(index.min()) < -n):
        raise IndexError(f"put_(): index {int(index.max()) if int(index.max()) >= n else int(index.min())} out of "
                         f"range for tensor of {n} elements (shape {list(input.shape)})")
    flat = input.reshape(-1).clone()
    flat.index_put_((index.reshape(-1),), source.reshape(-1), accumulate)
    return flat.reshape(input.shape)


def index_reduce(input: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                 include_self: bool = True) -> Tensor:
    """Reduce rows of ``source`` into ``input[index]`` along ``dim`` (prod, mean, amax, amin)."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    if input.ndim == 0 and isinstance(index, Tensor) and index.numel() == 1:
        return views.on_one_element(index_reduce, "index_reduce", input, dim, index, source, reduce,
                                    include_self=include_self)
    value_check.check_index_source("index_reduce", input, dim, index, source)
    dim = dim % input.ndim
    shape = [1] * source.ndim
    shape[dim] = -1
    expanded = index.reshape(shape).expand(source.shape)
    return scatter_reduce(input, dim, expanded, source, reduce, include_self=include_self)


def real(input: Tensor) -> Tensor:
    """The real part of a complex tensor; a real tensor is returned as it is."""
    return real_part(input)


def imag(input: Tensor) -> Tensor:
    """The imaginary part of a complex tensor (real tensors refuse, as in PyTorch)."""
    return imag_part(input)


sgn = complex_ops.sgn  # sign for real tensors (0 at NaN), z / |z| for complex ones


def range(start: float, end: float | None = None, step: float = 1, *, dtype: Any = None,  # noqa: A001
          device: Any = None, requires_grad: bool = False) -> Tensor:
    """Deprecated ``torch.range``: like ``arange`` but ``end`` included, float by default."""
    import warnings

    warnings.warn("torch.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
                  "[start, end).", UserWarning, stacklevel=2)
    if end is None:
        start, end = 0, start
    count = int(math.floor((end - start) / step)) + 1
    values = np.arange(count, dtype=np.float64) * step + start
    return tensor(values, dtype=dtype or get_default_dtype(), device=device,
                        requires_grad=requires_grad)


def empty_strided(size: Sequence[int], stride: Sequence[int], *, dtype: Any = None, device: Any = None,
                  requires_grad: bool = False, **_: Any) -> Tensor:
    """An uninitialized tensor of ``size`` with exactly ``stride`` (over storage of the size those strides need, as
    PyTorch; ember/ops/layout.py).

    Example:
        >>> ember.empty_strided((2, 3), (1, 2)).stride()
        (1, 2)
    """
    size, stride = _int_tuple("empty_strided", "size", size), _int_tuple("empty_strided", "stride", stride)
    if len(size) != len(stride):
        raise RuntimeError(f"empty_strided: mismatch in length of strides and shape: size {list(size)} has {len(size)} "
                           f"dims, stride {list(stride)} has {len(stride)}")
    if any(n < 0 for n in size) or any(s < 0 for s in stride):
        raise RuntimeError(f"empty_strided: sizes and strides must be non-negative, got size {list(size)} and stride "
                           f"{list(stride)}")
    out = empty(size, dtype=dtype, device=device)
    if type(out._data) is np.ndarray and out._device.type == "cpu":
        out._data = layout.empty_strided(np, size, stride, out._data.dtype)
    return out.requires_grad_(True) if requires_grad else out


def empty_permuted(size: Sequence[int], physical_layout: Sequence[int], *, dtype: Any = None, device: Any = None,
                   requires_grad: bool = False, **_: Any) -> Tensor:
    """An uninitialized tensor of ``size`` whose dimensions lie in memory in ``physical_layout``'s order (slowest
    first): ``empty_permuted((2, 3, 4), (0, 2, 1)).stride() == (12, 1, 3)``."""
    size = _int_tuple("empty_permuted", "size", size)
    order = _int_tuple("empty_permuted", "physical_layout", physical_layout)
    if sorted(order) != list(builtins.range(len(size))):
        raise RuntimeError(f"empty_permuted: physical_layout {list(order)} must be a permutation of the {len(size)} "
                           f"dimensions of size {list(size)}")
    return empty_strided(size, layout.strides_of_permuted(size, order), dtype=dtype, device=device,
                         requires_grad=requires_grad)


def _int_tuple(op: str, name: str, values: Any) -> tuple:
    if isinstance(values, int):
        values = (values,)
    try:
        return tuple(int(v) for v in values)
    except TypeError as error:
        raise TypeError(f"{op}(): argument '{name}' must be a sequence of ints, got {values!r}") from error


def frombuffer(buffer: Any, *, dtype: Any, count: int = -1, offset: int = 0, requires_grad: bool = False) -> Tensor:
    """A 1-D tensor sharing memory with a Python buffer object (bytes become read-only)."""
    dt = to_dtype(dtype)
    array = np.frombuffer(buffer, dtype=dt.np, count=count, offset=offset)
    out = from_numpy(array)
    return out.requires_grad_(True) if requires_grad else out


def unsafe_split_with_sizes(input: Tensor, split_sizes: Sequence[int], dim: int = 0) -> tuple:
    return tuple(split(input, list(split_sizes), dim))


def frobenius_norm(input: Tensor, dim: Any = (-2, -1), keepdim: bool = False) -> Tensor:
    """The 2-norm over ``dim`` (ember.norm's: gradient 0 at the zero matrix, not 0 / 0)."""
    return norm(input, p=2, dim=dim, keepdim=keepdim)


def norm_except_dim(v: Tensor, pow: float = 2, dim: int = 0) -> Tensor:  # noqa: A002
    """The ``pow``-norm over every dim but ``dim``, shaped to broadcast against ``v`` (weight norm's helper)."""
    if dim == -1:
        return norm(v, p=pow)
    others = tuple(d for d in builtins.range(v.ndim) if d != dim % v.ndim)
    if not others:  # a vector along ``dim``: the norm over no dims is each element's magnitude (torch's)
        return elementwise.abs(v)
    return norm(v, p=pow, dim=others, keepdim=True)


def is_distributed(input: Tensor) -> bool:
    return False


def set_autocast_cpu_dtype(dtype: Any) -> None:
    set_autocast_dtype("cpu", dtype)


def set_autocast_gpu_dtype(dtype: Any) -> None:
    set_autocast_dtype("cuda", dtype)


def set_autocast_cpu_enabled(enabled: bool) -> None:
    set_autocast_enabled("cpu", enabled)


def is_anomaly_enabled() -> bool:
    return anomaly_mode.is_anomaly_enabled()


def is_anomaly_check_nan_enabled() -> bool:
    return anomaly_mode.is_anomaly_check_nan_enabled()


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    set_detect_anomaly(enabled, check_nan)
