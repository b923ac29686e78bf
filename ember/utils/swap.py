"""``torch.utils.swap_tensors``: two tensor objects exchange everything they are, keeping their identities.

Everything a Python object holding either tensor sees moves: the class (Tensor/Parameter/subclass), the
instance ``__dict__``, and every slot (data, device, requires_grad, grad, grad_fn, version counter, view
base, hooks). So an optimizer that holds ``param`` sees the new values after
``swap_tensors(param, new_param)``; ``nn.Module``'s conversions use it when
``torch.__future__.set_swap_module_params_on_conversion(True)`` is set.

As PyTorch, a tensor with a live weak reference is refused (the weak reference would silently point at the
other tensor's contents).

Example:
    >>> import ember
    >>> a, b = ember.arange(2), ember.arange(3)
    >>> swap_tensors(a, b)
    >>> a.tolist(), b.tolist()
    ([0, 1, 2], [0, 1])
"""
from __future__ import annotations

import weakref

from ember.tensor import Tensor

__all__ = ["swap_tensors"]


def _slots(cls: type) -> list[str]:
    names: list[str] = []
    for klass in cls.__mro__:
        for name in getattr(klass, "__slots__", ()):
            if name not in ("__weakref__", "__dict__") and name not in names:
                names.append(name)
    return names


def swap_tensors(t1: Tensor, t2: Tensor) -> None:
    """Swap the contents (class, ``__dict__``, data and autograd state) of ``t1`` and ``t2`` in place."""
    if not isinstance(t1, Tensor) or not isinstance(t2, Tensor):
        raise TypeError(f"swap_tensors: expected two Tensors, got {type(t1).__name__} and {type(t2).__name__}")
    if t1 is t2:
        return
    for name, t in (("t1", t1), ("t2", t2)):
        if weakref.getweakrefcount(t):
            raise RuntimeError(f"Cannot swap {name} because it has weakref associated with it")
    cls1, cls2 = type(t1), type(t2)
    names = _slots(cls1)
    if names != _slots(cls2):
        raise RuntimeError(f"swap_tensors: {cls1.__name__} and {cls2.__name__} have different slots; they cannot "
                           "exchange contents")
    missing = object()
    values1 = {n: getattr(t1, n, missing) for n in names}
    values2 = {n: getattr(t2, n, missing) for n in names}
    dict1, dict2 = dict(t1.__dict__), dict(t2.__dict__)
    t1.__class__, t2.__class__ = cls2, cls1
    for target, values in ((t1, values2), (t2, values1)):
        for n, v in values.items():
            if v is missing:
                if hasattr(target, n):
                    object.__delattr__(target, n)
            else:
                object.__setattr__(target, n, v)
    t1.__dict__.clear()
    t1.__dict__.update(dict2)
    t2.__dict__.clear()
    t2.__dict__.update(dict1)
