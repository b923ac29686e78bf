"""What roi_align and roi_pool share: the box-argument forms and the output size (torchvision's ``ops._utils``)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

import ember
from ember.tensor import Tensor


def pair(size: int | Sequence[int], name: str) -> tuple[int, int]:
    """``7`` -> ``(7, 7)``; ``(7, 5)`` stays."""
    if isinstance(size, int):
        return size, size
    size = tuple(int(s) for s in size)
    if len(size) == 1:
        return size[0], size[0]
    if len(size) != 2:
        raise ValueError(f"{name}: output_size must be an int or (height, width), got {size}")
    return size  # type: ignore[return-value]


def check_roi_boxes(name: str, boxes: Any) -> None:
    """torchvision's check: a ``[K, 5]`` tensor (batch index, x1, y1, x2, y2) or a list of ``[L, 4]`` tensors."""
    if isinstance(boxes, (list, tuple)):
        for b in boxes:
            if not isinstance(b, Tensor) or b.ndim != 2 or b.shape[1] != 4:
                got = list(b.shape) if isinstance(b, Tensor) else type(b).__name__
                raise AssertionError(f"{name}: the boxes of each image must be a Tensor[L, 4], got {got}")
    elif isinstance(boxes, Tensor):
        if boxes.ndim != 2 or boxes.shape[1] != 5:
            raise AssertionError(f"{name}: boxes must be a Tensor[K, 5] (batch index, x1, y1, x2, y2), "
                                 f"got {list(boxes.shape)}")
    else:
        raise AssertionError(f"{name}: boxes is expected to be a Tensor[L, 5] or a List[Tensor[K, 4]], "
                             f"got {type(boxes).__name__}")


def convert_boxes_to_roi_format(boxes: Sequence[Tensor]) -> Tensor:
    """A list of per-image ``[L, 4]`` boxes as one ``[K, 5]`` tensor whose first column is the image index."""
    concat = ember.cat([b for b in boxes], dim=0)
    ids = ember.cat([ember.full_like(b[:, :1], i) for i, b in enumerate(boxes)], dim=0)
    return ember.cat([ids, concat], dim=1)


def rois_on_host(name: str, input: Tensor, boxes: Any) -> np.ndarray:
    """The rois as a float64 ``[K, 5]`` host array (an explicit copy: the sampling plan is built on the host)."""
    check_roi_boxes(name, boxes)
    rois = convert_boxes_to_roi_format(boxes) if isinstance(boxes, (list, tuple)) else boxes
    if rois.device != input.device:
        raise ValueError(f"{name}: input is on {input.device} but boxes on {rois.device}; move both to one device")
    host = np.asarray(rois.detach().cpu().numpy(), dtype=np.float64).reshape(-1, 5)
    if host.shape[0] and (host[:, 0].min() < 0 or host[:, 0].max() >= input.shape[0]):
        raise IndexError(f"{name}: a box's batch index is outside the input's batch of {input.shape[0]} images")
    return host
