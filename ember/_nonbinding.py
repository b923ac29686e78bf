"""Public functions that do not bind ``self``, as PyTorch's C builtins.

``torch.tanh``, ``torch.add``, ``torch.special.expit``, ``F.conv2d``... are C builtins: stored as a class attribute
(``class Block(nn.Module): act = torch.tanh``, ``activation_fn = torch.relu`` in a config class) and read through
an instance they stay the function itself, so ``self.act(x)`` is ``torch.tanh(x)``. A Python function binds
(``self.act(x)`` would be ``tanh(self, x)``). :func:`make` gives an ember function that does not bind: an exact
``functools.partial`` on Python < 3.13 (C code with vectorcall and no ``__get__``: ~20 ns over the function it
calls), a partial subclass whose ``__get__`` returns itself on 3.13+ (where ``partial`` starts binding).

The object keeps what programs read from a function: ``__name__``, ``__qualname__``, ``__module__``, ``__doc__``,
``__wrapped__`` (so ``inspect.signature`` shows the function's parameters), and it pickles by reference (module
and qualified name) as a function does. Which names are builtins in torch: ``ember/_torch_builtin_names.py``.

Example:
    >>> import ember
    >>> class Block:
    ...     act = ember.tanh
    >>> Block().act is ember.tanh
    True
"""
from __future__ import annotations

import functools
import sys
from typing import Any, Callable

from ember._torch_builtin_names import BUILTIN_NAMES  # noqa: F401  (re-exported: the names per namespace)

if sys.version_info < (3, 13):
    NonBinding: type = functools.partial  # exact type: its C call path (vectorcall) is kept
else:  # pragma: no cover  (partial binds like a method from 3.14, with a FutureWarning in 3.13)
    class NonBinding(functools.partial):  # type: ignore[no-redef]
        __slots__ = ()

        def __get__(self, obj: Any, objtype: Any = None) -> "NonBinding":
            return self


def _by_reference(obj: Any, protocol: int = 2) -> str:
    """``__reduce_ex__``: the qualified name, so pickle (and copy) treat the object as a global, as a function."""
    return obj.__qualname__


def make(call: Callable[..., Any], like: Callable[..., Any]) -> Any:
    """A non-binding callable that runs ``call`` and looks like ``like`` (its name, docs, module, signature)."""
    out = NonBinding(call)
    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        try:
            setattr(out, attr, getattr(like, attr))
        except AttributeError:
            pass
    out.__dict__.update({k: v for k, v in getattr(like, "__dict__", {}).items() if k != "__reduce_ex__"})
    out.__wrapped__ = like
    out.__reduce_ex__ = functools.partial(_by_reference, out)
    return out


def is_nonbinding(obj: Any) -> bool:
    """True for objects :func:`make` made."""
    return type(obj) is NonBinding and "__reduce_ex__" in getattr(obj, "__dict__", ())
