"""PyTorch's allow-list for ``weights_only`` loading: ``add_safe_globals``, ``safe_globals``, ...

By default ``ember.load`` (like ``torch.load`` since 2.6) unpickles only tensors, containers,
numbers, strings and a few torch types. A user who trusts a class or function in a file allows it
here, by object (its ``module.qualname`` is what the pickle names) or by ``(object, "module.name")``
when the pickle names it differently.

Example:
    >>> import collections
    >>> with safe_globals([collections.Counter]):
    ...     "collections.Counter" in [name for name, _ in _entries()]
    True
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

_ALLOWED: dict[str, Any] = {}
_LOCAL = threading.local()


def _name_of(obj: Any) -> str:
    module = getattr(obj, "__module__", None)
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if not module or not name:
        raise TypeError(f"add_safe_globals: {obj!r} has no __module__/__qualname__; pass (obj, 'module.name')")
    return f"{module}.{name}"


def _normalize(items: Any) -> dict[str, Any]:
    if not isinstance(items, (list, tuple)):
        raise TypeError("safe globals must be given as a list of objects or (object, 'module.name') pairs")
    out = {}
    for item in items:
        if isinstance(item, tuple):
            if len(item) != 2 or not isinstance(item[1], str):
                raise TypeError(f"safe global {item!r}: expected (object, 'module.name')")
            out[item[1]] = item[0]
        else:
            out[_name_of(item)] = item
    return out


def add_safe_globals(safe_globals: list) -> None:
    """Allow these classes/functions in ``weights_only=True`` loads (``torch.serialization.add_safe_globals``)."""
    _ALLOWED.update(_normalize(safe_globals))


def get_safe_globals() -> list:
    """The user-allowed globals (objects, or (object, name) pairs where the name differs)."""
    return [obj if _safe_name(obj) == name else (obj, name) for name, obj in _entries()]


def _safe_name(obj: Any) -> str | None:
    try:
        return _name_of(obj)
    except TypeError:
        return None


def clear_safe_globals() -> None:
    """Forget every global added with :func:`add_safe_globals`."""
    _ALLOWED.clear()


@contextlib.contextmanager
def safe_globals(safe_globals: list) -> Iterator[None]:
    """Allow these globals inside the ``with`` block only (this thread)."""
    stack = getattr(_LOCAL, "stack", None)
    if stack is None:
        stack = _LOCAL.stack = []
    stack.append(_normalize(safe_globals))
    try:
        yield
    finally:
        stack.pop()


def _entries() -> list[tuple[str, Any]]:
    merged = dict(_ALLOWED)
    for layer in getattr(_LOCAL, "stack", None) or []:
        merged.update(layer)
    return list(merged.items())


def lookup(full_name: str) -> tuple[bool, Any]:
    """(True, object) when ``full_name`` was allowed by the user, else (False, None)."""
    for layer in reversed(getattr(_LOCAL, "stack", None) or []):
        if full_name in layer:
            return True, layer[full_name]
    if full_name in _ALLOWED:
        return True, _ALLOWED[full_name]
    return False, None
