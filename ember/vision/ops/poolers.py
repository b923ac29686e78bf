"""Multi-scale RoIAlign of Faster/Mask R-CNN (torchvision's ``torchvision.ops.MultiScaleRoIAlign``).

Each box is pooled from one level of a feature pyramid, chosen by its size (FPN paper, eq. 1:
``floor(4 + log2(sqrt(area) / 224))``, clamped to the levels present). The scale of each level is inferred
from the feature and image sizes on the first call, as torchvision does.

Example:
    >>> import ember
    >>> from collections import OrderedDict
    >>> from ember.vision.ops import MultiScaleRoIAlign
    >>> pool = MultiScaleRoIAlign(["feat1", "feat3"], 3, 2)
    >>> x = OrderedDict(feat1=ember.rand(1, 5, 64, 64), feat3=ember.rand(1, 5, 16, 16))
    >>> pool(x, [ember.tensor([[0., 0., 20., 20.], [30., 30., 60., 60.]])], [(512, 512)]).shape
    ember.Size([2, 5, 3, 3])
"""
from __future__ import annotations

import math
from typing import Sequence

import ember
from ember import nn
from ember.tensor import Tensor
from ember.vision.ops._roi_common import convert_boxes_to_roi_format
from ember.vision.ops.boxes import box_area
from ember.vision.ops.roi_align import roi_align

__all__ = ["LevelMapper", "MultiScaleRoIAlign", "initLevelMapper"]


class LevelMapper:
    """Maps boxes to pyramid levels ``k_min..k_max`` (returned as 0-based level indices)."""

    def __init__(self, k_min: int, k_max: int, canonical_scale: int = 224, canonical_level: int = 4,
                 eps: float = 1e-6) -> None:
        self.k_min, self.k_max = k_min, k_max
        self.s0, self.lvl0, self.eps = canonical_scale, canonical_level, eps

    def __call__(self, boxlists: Sequence[Tensor]) -> Tensor:
        s = ember.sqrt(ember.cat([box_area(b) for b in boxlists]))
        target = ember.floor(self.lvl0 + ember.log2(s / self.s0) + ember.tensor(self.eps, dtype=s.dtype))
        target = ember.clamp(target, min=self.k_min, max=self.k_max)
        return (target.to(ember.int64) - self.k_min).to(ember.int64)


def initLevelMapper(k_min: int, k_max: int, canonical_scale: int = 224, canonical_level: int = 4,  # noqa: N802
                    eps: float = 1e-6) -> LevelMapper:
    """torchvision's factory name for ``LevelMapper``."""
    return LevelMapper(k_min, k_max, canonical_scale, canonical_level, eps)


def _infer_scale(feature: Tensor, original_size: Sequence[int]) -> float:
    """The power of two closest to ``feature height / image height`` (torchvision uses the first dimension's)."""
    return 2.0 ** round(math.log2(float(feature.shape[-2]) / float(original_size[0])))


class MultiScaleRoIAlign(nn.Module):
    """RoIAlign over the named feature maps of a pyramid (``featmap_names``), each box on its own level."""

    __annotations__ = {"scales": "list[float] | None", "map_levels": "LevelMapper | None"}

    def __init__(self, featmap_names: list[str], output_size: int | Sequence[int], sampling_ratio: int, *,
                 canonical_scale: int = 224, canonical_level: int = 4) -> None:
        super().__init__()
        if isinstance(output_size, int):
            output_size = (output_size, output_size)
        self.featmap_names = featmap_names
        self.sampling_ratio = sampling_ratio
        self.output_size = tuple(output_size)
        self.scales: list[float] | None = None
        self.map_levels: LevelMapper | None = None
        self.canonical_scale = canonical_scale
        self.canonical_level = canonical_level

    def _setup_scales(self, features: list[Tensor], image_shapes: list[tuple[int, int]]) -> None:
        if not image_shapes:
            raise ValueError("MultiScaleRoIAlign: images list should not be empty")
        original = (max(s[0] for s in image_shapes), max(s[1] for s in image_shapes))
        scales = [_infer_scale(f, original) for f in features]
        lvl_min, lvl_max = -math.log2(scales[0]), -math.log2(scales[-1])
        self.scales = scales
        self.map_levels = initLevelMapper(int(lvl_min), int(lvl_max), canonical_scale=self.canonical_scale,
                                          canonical_level=self.canonical_level)

    def forward(self, x: dict[str, Tensor], boxes: list[Tensor], image_shapes: list[tuple[int, int]]) -> Tensor:
        features = [v for k, v in x.items() if k in self.featmap_names]
        if not features:
            raise ValueError(f"MultiScaleRoIAlign: none of the feature maps {self.featmap_names} is in the input "
                             f"(keys: {list(x)})")
        if self.scales is None or self.map_levels is None:
            self._setup_scales(features, image_shapes)
        scales, mapper = self.scales, self.map_levels
        rois = convert_boxes_to_roi_format(boxes)
        if len(features) == 1:
            return roi_align(features[0], rois, self.output_size, spatial_scale=scales[0],
                             sampling_ratio=self.sampling_ratio)
        levels = mapper(boxes)
        first = features[0]
        result = ember.zeros((rois.shape[0], first.shape[1]) + self.output_size, dtype=first.dtype,
                             device=first.device)
        for level, (feature, scale) in enumerate(zip(features, scales)):
            idx = ember.where(levels == level)[0]
            pooled = roi_align(feature, rois[idx], self.output_size, spatial_scale=scale,
                               sampling_ratio=self.sampling_ratio)
            result = result.index_put((idx,), pooled.to(result.dtype))
        return result

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}(featmap_names={self.featmap_names}, output_size={self.output_size}, "
                f"sampling_ratio={self.sampling_ratio})")
