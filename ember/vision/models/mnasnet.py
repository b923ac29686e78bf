"""MNASNet (torchvision's ``models.mnasnet0_5/0_75/1_0/1_3``: same arguments, module names and keys).

The B1 network found by platform-aware architecture search: a depthwise-separable stem, then stacks of
inverted residuals (3x3 or 5x5 depthwise, expansion 3 or 6), widths scaled by ``alpha`` and rounded to
multiples of 8. Checkpoints saved by the first version of torchvision's model (state_dict version 1, a
stem of fixed width) load into a model patched to that stem, with torchvision's warning.

Example:
    >>> import ember
    >>> from ember.vision.models import mnasnet0_5
    >>> mnasnet0_5(num_classes=3).eval()(ember.randn(1, 3, 32, 32)).shape
    ember.Size([1, 3])
"""
from __future__ import annotations

import warnings
from typing import Any

from ember import nn
from ember.vision.models._api import (
    handle_legacy_interface, load_weights, make_weights_enum, override_num_classes, register_model,
)

__all__ = ["MNASNet", "MNASNet0_5_Weights", "MNASNet0_75_Weights", "MNASNet1_0_Weights", "MNASNet1_3_Weights",
           "mnasnet0_5", "mnasnet0_75", "mnasnet1_0", "mnasnet1_3"]

MNASNet0_5_Weights = make_weights_enum("MNASNet0_5_Weights", __name__)
MNASNet0_75_Weights = make_weights_enum("MNASNet0_75_Weights", __name__)
MNASNet1_0_Weights = make_weights_enum("MNASNet1_0_Weights", __name__)
MNASNet1_3_Weights = make_weights_enum("MNASNet1_3_Weights", __name__)

_BN_MOMENTUM = 1 - 0.9997  # the paper's TensorFlow decay 0.9997, in PyTorch's convention


class _InvertedResidual(nn.Module):
    """1x1 expand (BN, ReLU), kxk depthwise (BN, ReLU), 1x1 project (BN); a shortcut when shapes allow."""

    def __init__(self, in_ch: int, out_ch: int, kernel_size: int, stride: int, expansion_factor: int,
                 bn_momentum: float = 0.1) -> None:
        super().__init__()
        if stride not in (1, 2):
            raise ValueError(f"stride should be 1 or 2 instead of {stride}")
        if kernel_size not in (3, 5):
            raise ValueError(f"kernel_size should be 3 or 5 instead of {kernel_size}")
        mid_ch = in_ch * expansion_factor
        self.apply_residual = in_ch == out_ch and stride == 1
        self.layers = nn.Sequential(
            nn.Conv2d(in_ch, mid_ch, 1, bias=False), nn.BatchNorm2d(mid_ch, momentum=bn_momentum), nn.ReLU(inplace=True),
            nn.Conv2d(mid_ch, mid_ch, kernel_size, padding=kernel_size // 2, stride=stride, groups=mid_ch, bias=False),
            nn.BatchNorm2d(mid_ch, momentum=bn_momentum), nn.ReLU(inplace=True),
            nn.Conv2d(mid_ch, out_ch, 1, bias=False), nn.BatchNorm2d(out_ch, momentum=bn_momentum),
        )

    def forward(self, input: Any) -> Any:
        return self.layers(input) + input if self.apply_residual else self.layers(input)


def _stack(in_ch: int, out_ch: int, kernel_size: int, stride: int, exp_factor: int, repeats: int,
           bn_momentum: float) -> nn.Sequential:
    """``repeats`` inverted residuals; only the first changes width and resolution."""
    if repeats < 1:
        raise ValueError(f"repeats should be >= 1, instead got {repeats}")
    blocks = [_InvertedResidual(in_ch, out_ch, kernel_size, stride, exp_factor, bn_momentum=bn_momentum)]
    blocks += [_InvertedResidual(out_ch, out_ch, kernel_size, 1, exp_factor, bn_momentum=bn_momentum)
               for _ in range(1, repeats)]
    return nn.Sequential(*blocks)


def _round_to_multiple_of(val: float, divisor: int, round_up_bias: float = 0.9) -> int:
    """The nearest multiple of ``divisor``, rounded up when rounding down would lose more than 10%."""
    if not 0.0 < round_up_bias < 1.0:
        raise ValueError(f"round_up_bias should be greater than 0.0 and smaller than 1.0 instead of {round_up_bias}")
    new_val = max(divisor, int(val + divisor / 2) // divisor * divisor)
    return new_val if new_val >= round_up_bias * val else new_val + divisor


def _get_depths(alpha: float) -> list[int]:
    return [_round_to_multiple_of(depth * alpha, 8) for depth in (32, 16, 24, 40, 80, 96, 192, 320)]


def _stem(first: int, second: int, third_in: int, third_out: int) -> list[nn.Module]:
    return [
        nn.Conv2d(3, first, 3, padding=1, stride=2, bias=False), nn.BatchNorm2d(first, momentum=_BN_MOMENTUM),
        nn.ReLU(inplace=True),
        nn.Conv2d(first, first, 3, padding=1, stride=1, groups=first, bias=False),
        nn.BatchNorm2d(first, momentum=_BN_MOMENTUM), nn.ReLU(inplace=True),
        nn.Conv2d(first, second, 1, padding=0, stride=1, bias=False), nn.BatchNorm2d(second, momentum=_BN_MOMENTUM),
        _stack(third_in, third_out, 3, 2, 3, 3, _BN_MOMENTUM),
    ]


class MNASNet(nn.Module):
    """MNASNet-B1 with width multiplier ``alpha``."""

    _version = 2

    def __init__(self, alpha: float, num_classes: int = 1000, dropout: float = 0.2) -> None:
        super().__init__()
        if alpha <= 0.0:
            raise ValueError(f"alpha should be greater than 0.0 instead of {alpha}")
        self.alpha = alpha
        self.num_classes = num_classes
        d = _get_depths(alpha)
        layers = _stem(d[0], d[1], d[1], d[2]) + [
            _stack(d[2], d[3], 5, 2, 3, 3, _BN_MOMENTUM),
            _stack(d[3], d[4], 5, 2, 6, 3, _BN_MOMENTUM),
            _stack(d[4], d[5], 3, 1, 6, 2, _BN_MOMENTUM),
            _stack(d[5], d[6], 5, 2, 6, 4, _BN_MOMENTUM),
            _stack(d[6], d[7], 3, 1, 6, 1, _BN_MOMENTUM),
            nn.Conv2d(d[7], 1280, 1, padding=0, stride=1, bias=False), nn.BatchNorm2d(1280, momentum=_BN_MOMENTUM),
            nn.ReLU(inplace=True),
        ]
        self.layers = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout, inplace=True), nn.Linear(1280, num_classes))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.kaiming_uniform_(m.weight, mode="fan_out", nonlinearity="sigmoid")
                nn.init.zeros_(m.bias)

    def forward(self, x: Any) -> Any:
        return self.classifier(self.layers(x).mean([2, 3]))

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
        version = local_metadata.get("version", None)
        if version not in (1, 2):
            raise ValueError(f"version should be set to 1 or 2 instead of {version}")
        if version == 1 and self.alpha != 1.0:
            # version 1 had a stem of fixed width (32, 16); alpha 1.0 is the same in both versions
            for index, layer in enumerate(_stem(32, 16, 16, _get_depths(self.alpha)[2])):
                self.layers[index] = layer
            self._version = 1
            warnings.warn("A new version of MNASNet model has been implemented. Your checkpoint was saved using the "
                          "previous version. This checkpoint will load and work as before, but you may want to "
                          "upgrade by training a newer model or transfer learning from an updated ImageNet "
                          "checkpoint.", UserWarning)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


def _mnasnet(alpha: float, weights: Any, progress: bool, **kwargs: Any) -> MNASNet:
    override_num_classes(kwargs, weights)
    return load_weights(MNASNet(alpha, **kwargs), weights, progress)


@register_model("mnasnet0_5", MNASNet0_5_Weights)
@handle_legacy_interface(lambda: MNASNet0_5_Weights.IMAGENET1K_V1)
def mnasnet0_5(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> MNASNet:
    """MNASNet with depth multiplier 0.5."""
    return _mnasnet(0.5, MNASNet0_5_Weights.verify(weights), progress, **kwargs)


@register_model("mnasnet0_75", MNASNet0_75_Weights)
@handle_legacy_interface(lambda: MNASNet0_75_Weights.IMAGENET1K_V1)
def mnasnet0_75(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> MNASNet:
    """MNASNet with depth multiplier 0.75."""
    return _mnasnet(0.75, MNASNet0_75_Weights.verify(weights), progress, **kwargs)


@register_model("mnasnet1_0", MNASNet1_0_Weights)
@handle_legacy_interface(lambda: MNASNet1_0_Weights.IMAGENET1K_V1)
def mnasnet1_0(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> MNASNet:
    """MNASNet with depth multiplier 1.0."""
    return _mnasnet(1.0, MNASNet1_0_Weights.verify(weights), progress, **kwargs)


@register_model("mnasnet1_3", MNASNet1_3_Weights)
@handle_legacy_interface(lambda: MNASNet1_3_Weights.IMAGENET1K_V1)
def mnasnet1_3(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> MNASNet:
    """MNASNet with depth multiplier 1.3."""
    return _mnasnet(1.3, MNASNet1_3_Weights.verify(weights), progress, **kwargs)
