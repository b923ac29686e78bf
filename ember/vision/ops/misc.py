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


class Permute(nn.Module):
    """``x.permute(*dims)`` as a layer (ConvNeXt moves channels last around its LayerNorm and MLP)."""

    def __init__(self, dims: Sequence[int]) -> None:
        super().__init__()
        self.dims = list(dims)

    def forward(self, x: Any) -> Any:
        return x.permute(*self.dims)
