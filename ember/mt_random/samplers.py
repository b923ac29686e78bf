"""PyTorch's CPU samplers over an :class:`MTStream`, vectorized: each returns a new C-ordered NumPy array
filled in the order PyTorch's serial kernels fill a contiguous tensor.

``dtype`` is ember's dtype name ("float32", "float64", "float16", "bfloat16", or an integer dtype).
Half-precision results come back as float32 values already rounded to the dtype (the caller casts).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember.mt_random import libm, normal_fill
from ember.mt_random.permutation import fisher_yates
from ember.mt_random.stream import MTStream
from ember.ops.fma import fma_arrays

_DIGITS = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}
_CHUNK = 1 << 16  # elements per piece of a block fill: the temporaries stay in cache (a multiple of 16)


def _count(shape: tuple) -> int:
    return int(np.prod(shape, dtype=np.int64)) if shape else 1


def _round_to(values: np.ndarray, dtype: str) -> np.ndarray:
    """Round float32 values to float16/bfloat16 (returned as float32 holding representable values)."""
    if dtype == "float16":
        return values.astype(np.float16).astype(np.float32)
    if dtype == "bfloat16":  # round to nearest even on the top 16 bits
        bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
        rounded = ((bits + np.uint64(0x7FFF) + ((bits >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)) << np.uint64(16)
        out = rounded.astype(np.uint32).view(np.float32)
        return np.where(np.isnan(values), values, out)
    return values


def uniform(stream: MTStream, shape: tuple, dtype: str, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """``uniform_(low, high)``: unit values at the dtype's precision, then ``x * (high - low) + low`` with one
    rounding (PyTorch's kernel is compiled with fused multiply-adds)."""
    n = _count(shape)
    if dtype == "float64":
        x = stream.unit_float64(n)
        return _fma64(x, float(high) - float(low), float(low)).reshape(shape)
    # float16/bfloat16 draw as float32 (24 bits, float32 bounds), then round; a value that rounds up to the
    # upper bound becomes the lower bound, keeping results in [low, high) as PyTorch does
    lo, hi = np.float32(low), np.float32(high)
    span, offset = np.float64(np.float32(hi - lo)), np.float64(lo)
    out = np.empty(n, dtype=np.float32)
    wide = np.empty(min(n, _CHUNK), dtype=np.float64)
    for start in range(0, n, _CHUNK):  # cache-sized pieces, words in order
        piece = out[start:start + _CHUNK]
        buffer = wide[:piece.size]
        np.multiply(stream.unit_float32(piece.size), span, out=buffer, dtype=np.float64)
        np.add(buffer, offset, out=buffer)
        piece[...] = buffer  # x * span + low rounded once to float32 (the float64 product is exact)
    if dtype in ("float16", "bfloat16"):
        rounded = _round_to(out, dtype)
        top = _round_to(np.float32([high]), dtype)[0]
        out = np.where(rounded >= top, _round_to(np.float32([low]), dtype)[0], rounded)
    return out.reshape(shape)


def _fma64(x: np.ndarray, scale: float, offset: float) -> np.ndarray:
    """x * scale + offset with a single rounding, for doubles (ember/ops/fma.py's exact emulation)."""
    if scale == 1.0 and offset == 0.0:
        return x
    return fma_arrays(np, x, float(scale), float(offset))


def normal(stream: MTStream, shape: tuple, dtype: str, mean: float = 0.0, std: float = 1.0,
           contiguous: bool = True) -> np.ndarray:
    """``normal_(mean, std)``: tensors of 16 or more contiguous elements fill blocks of 16 by Box-Muller (the
    last partial block is redrawn and overwrites the tail); smaller ones draw pairs one number at a time,
    caching the second value of each pair in the generator, as PyTorch's ``normal_distribution<double>``."""
    n = _count(shape)
    if n >= 16 and contiguous:
        if dtype in ("float16", "bfloat16"):
            return _normal_half(stream, n, dtype, mean, std).reshape(shape)
        draw = stream.unit_float64 if dtype == "float64" else stream.unit_float32
        fill = normal_fill.fill16_float64 if dtype == "float64" else normal_fill.fill16_float32
        data = np.empty(n, dtype=np.float64 if dtype == "float64" else np.float32)
        for start in range(0, n, _CHUNK):  # cache-sized pieces (blocks are independent; words stay in order)
            piece = data[start:start + _CHUNK]
            piece[...] = draw(piece.size)
            fill(piece, mean, std)
        if n % 16:  # the last 16 values are redrawn and overwrite the tail
            tail = draw(16)
            fill(tail, mean, std)
            data[n - 16:] = tail
        return data.reshape(shape)
    return _fma64(standard_normal_pairs(stream, n), float(std), float(mean)).reshape(shape)


def _normal_half(stream: MTStream, n: int, dtype: str, mean: float, std: float) -> np.ndarray:
    """float16/bfloat16 of 16+ elements: PyTorch computes in float32 (the float32 kernel's arithmetic) and
    draws uniforms only for whole blocks; a partial block at the end takes 16 fresh uniforms and
    overwrites the last 16 values."""
    whole = n // 16 * 16
    data = np.empty(whole, dtype=np.float32)
    for start in range(0, whole, _CHUNK):
        piece = data[start:start + _CHUNK]
        piece[...] = stream.unit_float32(piece.size)
        normal_fill.fill16_float32(piece, mean, std)
    out = np.empty(n, dtype=np.float32)
    out[:whole] = data
    if n % 16:
        tail = stream.unit_float32(16)
        normal_fill.fill16_float32(tail, mean, std)
        out[n - 16:] = tail
    return _round_to(out, dtype)


def standard_normal_pairs(stream: MTStream, n: int) -> np.ndarray:
    """``n`` draws of ``normal_distribution<double>``: a cached value first, then Box-Muller pairs (cos value,
    then sin value), the last unused sin value cached for the next call."""
    out = np.empty(n, dtype=np.float64)
    start = 0
    if n and stream.next_double_normal is not None:
        out[0] = stream.next_double_normal
        stream.next_double_normal = None
        start = 1
    rest = n - start
    pairs = (rest + 1) // 2
    if pairs:
        u = stream.unit_float64(2 * pairs)
        radius = np.sqrt(-2.0 * libm.log1p(-u[1::2]))  # the C library's log1p/cos/sin, as PyTorch calls them
        theta = 2.0 * math.pi * u[0::2]
        values = np.empty(2 * pairs, dtype=np.float64)
        values[0::2] = radius * libm.cos(theta)
        values[1::2] = radius * libm.sin(theta)
        out[start:] = values[:rest]
        if rest % 2:
            stream.next_double_normal = float(values[-1])
    return out


def random_from_to(stream: MTStream, shape: tuple, low: int, high: int, wide_dtype: bool = True) -> np.ndarray:
    """``random_(low, high)`` / ``randint``: ``word % (high - low) + low``, one 32-bit word per value unless
    the range needs 64 bits (int64, float32/64 and bfloat16 tensors only, as PyTorch)."""
    n = _count(shape)
    span = int(high) - int(low)
    if span <= 0:
        raise RuntimeError(f"random_: expects 'from' to be less than 'to', got from={low}, to={high}")
    words = stream.words64(n) if span >= 2 ** 32 and wide_dtype else stream.words32(n)
    offsets = words % np.uint64(span)
    # PyTorch adds in 64-bit unsigned arithmetic and casts: the same wrap-around for ranges wider than int64's half
    return (offsets + np.uint64(int(low) % 2 ** 64)).astype(np.int64).reshape(shape)


def random_bits(stream: MTStream, shape: tuple, dtype: str) -> np.ndarray:
    """``random_()`` without bounds: [0, 2**mantissa] for floats, [0, max] for integers, 0/1 for bool."""
    n = _count(shape)
    if dtype in ("int64", "float64"):
        words = stream.words64(n)
    else:
        words = stream.words32(n)
    if dtype == "bool":
        return (words & np.uint64(1)).astype(bool).reshape(shape)
    limits = {"int64": 2 ** 63, "int32": 2 ** 31, "int16": 2 ** 15, "int8": 2 ** 7, "uint8": 2 ** 8,
              "float64": 2 ** 53 + 1, "float32": 2 ** 24 + 1, "float16": 2 ** 11 + 1, "bfloat16": 2 ** 8 + 1}
    return (words % np.uint64(limits.get(dtype, 2 ** 31))).astype(np.int64).reshape(shape)


def bernoulli_scalar(stream: MTStream, shape: tuple, p: float) -> np.ndarray:
    """``bernoulli_(p)`` with a number ``p`` (and dropout's mask): one double per element, ``u < p``.

    This is PyTorch's portable kernel, which it uses on AMD CPUs; on Intel CPUs PyTorch's MKL builds draw
    these masks from MKL's own stream instead."""
    return stream.unit_float64(_count(shape)).reshape(shape) < float(p)


def bernoulli_tensor(stream: MTStream, probs: np.ndarray) -> np.ndarray:
    """``bernoulli(p)`` with a tensor of probabilities: a float32 unit value per element for float32
    probabilities (a double for float64), ``u < p``."""
    n = probs.size
    if probs.dtype == np.float64:
        return stream.unit_float64(n).reshape(probs.shape) < probs
    return stream.unit_float32(n).reshape(probs.shape) < probs.astype(np.float32)


def exponential(stream: MTStream, shape: tuple, lambd: float) -> np.ndarray:
    """``exponential_(lambd)``: ``-1/lambd * log1p(-u)`` with a double ``u`` per element (the C library's log1p)."""
    u = stream.unit_float64(_count(shape))
    return (-1.0 / float(lambd) * libm.log1p(-u)).reshape(shape)


def cauchy(stream: MTStream, shape: tuple, median: float, sigma: float) -> np.ndarray:
    u = stream.unit_float64(_count(shape))
    return (median + sigma * libm.tan(math.pi * (u - 0.5))).reshape(shape)


def log_normal(stream: MTStream, shape: tuple, mean: float, std: float) -> np.ndarray:
    """``log_normal_``: ``exp`` of ``normal_distribution<double>`` draws (pairs with the generator's cache)."""
    return libm.exp(_fma64(standard_normal_pairs(stream, _count(shape)), float(std), float(mean))).reshape(shape)


def geometric(stream: MTStream, shape: tuple, p: float) -> np.ndarray:
    u = stream.unit_float64(_count(shape))
    return np.ceil(libm.log(u) / math.log1p(-float(p))).reshape(shape)


def permutation(stream: MTStream, n: int) -> np.ndarray:
    """``randperm(n)``: Fisher-Yates with ``word % (n - i)`` per step (64-bit words from n >= 2**32 / 20)."""
    n = int(n)
    if n <= 1:
        return np.arange(n, dtype=np.int64)
    steps = np.arange(n - 1, dtype=np.uint64)
    words = stream.words32(n - 1) if n < (2 ** 32 - 1) // 20 else stream.words64(n - 1)
    targets = (words % (np.uint64(n) - steps) + steps).astype(np.int64)
    return fisher_yates(targets, n)


def int64_seed(stream: MTStream) -> int:
    """``torch.empty((), dtype=torch.int64).random_().item()``: how PyTorch's samplers and DataLoader draw
    the seeds of their own generators."""
    return int(stream.words64(1)[0] % np.uint64(2 ** 63))


def multinomial(stream: MTStream, probs: np.ndarray, n_sample: int, replacement: bool) -> np.ndarray:
    """``torch.multinomial`` on the CPU, rows of ``probs`` (2-D, already checked): without replacement (or one
    sample) PyTorch draws ``q ~ Exp(1)`` per weight and takes the largest ``p / q`` (the exponential form of
    the Gumbel trick); with replacement each sample is a double uniform searched in the row's normalized
    running sum (accumulated in the weights' dtype, first slot whose sum reaches the draw)."""
    rows, categories = probs.shape
    if not replacement or n_sample == 1:
        q = exponential(stream, probs.shape, 1.0).astype(probs.dtype)
        keys = probs / q
        if n_sample == 1:
            return np.argmax(keys, axis=1)[:, None].astype(np.int64)
        return np.argsort(-keys, axis=1, kind="stable")[:, :n_sample].astype(np.int64)
    out = np.empty((rows, n_sample), dtype=np.int64)
    for row in range(rows):  # one row's draws depend on the stream position after the previous row's
        running = np.cumsum(probs[row], dtype=probs.dtype)
        total = running[-1]
        if total > 0:
            running = running / total
        u = stream.unit_float64(n_sample)
        out[row] = np.minimum(np.searchsorted(running.astype(np.float64), u, side="left"), categories - 1)
    return out
