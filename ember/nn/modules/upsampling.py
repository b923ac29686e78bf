"""``Upsample``, ``UpsamplingNearest2d`` and ``UpsamplingBilinear2d`` over ``F.interpolate``.

Example:
    >>> import ember
    >>> ember.nn.Upsample(scale_factor=2, mode="bilinear")(ember.randn(1, 3, 4, 4)).shape
    ember.Size([1, 3, 8, 8])
"""
from __future__ import annotations

from typing import Any

from ember.nn import functional as F
from ember.nn.modules.module import Module
from ember.tensor import Tensor


class Upsample(Module):
    """Resize (N, C, *spatial) inputs to ``size`` or by ``scale_factor`` with ``F.interpolate``'s modes."""

    def __init__(self, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                 align_corners: bool | None = None, recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        self.scale_factor = (tuple(float(f) for f in scale_factor) if isinstance(scale_factor, (tuple, list))
                             else (float(scale_factor) if scale_factor is not None else None))
        self.mode, self.align_corners = mode, align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear with ``align_corners=True`` (this class's fixed choice in PyTorch)."""

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
