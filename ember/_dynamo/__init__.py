"""``torch._dynamo``: the handful of names model code imports from it (``disable``, ``is_compiling``,
``mark_dynamic``, ``config``, ``utils.is_compile_supported``), on ember's compiler (see :mod:`ember.compiler`).

Example:
    >>> import ember
    >>> ember._dynamo.utils.is_compile_supported("cpu")
    True
"""
from __future__ import annotations

from typing import Any

from ember._dynamo import config, eval_frame, exc, utils  # noqa: F401
from ember.compiler import (  # noqa: F401
    allow_in_graph, assume_constant_result, disable, is_compiling, list_backends, reset, set_stance,
)

__all__ = ["allow_in_graph", "assume_constant_result", "config", "disable", "exc", "is_compiling", "list_backends", "mark_dynamic",
           "mark_static", "maybe_mark_dynamic", "reset", "utils"]


def mark_dynamic(t: Any, index: Any, *, hint_override: Any = None, min: Any = None, max: Any = None,  # noqa: A002
                 specialize_on: Any = None) -> None:
    """Nothing to mark: ember.compile traces each new input shape into its own graph."""


def maybe_mark_dynamic(t: Any, index: Any) -> None:
    """As :func:`mark_dynamic`."""


def mark_static(t: Any, index: Any = None) -> None:
    """Nothing to mark: ember.compile specializes on shapes already."""
