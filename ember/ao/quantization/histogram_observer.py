"""HistogramObserver: a running histogram of what passes through, and the [min, max] that minimizes the L2
quantization error (PyTorch's ``torch.ao.quantization.HistogramObserver``, the x86/fbgemm default for activations).

The same algorithm as PyTorch's: ``histc`` with 2048 bins over the running range; a wider range re-bins the old
histogram by upsampling each bin 16 times and assigning the midpoints; ``calculate_qparams`` narrows [min, max]
one cumulative-mass step (1e-5) at a time from the side that loses less mass, while the modelled quantization
error keeps falling. The arithmetic is float32 where PyTorch's is (tensors) and float64 where it uses Python
floats; PyTorch's vectorized ``linspace`` and summation orders are not copied, so bin assignments that sit exactly
on an edge can differ (measured in tests/ao/test_observers_vs_torch.py).

Example:
    >>> import ember
    >>> from ember.ao.quantization import HistogramObserver
    >>> obs = HistogramObserver()
    >>> _ = obs(ember.linspace(-1, 1, 1000))
    >>> float(obs.calculate_qparams()[0][0]) > 0
    True
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np


from ember.ao.qdtypes import per_tensor_affine, per_tensor_symmetric, quint8
from ember.ao.quantization.observer import _EPS, UniformQuantizationObserverBase
from ember.creation import tensor as _tensor

f32 = np.float32


def histc(x: np.ndarray, bins: int, lo: float, hi: float) -> np.ndarray:
    """``torch.histc`` on float32 data: bin ``int((x - lo) * bins / (hi - lo))`` in float32, the top edge in the last
    bin, values outside [lo, hi] dropped; equal bounds widen to [lo - 1, hi + 1]."""
    lo32, hi32 = f32(lo), f32(hi)
    if lo32 == hi32:
        lo32, hi32 = f32(lo32 - f32(1)), f32(hi32 + f32(1))
    x = x[(x >= lo32) & (x <= hi32)]
    position = ((x - lo32) * f32(bins) / (hi32 - lo32)).astype(np.int64)
    position = np.minimum(position, bins - 1)
    return np.bincount(position, minlength=bins).astype(f32)


def _norm(delta_begin: np.ndarray, delta_end: np.ndarray, density: np.ndarray) -> np.ndarray:
    return density * ((delta_end * delta_end * delta_end - delta_begin * delta_begin * delta_begin) / f32(3))


class HistogramObserver(UniformQuantizationObserverBase):
    """Per-tensor observer choosing [min, max] by L2 error over a 2048-bin histogram."""

    def __init__(self, bins: int = 2048, dtype: Any = quint8, qscheme: Any = per_tensor_affine,
                 reduce_range: bool = False, quant_min: int | None = None, quant_max: int | None = None,
                 factory_kwargs: Any = None, eps: float = _EPS, is_dynamic: bool = False, **kwargs: Any) -> None:
        if qscheme not in (per_tensor_affine, per_tensor_symmetric):
            raise NotImplementedError("HistogramObserver's qscheme only support torch.per_tensor_symmetric and "
                                      "torch.per_tensor_affine.")
        if is_dynamic:
            raise NotImplementedError("HistogramObserver doesn't support dynamic quantization")
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, factory_kwargs, eps, is_dynamic)
        self.bins = bins
        self.register_buffer("histogram", _tensor(np.zeros(bins, f32)))
        self.register_buffer("min_val", _tensor(float("inf")))
        self.register_buffer("max_val", _tensor(float("-inf")))
        self.dst_nbins = 2 ** (8 * np.dtype(dtype.np).itemsize)
        self.upsample_rate = 16

    # ---- observing -------------------------------------------------------------------------------------
    def forward(self, x_orig: Any) -> Any:
        if x_orig.numel() == 0:
            return x_orig
        x = np.asarray(x_orig.detach().float().numpy(), dtype=f32).ravel()
        x_min, x_max = x.min(), x.max()
        if x_min == -np.inf or x_max == np.inf:
            warnings.warn("torch.inf detected in input tensor, ignoring input", stacklevel=2)
            x = x[np.abs(x) != np.inf]
            if x.size == 0:
                return x_orig
            x_min, x_max = x.min(), x.max()
        current_min, current_max = f32(self.min_val.item()), f32(self.max_val.item())
        if current_min == np.inf or current_max == -np.inf:
            self._store(histc(x, self.bins, x_min, x_max), x_min, x_max)
            return x_orig
        new_min, new_max = min(current_min, x_min), max(current_max, x_max)
        update = histc(x, self.bins, new_min, new_max)
        old = self.histogram.numpy().astype(f32)
        if new_min == current_min and new_max == current_max:
            self._store(old + update, new_min, new_max)
        else:
            self._store(self._combine_histograms(old, current_min, current_max, update, new_min, new_max),
                        new_min, new_max)
        return x_orig

    def _store(self, histogram: np.ndarray, lo: Any, hi: Any) -> None:
        self._buffers["histogram"] = _tensor(histogram.astype(f32))
        self.min_val.copy_(_tensor(f32(lo)))
        self.max_val.copy_(_tensor(f32(hi)))

    def _upscale_histogram(self, histogram: np.ndarray, orig_min: f32, orig_max: f32, update_min: f32,
                           update_max: f32) -> np.ndarray:
        rate, bins = self.upsample_rate, self.bins
        fine = np.repeat(histogram, rate) / f32(rate)
        bin_size = (orig_max - orig_min) / f32(bins * rate)
        mids = _linspace(orig_min, orig_max, bins * rate + 1)[:-1] + f32(0.5) * bin_size
        bounds = _linspace(update_min, update_max, bins + 1)
        buckets = np.clip(np.searchsorted(bounds, mids, side="right") - 1, 0, bins - 1)
        return np.bincount(buckets, weights=fine.astype(np.float64), minlength=bins).astype(f32)

    def _combine_histograms(self, orig_hist: np.ndarray, orig_min: f32, orig_max: f32, update_hist: np.ndarray,
                            update_min: f32, update_max: f32) -> np.ndarray:
        if update_min == orig_min and update_max == orig_max:
            return orig_hist + update_hist
        if orig_min == orig_max:
            moved = histc(np.array([orig_min], f32), self.bins, update_min, update_max) * orig_hist.sum(dtype=f32)
            return moved + update_hist
        return update_hist + self._upscale_histogram(orig_hist, orig_min, orig_max, update_min, update_max)

    # ---- choosing the range ------------------------------------------------------------------------------
    def _compute_quantization_error(self, next_start_bin: int, next_end_bin: int) -> float:
        bin_width = (float(self.max_val.item()) - float(self.min_val.item())) / self.bins
        dst_bin_width = bin_width * (next_end_bin - next_start_bin + 1) / self.dst_nbins
        if dst_bin_width == 0.0:
            return 0.0
        width32, dst32 = f32(bin_width), f32(dst_bin_width)
        src_begin = (np.arange(self.bins) - next_start_bin).astype(f32) * width32
        src_end = src_begin + width32
        top = f32(self.dst_nbins - 1)
        dst_of_begin = np.clip(np.floor_divide(src_begin, dst32), f32(0), top)
        dst_of_begin_center = (dst_of_begin + f32(0.5)) * dst32
        dst_of_end = np.clip(np.floor_divide(src_end, dst32), f32(0), top)
        density = self.histogram.numpy().astype(f32) / width32
        half = f32(dst_bin_width / 2)
        norm = np.zeros(self.bins, f32)
        norm += _norm(src_begin - dst_of_begin_center, np.full(self.bins, half, f32), density)
        norm += (dst_of_end - dst_of_begin - f32(1)) * _norm(np.array(-half, f32), np.array(half, f32), density)
        dst_of_end_center = dst_of_end * dst32 + half
        norm += _norm(np.array(f32(-dst_bin_width / 2)), src_end - dst_of_end_center, density)
        return float(norm.sum(dtype=f32))

    def _non_linear_param_search(self) -> tuple:
        histogram = self.histogram.numpy().astype(f32)
        lo, hi = f32(self.min_val.item()), f32(self.max_val.item())
        bin_width = (hi - lo) / f32(self.bins)
        total = float(histogram.sum(dtype=f32))
        csum = np.cumsum(histogram, dtype=f32)
        stepsize, alpha, beta = 1e-5, 0.0, 1.0
        start_bin, end_bin = 0, self.bins - 1
        norm_min = float("inf")
        while alpha < beta:
            next_alpha, next_beta = alpha + stepsize, beta - stepsize
            left, right = start_bin, end_bin
            low_mass, high_mass = f32(next_alpha * total), f32(next_beta * total)
            while left < end_bin and csum[left] < low_mass:
                left += 1
            while right > start_bin and csum[right] > high_mass:
                right -= 1
            next_start_bin, next_end_bin = start_bin, end_bin
            if (left - start_bin) > (end_bin - right):
                next_start_bin, alpha = left, next_alpha
            else:
                next_end_bin, beta = right, next_beta
            if next_start_bin == start_bin and next_end_bin == end_bin:
                continue
            norm = self._compute_quantization_error(next_start_bin, next_end_bin)
            if norm > norm_min:
                break
            norm_min, start_bin, end_bin = norm, next_start_bin, next_end_bin
        new_min = lo + bin_width * f32(start_bin)
        new_max = lo + bin_width * f32(end_bin + 1)
        return _tensor(f32(new_min)), _tensor(f32(new_max))

    def calculate_qparams(self) -> tuple:
        if self.min_val.item() == float("inf") and self.max_val.item() == float("-inf"):
            warnings.warn("must run observer before calling calculate_qparams. Returning default scale and zero "
                          "point ", stacklevel=2)
            return _tensor([1.0]), _tensor([0])
        if self.bins != len(self.histogram):
            raise AssertionError("The number of bins in histogram should be equal to the number of bins supplied "
                                 "while making this observer")
        return self._calculate_qparams(*self._non_linear_param_search())

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
        if prefix + "histogram" in state_dict:
            self._buffers["histogram"] = _tensor(np.array(state_dict[prefix + "histogram"].numpy(), f32))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}"


def _linspace(start: f32, end: f32, steps: int) -> np.ndarray:
    """``torch.linspace`` in float32 by its scalar formula: from the start for the first half, from the end after."""
    step = (f32(end) - f32(start)) / f32(steps - 1)
    index = np.arange(steps)
    half = steps // 2
    head = f32(start) + step * index[:half].astype(f32)
    tail = f32(end) - step * (steps - index[half:] - 1).astype(f32)
    return np.concatenate([head, tail]).astype(f32)



