"""``torch.stft`` / ``torch.istft``: short-time Fourier transforms, composed of differentiable ember ops
(padding, ``unfold`` into frames, a window product, ``ember.fft``, and an overlap-add by ``scatter_add``),
so their gradients, devices and dtypes follow from those ops.

Example:
    >>> import ember
    >>> x = ember.sin(ember.arange(64.0))
    >>> w = ember.hann_window(16)
    >>> spec = ember.stft(x, 16, hop_length=4, window=w, return_complex=True)
    >>> spec.shape
    ember.Size([9, 17])
    >>> y = ember.istft(spec, 16, hop_length=4, window=w, length=64)
    >>> bool((y - x).abs().max() < 1e-5)
    True
"""
from __future__ import annotations

import warnings
from typing import Any

from ember import dtypes, fft as _fft
from ember.creation import arange, ones, zeros
from ember.nn import functional as F
from ember.ops import complex_ops, elementwise as ew, views

__all__ = ["stft", "istft"]


def _window(window: Any, win_length: int, n_fft: int, like: Any, op: str) -> Any:
    """The window padded with zeros on both sides to ``n_fft`` (PyTorch centres a shorter window)."""
    if window is None:
        warnings.warn(f"{op}: A window was not provided. A rectangular window will be applied, which is known to cause "
                      "spectral leakage (as PyTorch warns); pass window=ember.hann_window(n_fft) or, to keep the "
                      "rectangular one silently, window=ember.ones(n_fft)", UserWarning, stacklevel=3)
        window = ones(win_length, dtype=like.dtype.to_real(), device=like.device)
    elif window.ndim != 1 or window.shape[0] != win_length:
        raise RuntimeError(f"{op}: expected a 1D window tensor of size equal to win_length={win_length}, but got window "
                           f"with size {list(window.shape)}")
    if win_length < n_fft:
        left = (n_fft - win_length) // 2
        window = F.pad(window, (left, n_fft - win_length - left))
    return window


def _sizes(n_fft: int, hop_length: Any, win_length: Any, op: str) -> tuple:
    hop = n_fft // 4 if hop_length is None else int(hop_length)
    win = n_fft if win_length is None else int(win_length)
    if n_fft <= 0:
        raise RuntimeError(f"{op}: expected 0 < n_fft, but got n_fft={n_fft}")
    if hop <= 0:
        raise RuntimeError(f"{op}: expected hop_length > 0, but got hop_length={hop}")
    if not 0 < win <= n_fft:
        raise RuntimeError(f"{op}: expected 0 < win_length <= n_fft, but got win_length={win}")
    return hop, win


def stft(input: Any, n_fft: int, hop_length: int | None = None, win_length: int | None = None, window: Any = None,
         center: bool = True, pad_mode: str = "reflect", normalized: bool = False, onesided: bool | None = None,
         return_complex: bool | None = None, align_to_window: bool | None = None) -> Any:
    """The short-time Fourier transform of a 1-D signal or a batch of them: (B?, n_fft//2 + 1 or n_fft, frames)."""
    op = "stft"
    if return_complex is None:
        if not (input.dtype.is_complex or (window is not None and window.dtype.is_complex)):
            raise RuntimeError("stft requires the return_complex parameter be given for real inputs, and will further "
                               "require that return_complex=True in a future PyTorch release.")
        return_complex = True
    if align_to_window is not None and center:
        raise ValueError("stft: align_to_window should only be set when center = False")
    if input.ndim not in (1, 2):
        raise RuntimeError(f"{op}: expected a 1D or 2D tensor, but got a tensor of shape {tuple(input.shape)}")
    hop, win = _sizes(n_fft, hop_length, win_length, op)
    batched = input.ndim == 2
    x = input if batched else input.unsqueeze(0)
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        x = x.to(dtypes.get_default_dtype())
    if center:
        pad = n_fft // 2
        mode = "replicate" if pad_mode == "edge" else pad_mode
        if x.dtype.is_complex:  # padding modes work on real tensors: pad both parts
            x = complex_ops.complex(F.pad(x.real.unsqueeze(1), (pad, pad), mode=mode).squeeze(1),
                                    F.pad(x.imag.unsqueeze(1), (pad, pad), mode=mode).squeeze(1))
        else:
            x = F.pad(x.unsqueeze(1), (pad, pad), mode=mode).squeeze(1)
    elif align_to_window:
        left = (n_fft - win) // 2
        x = views.narrow(x, 1, left, x.shape[1] - left)
    if x.shape[1] < n_fft:
        raise RuntimeError(f"{op}: expected 0 < n_fft < {x.shape[1] + 1}, but got n_fft={n_fft}")
    w = _window(window, win, n_fft, x, op)
    frames = x.unfold(-1, n_fft, hop) * w  # (B, frames, n_fft)
    if onesided is None:
        onesided = not (x.dtype.is_complex or w.dtype.is_complex)
    if onesided and (x.dtype.is_complex or w.dtype.is_complex):
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    norm = "ortho" if normalized else "backward"
    spec = _fft.rfft(frames, dim=-1, norm=norm) if onesided else _fft.fft(frames, dim=-1, norm=norm)
    spec = spec.transpose(1, 2)
    if not batched:
        spec = spec.squeeze(0)
    if not return_complex:
        warnings.warn("stft with return_complex=False is deprecated (as in PyTorch): use return_complex=True and "
                      "ember.view_as_real", UserWarning, stacklevel=2)
        return complex_ops.view_as_real(spec)
    return spec


def istft(input: Any, n_fft: int, hop_length: int | None = None, win_length: int | None = None, window: Any = None,
          center: bool = True, normalized: bool = False, onesided: bool | None = None, length: int | None = None,
          return_complex: bool = False) -> Any:
    """The inverse of :func:`stft` by windowed overlap-add, divided by the summed squared window (least squares)."""
    op = "istft"
    if not input.dtype.is_complex:
        raise RuntimeError("istft requires a complex-valued input tensor matching the output from stft with "
                           "return_complex=True.")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"{op}: expected a tensor with 2 or 3 dimensions of complex values, got shape "
                           f"{tuple(input.shape)}")
    hop, win = _sizes(n_fft, hop_length, win_length, op)
    batched = input.ndim == 3
    spec = input if batched else input.unsqueeze(0)
    n_freq, n_frames = spec.shape[1], spec.shape[2]
    if onesided is None:
        onesided = n_freq != n_fft
    if onesided and n_freq != n_fft // 2 + 1:
        raise RuntimeError(f"{op}: expected the frequency dimension (2nd to last) of the input to equal n_fft / 2 + 1 "
                           f"when onesided=True, but got {n_freq}")
    if not onesided and n_freq != n_fft:
        raise RuntimeError(f"{op}: expected the frequency dimension (2nd to last) of the input to equal n_fft when "
                           f"onesided=False, but got {n_freq}")
    if return_complex and onesided:
        raise RuntimeError("cannot have onesided output if window or input is complex")
    w = _window(window, win, n_fft, spec, op)
    norm = "ortho" if normalized else "backward"
    frames = spec.transpose(1, 2)  # (B, frames, freq)
    if return_complex:
        frames = _fft.ifft(frames, n=n_fft, dim=-1, norm=norm)
    else:  # torch's: a two-sided input's first n_fft // 2 + 1 bins through the C2R transform (the others unread)
        if not onesided:
            frames = views.narrow(frames, -1, 0, n_fft // 2 + 1)
        frames = _fft.irfft(frames, n=n_fft, dim=-1, norm=norm)
    frames = frames * w
    total = n_fft + hop * (n_frames - 1)
    positions = (arange(n_frames, device=spec.device).unsqueeze(1) * hop
                 + arange(n_fft, device=spec.device).unsqueeze(0)).reshape(-1)
    batch = frames.shape[0]
    index = positions.unsqueeze(0).expand(batch, positions.shape[0])
    signal = zeros(batch, total, dtype=frames.dtype, device=spec.device).scatter_add(
        1, index, frames.reshape(batch, -1))
    w2 = w * w  # torch: window.pow(2), also for a complex window (not |w|**2)
    envelope = zeros(total, dtype=w2.dtype, device=spec.device).scatter_add(
        0, positions, w2.unsqueeze(0).expand(n_frames, n_fft).reshape(-1))
    start = n_fft // 2 if center else 0
    end = total - (n_fft // 2 if center else 0) if length is None else start + int(length)
    stop = min(end, total)
    signal = views.narrow(signal, 1, start, stop - start)
    envelope = views.narrow(envelope, 0, start, stop - start)
    if bool((envelope.abs() < 1e-11).any()):
        raise RuntimeError("istft: window overlap add min: the window's summed squares are 0 somewhere (< 1e-11); "
                           "choose a window and hop_length that satisfy the NOLA condition")
    signal = signal / envelope
    if end > total:  # a requested length past the frames: zeros, as PyTorch
        signal = F.pad(signal, (0, end - total)) if not signal.dtype.is_complex else views.cat(
            [signal, signal.new_zeros((batch, end - total))], 1)
    return signal if batched else signal.squeeze(0)
