"""Image transforms in the style of ``torchvision.transforms``, on NumPy images and ember tensors.

Each transform works on one sample (``HxW``/``HxWxC`` arrays or ``[..., H, W]`` tensors) and, where
it can, on a whole batch at once through ``apply_batch`` (used by vectorized datasets such as MNIST,
so ``Compose([ToTensor(), Normalize(...)])`` costs one NumPy pass per batch, not one per image).
Spatial transforms (flip, crops) act on the last two axes: give them ``HxW`` arrays or ``[..., H, W]``
tensors (apply ``ToTensor`` first for colour images). Random transforms draw from their ``generator``
if given, else from the loader batch's own stream (see ``ember.data.worker``), else from ember's
default generator.

Example:
    >>> import numpy as np
    >>> from ember.data import transforms as T
    >>> t = T.Compose([T.ToTensor(), T.Normalize((0.5,), (0.5,))])
    >>> t(np.full((2, 2), 255, dtype=np.uint8)).tolist()
    [[[1.0, 1.0], [1.0, 1.0]]]
"""
from __future__ import annotations

import numbers
from typing import Any, Callable, Sequence

import numpy as np

from ember.data.worker import data_rng
from ember.creation import from_numpy
from ember.tensor import Tensor


def _as_array(x: Any) -> np.ndarray:
    """The sample's data as a NumPy array (a view for CPU tensors)."""
    if isinstance(x, Tensor):
        return np.asarray(x.detach().cpu().numpy())
    return np.asarray(x)


def _wrap(array: np.ndarray) -> Any:
    return from_numpy(np.ascontiguousarray(array))


def _like(x: Any, array: np.ndarray) -> Any:
    """Return ``array`` in the kind ``x`` came as: NumPy images stay NumPy, tensors stay tensors."""
    return np.ascontiguousarray(array) if isinstance(x, np.ndarray) else _wrap(array)


class Transform:
    """Base class. ``batchable`` says whether ``apply_batch`` is available."""

    batchable = False

    def __call__(self, x: Any) -> Any:
        raise NotImplementedError

    def apply_batch(self, batch: Any) -> Any:
        raise TypeError(f"{type(self).__name__} has no batched form; apply it per sample")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Compose(Transform):
    """Apply transforms in order."""

    def __init__(self, transforms: Sequence[Callable]) -> None:
        self.transforms = list(transforms)

    @property
    def batchable(self) -> bool:  # type: ignore[override]
        return all(getattr(t, "batchable", False) for t in self.transforms)

    def __call__(self, x: Any) -> Any:
        for t in self.transforms:
            x = t(x)
        return x

    def apply_batch(self, batch: Any) -> Any:
        for t in self.transforms:
            batch = t.apply_batch(batch)
        return batch

    def __repr__(self) -> str:
        inner = "".join(f"\n    {t!r}" for t in self.transforms)
        return f"Compose({inner}\n)"


class ToTensor(Transform):
    """``HxW`` or ``HxWxC`` image -> ``CxHxW`` tensor; uint8 is scaled to float32 in [0, 1]."""

    batchable = True

    def __call__(self, pic: Any) -> Any:
        array = _as_array(pic)
        if array.ndim == 2:
            array = array[None]
        elif array.ndim == 3:
            array = array.transpose(2, 0, 1)
        else:
            raise ValueError(f"ToTensor: expected an HxW or HxWxC image, got shape {array.shape}")
        return _wrap(self._scale(array))

    def apply_batch(self, batch: Any) -> Any:
        """``NxHxW`` or ``NxHxWxC`` images -> ``NxCxHxW``."""
        array = _as_array(batch)
        if array.ndim == 3:
            array = array[:, None]
        elif array.ndim == 4:
            array = array.transpose(0, 3, 1, 2)
        else:
            raise ValueError(f"ToTensor.apply_batch: expected NxHxW or NxHxWxC images, got shape {array.shape}")
        return _wrap(self._scale(array))

    @staticmethod
    def _scale(array: np.ndarray) -> np.ndarray:
        if array.dtype == np.uint8:
            # A true division (not a multiply by 1/255) gives torchvision's values bit for bit.
            return array.astype(np.float32) / np.float32(255.0)
        return array


class Normalize(Transform):
    """``(x - mean) / std`` per channel of a ``[..., C, H, W]`` float tensor."""

    batchable = True

    def __init__(self, mean: Sequence[float], std: Sequence[float], inplace: bool = False) -> None:
        self.mean = np.asarray(mean, dtype=np.float32).reshape(-1)
        self.std = np.asarray(std, dtype=np.float32).reshape(-1)
        if (self.std == 0).any():
            raise ValueError(f"Normalize: std evaluated to zero after conversion to float32 ({std}), leading to "
                             "division by zero")
        self.inplace = inplace

    def __call__(self, tensor: Any) -> Any:
        array = _as_array(tensor)
        if array.ndim < 3:
            raise ValueError(f"Normalize: expected a tensor image of shape [..., C, H, W], got shape {array.shape}; "
                             "apply ToTensor first")
        if array.dtype.kind != "f":
            raise TypeError(f"Normalize: input should be a float tensor, got {array.dtype}; apply ToTensor first")
        channels = array.shape[-3]
        if self.mean.size not in (1, channels) or self.std.size not in (1, channels):
            # RuntimeError, as torchvision's (its in-place broadcast fails); MNIST with 3-channel statistics is common
            raise RuntimeError(f"Normalize: mean/std of length {self.mean.size}/{self.std.size} do not match "
                               f"{channels} channels (use one value per channel, e.g. (0.5,) for a 1-channel image)")
        shape = (-1, 1, 1)
        mean = self.mean.astype(array.dtype).reshape(shape)
        std = self.std.astype(array.dtype).reshape(shape)
        if self.inplace and array.flags.writeable:
            array -= mean
            array /= std
            return tensor
        return _wrap((array - mean) / std)

    apply_batch = __call__

    def __repr__(self) -> str:
        return f"Normalize(mean={self.mean.tolist()}, std={self.std.tolist()})"


class Lambda(Transform):
    """Wrap a function as a transform."""

    def __init__(self, lambd: Callable[[Any], Any]) -> None:
        if not callable(lambd):
            raise TypeError(f"Lambda: argument should be callable, got {type(lambd).__name__}")
        self.lambd = lambd

    def __call__(self, x: Any) -> Any:
        return self.lambd(x)


class RandomHorizontalFlip(Transform):
    """Flip the last axis with probability ``p``."""

    batchable = True

    def __init__(self, p: float = 0.5, generator: Any = None) -> None:
        self.p = p
        self.generator = generator

    def __call__(self, x: Any) -> Any:
        if data_rng(self.generator).random() < self.p:
            return _like(x, _as_array(x)[..., ::-1])
        return x

    def apply_batch(self, batch: Any) -> Any:
        array = _as_array(batch)
        flip = data_rng(self.generator).random(array.shape[0]) < self.p
        out = array.copy()
        out[flip] = array[flip][..., ::-1]
        return _wrap(out)

    def __repr__(self) -> str:
        return f"RandomHorizontalFlip(p={self.p})"


def _pair(size: Any) -> tuple[int, int]:
    if isinstance(size, numbers.Number):
        return int(size), int(size)
    if len(size) == 1:
        return int(size[0]), int(size[0])
    return int(size[0]), int(size[1])


class RandomCrop(Transform):
    """Crop a random ``size`` window from the last two axes, after optional ``padding``.

    ``padding``: int (all sides), (left/right, top/bottom) or (left, top, right, bottom), as torchvision.
    ``padding_mode``: 'constant' (with ``fill``), 'edge', 'reflect' or 'symmetric'.
    """

    batchable = True

    def __init__(self, size: Any, padding: Any = None, pad_if_needed: bool = False, fill: float = 0,
                 padding_mode: str = "constant", generator: Any = None) -> None:
        self.size = _pair(size)
        self.padding = padding
        self.pad_if_needed = pad_if_needed
        self.fill = fill
        if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
            raise ValueError(f"RandomCrop: padding_mode should be constant, edge, reflect or symmetric, got "
                             f"{padding_mode!r}")
        self.padding_mode = padding_mode
        self.generator = generator

    def _pad_widths(self, h: int, w: int) -> tuple[int, int, int, int]:
        left = top = right = bottom = 0
        if self.padding is not None:
            p = self.padding
            if isinstance(p, numbers.Number):
                left = top = right = bottom = int(p)
            elif len(p) == 2:
                left = right = int(p[0])
                top = bottom = int(p[1])
            elif len(p) == 4:
                left, top, right, bottom = (int(v) for v in p)
            else:
                raise ValueError(f"RandomCrop: padding must be an int or a 2- or 4-element sequence, got {p!r}")
        th, tw = self.size
        if self.pad_if_needed:
            extra_h = max(0, th - (h + top + bottom))
            extra_w = max(0, tw - (w + left + right))
            top, bottom, left, right = top + extra_h, bottom + extra_h, left + extra_w, right + extra_w
        return left, top, right, bottom

    def _pad(self, array: np.ndarray) -> np.ndarray:
        left, top, right, bottom = self._pad_widths(array.shape[-2], array.shape[-1])
        if not (left or top or right or bottom):
            return array
        widths = [(0, 0)] * (array.ndim - 2) + [(top, bottom), (left, right)]
        if self.padding_mode == "constant":
            return np.pad(array, widths, mode="constant", constant_values=self.fill)
        return np.pad(array, widths, mode=self.padding_mode)

    def _check(self, h: int, w: int) -> None:
        th, tw = self.size
        if h < th or w < tw:
            raise ValueError(f"RandomCrop: required crop size {(th, tw)} is larger than the padded input size "
                             f"{(h, w)}; use pad_if_needed=True or more padding")

    def __call__(self, x: Any) -> Any:
        array = self._pad(_as_array(x))
        h, w = array.shape[-2:]
        self._check(h, w)
        th, tw = self.size
        rng = data_rng(self.generator)
        i = int(rng.integers(0, h - th + 1))
        j = int(rng.integers(0, w - tw + 1))
        return _like(x, array[..., i:i + th, j:j + tw])

    def apply_batch(self, batch: Any) -> Any:
        array = self._pad(_as_array(batch))
        n, (h, w) = array.shape[0], array.shape[-2:]
        self._check(h, w)
        th, tw = self.size
        rng = data_rng(self.generator)
        rows = rng.integers(0, h - th + 1, n)
        cols = rng.integers(0, w - tw + 1, n)
        out = np.empty(array.shape[:-2] + (th, tw), dtype=array.dtype)
        for k in range(n):  # n small slices: cheaper than building a gather index
            out[k] = array[k, ..., rows[k]:rows[k] + th, cols[k]:cols[k] + tw]
        return _wrap(out)

    def __repr__(self) -> str:
        return f"RandomCrop(size={self.size}, padding={self.padding})"


class CenterCrop(Transform):
    """Crop the central ``size`` window of the last two axes."""

    batchable = True

    def __init__(self, size: Any) -> None:
        self.size = _pair(size)

    def __call__(self, x: Any) -> Any:
        array = _as_array(x)
        h, w = array.shape[-2:]
        th, tw = self.size
        if h < th or w < tw:
            raise ValueError(f"CenterCrop: crop size {(th, tw)} is larger than the input size {(h, w)}")
        i, j = int(round((h - th) / 2.0)), int(round((w - tw) / 2.0))
        return _like(x, array[..., i:i + th, j:j + tw])

    apply_batch = __call__
