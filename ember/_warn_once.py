"""Warnings as torch's ``TORCH_WARN_ONCE`` prints them: once per process (per message), at the program's line
(the first frame outside ember), and every time while ``torch.set_warn_always(True)`` is on.

Example:
    >>> from ember._warn_once import warn_once
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     warn_once("doctest-only message"); warn_once("doctest-only message")
    >>> len(w)
    1
"""
from __future__ import annotations

import os
import sys
import warnings

_EMBER_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_WARNED: set = set()
WARN_ALWAYS = [False]  # torch.set_warn_always writes it (ember.surface.constants)


def warn_once(message: str, category: type = UserWarning) -> None:
    """``message`` once per process (or always under ``set_warn_always(True)``), at the program's line."""
    if message in _WARNED and not WARN_ALWAYS[0]:
        return
    _WARNED.add(message)
    frame, level = sys._getframe(1), 2  # stacklevel 2 is warn_once's caller
    while frame is not None and frame.f_code.co_filename.startswith(_EMBER_DIR):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
