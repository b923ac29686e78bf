"""Video ResNets (torchvision's ``models.video.resnet``): ``r3d_18`` (3-D convolutions throughout), ``mc3_18``
(3-D in the first stage, 2-D spatial after: "mixed convolutions") and ``r2plus1d_18`` ((2+1)-D: a spatial 1x3x3
conv then a temporal 3x1x1 conv, with the middle width chosen to keep the parameter count of a 3x3x3 conv).
Input ``(N, 3, T, H, W)``; same arguments, module names and state_dict keys as torchvision.

Example:
    >>> import ember
    >>> from ember.vision.models.video import r3d_18
    >>> r3d_18(num_classes=5).eval()(ember.randn(1, 3, 4, 32, 32)).shape
    ember.Size([1, 5])
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ember import nn
from ember.tensor import Tensor
from ember.vision.models._api import (handle_legacy_interface, load_weights, make_weights_enum, override_num_classes,
                                      register_model)

__all__ = ["VideoResNet", "R3D_18_Weights", "MC3_18_Weights", "R2Plus1D_18_Weights", "r3d_18", "mc3_18",
           "r2plus1d_18"]

R3D_18_Weights = make_weights_enum("R3D_18_Weights", __name__)
MC3_18_Weights = make_weights_enum("MC3_18_Weights", __name__)
R2Plus1D_18_Weights = make_weights_enum("R2Plus1D_18_Weights", __name__)


class Conv3DSimple(nn.Conv3d):
    """A 3x3x3 convolution (``midplanes`` unused)."""

    def __init__(self, in_planes: int, out_planes: int, midplanes: int | None = None, stride: int = 1,
                 padding: int = 1) -> None:
        super().__init__(in_channels=in_planes, out_channels=out_planes, kernel_size=(3, 3, 3), stride=stride,
                         padding=padding, bias=False)

    @staticmethod
    def get_downsample_stride(stride: int) -> tuple[int, int, int]:
        return stride, stride, stride


class Conv2Plus1D(nn.Sequential):
    """A 1x3x3 spatial conv to ``midplanes``, batch norm, ReLU, then a 3x1x1 temporal conv."""

    def __init__(self, in_planes: int, out_planes: int, midplanes: int, stride: int = 1, padding: int = 1) -> None:
        super().__init__(
            nn.Conv3d(in_planes, midplanes, kernel_size=(1, 3, 3), stride=(1, stride, stride),
                      padding=(0, padding, padding), bias=False),
            nn.BatchNorm3d(midplanes), nn.ReLU(inplace=True),
            nn.Conv3d(midplanes, out_planes, kernel_size=(3, 1, 1), stride=(stride, 1, 1), padding=(padding, 0, 0),
                      bias=False))

    @staticmethod
    def get_downsample_stride(stride: int) -> tuple[int, int, int]:
        return stride, stride, stride


class Conv3DNoTemporal(nn.Conv3d):
    """A 1x3x3 (spatial only) convolution; strides only in space."""

    def __init__(self, in_planes: int, out_planes: int, midplanes: int | None = None, stride: int = 1,
                 padding: int = 1) -> None:
        super().__init__(in_channels=in_planes, out_channels=out_planes, kernel_size=(1, 3, 3),
                         stride=(1, stride, stride), padding=(0, padding, padding), bias=False)

    @staticmethod
    def get_downsample_stride(stride: int) -> tuple[int, int, int]:
        return 1, stride, stride


def _midplanes(inplanes: int, planes: int) -> int:
    # the (2+1)-D width whose parameter count matches a full 3x3x3 convolution
    return (inplanes * planes * 3 * 3 * 3) // (inplanes * 3 * 3 + 3 * planes)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes: int, planes: int, conv_builder: Callable[..., nn.Module], stride: int = 1,
                 downsample: nn.Module | None = None) -> None:
        mid = _midplanes(inplanes, planes)
        super().__init__()
        self.conv1 = nn.Sequential(conv_builder(inplanes, planes, mid, stride), nn.BatchNorm3d(planes),
                                   nn.ReLU(inplace=True))
        self.conv2 = nn.Sequential(conv_builder(planes, planes, mid), nn.BatchNorm3d(planes))
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        residual = x if self.downsample is None else self.downsample(x)
        return self.relu(self.conv2(self.conv1(x)) + residual)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes: int, planes: int, conv_builder: Callable[..., nn.Module], stride: int = 1,
                 downsample: nn.Module | None = None) -> None:
        super().__init__()
        mid = _midplanes(inplanes, planes)
        self.conv1 = nn.Sequential(nn.Conv3d(inplanes, planes, kernel_size=1, bias=False), nn.BatchNorm3d(planes),
                                   nn.ReLU(inplace=True))
        self.conv2 = nn.Sequential(conv_builder(planes, planes, mid, stride), nn.BatchNorm3d(planes),
                                   nn.ReLU(inplace=True))
        self.conv3 = nn.Sequential(nn.Conv3d(planes, planes * self.expansion, kernel_size=1, bias=False),
                                   nn.BatchNorm3d(planes * self.expansion))
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        residual = x if self.downsample is None else self.downsample(x)
        return self.relu(self.conv3(self.conv2(self.conv1(x))) + residual)


class BasicStem(nn.Sequential):
    """3x7x7 conv, stride (1, 2, 2), to 64 channels; batch norm; ReLU."""

    def __init__(self) -> None:
        super().__init__(nn.Conv3d(3, 64, kernel_size=(3, 7, 7), stride=(1, 2, 2), padding=(1, 3, 3), bias=False),
                         nn.BatchNorm3d(64), nn.ReLU(inplace=True))


class R2Plus1dStem(nn.Sequential):
    """The (2+1)-D stem: 1x7x7 to 45 channels, then 3x1x1 to 64, each with batch norm and ReLU."""

    def __init__(self) -> None:
        super().__init__(nn.Conv3d(3, 45, kernel_size=(1, 7, 7), stride=(1, 2, 2), padding=(0, 3, 3), bias=False),
                         nn.BatchNorm3d(45), nn.ReLU(inplace=True),
                         nn.Conv3d(45, 64, kernel_size=(3, 1, 1), stride=(1, 1, 1), padding=(1, 0, 0), bias=False),
                         nn.BatchNorm3d(64), nn.ReLU(inplace=True))


class VideoResNet(nn.Module):
    """Stem, four stages (``conv_makers[i]`` builds stage ``i``'s 3x3 convs), global average pool, ``fc``."""

    def __init__(self, block: type, conv_makers: Sequence[type], layers: list[int], stem: Callable[..., nn.Module],
                 num_classes: int = 400, zero_init_residual: bool = False) -> None:
        super().__init__()
        self.inplanes = 64
        self.stem = stem()
        self.layer1 = self._make_layer(block, conv_makers[0], 64, layers[0], stride=1)
        self.layer2 = self._make_layer(block, conv_makers[1], 128, layers[1], stride=2)
        self.layer3 = self._make_layer(block, conv_makers[2], 256, layers[2], stride=2)
        self.layer4 = self._make_layer(block, conv_makers[3], 512, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool3d((1, 1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv3d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.BatchNorm3d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            # each residual branch starts as zero (torchvision names a `bn3` that its Bottleneck lacks and fails;
            # here the branch's last batch norm is zeroed, which is what the option means)
            for m in self.modules():
                if isinstance(m, Bottleneck):
                    nn.init.constant_(m.conv3[1].weight, 0)

    def _make_layer(self, block: type, conv_builder: type, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                nn.Conv3d(self.inplanes, planes * block.expansion, kernel_size=1,
                          stride=conv_builder.get_downsample_stride(stride), bias=False),
                nn.BatchNorm3d(planes * block.expansion))
        layers = [block(self.inplanes, planes, conv_builder, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes, conv_builder) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        x = self.layer4(self.layer3(self.layer2(self.layer1(self.stem(x)))))
        return self.fc(self.avgpool(x).flatten(1))


def _video_resnet(conv_makers: Sequence[type], stem: Callable[..., nn.Module], weights: Any, progress: bool,
                  **kwargs: Any) -> VideoResNet:
    override_num_classes(kwargs, weights)
    return load_weights(VideoResNet(BasicBlock, conv_makers, [2, 2, 2, 2], stem, **kwargs), weights, progress)


@register_model("r3d_18", R3D_18_Weights)
@handle_legacy_interface(lambda: R3D_18_Weights.KINETICS400_V1)
def r3d_18(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> VideoResNet:
    """ResNet3D-18 (Kinetics-400 weights available)."""
    return _video_resnet([Conv3DSimple] * 4, BasicStem, R3D_18_Weights.verify(weights), progress, **kwargs)


@register_model("mc3_18", MC3_18_Weights)
@handle_legacy_interface(lambda: MC3_18_Weights.KINETICS400_V1)
def mc3_18(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> VideoResNet:
    """Mixed-convolution ResNet-18: 3-D convs in the first stage, spatial-only after."""
    return _video_resnet([Conv3DSimple] + [Conv3DNoTemporal] * 3, BasicStem, MC3_18_Weights.verify(weights),
                         progress, **kwargs)


@register_model("r2plus1d_18", R2Plus1D_18_Weights)
@handle_legacy_interface(lambda: R2Plus1D_18_Weights.KINETICS400_V1)
def r2plus1d_18(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> VideoResNet:
    """(2+1)-D ResNet-18."""
    return _video_resnet([Conv2Plus1D] * 4, R2Plus1dStem, R2Plus1D_18_Weights.verify(weights), progress, **kwargs)
