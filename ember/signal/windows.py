"""``torch.signal.windows``: the window functions of signal processing (SciPy's definitions), as tensors.

``sym=True`` gives the symmetric window for filter design; ``sym=False`` the periodic one for spectra (the
symmetric window of ``M + 1`` points without its last). Values are computed in float64 and rounded once to
``dtype`` (the default dtype unless given).

Example:
    >>> from ember.signal import windows
    >>> windows.hann(5).tolist()
    [0.0, 0.5, 1.0, 0.5, 0.0]
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from ember import creation, dtypes
from ember.tensor import Tensor

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine", "general_hamming",
           "hamming", "hann", "kaiser", "nuttall"]


def _window(name: str, M: int, values: Callable[[int], np.ndarray], sym: bool, dtype: Any, layout: Any,
            device: Any, requires_grad: bool) -> Tensor:
    if not isinstance(M, (int, np.integer)) or isinstance(M, bool) or M < 0:
        raise ValueError(f"signal.windows.{name}: M must be a non-negative integer, got {M!r}.")
    dtype = dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)
    if not dtype.is_floating_point:
        raise ValueError(f"signal.windows.{name}: expected a floating point dtype, got {dtype}.")
    if layout is not None and str(layout) not in ("torch.strided", "ember.strided", "strided"):
        raise ValueError(f"signal.windows.{name}: only the strided layout is supported, got {layout}.")
    if M == 0:
        array = np.zeros(0)
    elif M == 1:
        array = np.ones(1)
    else:
        # the periodic window is the symmetric one of M + 1 points without its last
        array = values(M) if sym else values(M + 1)[:-1]
    return creation.tensor(array, dtype=dtype, device=device, requires_grad=requires_grad)


def _symmetric_positions(M: int) -> np.ndarray:
    """``n - (M - 1) / 2`` for n = 0..M-1: positions centred on the window's middle."""
    return np.arange(M, dtype=np.float64) - (M - 1) / 2.0


def general_cosine(M: int, *, a: Sequence[float], sym: bool = True, dtype: Any = None, layout: Any = None,
                   device: Any = None, requires_grad: bool = False) -> Tensor:
    """``sum_k (-1)^k a[k] cos(2 pi k n / (M - 1))``."""
    if not isinstance(a, (list, tuple)) or not a:
        raise TypeError(f"signal.windows.general_cosine: coefficients `a` must be a non-empty list or tuple, got {a!r}.")

    def values(m: int) -> np.ndarray:
        phase = 2 * math.pi * np.arange(m, dtype=np.float64) / (m - 1)
        return sum((-1) ** k * w * np.cos(k * phase) for k, w in enumerate(a))

    return _window("general_cosine", M, values, sym, dtype, layout, device, requires_grad)


def general_hamming(M: int, *, alpha: float = 0.54, sym: bool = True, dtype: Any = None, layout: Any = None,
                    device: Any = None, requires_grad: bool = False) -> Tensor:
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)


def hann(M: int, *, sym: bool = True, dtype: Any = None, layout: Any = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def hamming(M: int, *, sym: bool = True, dtype: Any = None, layout: Any = None, device: Any = None,
            requires_grad: bool = False) -> Tensor:
    return general_hamming(M, sym=sym, dtype=dtype, layout=layout, device=device, requires_grad=requires_grad)


def blackman(M: int, *, sym: bool = True, dtype: Any = None, layout: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)


def nuttall(M: int, *, sym: bool = True, dtype: Any = None, layout: Any = None, device: Any = None,
            requires_grad: bool = False) -> Tensor:
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def bartlett(M: int, *, sym: bool = True, dtype: Any = None, layout: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """The triangle ``1 - |2n / (M - 1) - 1|``."""
    def values(m: int) -> np.ndarray:
        return 1.0 - np.abs(2.0 * np.arange(m, dtype=np.float64) / (m - 1) - 1.0)

    return _window("bartlett", M, values, sym, dtype, layout, device, requires_grad)


def cosine(M: int, *, sym: bool = True, dtype: Any = None, layout: Any = None, device: Any = None,
           requires_grad: bool = False) -> Tensor:
    """``sin(pi (n + 1/2) / M)`` (the symmetric form; the periodic one divides by ``M + 1``)."""
    def values(m: int) -> np.ndarray:
        return np.sin(math.pi * (np.arange(m, dtype=np.float64) + 0.5) / m)

    return _window("cosine", M, values, sym, dtype, layout, device, requires_grad)


def gaussian(M: int, *, std: float = 1.0, sym: bool = True, dtype: Any = None, layout: Any = None,
             device: Any = None, requires_grad: bool = False) -> Tensor:
    """``exp(-(n - (M - 1)/2)^2 / (2 std^2))``."""
    if std <= 0:
        raise ValueError(f"signal.windows.gaussian: standard deviation must be positive, got {std}.")

    def values(m: int) -> np.ndarray:
        return np.exp(-_symmetric_positions(m) ** 2 / (2.0 * std * std))

    return _window("gaussian", M, values, sym, dtype, layout, device, requires_grad)


def exponential(M: int, *, center: float | None = None, tau: float = 1.0, sym: bool = True, dtype: Any = None,
                layout: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """``exp(-|n - center| / tau)``; ``center`` defaults to the middle and must be left out when ``sym``."""
    if sym and center is not None:
        raise ValueError("signal.windows.exponential: center must be None for symmetric windows (sym=True).")
    if tau <= 0:
        raise ValueError(f"signal.windows.exponential: tau must be positive, got {tau}.")
    if not sym and center is not None:
        # an explicit center applies to the M points themselves (SciPy's rule), not to an M + 1 point window
        def periodic(m: int) -> np.ndarray:
            return np.exp(-np.abs(np.arange(m, dtype=np.float64) - center) / tau)

        return _window("exponential", M, periodic, True, dtype, layout, device, requires_grad)

    def values(m: int) -> np.ndarray:
        return np.exp(-np.abs(_symmetric_positions(m)) / tau)

    return _window("exponential", M, values, sym, dtype, layout, device, requires_grad)


def kaiser(M: int, *, beta: float = 12.0, sym: bool = True, dtype: Any = None, layout: Any = None,
           device: Any = None, requires_grad: bool = False) -> Tensor:
    """``I0(beta sqrt(1 - (2n / (M - 1) - 1)^2)) / I0(beta)``."""
    if beta < 0:
        raise ValueError(f"signal.windows.kaiser: beta must be non-negative, got {beta}.")

    def values(m: int) -> np.ndarray:
        ratio = 2.0 * np.arange(m, dtype=np.float64) / (m - 1) - 1.0
        return np.i0(beta * np.sqrt(np.clip(1.0 - ratio * ratio, 0.0, None))) / np.i0(beta)

    return _window("kaiser", M, values, sym, dtype, layout, device, requires_grad)
