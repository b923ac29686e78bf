"""``ember.nn.init``: in-place initializers with PyTorch's formulas and names.

Every function writes into the tensor without recording autograd (as under ``no_grad``) and draws
from ember's default generator unless ``generator=`` is given, so ``ember.manual_seed`` makes
initialization reproducible.

Example:
    >>> import ember
    >>> w = ember.empty(256, 128)
    >>> _ = ember.nn.init.kaiming_uniform_(w, nonlinearity="relu")
    >>> float(w.abs().max()) <= (6 / 128) ** 0.5
    True
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from ember import random as ember_random
from ember.device import to_device
from ember.tensor import Tensor
from ember.random import check_args

__all__ = [
    "calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_", "dirac_",
    "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "sparse_",
]


def _write(tensor: Tensor, values: np.ndarray, name: str) -> Tensor:
    """Store host ``values`` into ``tensor`` in place (no autograd record), bumping its version."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"nn.init.{name}: expected an ember Tensor, got {type(tensor).__name__}")
    if tensor.device.type == "meta":  # no data to write
        tensor._bump()
        return tensor
    values = np.broadcast_to(np.asarray(values), tuple(tensor.shape))
    tensor._data[...] = ember_random._to(np.ascontiguousarray(values), tensor.dtype, tensor.device)
    tensor._bump()
    return tensor


_host = to_device("cpu")  # initializers draw on the host (PyTorch's CPU stream) and write into the tensor


def _draws_for(tensor: Tensor) -> Any:
    """Where ``tensor``'s initial values are drawn: the host, but nothing at all for a meta tensor (a model built
    under ``torch.device("meta")`` costs no memory or time, as in PyTorch)."""
    return tensor.device if tensor.device.type == "meta" else _host


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity: 1 for linear/sigmoid, 5/3 tanh, sqrt(2) relu, ..."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1  # (an int, as PyTorch returns)
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")  # torch's message


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """fan_in = size(1) * receptive field, fan_out = size(0) * receptive field (weights are out x in x ...)."""
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in tuple(tensor.shape)[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Tensor:
    """Fill with U(a, b)."""
    check_args("uniform_", low=a, high=b)
    values = ember_random.sample_uniform(tuple(tensor.shape), tensor.dtype, _draws_for(tensor), generator, float(a),
                                         float(b))
    return _write(tensor, values, "uniform_")


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Tensor:
    """Fill with N(mean, std^2)."""
    check_args("normal_", std=std)
    values = ember_random.sample_normal(tuple(tensor.shape), tensor.dtype, _draws_for(tensor), generator, float(mean),
                                        float(std))
    return _write(tensor, values, "normal_")


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator: Any = None) -> Tensor:
    """Fill with N(mean, std^2) truncated to [a, b], by PyTorch 2.13's rejection sampling (so a seed gives
    torch's values): when [a, b] holds more than 30% of the mass, whole-tensor normals are redrawn where a
    value falls outside; otherwise uniform proposals on [a, b] are accepted with the density's ratio to
    its peak."""
    if not a < b:
        raise RuntimeError(f"trunc_normal_: expected a < b (the truncation interval [a, b]), got a={a}, b={b}")

    def cdf(x: float) -> float:
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values "
                      "may be incorrect.", stacklevel=2)
    shape, dtype = tuple(tensor.shape), tensor.dtype
    if tensor.device.type == "meta":
        return tensor

    def draw(kind: str, *args: float) -> np.ndarray:
        return np.asarray(getattr(ember_random, "sample_" + kind)(shape, dtype, _host, generator, *args))

    if cdf((b - mean) / std) - cdf((a - mean) / std) > 0.3:
        result = draw("normal", float(mean), float(std))
        lo, hi = (result.dtype.type(v) for v in (a, b))
        while True:
            outside = (result < lo) | (result > hi)
            if not outside.any():
                break
            result = np.where(outside, draw("normal", float(mean), float(std)), result)
        return _write(tensor, result, "trunc_normal_")
    mode = max(a, min(mean, b))
    log_peak = -0.5 * ((mode - mean) / std) ** 2

    def log_density(x: np.ndarray) -> np.ndarray:  # in the tensor's dtype, step by step as torch's in-place ops
        t = x.dtype.type
        return ((x - t(mean)) / t(std)) ** 2 * t(-0.5) - t(log_peak)

    result = draw("uniform", float(a), float(b))
    pending = np.log(draw("uniform", 0.0, 1.0)) > log_density(result)
    while pending.any():
        candidates = draw("uniform", float(a), float(b))
        result = np.where(pending, candidates, result)
        pending = np.where(pending, np.log(draw("uniform", 0.0, 1.0)) > log_density(candidates), pending)
    return _write(tensor, result, "trunc_normal_")


def constant_(tensor: Tensor, val: float) -> Tensor:
    return _write(tensor, np.asarray(val), "constant_")


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity (ones on the diagonal)."""
    if tensor.dim() != 2:
        raise ValueError(f"eye_: only tensors with 2 dimensions are supported, got shape {tuple(tensor.shape)}")
    return _write(tensor, np.eye(*tuple(tensor.shape)), "eye_")


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a 3/4/5-D conv weight so the convolution preserves its input (per group)."""
    dims = tensor.dim()
    if dims not in (3, 4, 5):
        raise ValueError("dirac_: only tensors with 3, 4, or 5 dimensions are supported")
    shape = tuple(tensor.shape)
    if shape[0] % groups != 0:
        raise ValueError("dirac_: dim 0 must be divisible by groups")
    out_per_group = shape[0] // groups
    values = np.zeros(shape)
    for g in range(groups):
        for d in range(min(out_per_group, shape[1])):
            values[(g * out_per_group + d, d) + tuple(s // 2 for s in shape[2:])] = 1
    return _write(tensor, values, "dirac_")


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """Glorot normal: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator: Any = None) -> Tensor:
    """He uniform: U(-b, b) with b = gain * sqrt(3 / fan); gain from ``calculate_gain(nonlinearity, a)``."""
    if 0 in tuple(tensor.shape):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator: Any = None) -> Tensor:
    """He normal: N(0, std^2) with std = gain / sqrt(fan)."""
    if 0 in tuple(tensor.shape):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan), generator)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """A (semi-)orthogonal matrix from the QR decomposition of a Gaussian one, times ``gain``."""
    if tensor.dim() < 2:
        raise ValueError("orthogonal_: only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0 or tensor.device.type == "meta":
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = np.asarray(ember_random.sample_normal((rows, cols), tensor.dtype, _host, generator), dtype=np.float64)
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))  # makes the decomposition unique (uniform over orthogonal matrices)
    if rows < cols:
        q = q.T
    return _write(tensor, (q * gain).reshape(tuple(tensor.shape)), "orthogonal_")


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator: Any = None) -> Tensor:
    """2-D only: N(0, std^2) with a fraction ``sparsity`` of each column set to zero."""
    if tensor.dim() != 2:
        raise ValueError("sparse_: only tensors with 2 dimensions are supported")
    if tensor.device.type == "meta":
        return tensor
    rows, cols = tuple(tensor.shape)
    values = np.array(ember_random.sample_normal((rows, cols), tensor.dtype, _host, generator, 0.0, float(std)))
    zeros = int(math.ceil(sparsity * rows))
    for c in range(cols):  # PyTorch: randperm(rows) from the default generator, per column
        values[ember_random.sample_permutation(rows, _host, None)[:zeros], c] = 0
    return _write(tensor, values, "sparse_")


def _deprecated_alias(new: Any, old_name: str) -> Any:
    """PyTorch's deprecated spellings without the trailing underscore (``init.eye`` -> ``init.eye_``)."""
    import warnings

    def alias(*args: Any, **kwargs: Any) -> Any:
        warnings.warn(f"`nn.init.{old_name}` is now deprecated in favor of `nn.init.{new.__name__}`.",
                      FutureWarning, stacklevel=2)
        return new(*args, **kwargs)

    alias.__name__ = old_name
    return alias


# PyTorch's deprecated non-underscore aliases, still seen in older lecture code (each warns, as torch's).
uniform, normal = _deprecated_alias(uniform_, "uniform"), _deprecated_alias(normal_, "normal")
constant = _deprecated_alias(constant_, "constant")
xavier_uniform, xavier_normal = _deprecated_alias(xavier_uniform_, "xavier_uniform"), _deprecated_alias(
    xavier_normal_, "xavier_normal")
kaiming_uniform, kaiming_normal = _deprecated_alias(kaiming_uniform_, "kaiming_uniform"), _deprecated_alias(
    kaiming_normal_, "kaiming_normal")
orthogonal = _deprecated_alias(orthogonal_, "orthogonal")
eye = _deprecated_alias(eye_, "eye")
dirac = _deprecated_alias(dirac_, "dirac")
sparse = _deprecated_alias(sparse_, "sparse")
