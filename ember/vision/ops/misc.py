"""Building blocks shared by the models (torchvision's ``torchvision.ops.misc``).

Example:
    >>> import ember
    >>> from ember.vision.ops import Conv2dNormActivation
    >>> block = Conv2dNormActivation(3, 8, kernel_size=3, stride=2)
    >>> [type(m).__name__ for m in block], block(ember.randn(1, 3, 8, 8)).shape
    (['Conv2d', 'BatchNorm2d', 'ReLU'], ember.Size([1, 8, 4, 4]))
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import ember
from ember import nn


class Conv2dNormActivation(nn.Sequential):
    """Conv2d, then a norm layer (if any), then an activation (if any), as children ``0``, ``1``, ``2``.

    ``padding=None`` keeps the spatial size at stride 1 (``(k - 1) // 2 * dilation``); the conv has
    a bias only when there is no norm layer (unless ``bias`` says otherwise).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | Sequence[int] = 3,
                 stride: int | Sequence[int] = 1, padding: Any = None, groups: int = 1,
                 norm_layer: Callable[..., nn.Module] | None = nn.BatchNorm2d,
                 activation_layer: Callable[..., nn.Module] | None = nn.ReLU, dilation: int | Sequence[int] = 1,
                 inplace: bool | None = True, bias: bool | None = None,
                 conv_layer: Callable[..., nn.Module] = nn.Conv2d) -> None:
        if padding is None:
            kernels = (kernel_size,) * 2 if isinstance(kernel_size, int) else tuple(kernel_size)
            dilations = (dilation,) * len(kernels) if isinstance(dilation, int) else tuple(dilation)
            pads = tuple((k - 1) // 2 * d for k, d in zip(kernels, dilations))
            padding = pads[0] if isinstance(kernel_size, int) and isinstance(dilation, int) else pads
        if bias is None:
            bias = norm_layer is None
        layers = [conv_layer(in_channels, out_channels, kernel_size, stride, padding, dilation=dilation, groups=groups,
                             bias=bias)]
        if norm_layer is not None:
            layers.append(norm_layer(out_channels))
        if activation_layer is not None:
            layers.append(activation_layer(**({} if inplace is None else {"inplace": inplace})))
        super().__init__(*layers)
        self.out_channels = out_channels


class Conv3dNormActivation(Conv2dNormActivation):
    """Conv3d, then a norm layer (BatchNorm3d by default), then an activation: torchvision's 3-D block (the video
    models use it); padding and bias follow :class:`Conv2dNormActivation`'s rules."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | Sequence[int] = 3,
                 stride: int | Sequence[int] = 1, padding: Any = None, groups: int = 1,
                 norm_layer: Callable[..., nn.Module] | None = nn.BatchNorm3d,
                 activation_layer: Callable[..., nn.Module] | None = nn.ReLU, dilation: int | Sequence[int] = 1,
                 inplace: bool | None = True, bias: bool | None = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, groups, norm_layer,
                         activation_layer, dilation, inplace, bias, conv_layer=nn.Conv3d)


class SqueezeExcitation(nn.Module):
    """Channel attention: ``x * scale(fc2(act(fc1(avgpool(x)))))`` with 1x1 convs ``fc1``/``fc2``."""

    def __init__(self, input_channels: int, squeeze_channels: int,
                 activation: Callable[..., nn.Module] = nn.ReLU,
                 scale_activation: Callable[..., nn.Module] = nn.Sigmoid) -> None:
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(input_channels, squeeze_channels, 1)
        self.fc2 = nn.Conv2d(squeeze_channels, input_channels, 1)
        self.activation = activation()
        self.scale_activation = scale_activation()

    def _scale(self, input: Any) -> Any:
        scale = self.avgpool(input)
        scale = self.activation(self.fc1(scale))
        return self.scale_activation(self.fc2(scale))

    def forward(self, input: Any) -> Any:
        return self._scale(input) * input


class MLP(nn.Sequential):
    """Linear -> norm? -> activation -> dropout for each hidden size; the last has no norm/activation."""

    def __init__(self, in_channels: int, hidden_channels: Sequence[int],
                 norm_layer: Callable[..., nn.Module] | None = None,
                 activation_layer: Callable[..., nn.Module] | None = nn.ReLU, inplace: bool | None = None,
                 bias: bool = True, dropout: float = 0.0) -> None:
        params = {} if inplace is None else {"inplace": inplace}
        layers: list[nn.Module] = []
        in_dim = in_channels
        for hidden_dim in hidden_channels[:-1]:
            layers.append(nn.Linear(in_dim, hidden_dim, bias=bias))
            if norm_layer is not None:
                layers.append(norm_layer(hidden_dim))
            if activation_layer is not None:
                layers.append(activation_layer(**params))
            layers.append(nn.Dropout(dropout, **params))
            in_dim = hidden_dim
        layers.append(nn.Linear(in_dim, hidden_channels[-1], bias=bias))
        layers.append(nn.Dropout(dropout, **params))
        super().__init__(*layers)


class FrozenBatchNorm2d(nn.Module):
    """BatchNorm2d with fixed statistics and affine parameters (buffers, not parameters), as detection
    backbones use: ``x * weight / sqrt(running_var + eps) + (bias - running_mean * scale)``."""

    def __init__(self, num_features: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.register_buffer("weight", ember.ones(num_features))
        self.register_buffer("bias", ember.zeros(num_features))
        self.register_buffer("running_mean", ember.zeros(num_features))
        self.register_buffer("running_var", ember.ones(num_features))

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list) -> Any:
        state_dict.pop(prefix + "num_batches_tracked", None)  # a BatchNorm2d checkpoint loads as well
        return super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                             unexpected_keys, error_msgs)

    def forward(self, x: Any) -> Any:
        w = self.weight.reshape(1, -1, 1, 1)
        b = self.bias.reshape(1, -1, 1, 1)
        rv = self.running_var.reshape(1, -1, 1, 1)
        rm = self.running_mean.reshape(1, -1, 1, 1)
        scale = w * (rv + self.eps).rsqrt()
        return x * scale + (b - rm * scale)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.weight.shape[0]}, eps={self.eps})"


class Permute(nn.Module):
    """``x.permute(*dims)`` as a layer (ConvNeXt moves channels last around its LayerNorm and MLP)."""

    def __init__(self, dims: Sequence[int]) -> None:
        super().__init__()
        self.dims = list(dims)

    def forward(self, x: Any) -> Any:
        return x.permute(*self.dims)
