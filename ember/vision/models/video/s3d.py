"""S3D (torchvision's ``models.video.s3d``): separable 3-D Inception (each 3x3x3 conv split into 1x3x3 spatial and
3x1x1 temporal convs); same arguments, module names and state_dict keys as torchvision.

Example:
    >>> import ember
    >>> from ember.vision.models.video import s3d
    >>> s3d(num_classes=5).eval()(ember.randn(1, 3, 16, 224, 224)).shape  # doctest: +SKIP
    ember.Size([1, 5])
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable

import ember
from ember import nn
from ember.tensor import Tensor
from ember.vision.models._api import (handle_legacy_interface, load_weights, make_weights_enum, override_num_classes,
                                      register_model)
from ember.vision.ops.misc import Conv3dNormActivation

__all__ = ["S3D", "S3D_Weights", "s3d"]

S3D_Weights = make_weights_enum("S3D_Weights", __name__)


class TemporalSeparableConv(nn.Sequential):
    """A ``1 x k x k`` spatial conv-norm-ReLU, then a ``k x 1 x 1`` temporal one."""

    def __init__(self, in_planes: int, out_planes: int, kernel_size: int, stride: int, padding: int,
                 norm_layer: Callable[..., nn.Module]) -> None:
        super().__init__(
            Conv3dNormActivation(in_planes, out_planes, kernel_size=(1, kernel_size, kernel_size),
                                 stride=(1, stride, stride), padding=(0, padding, padding), bias=False,
                                 norm_layer=norm_layer),
            Conv3dNormActivation(out_planes, out_planes, kernel_size=(kernel_size, 1, 1), stride=(stride, 1, 1),
                                 padding=(padding, 0, 0), bias=False, norm_layer=norm_layer))


class SepInceptionBlock3D(nn.Module):
    """Four branches concatenated: 1x1x1; 1x1x1 then separable 3x3x3 (twice, different widths); 3x3x3 max-pool
    then 1x1x1."""

    def __init__(self, in_planes: int, b0_out: int, b1_mid: int, b1_out: int, b2_mid: int, b2_out: int, b3_out: int,
                 norm_layer: Callable[..., nn.Module]) -> None:
        super().__init__()
        self.branch0 = Conv3dNormActivation(in_planes, b0_out, kernel_size=1, stride=1, norm_layer=norm_layer)
        self.branch1 = nn.Sequential(
            Conv3dNormActivation(in_planes, b1_mid, kernel_size=1, stride=1, norm_layer=norm_layer),
            TemporalSeparableConv(b1_mid, b1_out, kernel_size=3, stride=1, padding=1, norm_layer=norm_layer))
        self.branch2 = nn.Sequential(
            Conv3dNormActivation(in_planes, b2_mid, kernel_size=1, stride=1, norm_layer=norm_layer),
            TemporalSeparableConv(b2_mid, b2_out, kernel_size=3, stride=1, padding=1, norm_layer=norm_layer))
        self.branch3 = nn.Sequential(
            nn.MaxPool3d(kernel_size=(3, 3, 3), stride=1, padding=1),
            Conv3dNormActivation(in_planes, b3_out, kernel_size=1, stride=1, norm_layer=norm_layer))

    def forward(self, x: Tensor) -> Tensor:
        return ember.cat((self.branch0(x), self.branch1(x), self.branch2(x), self.branch3(x)), 1)


class S3D(nn.Module):
    """``features`` (separable stem and nine Inception blocks), a 2x7x7 average pool, dropout and a 1x1x1 conv
    classifier averaged over what remains of time and space."""

    def __init__(self, num_classes: int = 400, dropout: float = 0.2,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        if norm_layer is None:
            norm_layer = partial(nn.BatchNorm3d, eps=0.001, momentum=0.001)
        blocks = [(192, 64, 96, 128, 16, 32, 32), (256, 128, 128, 192, 32, 96, 64), "pool3",
                  (480, 192, 96, 208, 16, 48, 64), (512, 160, 112, 224, 24, 64, 64), (512, 128, 128, 256, 24, 64, 64),
                  (512, 112, 144, 288, 32, 64, 64), (528, 256, 160, 320, 32, 128, 128), "pool2",
                  (832, 256, 160, 320, 32, 128, 128), (832, 384, 192, 384, 48, 128, 128)]
        layers: list[nn.Module] = [
            TemporalSeparableConv(3, 64, 7, 2, 3, norm_layer),
            nn.MaxPool3d(kernel_size=(1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1)),
            Conv3dNormActivation(64, 64, kernel_size=1, stride=1, norm_layer=norm_layer),
            TemporalSeparableConv(64, 192, 3, 1, 1, norm_layer),
            nn.MaxPool3d(kernel_size=(1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1))]
        for spec in blocks:
            if spec == "pool3":
                layers.append(nn.MaxPool3d(kernel_size=(3, 3, 3), stride=(2, 2, 2), padding=(1, 1, 1)))
            elif spec == "pool2":
                layers.append(nn.MaxPool3d(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0)))
            else:
                layers.append(SepInceptionBlock3D(*spec, norm_layer))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AvgPool3d(kernel_size=(2, 7, 7), stride=1)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout), nn.Conv3d(1024, num_classes, kernel_size=1, stride=1,
                                                                         bias=True))

    def forward(self, x: Tensor) -> Tensor:
        return ember.mean(self.classifier(self.avgpool(self.features(x))), dim=(2, 3, 4))


@register_model("s3d", S3D_Weights)
@handle_legacy_interface(lambda: S3D_Weights.KINETICS400_V1)
def s3d(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> S3D:
    """S3D (Kinetics-400 weights available; clips of at least 14 frames at 224x224)."""
    weights = S3D_Weights.verify(weights)
    override_num_classes(kwargs, weights)
    return load_weights(S3D(**kwargs), weights, progress)
