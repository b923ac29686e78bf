"""GoogLeNet / Inception v1 (torchvision's ``models.googlenet``: same arguments, module names, keys, outputs).

Inception blocks run 1x1, 1x1-3x3, 1x1-3x3 (torchvision's known stand-in for the paper's 5x5) and
max-pool-1x1 branches side by side and concatenate them; two auxiliary classifiers give extra losses in
training. In training with ``aux_logits`` the forward returns ``GoogLeNetOutputs(logits, aux_logits2,
aux_logits1)``, otherwise the logits.

Example:
    >>> import ember
    >>> from ember.vision.models import googlenet
    >>> googlenet(num_classes=3, init_weights=False).eval()(ember.randn(1, 3, 64, 64)).shape
    ember.Size([1, 3])
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, NamedTuple

import ember
from ember import nn
from ember.nn import functional as F
from ember.vision.models._api import handle_legacy_interface, make_weights_enum, override_num_classes, register_model

__all__ = ["GoogLeNet", "GoogLeNetOutputs", "_GoogLeNetOutputs", "GoogLeNet_Weights", "googlenet"]

GoogLeNet_Weights = make_weights_enum("GoogLeNet_Weights", __name__)


class GoogLeNetOutputs(NamedTuple):
    logits: Any
    aux_logits2: Any
    aux_logits1: Any


_GoogLeNetOutputs = GoogLeNetOutputs


class BasicConv2d(nn.Module):
    """Conv (no bias), BatchNorm (eps 1e-3), ReLU."""

    def __init__(self, in_channels: int, out_channels: int, **kwargs: Any) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, bias=False, **kwargs)
        self.bn = nn.BatchNorm2d(out_channels, eps=0.001)

    def forward(self, x: Any) -> Any:
        return F.relu(self.bn(self.conv(x)), inplace=True)


class Inception(nn.Module):
    """Four parallel branches concatenated along the channels."""

    def __init__(self, in_channels: int, ch1x1: int, ch3x3red: int, ch3x3: int, ch5x5red: int, ch5x5: int,
                 pool_proj: int, conv_block: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        conv_block = conv_block or BasicConv2d
        self.branch1 = conv_block(in_channels, ch1x1, kernel_size=1)
        self.branch2 = nn.Sequential(conv_block(in_channels, ch3x3red, kernel_size=1),
                                     conv_block(ch3x3red, ch3x3, kernel_size=3, padding=1))
        self.branch3 = nn.Sequential(conv_block(in_channels, ch5x5red, kernel_size=1),
                                     conv_block(ch5x5red, ch5x5, kernel_size=3, padding=1))
        self.branch4 = nn.Sequential(nn.MaxPool2d(kernel_size=3, stride=1, padding=1, ceil_mode=True),
                                     conv_block(in_channels, pool_proj, kernel_size=1))

    def forward(self, x: Any) -> Any:
        return ember.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


class InceptionAux(nn.Module):
    """An auxiliary classifier: 4x4 average pool, 1x1 conv to 128, two linears with dropout."""

    def __init__(self, in_channels: int, num_classes: int, conv_block: Callable[..., nn.Module] | None = None,
                 dropout: float = 0.7) -> None:
        super().__init__()
        conv_block = conv_block or BasicConv2d
        self.conv = conv_block(in_channels, 128, kernel_size=1)
        self.fc1 = nn.Linear(2048, 1024)
        self.fc2 = nn.Linear(1024, num_classes)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, x: Any) -> Any:
        x = ember.flatten(self.conv(F.adaptive_avg_pool2d(x, (4, 4))), 1)
        return self.fc2(self.dropout(F.relu(self.fc1(x), inplace=True)))


def transform_imagenet_input(x: Any) -> Any:
    """Re-normalize an input normalized with ImageNet's mean/std to the (x - 0.5) / 0.5 the original
    Inception weights expect (torchvision's ``transform_input``)."""
    channels = [ember.unsqueeze(x[:, c], 1) * (std / 0.5) + (mean - 0.5) / 0.5
                for c, (mean, std) in enumerate(((0.485, 0.229), (0.456, 0.224), (0.406, 0.225)))]
    return ember.cat(channels, 1)


class GoogLeNet(nn.Module):
    """The 22-layer Inception network of "Going Deeper with Convolutions"."""

    def __init__(self, num_classes: int = 1000, aux_logits: bool = True, transform_input: bool = False,
                 init_weights: bool | None = None, blocks: list[Callable[..., nn.Module]] | None = None,
                 dropout: float = 0.2, dropout_aux: float = 0.7) -> None:
        super().__init__()
        blocks = blocks or [BasicConv2d, Inception, InceptionAux]
        if init_weights is None:
            warnings.warn("The default weight initialization of GoogleNet will be changed in future releases of "
                          "torchvision. If you wish to keep the old behavior (which leads to long initialization "
                          "times due to scipy/scipy#11299), please set init_weights=True.", FutureWarning)
            init_weights = True
        if len(blocks) != 3:
            raise ValueError(f"blocks length should be 3 instead of {len(blocks)}")
        conv_block, inception_block, inception_aux_block = blocks
        self.aux_logits = aux_logits
        self.transform_input = transform_input
        self.conv1 = conv_block(3, 64, kernel_size=7, stride=2, padding=3)
        self.maxpool1 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.conv2 = conv_block(64, 64, kernel_size=1)
        self.conv3 = conv_block(64, 192, kernel_size=3, padding=1)
        self.maxpool2 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.inception3a = inception_block(192, 64, 96, 128, 16, 32, 32)
        self.inception3b = inception_block(256, 128, 128, 192, 32, 96, 64)
        self.maxpool3 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.inception4a = inception_block(480, 192, 96, 208, 16, 48, 64)
        self.inception4b = inception_block(512, 160, 112, 224, 24, 64, 64)
        self.inception4c = inception_block(512, 128, 128, 256, 24, 64, 64)
        self.inception4d = inception_block(512, 112, 144, 288, 32, 64, 64)
        self.inception4e = inception_block(528, 256, 160, 320, 32, 128, 128)
        self.maxpool4 = nn.MaxPool2d(2, stride=2, ceil_mode=True)
        self.inception5a = inception_block(832, 256, 160, 320, 32, 128, 128)
        self.inception5b = inception_block(832, 384, 192, 384, 48, 128, 128)
        if aux_logits:
            self.aux1 = inception_aux_block(512, num_classes, dropout=dropout_aux)
            self.aux2 = inception_aux_block(528, num_classes, dropout=dropout_aux)
        else:
            self.aux1 = None
            self.aux2 = None
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(p=dropout)
        self.fc = nn.Linear(1024, num_classes)
        if init_weights:
            for m in self.modules():
                if isinstance(m, (nn.Conv2d, nn.Linear)):
                    nn.init.trunc_normal_(m.weight, mean=0.0, std=0.01, a=-2, b=2)
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)

    def _forward(self, x: Any) -> tuple[Any, Any, Any]:
        x = self.maxpool1(self.conv1(x))
        x = self.maxpool2(self.conv3(self.conv2(x)))
        x = self.maxpool3(self.inception3b(self.inception3a(x)))
        x = self.inception4a(x)
        aux1 = self.aux1(x) if self.aux1 is not None and self.training else None
        x = self.inception4d(self.inception4c(self.inception4b(x)))
        aux2 = self.aux2(x) if self.aux2 is not None and self.training else None
        x = self.maxpool4(self.inception4e(x))
        x = self.inception5b(self.inception5a(x))
        x = self.fc(self.dropout(ember.flatten(self.avgpool(x), 1)))
        return x, aux2, aux1

    def forward(self, x: Any) -> Any:
        if self.transform_input:
            x = transform_imagenet_input(x)
        x, aux2, aux1 = self._forward(x)
        if self.training and self.aux_logits:
            return GoogLeNetOutputs(x, aux2, aux1)
        return x


@register_model("googlenet", GoogLeNet_Weights)
@handle_legacy_interface(lambda: GoogLeNet_Weights.IMAGENET1K_V1)
def googlenet(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> GoogLeNet:
    """GoogLeNet. With weights the auxiliary heads are built to load the checkpoint and then dropped unless
    ``aux_logits=True`` is asked for (they are not pretrained), as torchvision does."""
    weights = GoogLeNet_Weights.verify(weights)
    keep_aux = kwargs.get("aux_logits", False)
    if weights is not None:
        kwargs.setdefault("transform_input", True)
        kwargs["aux_logits"], kwargs["init_weights"] = True, False
        override_num_classes(kwargs, weights)
    model = GoogLeNet(**kwargs)
    if weights is not None:
        model.load_state_dict(weights.get_state_dict(progress=progress, check_hash=True))
        if not keep_aux:
            model.aux_logits = False
            model.aux1 = None
            model.aux2 = None
        else:
            warnings.warn("auxiliary heads in the pretrained googlenet model are NOT pretrained, so make sure to "
                          "train them")
    return model
