"""``grid_sample``: PyTorch's ``F.grid_sample`` (spatial transformer networks), written in ember ops.

``out[n, c, p] = sum_k w_k(grid[n, p]) * input[n, c, tap_k(grid[n, p])]``: each output point reads a few
input pixels (1 for ``nearest``, 2^d for ``bilinear``/trilinear, 16 for ``bicubic``) at integer taps, weighted
by polynomials of the fractional source coordinate. The taps are computed without gradient (``floor``/``round``)
and read with ``gather`` (whose backward is the scatter-add PyTorch's kernel does); the weights are ember ops of
the grid, so autograd yields the grid's gradient - PyTorch's hand-written formulas, derived instead of copied -
and second derivatives, tracing, ``ember.compile`` and every device come with the ops.

PyTorch's kernels decide the special points, and these follow them (checked against torch 2.13):
``border`` clips the source coordinate (the gradient passes only strictly inside); ``reflection``
folds it at the borders (the sign flips with each fold) and then clips; taps outside the input read zero
whatever the padding, so with ``zeros`` a NaN or infinite coordinate reads zero.

Example:
    >>> import ember, ember.nn.functional as F
    >>> x = ember.arange(4.0).reshape(1, 1, 2, 2)
    >>> theta = ember.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
    >>> grid = F.affine_grid(theta, x.size(), align_corners=False)
    >>> F.grid_sample(x, grid, align_corners=False).flatten().tolist()
    [0.0, 1.0, 2.0, 3.0]
"""
from __future__ import annotations

import itertools
import math
import warnings
from typing import Any

from ember.dtypes import int64
from ember.ops.elementwise import floor, fmod, isfinite, logical_and, round as round_, where
from ember.tensor import Tensor

__all__ = ["grid_sample", "grid_sampler", "grid_sampler_2d", "grid_sampler_3d"]

MODES = ("bilinear", "nearest", "bicubic")
PADDING_MODES = ("zeros", "border", "reflection")
_CUBIC_A = -0.75  # the cubic convolution constant PyTorch (and OpenCV) use


def _check(input: Any, grid: Any, mode: str, padding_mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but "
                         f"got: '{mode}'")
    if padding_mode not in PADDING_MODES:
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if not isinstance(input, Tensor) or not isinstance(grid, Tensor):
        raise TypeError(f"grid_sample(): expected input and grid to be tensors, got {type(input).__name__} and "
                        f"{type(grid).__name__}")
    shape, gshape = tuple(input.shape), tuple(grid.shape)
    if input.ndim not in (4, 5) or grid.ndim != input.ndim:
        raise RuntimeError(f"grid_sampler(): expected 4D or 5D input and grid with same number of dimensions, but got "
                           f"input with sizes {list(shape)} and grid with sizes {list(gshape)}")
    if input.device != grid.device:
        raise RuntimeError(f"grid_sampler(): expected input and grid to be on same device, but input is on "
                           f"{input.device} and grid is on {grid.device}; move one with .to()")
    if input.dtype != grid.dtype:
        raise RuntimeError(f"grid_sampler(): expected input and grid to have same dtype, but input has "
                           f"{input.dtype} and grid has {grid.dtype}; convert one with .to(dtype)")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"grid_sampler(): expected floating-point input and grid, got {input.dtype}; "
                           "convert them with .float()")
    if shape[0] != gshape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got input with "
                           f"sizes {list(shape)} and grid with sizes {list(gshape)}")
    spatial = input.ndim - 2
    if gshape[-1] != spatial:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {spatial} in last dimension, but got grid "
                           f"with sizes {list(gshape)}")
    if any(s == 0 for s in shape[2:]):
        raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial dimensions, but input has "
                           f"sizes {list(shape)} with dimension {2 + list(shape[2:]).index(0)} being empty")
    if mode == "bicubic" and spatial != 2:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input; use 'bilinear' "
                           "(trilinear) or 'nearest' for 5D input")


# ---- source coordinates ----------------------------------------------------------------------------------
def _unnormalize(coord: Any, size: int, align_corners: bool) -> Any:
    """[-1, 1] -> pixel index: -1/+1 are the corner pixels' centers (align_corners) or the image edges."""
    if align_corners:
        return (coord + 1) * ((size - 1) / 2)
    return (coord + 1) * (size / 2) - 0.5


def _clip(coord: Any, size: int, spatial: int) -> Any:
    """Clamp into [0, size - 1]; as in PyTorch the gradient passes only strictly inside. NaN becomes 0 in 2-D and
    size - 1 in 3-D: PyTorch's vectorized 2-D kernel and its scalar 3-D kernel (``min(size - 1, max(x, 0))``)
    differ there, and each is followed."""
    if spatial == 2:
        return where(coord > 0, where(coord >= size - 1, size - 1, coord), 0)
    return where(coord <= 0, 0, where(coord < size - 1, coord, size - 1))


def _reflect(coord: Any, twice_low: int, twice_high: int) -> Any:
    """Fold ``coord`` into [twice_low / 2, twice_high / 2] by reflecting at the ends (derivative +-1)."""
    if twice_low == twice_high:
        return coord * 0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    shifted = coord - low
    folded = where(shifted < 0, -shifted, shifted)  # derivative -1 left of the low end, +1 from it on, as PyTorch
    extra = fmod(folded, span)
    odd = fmod(floor(folded.detach() / span), 2) != 0
    return where(odd, span - extra, extra) + low


def _pad(coord: Any, size: int, padding_mode: str, align_corners: bool, spatial: int) -> Any:
    """Apply the padding mode to a pixel coordinate: nothing (zeros), clip (border), fold then clip (reflection)."""
    if padding_mode == "border":
        return _clip(coord, size, spatial)
    if padding_mode == "reflection":
        twice = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
        return _clip(_reflect(coord, *twice), size, spatial)
    return coord


# ---- reading taps --------------------------------------------------------------------------------------------
def _read(flat: Any, taps: list, sizes: tuple, weight: Any = None) -> Any:
    """``weight * flat[n, c, taps]`` (taps: one float tensor (N, P) of whole numbers per spatial axis, outermost
    first; weight (N, P)); taps outside the input (or NaN) read 0 and pass no gradient to ``flat``."""
    n, c, _ = flat.shape
    inside, position, stride = None, None, 1
    for tap, size in zip(reversed(taps), reversed(sizes)):
        ok = logical_and(tap >= 0, tap <= size - 1)
        inside = ok if inside is None else logical_and(inside, ok)
        term = tap * stride
        position = term if position is None else position + term
        stride *= size
    index = where(inside, position, 0).to(int64)
    values = flat.gather(2, index.unsqueeze(1).expand(n, c, index.shape[1]))
    if weight is None:
        return where(inside.unsqueeze(1), values, 0)
    if len(sizes) == 2:  # PyTorch's vectorized 2-D kernel weights the zeros it read: a NaN weight gives NaN
        return where(inside.unsqueeze(1), values, 0) * weight.unsqueeze(1)
    # its scalar 3-D kernel skips taps outside: a non-finite coordinate's NaN weight does not reach the result
    return where(inside.unsqueeze(1), values * weight.unsqueeze(1), 0)


def _cubic_weights(t: Any) -> list:
    """The four cubic-convolution weights of the taps at -1, 0, 1, 2 for fraction ``t`` in [0, 1)."""
    a = _CUBIC_A

    def near(x: Any) -> Any:  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x: Any) -> Any:  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


# ---- the public functions ------------------------------------------------------------------------------------
def grid_sample(input: Any, grid: Any, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners: bool | None = None) -> Any:
    """Sample ``input`` (N, C, H, W) / (N, C, D, H, W) at ``grid`` (N, Ho, Wo, 2) / (N, Do, Ho, Wo, 3) points in
    [-1, 1] (x = width first); returns (N, C, Ho, Wo) / (N, C, Do, Ho, Wo). Differentiable in input and grid."""
    _check(input, grid, mode, padding_mode)
    if align_corners is None:
        warnings.warn("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                      "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                      "grid_sample for details.", UserWarning, stacklevel=2)
        align_corners = False
    n, c = input.shape[0], input.shape[1]
    sizes = tuple(input.shape[2:])            # outermost first: (H, W) or (D, H, W)
    out_spatial = tuple(grid.shape[1:-1])
    points = math.prod(out_spatial)
    flat = input.reshape(n, c, math.prod(sizes))
    flat_grid = grid.reshape(n, points, len(sizes))
    # grid's last axis is x (width), y, z: reverse it to match the axes of ``sizes``
    coords = [flat_grid[..., len(sizes) - 1 - axis] for axis in range(len(sizes))]
    if mode == "bicubic":
        out = _bicubic(flat, coords, sizes, padding_mode, bool(align_corners))
    else:
        sources = [_pad(_unnormalize(coord, size, bool(align_corners)), size, padding_mode, bool(align_corners),
                        len(sizes)) for coord, size in zip(coords, sizes)]
        if mode == "nearest":  # round half to even, as PyTorch's nearbyint; the grid's gradient is zero
            out = _read(flat, [round_(s.detach()) for s in sources], sizes)
            for s in sources:  # PyTorch hands the grid zeros (not None): a zero-valued term that keeps the link
                out = out + where(isfinite(s), s * 0, 0).unsqueeze(1)
        else:
            out = _linear(flat, sources, sizes)
    return out.reshape(n, c, *out_spatial)


def _linear(flat: Any, sources: list, sizes: tuple) -> Any:
    lows = [floor(s.detach()) for s in sources]
    # weight of the low tap is (low + 1 - s), of the high tap (s - low): products over the axes
    factors = [((low + 1) - s, s - low) for s, low in zip(sources, lows)]
    out = None
    for corner in itertools.product((0, 1), repeat=len(sources)):
        weight = None
        for axis, bit in enumerate(corner):
            f = factors[axis][bit]
            weight = f if weight is None else weight * f
        taps = [low + bit for low, bit in zip(lows, corner)]
        term = _read(flat, taps, sizes, weight)
        out = term if out is None else out + term
    return out


def _bicubic(flat: Any, coords: list, sizes: tuple, padding_mode: str, align_corners: bool) -> Any:
    sources = [_unnormalize(coord, size, align_corners) for coord, size in zip(coords, sizes)]
    lows = [floor(s.detach()) for s in sources]
    weights = [_cubic_weights(s - low) for s, low in zip(sources, lows)]
    out = None
    for i, j in itertools.product(range(4), repeat=2):  # (y, x) taps at offsets -1..2
        taps = [_pad(lows[0] + (i - 1), sizes[0], padding_mode, align_corners, 2),
                _pad(lows[1] + (j - 1), sizes[1], padding_mode, align_corners, 2)]
        term = _read(flat, taps, sizes, weights[0][i] * weights[1][j])
        out = term if out is None else out + term
    return out


def grid_sampler(input: Any, grid: Any, interpolation_mode: int, padding_mode: int, align_corners: bool) -> Any:
    """``torch.grid_sampler``: ``grid_sample`` with PyTorch's integer codes (mode 0/1/2 = bilinear/nearest/bicubic,
    padding 0/1/2 = zeros/border/reflection)."""
    try:
        mode, padding = MODES[interpolation_mode], PADDING_MODES[padding_mode]
    except (IndexError, TypeError):
        raise ValueError(f"grid_sampler(): interpolation_mode must be 0, 1 or 2 and padding_mode 0, 1 or 2, got "
                         f"{interpolation_mode!r} and {padding_mode!r}") from None
    return grid_sample(input, grid, mode, padding, bool(align_corners))


def grid_sampler_2d(input: Any, grid: Any, interpolation_mode: int, padding_mode: int, align_corners: bool) -> Any:
    """``torch.grid_sampler_2d``: 4-D input only."""
    if input.ndim != 4:
        raise RuntimeError(f"grid_sampler_2d(): expected 4D input, got sizes {list(input.shape)}")
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_3d(input: Any, grid: Any, interpolation_mode: int, padding_mode: int, align_corners: bool) -> Any:
    """``torch.grid_sampler_3d``: 5-D input only."""
    if input.ndim != 5:
        raise RuntimeError(f"grid_sampler_3d(): expected 5D input, got sizes {list(input.shape)}")
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)
