"""``ember.fake_quantize_per_tensor_affine`` / ``fake_quantize_per_channel_affine``: quantize and dequantize in
one float op, with PyTorch's straight-through gradient (the gradient passes where the value was not clamped).

The forward is PyTorch's CPU kernel: ``(clamp(zp + rint(x * (1/scale)), qmin, qmax) - zp) * scale`` in float32
(``1/scale`` a float32 division); the mask ``qmin <= zp + rint(x * (1/scale)) <= qmax`` gates the gradient.
Written against the tensor's array namespace (every device). A custom autograd Function rather than an op
record: the values are piecewise constant, so the record's generated gradient checks (finite differences)
do not apply; the straight-through rule is checked against PyTorch instead (tests/ao/).

Example:
    >>> import ember
    >>> x = ember.tensor([0.26, 9.0], requires_grad=True)
    >>> y = ember.fake_quantize_per_tensor_affine(x, 0.1, 0, 0, 255)
    >>> y.sum().backward(); y, x.grad
    (tensor([0.3000, 9.0000], grad_fn=<FakeQuantizeBackward>), tensor([1., 1.]))
"""
from __future__ import annotations

from typing import Any

from ember.autograd.function import Function
from ember.tensor import Tensor


def _fake_quantize(xp: Any, x: Any, scale: Any, zero_point: Any, qmin: int, qmax: int, per_channel: bool) -> tuple:
    """(values, mask) for float arrays; ``scale``/``zero_point`` broadcast against ``x``.

    Out-of-int64 levels follow the kernels' int64 conversion (x86 gives INT64_MIN, so ``qmin``): NaN in both,
    and +-inf or beyond 2**63 in the per-channel kernel, which converts before clamping.
    """
    scale = xp.asarray(scale, dtype=xp.float32)
    inv = xp.float32(1.0) / scale
    zp = xp.asarray(zero_point, dtype=xp.float64)
    level = zp + xp.rint((x.astype(xp.float32) * inv).astype(xp.float64))
    mask = (level >= qmin) & (level <= qmax)
    invalid = ~(xp.abs(level) < 2.0 ** 63) if per_channel else xp.isnan(level)
    clamped = xp.where(invalid, float(qmin), xp.clip(level, qmin, qmax))
    values = (clamped - zp).astype(xp.float32) * scale
    return values.astype(x.dtype), mask


class _FakeQuantize(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, scale: Any, zero_point: Any, qmin: int, qmax: int, per_channel: bool) -> Tensor:
        xp = x._device.backend.xp
        values, mask = _fake_quantize(xp, x._data, scale, zero_point, qmin, qmax, per_channel)
        ctx.mask = mask
        return Tensor._make(values, x._device, False)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple:
        mask = Tensor._make(ctx.mask, grad._device, False)
        return grad * mask.to(grad.dtype), None, None, None, None, None


_FakeQuantize.__name__ = "FakeQuantize"


def _check(x: Any, qmin: int, qmax: int, op: str) -> None:
    if not isinstance(x, Tensor) or not x.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating point tensor, got "
                           f"{getattr(x, 'dtype', type(x).__name__)!r}")
    if qmin > qmax:
        raise RuntimeError(f"{op}: `quant_min` {qmin} should be less than or equal to `quant_max` {qmax}")


def _host_numbers(value: Any, xp: Any, dtype: Any) -> Any:
    if isinstance(value, Tensor):
        return xp.asarray(value._device.backend.to_numpy(value._data) if value._device.type != "cpu"
                          else value._data, dtype=dtype)
    return xp.asarray(value, dtype=dtype)


def fake_quantize_per_tensor_affine(input: Tensor, scale: Any, zero_point: Any, quant_min: int,
                                    quant_max: int) -> Tensor:
    """Quantize then dequantize ``input`` with one scale and zero point; gradient 1 inside the range."""
    _check(input, quant_min, quant_max, "fake_quantize_per_tensor_affine")
    xp = input._device.backend.xp
    scale = xp.asarray(float(scale.item() if isinstance(scale, Tensor) else scale), dtype=xp.float32)
    zp = int(zero_point.item() if isinstance(zero_point, Tensor) else zero_point)
    if not quant_min <= zp <= quant_max:
        raise RuntimeError(f"fake_quantize_per_tensor_affine: `zero_point` {zp} must be between `quant_min` "
                           f"{quant_min} and `quant_max` {quant_max}")
    return _FakeQuantize.apply(input, scale, zp, int(quant_min), int(quant_max), False)


def fake_quantize_per_channel_affine(input: Tensor, scale: Tensor, zero_point: Tensor, axis: int, quant_min: int,
                                     quant_max: int) -> Tensor:
    """Quantize then dequantize with ``scale[i]``, ``zero_point[i]`` along ``axis``; straight-through gradient."""
    op = "fake_quantize_per_channel_affine"
    _check(input, quant_min, quant_max, op)
    xp = input._device.backend.xp
    axis %= input.ndim
    scales = _host_numbers(scale, xp, xp.float32).reshape(-1)
    zps = xp.rint(_host_numbers(zero_point, xp, xp.float64)).reshape(-1)
    if scales.shape[0] != input.shape[axis] or zps.shape[0] != input.shape[axis]:
        raise RuntimeError(f"{op}: dimensions of scale ({scales.shape[0]}) and zero_point ({zps.shape[0]}) must "
                           f"match the size of axis {axis} of the input {tuple(input.shape)}")
    if bool(((zps < quant_min) | (zps > quant_max)).any()):
        raise RuntimeError(f"{op}: `zero_point` must be between `quant_min` {quant_min} and `quant_max` {quant_max}")
    shape = [1] * input.ndim
    shape[axis] = -1
    return _FakeQuantize.apply(input, scales.reshape(shape), zps.reshape(shape), int(quant_min), int(quant_max),
                               True)
