"""``Conv1d``, ``Conv2d`` and ``Conv3d`` (weights ``(out_channels, in_channels // groups, *kernel_size)`` as PyTorch).

Example:
    >>> import ember
    >>> ember.nn.Conv2d(3, 8, 3, padding=1)(ember.randn(2, 3, 16, 16)).shape
    ember.Size([2, 8, 16, 16])
"""
from __future__ import annotations

import math
from typing import Any

from ember import creation
from ember.nn import functional as F, init
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.tensor import Tensor


def _ntuple(value: Any, n: int, name: str) -> tuple:
    if isinstance(value, (tuple, list)):
        if len(value) != n:
            raise ValueError(f"{name}: expected {n} values, got {tuple(value)}")
        return tuple(int(v) for v in value)
    return (int(value),) * n


class _ConvNd(Module):
    _dims = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        name = type(self).__name__
        if in_channels % groups != 0 or out_channels % groups != 0:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) must both be "
                             f"divisible by groups ({groups})")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"{name}: padding_mode must be one of 'zeros', 'reflect', 'replicate' or 'circular', "
                             f"got {padding_mode!r}")
        n = self._dims
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _ntuple(kernel_size, n, name)
        self.stride = _ntuple(stride, n, name)
        self.dilation = _ntuple(dilation, n, name)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{name}: padding must be an int, a tuple, 'same' or 'valid', got {padding!r}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
            self.padding: Any = padding
        else:
            self.padding = _ntuple(padding, n, name)
        self.padding_mode = padding_mode
        self.output_padding = (0,) * n
        self.transposed = False
        self.weight = Parameter(creation.empty(out_channels, in_channels // groups, *self.kernel_size,
                                               device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(creation.empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _padded(self, input: Tensor) -> tuple[Tensor, Any]:
        """Apply a non-zero padding mode explicitly; returns the input and the padding left for the conv."""
        if self.padding_mode == "zeros" or self.padding == "valid":
            return input, self.padding
        pads: list = []
        if self.padding == "same":  # PyTorch's split of d * (k - 1): the extra element on the right
            for d, k in zip(reversed(self.dilation), reversed(self.kernel_size)):
                pads += [d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2]
        else:
            for p in reversed(self.padding):  # F.pad takes the last dim first
                pads += [p, p]
        return F.pad(input, tuple(pads), mode=self.padding_mode), 0

    def extra_repr(self) -> str:
        text = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self._dims:
            text += f", padding={self.padding}"  # torch's str.format: 'same' prints unquoted
        if self.dilation != (1,) * self._dims:
            text += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self._dims:
            text += f", output_padding={self.output_padding}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        if self.padding_mode != "zeros":
            text += f", padding_mode={self.padding_mode}"
        return text


class Conv1d(_ConvNd):
    """1-D convolution over (N, C_in, L) or (C_in, L) input."""

    _dims = 1

    def forward(self, input: Tensor) -> Tensor:
        x, padding = self._padded(input)
        return F.conv1d(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)


class Conv2d(_ConvNd):
    """2-D convolution over (N, C_in, H, W) or (C_in, H, W) input."""

    _dims = 2

    def forward(self, input: Tensor) -> Tensor:
        x, padding = self._padded(input)
        return F.conv2d(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)


class Conv3d(_ConvNd):
    """3-D convolution over (N, C_in, D, H, W) or (C_in, D, H, W) input."""

    _dims = 3

    def forward(self, input: Tensor) -> Tensor:
        x, padding = self._padded(input)
        return F.conv3d(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)


class _ConvTransposeNd(Module):
    """Transposed N-D convolution ("deconvolution"); weight (in_channels, out_channels // groups, *kernel).

    Output size per dim: (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1.
    One implementation for ConvTranspose1d/2d/3d; subclasses set ``_dims``.
    """

    _dims = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 output_padding: Any = 0, groups: int = 1, bias: bool = True, dilation: Any = 1,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        name, n = type(self).__name__, self._dims
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {name}, got {padding_mode!r}')
        if in_channels % groups != 0 or out_channels % groups != 0:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) must "
                             f"both be divisible by groups ({groups})")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _ntuple(kernel_size, n, name)
        self.stride = _ntuple(stride, n, name)
        self.padding = _ntuple(padding, n, name)
        self.output_padding = _ntuple(output_padding, n, name)
        self.dilation = _ntuple(dilation, n, name)
        self.padding_mode, self.transposed = padding_mode, True
        self.weight = Parameter(creation.empty(in_channels, out_channels // groups, *self.kernel_size,
                                               device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(creation.empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    reset_parameters = _ConvNd.reset_parameters

    def forward(self, input: Tensor, output_size: Any = None) -> Tensor:
        output_padding, n = self.output_padding, self._dims
        if output_size is not None:  # pick output_padding so the result has output_size (as PyTorch)
            size = tuple(output_size)[-n:]
            minimum = [(input.shape[-n + i] - 1) * self.stride[i] - 2 * self.padding[i]
                       + self.dilation[i] * (self.kernel_size[i] - 1) + 1 for i in range(n)]
            output_padding = tuple(int(s - m) for s, m in zip(size, minimum))
            if any(not 0 <= p < max(self.stride[i], self.dilation[i]) for i, p in enumerate(output_padding)):
                raise ValueError(f"{type(self).__name__}: requested output_size {size} is not reachable; valid "
                                 f"sizes start at {tuple(minimum)}")
        fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[n - 1]
        return fn(input, self.weight, self.bias, self.stride, self.padding, output_padding, self.groups,
                  self.dilation)

    extra_repr = _ConvNd.extra_repr


class ConvTranspose1d(_ConvTransposeNd):
    _dims = 1


class ConvTranspose2d(_ConvTransposeNd):
    _dims = 2


class ConvTranspose3d(_ConvTransposeNd):
    _dims = 3
