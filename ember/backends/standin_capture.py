"""CUDA-graph capture on the stand-in device: record kernels, refuse what CUDA refuses, replay.

A CUDA stream capture does not run anything: each kernel launch is recorded into a graph, and the
memory it writes holds garbage until the graph is launched. Host synchronizations (``.item()``, a
device-to-host copy, ``nonzero``'s count), host-to-device copies of host data and random numbers
drawn with a host-side counter are refused (CuPy raises ``cudaErrorStreamCaptureUnsupported``; a
copy from pageable host memory would otherwise bake a buffer the pool later reuses). This module
makes the stand-in device (:mod:`ember.backends.standin`) behave the same way, so CI tests the
capture logic of :mod:`ember.cuda_graphs` and :mod:`ember.graph.cuda_graph_step` without a GPU:

- during a capture every stand-in operation still computes (NumPy needs values to know shapes), and
  is recorded as a *kernel*: a new array's kernel recomputes it and copies the result into that
  array; an in-place operation's kernel runs it again on the same arrays; a view records nothing
  (it aliases memory, as on the GPU);
- when the capture ends, memory is put back as CUDA would leave it: arrays that existed before
  and were written during the capture get their old contents back, arrays allocated during the
  capture are poisoned (NaN, or a sentinel for integers), so code that reads a captured result
  before replaying fails its test;
- :meth:`Capture.replay` runs the kernels in order (``graph.replay()``).

Example:
    >>> from ember.backends import standin
    >>> x = standin.xp.ones(3)
    >>> g = standin.BACKEND.capture_begin(); y = x * 2 + 1; g = standin.BACKEND.capture_end()
    >>> bool(standin.xp.isnan(y).all())   # nothing ran yet
    True
    >>> g.replay(); y.tolist()
    [3.0, 3.0, 3.0]
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

# The active capture (one at a time, as one capturing stream per thread in ember's use).
ACTIVE: "Capture | None" = None

# CUDA's error for an operation a capturing stream does not allow (CuPy raises it as CUDARuntimeError).
_UNSUPPORTED = "cudaErrorStreamCaptureUnsupported: operation not permitted when stream is capturing"

# Functions whose first argument is written in place.
_INPLACE_FIRST = frozenset({"copyto", "place", "putmask", "put", "put_along_axis", "fill_diagonal"})
# Methods that write their array in place.
INPLACE_METHODS = frozenset({"fill", "sort", "put", "partition"})
# Functions whose output shape depends on the data: CuPy reads a count back to the host (a sync).
_DATA_SHAPED = frozenset({"nonzero", "argwhere", "flatnonzero", "unique", "unique_all", "unique_counts",
                          "unique_inverse", "unique_values", "extract", "compress", "trim_zeros"})


class CaptureError(RuntimeError):
    """What a capturing CUDA stream raises for an operation it does not allow."""


def root(array: np.ndarray) -> np.ndarray:
    """The array owning ``array``'s memory (following NumPy's ``base`` chain)."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _arrays(value: Any, out: list) -> list:
    """Every NumPy array in ``value`` (nested lists/tuples/dicts)."""
    if isinstance(value, np.ndarray):
        out.append(value)
    elif type(value) is list or isinstance(value, tuple):
        for v in value:
            _arrays(v, out)
    elif type(value) is dict:
        for v in value.values():
            _arrays(v, out)
    return out


class Capture:
    """One capture in progress, then the recorded graph (``replay``)."""

    def __init__(self) -> None:
        self.kernels: list[Callable[[], None]] = []
        self.saved: dict[int, tuple] = {}   # id(root) -> (root, copy before its first captured write)
        self.fresh: dict[int, np.ndarray] = {}  # id(root) -> arrays allocated during the capture
        self.error: str | None = None  # the first refused operation: the capture is invalidated
        self.ended = False

    # ---- refusing ----------------------------------------------------------------------------------
    def refuse(self, what: str) -> CaptureError:
        """Invalidate the capture (CUDA does: ``end_capture`` then fails too) and return the error."""
        message = f"{_UNSUPPORTED} ({what}; ember's stand-in CUDA device, as CUDA)"
        if self.error is None:
            self.error = message
        return CaptureError(message)

    # ---- recording -----------------------------------------------------------------------------------
    def _written(self, array: np.ndarray) -> None:
        """Before a captured in-place write: keep the old contents of memory that existed before."""
        owner = root(array)
        key = id(owner)
        if key not in self.fresh and key not in self.saved:
            self.saved[key] = (owner, owner.copy())

    def allocated(self, array: np.ndarray) -> None:
        """An array made during the capture (``cupy.empty``): poisoned when the capture ends."""
        self.fresh[id(root(array))] = root(array)

    def call(self, fn: Callable, name: str, args: tuple, kwargs: dict, inplace: Any = None,
             inputs: tuple = ()) -> Any:
        """Run ``fn(*args, **kwargs)`` on NumPy arrays and record it as a kernel; returns NumPy's result.

        ``inplace``: the array the call writes (a method's own array, ``x[...] = v``); ``out=`` and the
        functions of :data:`_INPLACE_FIRST` are found here. ``inputs``: arrays the call reads besides its
        arguments (a bound method's array)."""
        if name in _DATA_SHAPED:
            raise self.refuse(f"{name}: its result's shape depends on the data, which CuPy reads back to the host")
        targets = _arrays(kwargs.get("out"), [])
        if inplace is not None:
            targets.append(inplace)
        if name in _INPLACE_FIRST and args and isinstance(args[0], np.ndarray):
            targets.append(args[0])
        for t in targets:
            self._written(t)
        result = _normalize(fn(*args, **kwargs))
        if targets:
            self.kernels.append(lambda: fn(*args, **kwargs))
            return result
        results = _arrays(result if type(result) is list or isinstance(result, tuple) else [result], [])
        if not results:
            return result
        read = {id(root(a)) for a in _arrays(args, _arrays(kwargs, list(inputs)))}
        made = [k for k, r in enumerate(results) if id(root(r)) not in read]  # the others are views of an input
        if made:
            for k in made:
                self.allocated(results[k])
            self.kernels.append(_recompute(fn, args, kwargs, [(k, results[k]) for k in made]))
        return result

    def end(self) -> None:
        """Leave memory as an unexecuted capture does: writes undone, new arrays poisoned."""
        self.ended = True
        for owner, before in self.saved.values():
            owner[...] = before
        for owner in self.fresh.values():
            poison(owner)

    def replay(self) -> None:
        """Run the recorded kernels (``graph.replay()``)."""
        for kernel in self.kernels:
            kernel()


def _recompute(fn: Callable, args: tuple, kwargs: dict, made: list) -> Callable[[], None]:
    """A kernel writing new arrays: recompute, copy each result (by its position among the call's arrays)
    into the array the capture allocated for it (the graph's memory)."""
    def kernel() -> None:
        result = _normalize(fn(*args, **kwargs))
        results = _arrays(result if type(result) is list or isinstance(result, tuple) else [result], [])
        for k, target in made:
            np.copyto(target, results[k])

    return kernel


def _normalize(result: Any) -> Any:
    """NumPy scalars as 0-d arrays (the stand-in wraps them so: CuPy's reductions return 0-d arrays), so
    the capture sees every array a call makes."""
    if isinstance(result, np.generic):
        return np.asarray(result)
    if type(result) is list:
        return [_normalize(r) for r in result]
    if isinstance(result, tuple):  # NumPy's named results too: the stand-in returns plain tuples, as CuPy
        return tuple(_normalize(r) for r in result)
    return result


def poison(array: np.ndarray) -> None:
    """Fill memory the capture allocated with values no computation gives by chance."""
    kind = array.dtype.kind
    if kind in "fc":
        array[...] = np.nan
    elif kind in "iu":
        array[...] = np.iinfo(array.dtype).max // 3
    elif kind == "b":
        array[...] = True
