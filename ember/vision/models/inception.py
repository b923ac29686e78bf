"""Inception v3 (torchvision's ``models.inception_v3``: same module names, keys and outputs).

In training mode with ``aux_logits`` the model returns ``InceptionOutputs(logits, aux_logits)``, otherwise the
logits alone. The network expects 299x299 images (75x75 is the smallest that works).

Example:
    >>> import ember
    >>> from ember.vision.models import inception_v3
    >>> inception_v3(num_classes=5, aux_logits=False, init_weights=False).eval()(ember.randn(1, 3, 75, 75)).shape
    ember.Size([1, 5])
"""
from __future__ import annotations

import warnings
from collections import namedtuple
from typing import Any, Callable

import ember
from ember import nn
from ember.nn import functional as F
from ember.vision.models._api import handle_legacy_interface, make_weights_enum, register_model
from ember.vision.models.googlenet import (BasicConv2d, init_conv_linear_bn, overwrite_named_param,
                                          transform_input_like_torchvision)

__all__ = ["Inception3", "InceptionOutputs", "_InceptionOutputs", "Inception_V3_Weights", "inception_v3"]

InceptionOutputs = namedtuple("InceptionOutputs", ["logits", "aux_logits"])
_InceptionOutputs = InceptionOutputs
Inception_V3_Weights = make_weights_enum("Inception_V3_Weights", __name__)

Block = Callable[..., nn.Module]


class InceptionA(nn.Module):
    """35x35 block: 1x1; 1x1 -> 5x5; 1x1 -> 3x3 -> 3x3; avg-pool -> 1x1."""

    def __init__(self, in_channels: int, pool_features: int, conv_block: Block | None = None) -> None:
        super().__init__()
        conv_block = conv_block or BasicConv2d
        self.branch1x1 = conv_block(in_channels, 64, kernel_size=1)
        self.branch5x5_1 = conv_block(in_channels, 48, kernel_size=1)
        self.branch5x5_2 = conv_block(48, 64, kernel_size=5, padding=2)
        self.branch3x3dbl_1 = conv_block(in_channels, 64, kernel_size=1)
        self.branch3x3dbl_2 = conv_block(64, 96, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = conv_block(96, 96, kernel_size=3, padding=1)
        self.branch_pool = conv_block(in_channels, pool_features, kernel_size=1)

    def _forward(self, x: Any) -> list[Any]:
        b5 = self.branch5x5_2(self.branch5x5_1(x))
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        pool = self.branch_pool(F.avg_pool2d(x, kernel_size=3, stride=1, padding=1))
        return [self.branch1x1(x), b5, b3, pool]

    def forward(self, x: Any) -> Any:
        return ember.cat(self._forward(x), 1)


class InceptionB(nn.Module):
    """Grid reduction 35 -> 17: stride-2 3x3; 1x1 -> 3x3 -> stride-2 3x3; max-pool."""

    def __init__(self, in_channels: int, conv_block: Block | None = None) -> None:
        super().__init__()
        conv_block = conv_block or BasicConv2d
        self.branch3x3 = conv_block(in_channels, 384, kernel_size=3, stride=2)
        self.branch3x3dbl_1 = conv_block(in_channels, 64, kernel_size=1)
        self.branch3x3dbl_2 = conv_block(64, 96, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = conv_block(96, 96, kernel_size=3, stride=2)

    def _forward(self, x: Any) -> list[Any]:
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return [self.branch3x3(x), b3, F.max_pool2d(x, kernel_size=3, stride=2)]

    def forward(self, x: Any) -> Any:
        return ember.cat(self._forward(x), 1)


class InceptionC(nn.Module):
    """17x17 block with factorized 7x7 convolutions (1x7 and 7x1)."""

    def __init__(self, in_channels: int, channels_7x7: int, conv_block: Block | None = None) -> None:
        super().__init__()
        conv_block = conv_block or BasicConv2d
        c7 = channels_7x7
        self.branch1x1 = conv_block(in_channels, 192, kernel_size=1)
        self.branch7x7_1 = conv_block(in_channels, c7, kernel_size=1)
        self.branch7x7_2 = conv_block(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7_3 = conv_block(c7, 192, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = conv_block(in_channels, c7, kernel_size=1)
        self.branch7x7dbl_2 = conv_block(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = conv_block(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = conv_block(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = conv_block(c7, 192, kernel_size=(1, 7), padding=(0, 3))
        self.branch_pool = conv_block(in_channels, 192, kernel_size=1)

    def _forward(self, x: Any) -> list[Any]:
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        d = self.branch7x7dbl_1(x)
        for layer in (self.branch7x7dbl_2, self.branch7x7dbl_3, self.branch7x7dbl_4, self.branch7x7dbl_5):
            d = layer(d)
        pool = self.branch_pool(F.avg_pool2d(x, kernel_size=3, stride=1, padding=1))
        return [self.branch1x1(x), b7, d, pool]

    def forward(self, x: Any) -> Any:
        return ember.cat(self._forward(x), 1)


class InceptionD(nn.Module):
    """Grid reduction 17 -> 8."""

    def __init__(self, in_channels: int, conv_block: Block | None = None) -> None:
        super().__init__()
        conv_block = conv_block or BasicConv2d
        self.branch3x3_1 = conv_block(in_channels, 192, kernel_size=1)
        self.branch3x3_2 = conv_block(192, 320, kernel_size=3, stride=2)
        self.branch7x7x3_1 = conv_block(in_channels, 192, kernel_size=1)
        self.branch7x7x3_2 = conv_block(192, 192, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7x3_3 = conv_block(192, 192, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7x3_4 = conv_block(192, 192, kernel_size=3, stride=2)

    def _forward(self, x: Any) -> list[Any]:
        b3 = self.branch3x3_2(self.branch3x3_1(x))
        b7 = self.branch7x7x3_4(self.branch7x7x3_3(self.branch7x7x3_2(self.branch7x7x3_1(x))))
        return [b3, b7, F.max_pool2d(x, kernel_size=3, stride=2)]

    def forward(self, x: Any) -> Any:
        return ember.cat(self._forward(x), 1)


class InceptionE(nn.Module):
    """8x8 block with split 1x3 / 3x1 branches."""

    def __init__(self, in_channels: int, conv_block: Block | None = None) -> None:
        super().__init__()
        conv_block = conv_block or BasicConv2d
        self.branch1x1 = conv_block(in_channels, 320, kernel_size=1)
        self.branch3x3_1 = conv_block(in_channels, 384, kernel_size=1)
        self.branch3x3_2a = conv_block(384, 384, kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3_2b = conv_block(384, 384, kernel_size=(3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = conv_block(in_channels, 448, kernel_size=1)
        self.branch3x3dbl_2 = conv_block(448, 384, kernel_size=3, padding=1)
        self.branch3x3dbl_3a = conv_block(384, 384, kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = conv_block(384, 384, kernel_size=(3, 1), padding=(1, 0))
        self.branch_pool = conv_block(in_channels, 192, kernel_size=1)

    def _forward(self, x: Any) -> list[Any]:
        b3 = self.branch3x3_1(x)
        b3 = ember.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
        d = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        d = ember.cat([self.branch3x3dbl_3a(d), self.branch3x3dbl_3b(d)], 1)
        pool = self.branch_pool(F.avg_pool2d(x, kernel_size=3, stride=1, padding=1))
        return [self.branch1x1(x), b3, d, pool]

    def forward(self, x: Any) -> Any:
        return ember.cat(self._forward(x), 1)


class InceptionAux(nn.Module):
    """The auxiliary classifier on the 17x17 grid."""

    def __init__(self, in_channels: int, num_classes: int, conv_block: Block | None = None) -> None:
        super().__init__()
        conv_block = conv_block or BasicConv2d
        self.conv0 = conv_block(in_channels, 128, kernel_size=1)
        self.conv1 = conv_block(128, 768, kernel_size=5)
        self.conv1.stddev = 0.01
        self.fc = nn.Linear(768, num_classes)
        self.fc.stddev = 0.001

    def forward(self, x: Any) -> Any:
        x = self.conv1(self.conv0(F.avg_pool2d(x, kernel_size=5, stride=3)))
        return self.fc(ember.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1))


class Inception3(nn.Module):
    """Inception v3 with torchvision's arguments (``aux_logits``, ``transform_input``, ``inception_blocks``,
    ``init_weights``, ``dropout``)."""

    def __init__(self, num_classes: int = 1000, aux_logits: bool = True, transform_input: bool = False,
                 inception_blocks: list[Block] | None = None, init_weights: bool | None = None,
                 dropout: float = 0.5) -> None:
        super().__init__()
        if inception_blocks is None:
            inception_blocks = [BasicConv2d, InceptionA, InceptionB, InceptionC, InceptionD, InceptionE, InceptionAux]
        if init_weights is None:
            warnings.warn("The default weight initialization of inception_v3 will be changed in future releases of "
                          "torchvision. If you wish to keep the old behavior (which leads to long initialization "
                          "times due to scipy/scipy#11299), please set init_weights=True.", FutureWarning)
            init_weights = True
        if len(inception_blocks) != 7:
            raise ValueError(f"length of inception_blocks should be 7 instead of {len(inception_blocks)}")
        conv_block, inception_a, inception_b, inception_c, inception_d, inception_e, inception_aux = inception_blocks
        self.aux_logits = aux_logits
        self.transform_input = transform_input
        self.Conv2d_1a_3x3 = conv_block(3, 32, kernel_size=3, stride=2)
        self.Conv2d_2a_3x3 = conv_block(32, 32, kernel_size=3)
        self.Conv2d_2b_3x3 = conv_block(32, 64, kernel_size=3, padding=1)
        self.maxpool1 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.Conv2d_3b_1x1 = conv_block(64, 80, kernel_size=1)
        self.Conv2d_4a_3x3 = conv_block(80, 192, kernel_size=3)
        self.maxpool2 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.Mixed_5b = inception_a(192, pool_features=32)
        self.Mixed_5c = inception_a(256, pool_features=64)
        self.Mixed_5d = inception_a(288, pool_features=64)
        self.Mixed_6a = inception_b(288)
        self.Mixed_6b = inception_c(768, channels_7x7=128)
        self.Mixed_6c = inception_c(768, channels_7x7=160)
        self.Mixed_6d = inception_c(768, channels_7x7=160)
        self.Mixed_6e = inception_c(768, channels_7x7=192)
        self.AuxLogits = inception_aux(768, num_classes) if aux_logits else None
        self.Mixed_7a = inception_d(768)
        self.Mixed_7b = inception_e(1280)
        self.Mixed_7c = inception_e(2048)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(p=dropout)
        self.fc = nn.Linear(2048, num_classes)
        if init_weights:
            init_conv_linear_bn(self, 0.1)

    def _transform_input(self, x: Any) -> Any:
        return transform_input_like_torchvision(x) if self.transform_input else x

    def _forward(self, x: Any) -> tuple[Any, Any]:
        for name in ("Conv2d_1a_3x3", "Conv2d_2a_3x3", "Conv2d_2b_3x3", "maxpool1", "Conv2d_3b_1x1", "Conv2d_4a_3x3",
                     "maxpool2", "Mixed_5b", "Mixed_5c", "Mixed_5d", "Mixed_6a", "Mixed_6b", "Mixed_6c", "Mixed_6d",
                     "Mixed_6e"):
            x = getattr(self, name)(x)
        aux = self.AuxLogits(x) if self.AuxLogits is not None and self.training else None
        x = self.Mixed_7c(self.Mixed_7b(self.Mixed_7a(x)))
        x = self.dropout(self.avgpool(x))
        return self.fc(ember.flatten(x, 1)), aux

    def eager_outputs(self, x: Any, aux: Any) -> Any:
        if self.training and self.aux_logits:
            return InceptionOutputs(x, aux)
        return x

    def forward(self, x: Any) -> Any:
        x, aux = self._forward(self._transform_input(x))
        return self.eager_outputs(x, aux)


@register_model("inception_v3", Inception_V3_Weights)
@handle_legacy_interface(lambda: Inception_V3_Weights.IMAGENET1K_V1)
def inception_v3(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> Inception3:
    """Inception v3 (``weights``: :class:`Inception_V3_Weights` or None; keywords go to :class:`Inception3`). With
    weights, ``transform_input`` defaults to True and the auxiliary head is dropped unless ``aux_logits``."""
    weights = Inception_V3_Weights.verify(weights)
    original_aux_logits = kwargs.get("aux_logits", True)
    if weights is not None:
        if "transform_input" not in kwargs:
            overwrite_named_param(kwargs, "transform_input", True)
        overwrite_named_param(kwargs, "aux_logits", True)
        overwrite_named_param(kwargs, "init_weights", False)
        overwrite_named_param(kwargs, "num_classes", len(weights.meta["categories"]))
    model = Inception3(**kwargs)
    if weights is not None:
        model.load_state_dict(weights.get_state_dict(progress=progress, check_hash=True))
        if not original_aux_logits:
            model.aux_logits = False
            model.AuxLogits = None
    return model
