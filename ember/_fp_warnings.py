"""Floating-point exceptions are silent, as in PyTorch: NumPy's ``RuntimeWarning``s raised inside ember are muted.

``x / 0``, ``log(0)``, ``inf - inf``, ``exp(1000)`` and a float64 -> float32 cast of 1e300 give inf/NaN in PyTorch
without a word; NumPy computes the same values and warns ("divide by zero encountered in divide"), attributed to
ember's op files or, for NumPy's Python-level functions ember calls (``np.fft``, ``np.linalg``, ``np.mean``), to
NumPy's own files. How ember mutes them, at no cost per op:

* one ``warnings`` filter, "ignore" for NumPy's floating-point messages raised by a module of ember, or by a module
  of NumPy whose nearest caller outside NumPy is ember (the module field is a matcher object; the stack is looked
  at only when such a warning is raised). ``np.errstate`` around each op would cost ~1 us, and even a bare
  context-variable switch ~0.1 us: a tenth of a small op;
* the filter stays first: a filter added later (``warnings.simplefilter("error")``, pytest's ``-W error`` and
  ``filterwarnings`` ini lines, applied per test) and ``catch_warnings`` exits (which put back a list saved before
  ember was imported, as pytest's collection does) all call ``warnings._filters_mutated``, which ember wraps to
  move its filter back to the front.

NumPy's own error state (``np.seterr``/``np.geterr``) is never changed, and the user's NumPy code outside ember
keeps NumPy's behaviour (its warnings, a user's "error" filter).

Example:
    >>> import warnings, ember
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error")
    ...     ember.tensor([1.0, 0.0]) / 0
    tensor([inf, nan])
"""
from __future__ import annotations

import re
import sys
import warnings
from typing import Any

# NumPy's floating-point-error messages (np.errstate categories divide, over, under, invalid) and its reductions'
# warnings for empty or all-NaN input (torch gives NaN silently)
_MESSAGE = re.compile(r"(divide by zero|overflow|underflow|invalid value) encountered in |Mean of empty slice|"
                      r"Degrees of freedom <= 0 for slice|All-NaN (slice|axis) encountered", re.I)


def _from_ember(module: str) -> bool:
    return module == "ember" or module.startswith("ember.")


class _EmberModules:
    """The filter's module field: ember's modules, and NumPy's modules while ember called them (C's ``warnings``
    calls ``.match(module_name)`` on it, as on a compiled regex)."""

    def match(self, module: str) -> bool:
        if _from_ember(module):
            return True
        if not (module == "numpy" or module.startswith("numpy.")):
            return False
        frame = sys._getframe(1)  # the frame that raised the warning (this method is called from C)
        while frame is not None:
            name = frame.f_globals.get("__name__", "") or ""
            if not (name == "numpy" or name.startswith("numpy.")):
                return _from_ember(name)
            frame = frame.f_back
        return False

    def __repr__(self) -> str:
        return "ember-and-numpy-called-by-ember"


FILTER = ("ignore", _MESSAGE, RuntimeWarning, _EmberModules(), 0)


def _to_front() -> None:
    filters = warnings.filters
    if not filters or filters[0] is not FILTER:
        try:
            filters.remove(FILTER)
        except ValueError:
            pass
        filters.insert(0, FILTER)


_ORIGINAL_MUTATED: Any = None


def _filters_mutated() -> None:
    """``warnings._filters_mutated`` as wrapped by ember: the filter list changed; ember's filter first again."""
    _to_front()
    _ORIGINAL_MUTATED()


def install() -> None:
    """Put the filter at the front of the filter list and keep it there (idempotent)."""
    global _ORIGINAL_MUTATED
    original = getattr(warnings, "_filters_mutated", None)
    if original is not None and original is not _filters_mutated and callable(original):
        _ORIGINAL_MUTATED = original
        warnings._filters_mutated = _filters_mutated  # type: ignore[attr-defined]
    _to_front()
    if _ORIGINAL_MUTATED is not None:
        _ORIGINAL_MUTATED()  # the C module caches filter decisions per version: a new version
