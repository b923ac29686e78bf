"""Devices: ``ember.device('cpu')``, ``ember.device('cuda:0')``.

Example:
    >>> import ember
    >>> ember.device("cpu")
    device(type='cpu')
"""
from __future__ import annotations

from typing import Any

from ember.backends import Backend, get_backend


class device:
    """A device type plus an optional index. Equal devices compare equal and hash alike."""

    __slots__ = ("type", "index", "backend", "xp")

    def __init__(self, type_or_str: "str | device", index: int | None = None) -> None:
        if isinstance(type_or_str, device):
            type_or_str, index = type_or_str.type, type_or_str.index
        if not isinstance(type_or_str, str):
            raise TypeError(f"ember.device: expected a string such as 'cpu' or 'cuda:0', got {type_or_str!r}")
        kind = type_or_str
        if ":" in kind:
            kind, idx = kind.split(":", 1)
            if index is not None:
                raise ValueError(f"ember.device: index given twice in {type_or_str!r} and index={index}")
            index = int(idx)
        self.type = kind
        self.index = index
        try:
            self.backend: Backend = get_backend(kind)
            self.xp = self.backend.xp
        except RuntimeError:
            if kind not in _DEFERRABLE:
                raise
            # As in PyTorch, naming a device never fails (torch.device('cuda') is a default argument in library
            # code); using it does: the first read of its backend raises the backend's own error.
            self.backend = _Unresolved(self, "backend")
            self.xp = _Unresolved(self, "xp")

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except (RuntimeError, ValueError):  # "npu", "xpu", not a device string: unequal, never an error
                return False
        if not isinstance(other, device):
            return NotImplemented
        return self.type == other.type and (self.index or 0) == (other.index or 0)

    def __hash__(self) -> int:
        return hash((self.type, self.index or 0))

    def __reduce__(self) -> tuple:  # by name: the backend and its array module are not picklable
        return (device, (str(self),))

    def __enter__(self) -> "device":
        """``with ember.device("meta"):`` makes this the default device of factory functions inside, as PyTorch."""
        _DEFAULT_STACK.append(_CACHE[None])
        set_default(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        set_default(_DEFAULT_STACK.pop())


_DEFERRABLE = ("cuda",)  # device types that exist but may lack hardware here


class _Unresolved:
    """Stands for the backend (or array namespace) of a device whose hardware was missing when it was named:
    any use resolves it again, raising the backend's error while it is still missing."""

    __slots__ = ("_device", "_slot")

    def __init__(self, owner: device, slot: str) -> None:
        self._device, self._slot = owner, slot

    def __getattr__(self, name: str) -> Any:
        backend = get_backend(self._device.type)  # raises "no CUDA device is available ..." when still missing
        self._device.backend, self._device.xp = backend, backend.xp
        return getattr(getattr(self._device, self._slot), name)


CPU = device("cpu")
_CACHE: dict[Any, device] = {"cpu": CPU, None: CPU}  # None: the default device (factories without device=)
_DEFAULT_STACK: list = []


def set_default(value: Any) -> None:
    """Make ``value`` (None: the CPU) the device of tensors created without ``device=``."""
    _CACHE[None] = CPU if value is None else to_device(value)


def get_default() -> device:
    return _CACHE[None]


def to_device(value: Any) -> device:
    """Normalize None / str / device to a cached device object (the hot path avoids parsing)."""
    found = _CACHE.get(value) if not isinstance(value, device) else value
    if found is None:
        found = device(value)
        if isinstance(value, str):
            _CACHE[value] = found
    return found
