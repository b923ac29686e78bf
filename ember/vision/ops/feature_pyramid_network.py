"""Feature Pyramid Network (torchvision's ``torchvision.ops.FeaturePyramidNetwork`` and its extra blocks).

Lateral 1x1 convolutions bring every level to ``out_channels``; a top-down pass adds each coarser level,
upsampled by nearest neighbour, to the next finer one; a 3x3 convolution then smooths each level. Module
names and state-dict keys are torchvision's (``inner_blocks.0.0.weight``, ``layer_blocks.0.0.weight``).

Example:
    >>> import ember
    >>> from collections import OrderedDict
    >>> from ember.vision.ops import FeaturePyramidNetwork
    >>> fpn = FeaturePyramidNetwork([10, 20, 30], 5)
    >>> x = OrderedDict(feat0=ember.rand(1, 10, 64, 64), feat2=ember.rand(1, 20, 16, 16),
    ...                 feat3=ember.rand(1, 30, 8, 8))
    >>> [(k, tuple(v.shape)) for k, v in fpn(x).items()]
    [('feat0', (1, 5, 64, 64)), ('feat2', (1, 5, 16, 16)), ('feat3', (1, 5, 8, 8))]
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

from ember import nn
from ember.nn import functional as F
from ember.tensor import Tensor
from ember.vision.ops.misc import Conv2dNormActivation

__all__ = ["ExtraFPNBlock", "FeaturePyramidNetwork", "LastLevelMaxPool", "LastLevelP6P7"]


class ExtraFPNBlock(nn.Module):
    """Base class of blocks that add levels after the FPN: ``forward(results, x, names) -> (results, names)``."""

    def forward(self, results: list[Tensor], x: list[Tensor], names: list[str]) -> tuple[list[Tensor], list[str]]:
        raise NotImplementedError


class LastLevelMaxPool(ExtraFPNBlock):
    """Adds level ``"pool"``: the last level max-pooled with kernel 1 and stride 2."""

    def forward(self, x: list[Tensor], y: list[Tensor], names: list[str]) -> tuple[list[Tensor], list[str]]:
        names.append("pool")
        x.append(F.max_pool2d(x[-1], kernel_size=1, stride=2, padding=0))
        return x, names


class LastLevelP6P7(ExtraFPNBlock):
    """RetinaNet's P6 and P7: stride-2 3x3 convolutions on P5 (or on C5 when the channel counts differ)."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.p6 = nn.Conv2d(in_channels, out_channels, 3, 2, 1)
        self.p7 = nn.Conv2d(out_channels, out_channels, 3, 2, 1)
        for module in [self.p6, self.p7]:
            nn.init.kaiming_uniform_(module.weight, a=1)
            nn.init.constant_(module.bias, 0)
        self.use_P5 = in_channels == out_channels

    def forward(self, p: list[Tensor], c: list[Tensor], names: list[str]) -> tuple[list[Tensor], list[str]]:
        x = p[-1] if self.use_P5 else c[-1]
        p6 = self.p6(x)
        p7 = self.p7(F.relu(p6))
        p.extend([p6, p7])
        names.extend(["p6", "p7"])
        return p, names


class FeaturePyramidNetwork(nn.Module):
    """FPN over an ordered dict of feature maps, finest first; returns an ordered dict with the same keys
    (plus the extra block's)."""

    _version = 2

    def __init__(self, in_channels_list: list[int], out_channels: int, extra_blocks: ExtraFPNBlock | None = None,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        self.inner_blocks = nn.ModuleList()
        self.layer_blocks = nn.ModuleList()
        for in_channels in in_channels_list:
            if in_channels == 0:
                raise ValueError("FeaturePyramidNetwork: in_channels=0 is currently not supported")
            self.inner_blocks.append(Conv2dNormActivation(in_channels, out_channels, kernel_size=1, padding=0,
                                                          norm_layer=norm_layer, activation_layer=None))
            self.layer_blocks.append(Conv2dNormActivation(out_channels, out_channels, kernel_size=3,
                                                          norm_layer=norm_layer, activation_layer=None))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_uniform_(m.weight, a=1)
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0)
        if extra_blocks is not None and not isinstance(extra_blocks, ExtraFPNBlock):
            raise TypeError(f"extra_blocks should be of type ExtraFPNBlock not {type(extra_blocks)}")
        self.extra_blocks = extra_blocks

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list) -> Any:
        version = local_metadata.get("version", None)
        if version is None or version < 2:  # before torchvision 0.13 the convolutions were not in a Sequential
            for block in ["inner_blocks", "layer_blocks"]:
                for i in range(len(self.inner_blocks)):
                    for kind in ["weight", "bias"]:
                        old = f"{prefix}{block}.{i}.{kind}"
                        if old in state_dict:
                            state_dict[f"{prefix}{block}.{i}.0.{kind}"] = state_dict.pop(old)
        return super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                             unexpected_keys, error_msgs)

    def get_result_from_inner_blocks(self, x: Tensor, idx: int) -> Tensor:
        return self.inner_blocks[idx](x)

    def get_result_from_layer_blocks(self, x: Tensor, idx: int) -> Tensor:
        return self.layer_blocks[idx](x)

    def forward(self, x: dict[str, Tensor]) -> dict[str, Tensor]:
        names = list(x.keys())
        features = list(x.values())
        last_inner = self.get_result_from_inner_blocks(features[-1], -1)
        results = [self.get_result_from_layer_blocks(last_inner, -1)]
        for idx in range(len(features) - 2, -1, -1):
            lateral = self.get_result_from_inner_blocks(features[idx], idx)
            top_down = F.interpolate(last_inner, size=tuple(lateral.shape[-2:]), mode="nearest")
            last_inner = lateral + top_down
            results.insert(0, self.get_result_from_layer_blocks(last_inner, idx))
        if self.extra_blocks is not None:
            results, names = self.extra_blocks(results, features, names)
        return OrderedDict(zip(names, results))
