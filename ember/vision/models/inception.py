"""Inception v3 (torchvision's ``models.inception_v3``: same arguments, module names, keys and outputs).

Factorized Inception blocks (A: 5x5 and double-3x3 branches; B and D: stride-2 reductions; C: 7x7 as 1x7 and
7x1; E: 3x3 split into parallel 1x3 and 3x1) on a 299x299 input, with one auxiliary classifier. In
training with ``aux_logits`` the forward returns ``InceptionOutputs(logits, aux_logits)``, otherwise the
logits.

Example:
    >>> import ember
    >>> from ember.vision.models import inception_v3
    >>> inception_v3(num_classes=3, init_weights=False, aux_logits=False).eval()(ember.randn(1, 3, 75, 75)).shape
    ember.Size([1, 3])
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, NamedTuple

import ember
from ember import nn
from ember.nn import functional as F
from ember.vision.models._api import handle_legacy_interface, make_weights_enum, override_num_classes, register_model
from ember.vision.models.googlenet import BasicConv2d, transform_imagenet_input

__all__ = ["Inception3", "InceptionOutputs", "_InceptionOutputs", "Inception_V3_Weights", "inception_v3"]

Inception_V3_Weights = make_weights_enum("Inception_V3_Weights", __name__)


class InceptionOutputs(NamedTuple):
    logits: Any
    aux_logits: Any


_InceptionOutputs = InceptionOutputs

ConvBlock = Callable[..., nn.Module]


def _pool3(x: Any) -> Any:
    return F.avg_pool2d(x, kernel_size=3, stride=1, padding=1)


class InceptionA(nn.Module):
    """1x1 | 1x1-5x5 | 1x1-3x3-3x3 | avg-pool-1x1."""

    def __init__(self, in_channels: int, pool_features: int, conv_block: ConvBlock | None = None) -> None:
        super().__init__()
        conv = conv_block or BasicConv2d
        self.branch1x1 = conv(in_channels, 64, kernel_size=1)
        self.branch5x5_1 = conv(in_channels, 48, kernel_size=1)
        self.branch5x5_2 = conv(48, 64, kernel_size=5, padding=2)
        self.branch3x3dbl_1 = conv(in_channels, 64, kernel_size=1)
        self.branch3x3dbl_2 = conv(64, 96, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = conv(96, 96, kernel_size=3, padding=1)
        self.branch_pool = conv(in_channels, pool_features, kernel_size=1)

    def forward(self, x: Any) -> Any:
        return ember.cat([self.branch1x1(x), self.branch5x5_2(self.branch5x5_1(x)),
                          self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x))),
                          self.branch_pool(_pool3(x))], 1)


class InceptionB(nn.Module):
    """A grid reduction: 3x3/2 | 1x1-3x3-3x3/2 | max-pool/2."""

    def __init__(self, in_channels: int, conv_block: ConvBlock | None = None) -> None:
        super().__init__()
        conv = conv_block or BasicConv2d
        self.branch3x3 = conv(in_channels, 384, kernel_size=3, stride=2)
        self.branch3x3dbl_1 = conv(in_channels, 64, kernel_size=1)
        self.branch3x3dbl_2 = conv(64, 96, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = conv(96, 96, kernel_size=3, stride=2)

    def forward(self, x: Any) -> Any:
        return ember.cat([self.branch3x3(x), self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x))),
                          F.max_pool2d(x, kernel_size=3, stride=2)], 1)


class InceptionC(nn.Module):
    """7x7 convolutions factorized into 1x7 and 7x1."""

    def __init__(self, in_channels: int, channels_7x7: int, conv_block: ConvBlock | None = None) -> None:
        super().__init__()
        conv = conv_block or BasicConv2d
        c7 = channels_7x7
        self.branch1x1 = conv(in_channels, 192, kernel_size=1)
        self.branch7x7_1 = conv(in_channels, c7, kernel_size=1)
        self.branch7x7_2 = conv(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7_3 = conv(c7, 192, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = conv(in_channels, c7, kernel_size=1)
        self.branch7x7dbl_2 = conv(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = conv(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = conv(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = conv(c7, 192, kernel_size=(1, 7), padding=(0, 3))
        self.branch_pool = conv(in_channels, 192, kernel_size=1)

    def forward(self, x: Any) -> Any:
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        bd = x
        for layer in (self.branch7x7dbl_1, self.branch7x7dbl_2, self.branch7x7dbl_3, self.branch7x7dbl_4,
                      self.branch7x7dbl_5):
            bd = layer(bd)
        return ember.cat([self.branch1x1(x), b7, bd, self.branch_pool(_pool3(x))], 1)


class InceptionD(nn.Module):
    """A grid reduction: 1x1-3x3/2 | 1x1-1x7-7x1-3x3/2 | max-pool/2."""

    def __init__(self, in_channels: int, conv_block: ConvBlock | None = None) -> None:
        super().__init__()
        conv = conv_block or BasicConv2d
        self.branch3x3_1 = conv(in_channels, 192, kernel_size=1)
        self.branch3x3_2 = conv(192, 320, kernel_size=3, stride=2)
        self.branch7x7x3_1 = conv(in_channels, 192, kernel_size=1)
        self.branch7x7x3_2 = conv(192, 192, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7x3_3 = conv(192, 192, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7x3_4 = conv(192, 192, kernel_size=3, stride=2)

    def forward(self, x: Any) -> Any:
        b7 = self.branch7x7x3_4(self.branch7x7x3_3(self.branch7x7x3_2(self.branch7x7x3_1(x))))
        return ember.cat([self.branch3x3_2(self.branch3x3_1(x)), b7, F.max_pool2d(x, kernel_size=3, stride=2)], 1)


class InceptionE(nn.Module):
    """The widest block: 3x3 convolutions as parallel 1x3 and 3x1 whose outputs are concatenated."""

    def __init__(self, in_channels: int, conv_block: ConvBlock | None = None) -> None:
        super().__init__()
        conv = conv_block or BasicConv2d
        self.branch1x1 = conv(in_channels, 320, kernel_size=1)
        self.branch3x3_1 = conv(in_channels, 384, kernel_size=1)
        self.branch3x3_2a = conv(384, 384, kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3_2b = conv(384, 384, kernel_size=(3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = conv(in_channels, 448, kernel_size=1)
        self.branch3x3dbl_2 = conv(448, 384, kernel_size=3, padding=1)
        self.branch3x3dbl_3a = conv(384, 384, kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = conv(384, 384, kernel_size=(3, 1), padding=(1, 0))
        self.branch_pool = conv(in_channels, 192, kernel_size=1)

    def forward(self, x: Any) -> Any:
        b3 = self.branch3x3_1(x)
        b3 = ember.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
        bd = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        bd = ember.cat([self.branch3x3dbl_3a(bd), self.branch3x3dbl_3b(bd)], 1)
        return ember.cat([self.branch1x1(x), b3, bd, self.branch_pool(_pool3(x))], 1)


class InceptionAux(nn.Module):
    """The auxiliary classifier on the 17x17 grid: 5x5/3 average pool, 1x1 conv, 5x5 conv, linear."""

    def __init__(self, in_channels: int, num_classes: int, conv_block: ConvBlock | None = None) -> None:
        super().__init__()
        conv = conv_block or BasicConv2d
        self.conv0 = conv(in_channels, 128, kernel_size=1)
        self.conv1 = conv(128, 768, kernel_size=5)
        self.conv1.stddev = 0.01  # read by nobody (the init looks at the inner Conv2d), kept as torchvision has it
        self.fc = nn.Linear(768, num_classes)
        self.fc.stddev = 0.001  # the initialization's standard deviation for this layer

    def forward(self, x: Any) -> Any:
        x = self.conv1(self.conv0(F.avg_pool2d(x, kernel_size=5, stride=3)))
        return self.fc(ember.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1))


class Inception3(nn.Module):
    """The network of "Rethinking the Inception Architecture for Computer Vision"."""

    def __init__(self, num_classes: int = 1000, aux_logits: bool = True, transform_input: bool = False,
                 inception_blocks: list[ConvBlock] | None = None, init_weights: bool | None = None,
                 dropout: float = 0.5) -> None:
        super().__init__()
        blocks = inception_blocks or [BasicConv2d, InceptionA, InceptionB, InceptionC, InceptionD, InceptionE,
                                      InceptionAux]
        if init_weights is None:
            warnings.warn("The default weight initialization of inception_v3 will be changed in future releases of "
                          "torchvision. If you wish to keep the old behavior (which leads to long initialization "
                          "times due to scipy/scipy#11299), please set init_weights=True.", FutureWarning)
            init_weights = True
        if len(blocks) != 7:
            raise ValueError(f"length of inception_blocks should be 7 instead of {len(blocks)}")
        conv, block_a, block_b, block_c, block_d, block_e, block_aux = blocks
        self.aux_logits = aux_logits
        self.transform_input = transform_input
        self.Conv2d_1a_3x3 = conv(3, 32, kernel_size=3, stride=2)
        self.Conv2d_2a_3x3 = conv(32, 32, kernel_size=3)
        self.Conv2d_2b_3x3 = conv(32, 64, kernel_size=3, padding=1)
        self.maxpool1 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.Conv2d_3b_1x1 = conv(64, 80, kernel_size=1)
        self.Conv2d_4a_3x3 = conv(80, 192, kernel_size=3)
        self.maxpool2 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.Mixed_5b = block_a(192, pool_features=32)
        self.Mixed_5c = block_a(256, pool_features=64)
        self.Mixed_5d = block_a(288, pool_features=64)
        self.Mixed_6a = block_b(288)
        self.Mixed_6b = block_c(768, channels_7x7=128)
        self.Mixed_6c = block_c(768, channels_7x7=160)
        self.Mixed_6d = block_c(768, channels_7x7=160)
        self.Mixed_6e = block_c(768, channels_7x7=192)
        self.AuxLogits = block_aux(768, num_classes) if aux_logits else None
        self.Mixed_7a = block_d(768)
        self.Mixed_7b = block_e(1280)
        self.Mixed_7c = block_e(2048)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(p=dropout)
        self.fc = nn.Linear(2048, num_classes)
        if init_weights:
            for m in self.modules():
                if isinstance(m, (nn.Conv2d, nn.Linear)):
                    std = float(getattr(m, "stddev", 0.1))
                    nn.init.trunc_normal_(m.weight, mean=0.0, std=std, a=-2, b=2)
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)

    def _forward(self, x: Any) -> tuple[Any, Any]:
        x = self.maxpool1(self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x))))
        x = self.maxpool2(self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(x)))
        for block in (self.Mixed_5b, self.Mixed_5c, self.Mixed_5d, self.Mixed_6a, self.Mixed_6b, self.Mixed_6c,
                      self.Mixed_6d, self.Mixed_6e):
            x = block(x)
        aux = self.AuxLogits(x) if self.AuxLogits is not None and self.training else None
        x = self.Mixed_7c(self.Mixed_7b(self.Mixed_7a(x)))
        x = self.fc(ember.flatten(self.dropout(self.avgpool(x)), 1))
        return x, aux

    def forward(self, x: Any) -> Any:
        if self.transform_input:
            x = transform_imagenet_input(x)
        x, aux = self._forward(x)
        if self.training and self.aux_logits:
            return InceptionOutputs(x, aux)
        return x


@register_model("inception_v3", Inception_V3_Weights)
@handle_legacy_interface(lambda: Inception_V3_Weights.IMAGENET1K_V1)
def inception_v3(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> Inception3:
    """Inception v3 (expects 299x299 inputs for its published weights; at least 75x75)."""
    weights = Inception_V3_Weights.verify(weights)
    keep_aux = kwargs.get("aux_logits", True)
    if weights is not None:
        kwargs.setdefault("transform_input", True)
        kwargs["aux_logits"], kwargs["init_weights"] = True, False
        override_num_classes(kwargs, weights)
    model = Inception3(**kwargs)
    if weights is not None:
        model.load_state_dict(weights.get_state_dict(progress=progress, check_hash=True))
        if not keep_aux:
            model.aux_logits = False
            model.AuxLogits = None
    return model
