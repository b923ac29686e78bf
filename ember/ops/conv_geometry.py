"""Convolution geometry shared by the im2col layouts: output sizes and each kernel tap's reach.

Example:
    >>> out_size(32, 3, 2, 1, 1, 1)
    16
    >>> tap_range(4, 4, 0, 1, 1)     # tap 0 of a 3-tap, pad-1 kernel: outputs 1..3 read inputs 0..2
    (slice(1, 4, None), slice(0, 3, 1))
"""
from __future__ import annotations


def out_size(size: int, kernel: int, stride: int, pad_lo: int, pad_hi: int, dilation: int) -> int:
    return (size + pad_lo + pad_hi - dilation * (kernel - 1) - 1) // stride + 1


def tap_range(size: int, out: int, offset: int, stride: int, pad: int) -> tuple | None:
    """For one kernel tap at ``offset`` (tap index * dilation): the output positions whose window
    reads a real (non-padding) input element, and those input elements, as two slices; None when
    the tap reads only padding."""
    lo = max(0, -((offset - pad) // stride))  # ceil((pad - offset) / stride)
    hi = min(out, (size - 1 + pad - offset) // stride + 1)
    if hi <= lo:
        return None
    start = lo * stride + offset - pad
    return slice(lo, hi), slice(start, start + (hi - lo - 1) * stride + 1, stride)
