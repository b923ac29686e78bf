"""Anchor (prior box) generators (torchvision's ``models.detection.anchor_utils``): ``AnchorGenerator`` for
Faster R-CNN / RetinaNet / FCOS and ``DefaultBoxGenerator`` for SSD.

Example:
    >>> import ember
    >>> from ember.vision.models.detection.anchor_utils import AnchorGenerator
    >>> from ember.vision.models.detection.image_list import ImageList
    >>> gen = AnchorGenerator(sizes=((16,),), aspect_ratios=((1.0,),))
    >>> anchors = gen(ImageList(ember.zeros(1, 3, 32, 32), [(32, 32)]), [ember.zeros(1, 8, 2, 2)])
    >>> anchors[0].tolist()[:2]
    [[-8.0, -8.0, 8.0, 8.0], [8.0, -8.0, 24.0, 8.0]]
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

import ember
from ember import nn
from ember.tensor import Tensor
from ember.vision.models.detection.image_list import ImageList

__all__ = ["AnchorGenerator", "DefaultBoxGenerator"]


class AnchorGenerator(nn.Module):
    """Anchors of every ``sizes[i] x aspect_ratios[i]`` combination (aspect ratio = height / width) centred at
    each cell of feature map ``i``, in image coordinates; one ``[sum(H_i W_i A_i), 4]`` tensor per image."""

    def __init__(self, sizes: Sequence[Any] = ((128, 256, 512),),
                 aspect_ratios: Sequence[Any] = ((0.5, 1.0, 2.0),)) -> None:
        super().__init__()
        if not isinstance(sizes[0], (list, tuple)):
            sizes = tuple((s,) for s in sizes)
        if not isinstance(aspect_ratios[0], (list, tuple)):
            aspect_ratios = (aspect_ratios,) * len(sizes)
        self.sizes = sizes
        self.aspect_ratios = aspect_ratios
        self.cell_anchors = [self.generate_anchors(s, a) for s, a in zip(sizes, aspect_ratios)]

    def generate_anchors(self, scales: Sequence[int], aspect_ratios: Sequence[float], dtype: Any = ember.float32,
                         device: Any = "cpu") -> Tensor:
        """The ``[len(ratios) * len(scales), 4]`` anchors centred at 0, rounded to integers (computed in float32,
        as torchvision, so the rounding ties break the same way)."""
        scales_ = np.asarray(scales, dtype=np.float32)
        h_ratios = np.sqrt(np.asarray(aspect_ratios, dtype=np.float32))
        w_ratios = np.float32(1) / h_ratios
        ws = (w_ratios[:, None] * scales_[None, :]).reshape(-1)
        hs = (h_ratios[:, None] * scales_[None, :]).reshape(-1)
        base = np.round(np.stack([-ws, -hs, ws, hs], axis=1) / np.float32(2))
        return ember.as_tensor(base, dtype=dtype, device=device)

    def set_cell_anchors(self, dtype: Any, device: Any) -> None:
        self.cell_anchors = [a.to(dtype=dtype, device=device) for a in self.cell_anchors]

    def num_anchors_per_location(self) -> list[int]:
        return [len(s) * len(a) for s, a in zip(self.sizes, self.aspect_ratios)]

    def grid_anchors(self, grid_sizes: list[list[int]], strides: list[list[int]]) -> list[Tensor]:
        if not len(grid_sizes) == len(strides) == len(self.cell_anchors):
            raise ValueError("AnchorGenerator: there must be one entry of sizes and aspect_ratios per feature map; "
                             f"got {len(self.cell_anchors)} for {len(grid_sizes)} feature maps")
        anchors = []
        for (gh, gw), (sh, sw), base in zip(grid_sizes, strides, self.cell_anchors):
            shift_x = ember.arange(0, gw, device=base.device) * sw
            shift_y = ember.arange(0, gh, device=base.device) * sh
            yy, xx = ember.meshgrid(shift_y, shift_x, indexing="ij")
            xx, yy = xx.reshape(-1), yy.reshape(-1)
            shifts = ember.stack((xx, yy, xx, yy), dim=1).to(base.dtype)
            anchors.append((shifts.view(-1, 1, 4) + base.view(1, -1, 4)).reshape(-1, 4))
        return anchors

    def forward(self, image_list: ImageList, feature_maps: list[Tensor]) -> list[Tensor]:
        grid_sizes = [list(f.shape[-2:]) for f in feature_maps]
        ih, iw = image_list.tensors.shape[-2:]
        strides = [[ih // g[0], iw // g[1]] for g in grid_sizes]
        self.set_cell_anchors(feature_maps[0].dtype, feature_maps[0].device)
        per_level = self.grid_anchors(grid_sizes, strides)
        return [ember.cat(per_level) for _ in image_list.image_sizes]


class DefaultBoxGenerator(nn.Module):
    """SSD's default boxes: per feature map ``k``, two square boxes (scale ``s_k`` and ``sqrt(s_k s_{k+1})``) and
    a pair per aspect ratio, centred at each cell; scales spread linearly from ``min_ratio`` to ``max_ratio``
    unless ``scales`` is given; ``steps`` fixes the cell pitch; ``clip`` clamps the normalized sizes to [0, 1]."""

    def __init__(self, aspect_ratios: list[list[int]], min_ratio: float = 0.15, max_ratio: float = 0.9,
                 scales: list[float] | None = None, steps: list[int] | None = None, clip: bool = True) -> None:
        super().__init__()
        if steps is not None and len(aspect_ratios) != len(steps):
            raise ValueError("aspect_ratios and steps should have the same length")
        self.aspect_ratios = aspect_ratios
        self.steps = steps
        self.clip = clip
        n = len(aspect_ratios)
        if scales is None:
            if n > 1:
                self.scales = [min_ratio + (max_ratio - min_ratio) * k / (n - 1.0) for k in range(n)] + [1.0]
            else:
                self.scales = [min_ratio, max_ratio]
        else:
            self.scales = scales
        self._wh_pairs = self._generate_wh_pairs(n)

    def _generate_wh_pairs(self, num_outputs: int, dtype: Any = ember.float32, device: Any = "cpu") -> list[Tensor]:
        pairs = []
        for k in range(num_outputs):
            s_k = self.scales[k]
            s_mid = math.sqrt(self.scales[k] * self.scales[k + 1])
            wh = [[s_k, s_k], [s_mid, s_mid]]
            for ar in self.aspect_ratios[k]:
                root = math.sqrt(ar)
                wh += [[s_k * root, s_k / root], [s_k / root, s_k * root]]
            pairs.append(ember.as_tensor(wh, dtype=dtype, device=device))
        return pairs

    def num_anchors_per_location(self) -> list[int]:
        return [2 + 2 * len(r) for r in self.aspect_ratios]

    def _grid_default_boxes(self, grid_sizes: list[list[int]], image_size: list[int],
                            dtype: Any = ember.float32) -> Tensor:
        boxes = []
        for k, (fh, fw) in enumerate(grid_sizes):
            if self.steps is not None:
                x_f, y_f = image_size[1] / self.steps[k], image_size[0] / self.steps[k]
            else:
                y_f, x_f = fh, fw
            # the centres are computed in float32 first, as torchvision's
            cx = ember.as_tensor((np.arange(fw, dtype=np.float32) + np.float32(0.5)) / np.float32(x_f), dtype=dtype)
            cy = ember.as_tensor((np.arange(fh, dtype=np.float32) + np.float32(0.5)) / np.float32(y_f), dtype=dtype)
            yy, xx = ember.meshgrid(cy, cx, indexing="ij")
            wh = self._wh_pairs[k].clamp(min=0, max=1) if self.clip else self._wh_pairs[k]
            n_pairs = wh.shape[0]
            centres = ember.stack((xx.reshape(-1), yy.reshape(-1)), dim=-1)
            centres = centres[:, None, :].expand(-1, n_pairs, 2).reshape(-1, 2)
            boxes.append(ember.cat((centres, wh.to(dtype).repeat(fh * fw, 1)), dim=1))
        return ember.cat(boxes, dim=0)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(aspect_ratios={self.aspect_ratios}, clip={self.clip}, "
                f"scales={self.scales}, steps={self.steps})")

    def forward(self, image_list: ImageList, feature_maps: list[Tensor]) -> list[Tensor]:
        grid_sizes = [list(f.shape[-2:]) for f in feature_maps]
        image_size = list(image_list.tensors.shape[-2:])
        dtype, device = feature_maps[0].dtype, feature_maps[0].device
        boxes = self._grid_default_boxes(grid_sizes, image_size, dtype=dtype).to(device)
        scale = ember.tensor([image_size[1], image_size[0]], device=device)
        corners = ember.cat([(boxes[:, :2] - 0.5 * boxes[:, 2:]) * scale, (boxes[:, :2] + 0.5 * boxes[:, 2:]) * scale],
                            -1)
        return [corners for _ in image_list.image_sizes]
