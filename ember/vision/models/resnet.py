"""ResNet, ResNeXt and Wide ResNet (torchvision's ``models.resnet``: same arguments, module names, state_dict keys).

Example:
    >>> import ember
    >>> from ember.vision.models import resnet18
    >>> model = resnet18(num_classes=10).eval()
    >>> model(ember.randn(1, 3, 64, 64)).shape
    ember.Size([1, 10])
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import ember
from ember import nn
from ember.vision.models._api import (
    WeightsEnum, handle_legacy_interface, load_weights, make_weights_enum, override_num_classes, register_model,
)

__all__ = ["ResNet", "BasicBlock", "Bottleneck", "ResNet18_Weights", "ResNet34_Weights", "ResNet50_Weights",
           "ResNet101_Weights", "ResNet152_Weights", "ResNeXt50_32X4D_Weights", "Wide_ResNet50_2_Weights",
           "ResNeXt101_32X8D_Weights", "ResNeXt101_64X4D_Weights", "Wide_ResNet101_2_Weights",
           "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d", "wide_resnet50_2",
           "resnext101_32x8d", "resnext101_64x4d", "wide_resnet101_2"]

ResNet18_Weights = make_weights_enum("ResNet18_Weights", __name__)
ResNet34_Weights = make_weights_enum("ResNet34_Weights", __name__)
ResNet50_Weights = make_weights_enum("ResNet50_Weights", __name__)
ResNet101_Weights = make_weights_enum("ResNet101_Weights", __name__)
ResNet152_Weights = make_weights_enum("ResNet152_Weights", __name__)
ResNeXt50_32X4D_Weights = make_weights_enum("ResNeXt50_32X4D_Weights", __name__)
Wide_ResNet50_2_Weights = make_weights_enum("Wide_ResNet50_2_Weights", __name__)
ResNeXt101_32X8D_Weights = make_weights_enum("ResNeXt101_32X8D_Weights", __name__)
ResNeXt101_64X4D_Weights = make_weights_enum("ResNeXt101_64X4D_Weights", __name__)
Wide_ResNet101_2_Weights = make_weights_enum("Wide_ResNet101_2_Weights", __name__)


def conv3x3(in_planes: int, out_planes: int, stride: int = 1, groups: int = 1, dilation: int = 1) -> nn.Conv2d:
    """3x3 convolution that keeps the size at stride 1 (padding = dilation), no bias (a norm follows)."""
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=dilation, groups=groups, bias=False,
                     dilation=dilation)


def conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 convs with a shortcut (ResNet-18/34)."""

    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None,
                 groups: int = 1, base_width: int = 64, dilation: int = 1,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        if groups != 1 or base_width != 64:
            raise ValueError("BasicBlock only supports groups=1 and base_width=64")
        if dilation > 1:
            raise NotImplementedError("Dilation > 1 not supported in BasicBlock")
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = norm_layer(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = norm_layer(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: Any) -> Any:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)  # after the main path, as torchvision
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (stride, groups, dilation here: the "V1.5" placement), 1x1 expand by 4, shortcut."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None,
                 groups: int = 1, base_width: int = 64, dilation: int = 1,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        width = int(planes * (base_width / 64.0)) * groups
        self.conv1 = conv1x1(inplanes, width)
        self.bn1 = norm_layer(width)
        self.conv2 = conv3x3(width, width, stride, groups, dilation)
        self.bn2 = norm_layer(width)
        self.conv3 = conv1x1(width, planes * self.expansion)
        self.bn3 = norm_layer(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: Any) -> Any:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)  # after the main path, as torchvision
        return self.relu(out + identity)


class ResNet(nn.Module):
    """Stem (7x7/2 conv, max-pool), four stages of ``block``, global average pool, ``fc``."""

    def __init__(self, block: type[BasicBlock] | type[Bottleneck], layers: Sequence[int], num_classes: int = 1000,
                 zero_init_residual: bool = False, groups: int = 1, width_per_group: int = 64,
                 replace_stride_with_dilation: Sequence[bool] | None = None,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        self._norm_layer = norm_layer or nn.BatchNorm2d
        self.inplanes = 64
        self.dilation = 1
        if replace_stride_with_dilation is None:
            replace_stride_with_dilation = [False, False, False]
        if len(replace_stride_with_dilation) != 3:
            raise ValueError("replace_stride_with_dilation should be None or a 3-element tuple, got "
                             f"{replace_stride_with_dilation}")
        self.groups = groups
        self.base_width = width_per_group
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = self._norm_layer(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2, dilate=replace_stride_with_dilation[0])
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2, dilate=replace_stride_with_dilation[1])
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2, dilate=replace_stride_with_dilation[2])
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            # Each residual branch starts as zero, so every block starts as the identity.
            for m in self.modules():
                if isinstance(m, Bottleneck) and m.bn3.weight is not None:
                    nn.init.constant_(m.bn3.weight, 0)
                elif isinstance(m, BasicBlock) and m.bn2.weight is not None:
                    nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(self, block: type[BasicBlock] | type[Bottleneck], planes: int, blocks: int, stride: int = 1,
                    dilate: bool = False) -> nn.Sequential:
        norm_layer = self._norm_layer
        downsample = None
        previous_dilation = self.dilation
        if dilate:
            self.dilation *= stride
            stride = 1
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                       norm_layer(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample, self.groups, self.base_width, previous_dilation,
                        norm_layer)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes, groups=self.groups, base_width=self.base_width,
                                dilation=self.dilation, norm_layer=norm_layer))
        return nn.Sequential(*layers)

    def _forward_impl(self, x: Any) -> Any:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = ember.flatten(self.avgpool(x), 1)
        return self.fc(x)

    def forward(self, x: Any) -> Any:
        return self._forward_impl(x)


def _resnet(block: Any, layers: list[int], weights: WeightsEnum | None, progress: bool, **kwargs: Any) -> ResNet:
    override_num_classes(kwargs, weights)
    return load_weights(ResNet(block, layers, **kwargs), weights, progress)


def _builder(name: str, weights_enum: type[WeightsEnum], block: Any, layers: list[int],
             fixed: dict[str, Any] | None = None) -> Callable[..., ResNet]:
    @register_model(name, weights_enum)
    @handle_legacy_interface(lambda: weights_enum.IMAGENET1K_V1)
    def build(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> ResNet:
        weights = weights_enum.verify(weights)
        for key, value in (fixed or {}).items():
            kwargs[key] = value
        return _resnet(block, layers, weights, progress, **kwargs)

    build.__name__ = build.__qualname__ = name
    build.__doc__ = (f"{name} from torchvision (``weights``: :class:`{weights_enum.__name__}` or None; other keywords "
                     "go to :class:`ResNet`).")
    return build


resnet18 = _builder("resnet18", ResNet18_Weights, BasicBlock, [2, 2, 2, 2])
resnet34 = _builder("resnet34", ResNet34_Weights, BasicBlock, [3, 4, 6, 3])
resnet50 = _builder("resnet50", ResNet50_Weights, Bottleneck, [3, 4, 6, 3])
resnet101 = _builder("resnet101", ResNet101_Weights, Bottleneck, [3, 4, 23, 3])
resnet152 = _builder("resnet152", ResNet152_Weights, Bottleneck, [3, 8, 36, 3])
resnext50_32x4d = _builder("resnext50_32x4d", ResNeXt50_32X4D_Weights, Bottleneck, [3, 4, 6, 3],
                           {"groups": 32, "width_per_group": 4})
wide_resnet50_2 = _builder("wide_resnet50_2", Wide_ResNet50_2_Weights, Bottleneck, [3, 4, 6, 3],
                           {"width_per_group": 64 * 2})
resnext101_32x8d = _builder("resnext101_32x8d", ResNeXt101_32X8D_Weights, Bottleneck, [3, 4, 23, 3],
                            {"groups": 32, "width_per_group": 8})
resnext101_64x4d = _builder("resnext101_64x4d", ResNeXt101_64X4D_Weights, Bottleneck, [3, 4, 23, 3],
                            {"groups": 64, "width_per_group": 4})
wide_resnet101_2 = _builder("wide_resnet101_2", Wide_ResNet101_2_Weights, Bottleneck, [3, 4, 23, 3],
                            {"width_per_group": 64 * 2})
