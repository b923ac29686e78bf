"""Per-thread autocast state (PyTorch's autocast TLS): enabled flag and dtype per device type.

Kept free of ember imports beyond :mod:`ember.dtypes` so that :mod:`ember.ops.dispatch` can read it
at import time. The hot path reads only ``STATE.active``: True while autocast is enabled for some
device type and not suspended (a composite op with its own policy suspends it for its body, as
PyTorch excludes the Autocast dispatch key while running an autocast-wrapped op).

Example:
    >>> from ember.amp.state import STATE
    >>> STATE.active
    False
"""
from __future__ import annotations

import threading
from typing import Any

from ember import dtypes

# Device types autocast knows; PyTorch's default lower-precision dtype for each.
DEFAULT_DTYPES = {"cpu": dtypes.bfloat16, "cuda": dtypes.float16}
# The lower-precision dtypes autocast may run ops in (PyTorch: bfloat16 and float16 on cpu and cuda).
SUPPORTED_DTYPES = (dtypes.bfloat16, dtypes.float16)


class _AutocastState(threading.local):
    """One per thread; ``threading.local`` runs ``__init__`` again in every new thread."""

    def __init__(self) -> None:
        self.enabled: dict[str, bool] = {}
        self.dtype: dict[str, Any] = dict(DEFAULT_DTYPES)
        self.cache_enabled = True
        self.nesting = 0  # open autocast regions; the cast cache is dropped when it returns to 0
        self.suspended = 0  # > 0 inside the body of a composite op that already applied its policy
        self.cache: dict = {}  # (id(weight), dtype) -> (weakref, version, grad mode, cast tensor)
        self.active = False
        self.key: tuple = ()  # what ember.compile adds to its cache key

    def refresh(self) -> None:
        """Recompute the derived fast flag and the compile-cache key after any change."""
        on = tuple(sorted((kind, self.dtype[kind].name) for kind, flag in self.enabled.items() if flag))
        self.key = on
        self.active = bool(on) and not self.suspended


STATE = _AutocastState()


def compile_key() -> tuple:
    """The autocast part of ``ember.compile``'s cache key: the device types enabled and their dtypes."""
    return STATE.key
