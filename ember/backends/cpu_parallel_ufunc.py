"""Large memory-bound NumPy passes (adds, products, fills, copies) in blocks of the first axis on ember's threads.

A NumPy ufunc runs on one core; PyTorch spreads the same pass over all of them. NumPy releases the GIL inside
its inner loops, so the same ufunc called with ``out=`` on disjoint blocks of the first axis from ember's pool
(``cpu_threads.parallel_for``: the calling thread takes the first block, idle workers sleep on a lock) uses
every core. Each element is computed by the same ufunc loop as in one call (IEEE addition, multiplication and
division round each element alone), so the results are the same bits, and the
caller's NumPy error state (``np.errstate``, per thread) holds in every block; only passes of ``MIN_PER_THREAD``
elements per thread or more split (a hand-off costs ~70 us on a VM, what an add of ~200K floats takes), smaller ones
return None and the caller runs NumPy as before. Where ember has one thread (``EMBER_CPU_THREADS=1``,
``ember.set_num_threads(1)``) every function here returns None or runs inline.

Example:
    >>> import numpy as np
    >>> x = np.ones((1024, 512), np.float32)
    >>> out = binary(np.add, x, x)
    >>> out is None or float(out[3, 7]) == 2.0
    True
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.backends.cpu_threads import num_threads, parallel_for

# Elements per thread below which the pass runs on the calling thread (threads19, docs/cpu-performance.md). A float32
# add split in two against one call, process CPU under load: 2^18 elements in all 1.6x (each thread's share ~0.8x
# the call's time, a wash with the ~70 us wake-up of this VM's sleeping worker), 2^19 1.35x, 2^21 0.95x. Whole
# steps under SCHED_FIFO, split against not: 2^18 per thread W4 1.02x, 2^19 W4 0.965x and GPT 0.969x.
MIN_PER_THREAD = 1 << 19


def _rows_per_chunk(shape: tuple, size: int) -> int:
    """Blocks of the first axis with at least ``MIN_PER_THREAD`` elements each."""
    per_row = max(1, size // max(1, shape[0]))
    return max(1, -(-MIN_PER_THREAD // per_row))


def _blocks(value: Any, ndim: int, lead: int) -> bool:
    """Whether ``value`` is sliced along the output's first axis (it spans it) or passed whole (broadcast)."""
    return value.ndim == ndim and value.shape[0] == lead


def binary(ufunc: Any, x: Any, y: Any) -> Any:
    """``ufunc(x, y)`` for two float NumPy arrays of one dtype, split over ember's threads by blocks of the
    output's first axis (an operand with fewer dims, or a first axis of 1, broadcasts whole into each block);
    None when it should not split (small, one thread, other types): then call ``ufunc(x, y)``."""
    if x.__class__ is not np.ndarray or y.__class__ is not np.ndarray:
        return None
    size = x.size if x.size >= y.size else y.size
    if size < 2 * MIN_PER_THREAD or x.dtype != y.dtype or x.dtype.kind != "f" or num_threads() <= 1:
        return None
    shape = x.shape if x.shape == y.shape else np.broadcast_shapes(x.shape, y.shape)
    if len(shape) == 0 or shape[0] < 2:
        return None
    lead, ndim = shape[0], len(shape)
    out = np.empty(shape, x.dtype)
    cut_x, cut_y = _blocks(x, ndim, lead), _blocks(y, ndim, lead)

    errors = np.geterr()

    def block(start: int, stop: int) -> None:
        with np.errstate(**errors):  # the caller's (NumPy's error state is per thread)
            ufunc(x[start:stop] if cut_x else x, y[start:stop] if cut_y else y, out=out[start:stop])

    parallel_for(block, lead, _rows_per_chunk(shape, out.size))
    return out


def add_into(buffer: Any, value: Any) -> bool:
    """``buffer += value`` (NumPy arrays, ``value`` broadcasting to ``buffer``) on ember's threads by blocks of the
    first axis; False (nothing done) when it should not split: then add on the calling thread."""
    if buffer.__class__ is not np.ndarray or value.__class__ is not np.ndarray or buffer.size < 2 * MIN_PER_THREAD \
            or buffer.ndim == 0 or buffer.shape[0] < 2 or value.dtype != buffer.dtype or num_threads() <= 1:
        return False
    lead, ndim = buffer.shape[0], buffer.ndim
    if value.ndim > ndim:
        return False
    cut = _blocks(value, ndim, lead)

    errors = np.geterr()

    def block(start: int, stop: int) -> None:
        part = buffer[start:stop]
        with np.errstate(**errors):  # the caller's (NumPy's error state is per thread)
            np.add(part, value[start:stop] if cut else value, out=part)

    parallel_for(block, lead, _rows_per_chunk(buffer.shape, buffer.size))
    return True


def zeros(shape: tuple, dtype: Any) -> Any:
    """``np.zeros(shape, dtype)``, the fill split over ember's threads when large. (glibc hands ember's large
    buffers from its heap, ``cpu.py``'s malloc thresholds, so ``np.zeros`` is a ``memset`` on one core there.)"""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    size = 1
    for extent in shape:
        size *= extent
    if size < 2 * MIN_PER_THREAD or not shape or shape[0] < 2 or num_threads() <= 1:
        return np.zeros(shape, dtype)
    out = np.empty(shape, dtype)
    parallel_for(lambda start, stop: out[start:stop].fill(0), shape[0], _rows_per_chunk(shape, size))
    return out


def contiguous(x: Any) -> Any:
    """``np.ascontiguousarray(x)`` with a large copy of a strided ``x`` (a permuted gradient before a reshape)
    split over ember's threads by blocks of its first axis; ``x`` itself when already C-contiguous."""
    if x.__class__ is not np.ndarray:  # CuPy / stand-in device arrays: their own library copies
        return x if x.flags.c_contiguous else x.copy()
    if x.flags.c_contiguous:
        return x
    if x.size < 2 * MIN_PER_THREAD or x.ndim == 0 or x.shape[0] < 2 or num_threads() <= 1:
        return np.ascontiguousarray(x)
    out = np.empty(x.shape, x.dtype)
    parallel_for(lambda start, stop: np.copyto(out[start:stop], x[start:stop]), x.shape[0],
                 _rows_per_chunk(x.shape, x.size))
    return out


def reshape(x: Any, shape: tuple) -> Any:
    """``x.reshape(shape)``: a view when NumPy can make one, else the copy ``contiguous`` makes (split over
    ember's threads when large: a permuted gradient reshaped back, one core's strided copy before)."""
    if x.__class__ is not np.ndarray or x.flags.c_contiguous or x.size < 2 * MIN_PER_THREAD:
        return x.reshape(shape)
    try:
        return x.reshape(shape, copy=False)
    except (ValueError, TypeError):  # a copy is needed (TypeError: a NumPy without reshape's copy argument)
        return contiguous(x).reshape(shape)


def copy(x: Any) -> Any:
    """``x.copy()`` (C order), split over ember's threads when large; other arrays (CuPy, the stand-in device)
    copy through their own library."""
    if x.__class__ is not np.ndarray or x.size < 2 * MIN_PER_THREAD or x.ndim == 0 or x.shape[0] < 2 or num_threads() <= 1:
        return x.copy()
    out = np.empty(x.shape, x.dtype)
    parallel_for(lambda start, stop: np.copyto(out[start:stop], x[start:stop]), x.shape[0],
                 _rows_per_chunk(x.shape, x.size))
    return out
