"""``torch._dynamo``: the few names programs touch (``config``, ``reset``, ``disable``, ``mark_dynamic``).

ember.compile has no bytecode tracer: ``config`` keeps PyTorch's settings' names and defaults so programs that
set them run, and ember.compile does not read them (docs/pytorch-compat.md says which matter nowhere here).
``mark_dynamic``/``mark_static`` return at once: ember's traced graphs are re-traced per input shape.

Example:
    >>> import ember
    >>> ember._dynamo.config.cache_size_limit = 64
    >>> ember._dynamo.config.cache_size_limit
    64
"""
from __future__ import annotations

from typing import Any

from ember._dynamo import config
from ember.compiler import allow_in_graph, assume_constant_result, disable, is_compiling, reset  # noqa: F401


def mark_dynamic(t: Any, index: Any, *, min: Any = None, max: Any = None, specialize_on: Any = None) -> None:  # noqa: A002
    """Accepted: ember re-traces per input shape, so there is no static size to relax."""


def mark_static(t: Any, index: Any = None) -> None:
    """Accepted: sizes are static in each traced graph already."""


__all__ = ["config", "reset", "disable", "allow_in_graph", "assume_constant_result", "is_compiling", "mark_dynamic",
           "mark_static"]
