"""A restricted unpickler for data files that are pickles (CIFAR's python batches).

Only plain containers, strings, bytes, numbers and NumPy arrays can be built; any other global the
file names (``os.system``, ``builtins.eval``, a class of some package, ...) is refused with an error
naming it, so reading a data set never runs code from the file.
"""
from __future__ import annotations

import io
import pickle
from typing import Any

# (module, name) pairs a pickled NumPy array needs; numpy 2 moved numpy.core to numpy._core.
_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("collections", "OrderedDict"), ("builtins", "set"), ("builtins", "frozenset"),
    ("__builtin__", "set"),
}


def _latin1_bytes(text: str, encoding: str = "utf-8") -> bytes:
    """What Python 3's protocol-2 pickles call to rebuild ``bytes`` (``_codecs.encode(text, "latin1")``),
    limited to that use: a str and the latin-1 codec, nothing else."""
    if not isinstance(text, str) or encoding.replace("-", "").lower() != "latin1":
        raise pickle.UnpicklingError(f"refusing _codecs.encode({type(text).__name__}, {encoding!r}) in a data file")
    return text.encode("latin1")


class RefusedGlobal(pickle.UnpicklingError):
    """The pickle asked for a global outside the allow-list."""


class _Restricted(pickle.Unpickler):
    def __init__(self, file: Any, source: str, **kwargs: Any) -> None:
        super().__init__(file, **kwargs)
        self._source = source

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("_codecs", "encode"):
            return _latin1_bytes
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise RefusedGlobal(f"{self._source}: refusing to load global {module}.{name}: data files may only hold "
                            "dicts, lists, strings, bytes, numbers and NumPy arrays (the file may be corrupt or "
                            "malicious)")


def load_data_pickle(data: bytes, source: str, encoding: str = "latin1") -> Any:
    """Unpickle ``data`` allowing only plain data and NumPy arrays (``encoding`` as for ``pickle.load``:
    latin1 reads Python 2 pickles such as CIFAR's)."""
    return _Restricted(io.BytesIO(data), source, encoding=encoding).load()
