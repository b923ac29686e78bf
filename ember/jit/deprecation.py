"""torch 2.13's deprecation of TorchScript: ``torch.jit.trace``, ``trace_module``, ``script``,
``script_method``, ``save`` and ``load`` warn a ``DeprecationWarning`` on every call, in torch's words.

Python's default filters hide a DeprecationWarning raised outside ``__main__`` (so scripts print nothing, in
both); test suites show them, and ones run with ``filterwarnings = error`` fail on them in both (geoopt's
``@torch.jit.script`` at import). ember's own callers use the functions' private forms, which do not warn.

Example:
    >>> import warnings, ember
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     _ = ember.jit.script(lambda x: x)
    >>> str(seen[0].message)
    '`torch.jit.script` is deprecated. Please switch to `torch.compile` or `torch.export`.'
"""
from __future__ import annotations

import sys
import warnings


def deprecated(name: str, replacement: str) -> None:
    """Warn as torch 2.13's ``torch.jit.<name>`` does (its Python 3.14 wording there)."""
    if sys.version_info >= (3, 14):
        text = f"`torch.jit.{name}` is not supported in Python 3.14+ and may break. Please switch to {replacement}."
    else:
        text = f"`torch.jit.{name}` is deprecated. Please switch to {replacement}."
    warnings.warn(text, DeprecationWarning, stacklevel=2)  # at the jit function, as torch


def script_method(fn: object) -> object:
    """``torch.jit.script_method``: warns, and returns ``fn`` (ember's ScriptModule compiles ``forward`` itself)."""
    deprecated("script_method", "`torch.compile` or `torch.export`")
    return fn
