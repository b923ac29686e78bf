"""Python objects over the socket mesh: pickled by the sender, rebuilt through an allow-list unpickler.

The object collectives (``all_gather_object``, ``broadcast_object_list``, ``gather_object``,
``scatter_object_list``, ``send_object_list``/``recv_object_list``) on a ``"gloo"`` group accept bytes
from the network, so the receiver never runs what a pickle names: only plain data can be rebuilt
(None, bools, numbers, strings, bytes, lists, tuples, dicts, sets, ``collections`` containers,
``datetime`` values, NumPy arrays and scalars, ember tensors and dtypes). Any other global is refused
with :class:`RefusedObject` naming it. A program that sends its own classes allows them explicitly,
on every rank, with :func:`allow` (torch unpickles anything; ember asks first).

Example:
    >>> from ember.distributed.gloo.objects import dumps, loads
    >>> loads(dumps({"loss": 0.5, "steps": [1, 2]}), "all_gather_object from rank 1")
    {'loss': 0.5, 'steps': [1, 2]}
"""
from __future__ import annotations

import io
import pickle
from typing import Any

_ALLOWED: set[tuple[str, str]] = {
    *(("builtins", n) for n in ("set", "frozenset", "complex", "slice", "range", "bytearray", "list", "dict",
                                "tuple", "int", "float", "str", "bool", "bytes")),
    *(("collections", n) for n in ("OrderedDict", "defaultdict", "deque", "Counter")),
    *(("datetime", n) for n in ("timedelta", "datetime", "date", "time", "timezone")),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy._core.numeric", "_frombuffer"), ("numpy.core.numeric", "_frombuffer"),  # pickle protocol 5 arrays
    ("ember.serialization.pickling", "rebuild_tensor"), ("ember.dtypes", "_lookup_by_name"),
}


class RefusedObject(pickle.UnpicklingError):
    """A received pickle named a global outside the allow-list."""


def allow(*objects: Any) -> None:
    """Let received pickles rebuild these classes or functions (call on every rank, before the collective).

    Example: ``allow(MyMetrics)`` for a dataclass sent with ``all_gather_object``."""
    for obj in objects:
        _ALLOWED.add((obj.__module__, obj.__qualname__))


class _Restricted(pickle.Unpickler):
    def __init__(self, data: bytes, source: str) -> None:
        super().__init__(io.BytesIO(data))
        self._source = source

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise RefusedObject(f"{self._source}: refusing to rebuild {module}.{name} from bytes received over the network "
                            "(ember's object collectives rebuild only plain data, NumPy arrays and ember tensors); "
                            f"if the sender is trusted, call ember.distributed.gloo.objects.allow({name}) on every rank")

    def persistent_load(self, pid: Any) -> Any:
        raise RefusedObject(f"{self._source}: refusing a persistent id in a received pickle")


def dumps(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def loads(data: Any, source: str) -> Any:
    """Rebuild an object from received bytes, allowing only the globals above."""
    return _Restricted(bytes(data), source).load()
