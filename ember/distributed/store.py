"""Key-value stores for rendezvous, with ``torch.distributed``'s names: Store, HashStore, FileStore, PrefixStore.

A store is how processes that know nothing of each other but one address (or one file) find each
other: each writes what the others need (its listening address) and reads theirs, waiting until it
is there. :class:`TCPStore` (in :mod:`ember.distributed.tcp_store`) serves one over a socket.

Semantics follow torch's: values are bytes (``str`` values are UTF-8 encoded), ``get`` waits for a
missing key up to the store's timeout and then raises :class:`DistStoreError`
(``wait timeout after 300ms, keys: /name``), ``add`` keeps an integer in decimal text,
``compare_set(key, expected, desired)`` sets ``desired`` when the current value is ``expected`` (an
absent key matches ``""``) and returns the value now held (``expected`` itself when the key is
absent and ``expected`` is not empty, as torch does).

Example:
    >>> from ember.distributed.store import HashStore
    >>> s = HashStore(); s.set("a", "1"); s.add("n", 5); s.add("n", 2)
    7
    >>> s.get("a"), s.num_keys()
    (b'1', 2)
"""
from __future__ import annotations

import fcntl
import os
import struct
import threading
import time
from datetime import timedelta
from typing import Any, Iterable

from ember.distributed.watchdog import DistError

DEFAULT_STORE_TIMEOUT = timedelta(seconds=300)  # torch's default for stores


class DistStoreError(DistError):
    """A store operation failed: a wait for keys timed out, or the store cannot be reached."""

    __module__ = "ember.distributed"


def as_bytes(value: Any, op: str) -> bytes:
    """A store value as bytes (str is UTF-8, as torch's pybind layer does)."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, list) and all(isinstance(v, int) for v in value):  # torch accepts a list of byte values
        return bytes(value)
    raise TypeError(f"{op}: store values are str or bytes, got {type(value).__name__}")


def as_timedelta(timeout: Any, op: str) -> timedelta:
    if isinstance(timeout, timedelta):
        return timeout
    if isinstance(timeout, (int, float)):
        return timedelta(seconds=float(timeout))
    raise TypeError(f"{op}: timeout must be a datetime.timedelta, got {type(timeout).__name__}")


def timeout_error(keys: Iterable[str], timeout: timedelta) -> DistStoreError:
    """torch's message for a wait that ran out of time."""
    names = ", ".join("/" + k for k in keys)
    return DistStoreError(f"wait timeout after {int(timeout.total_seconds() * 1000)}ms, keys: {names}")


class Store:
    """Base class: the timeout shared by ``get`` and ``wait``; subclasses implement the operations."""

    def __init__(self, timeout: Any = DEFAULT_STORE_TIMEOUT) -> None:
        self._timeout = as_timedelta(timeout, type(self).__name__)

    @property
    def timeout(self) -> timedelta:
        return self._timeout

    def set_timeout(self, timeout: Any) -> None:
        self._timeout = as_timedelta(timeout, "set_timeout")

    def check(self, keys: list[str]) -> bool:
        """True when every key is present (does not wait)."""
        raise NotImplementedError

    def multi_get(self, keys: list[str]) -> list[bytes]:
        return [self.get(k) for k in keys]

    def multi_set(self, keys: list[str], values: list[Any]) -> None:
        if len(keys) != len(values):
            raise ValueError(f"multi_set: {len(keys)} keys but {len(values)} values")
        for k, v in zip(keys, values):
            self.set(k, v)

    def append(self, key: str, value: Any) -> None:
        """Append bytes to the key's value (creating it)."""
        raise NotImplementedError

    def has_extended_api(self) -> bool:
        return True


class HashStore(Store):
    """An in-process store (threads of one process share it), torch's ``HashStore``."""

    def __init__(self) -> None:
        super().__init__()
        self._data: dict[str, bytes] = {}
        self._changed = threading.Condition()

    def set(self, key: str, value: Any) -> None:
        with self._changed:
            self._data[key] = as_bytes(value, "HashStore.set")
            self._changed.notify_all()

    def get(self, key: str) -> bytes:
        self.wait([key])
        with self._changed:
            return self._data[key]

    def add(self, key: str, amount: int) -> int:
        with self._changed:
            value = int(self._data.get(key, b"0")) + int(amount)
            self._data[key] = str(value).encode()
            self._changed.notify_all()
            return value

    def append(self, key: str, value: Any) -> None:
        with self._changed:
            self._data[key] = self._data.get(key, b"") + as_bytes(value, "HashStore.append")
            self._changed.notify_all()

    def compare_set(self, key: str, expected_value: Any, desired_value: Any) -> bytes:
        expected, desired = as_bytes(expected_value, "compare_set"), as_bytes(desired_value, "compare_set")
        with self._changed:
            current = self._data.get(key)
            if current is None:
                if expected:
                    return expected
                self._data[key] = desired
            elif current == expected:
                self._data[key] = desired
            self._changed.notify_all()
            return self._data[key]

    def delete_key(self, key: str) -> bool:
        with self._changed:
            return self._data.pop(key, None) is not None

    def num_keys(self) -> int:
        with self._changed:
            return len(self._data)

    def check(self, keys: list[str]) -> bool:
        with self._changed:
            return all(k in self._data for k in keys)

    def wait(self, keys: list[str], timeout: Any = None) -> None:
        limit = self.timeout if timeout is None else as_timedelta(timeout, "wait")
        deadline = time.monotonic() + limit.total_seconds()
        with self._changed:
            while not all(k in self._data for k in keys):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise timeout_error([k for k in keys if k not in self._data], limit)
                self._changed.wait(left)


class PrefixStore(Store):
    """Every key of ``store`` seen under ``prefix + "/"`` (torch's ``PrefixStore``)."""

    def __init__(self, prefix: str, store: Store) -> None:
        super().__init__(store.timeout)
        self.underlying_store = store
        self._prefix = prefix

    def _k(self, key: str) -> str:
        return f"{self._prefix}/{key}"

    @property
    def timeout(self) -> timedelta:
        return self.underlying_store.timeout

    def set_timeout(self, timeout: Any) -> None:
        self.underlying_store.set_timeout(timeout)

    def set(self, key: str, value: Any) -> None:
        self.underlying_store.set(self._k(key), value)

    def get(self, key: str) -> bytes:
        return self.underlying_store.get(self._k(key))

    def add(self, key: str, amount: int) -> int:
        return self.underlying_store.add(self._k(key), amount)

    def append(self, key: str, value: Any) -> None:
        self.underlying_store.append(self._k(key), value)

    def compare_set(self, key: str, expected_value: Any, desired_value: Any) -> bytes:
        return self.underlying_store.compare_set(self._k(key), expected_value, desired_value)

    def delete_key(self, key: str) -> bool:
        return self.underlying_store.delete_key(self._k(key))

    def num_keys(self) -> int:
        return self.underlying_store.num_keys()

    def check(self, keys: list[str]) -> bool:
        return self.underlying_store.check([self._k(k) for k in keys])

    def wait(self, keys: list[str], timeout: Any = None) -> None:
        if timeout is None:
            self.underlying_store.wait([self._k(k) for k in keys])
        else:
            self.underlying_store.wait([self._k(k) for k in keys], timeout)


# ---- FileStore: an append-only log of records in one file, shared through file locks ----------------------
_SET, _DELETE = b"S", b"D"
_LENGTHS = struct.Struct("<II")


class FileStore(Store):
    """A store in a file that every process can open (one machine, or a shared file system), torch's ``FileStore``.

    The file is a log of ``set``/``delete`` records, appended under an exclusive ``flock`` and replayed
    under a shared one, so concurrent writers never interleave. Waits poll the file (every 10 ms at most).
    ``world_size`` is accepted as in torch; ember does not delete the file (the job's launcher or the test
    owns it), and a file left from an earlier job must not be reused (its keys would still be there).
    """

    def __init__(self, file_name: str, world_size: int = -1) -> None:
        super().__init__()
        self.path = os.fspath(file_name)
        self.world_size = world_size
        self._data: dict[str, bytes] = {}
        self._offset = 0
        self._pending = b""
        # os.open with O_CREAT: creating the file is atomic, whichever process comes first
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        os.close(fd)

    def _locked(self, exclusive: bool) -> Any:
        store = self

        class _Lock:
            def __enter__(self) -> Any:
                self.f = open(store.path, "r+b")
                fcntl.flock(self.f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
                store._refresh(self.f)
                return self.f

            def __exit__(self, *exc: Any) -> None:
                fcntl.flock(self.f, fcntl.LOCK_UN)
                self.f.close()

        return _Lock()

    def _refresh(self, f: Any) -> None:
        """Replay the records appended since the last read."""
        f.seek(self._offset)
        data = self._pending + f.read()
        self._offset = f.tell()
        at = 0
        while at + 1 + _LENGTHS.size <= len(data):
            kind = data[at:at + 1]
            key_len, value_len = _LENGTHS.unpack_from(data, at + 1)
            end = at + 1 + _LENGTHS.size + key_len + value_len
            if end > len(data):
                break
            key = data[at + 1 + _LENGTHS.size:at + 1 + _LENGTHS.size + key_len].decode()
            if kind == _SET:
                self._data[key] = data[end - value_len:end]
            elif kind == _DELETE:
                self._data.pop(key, None)
            else:
                raise DistStoreError(f"FileStore: {self.path} is not a store file (a record starts with {kind!r}); "
                                     "use a new file name for each job")
            at = end
        self._pending = data[at:]

    def _write(self, f: Any, kind: bytes, key: str, value: bytes = b"") -> None:
        name = key.encode()
        f.seek(0, os.SEEK_END)
        f.write(kind + _LENGTHS.pack(len(name), len(value)) + name + value)
        f.flush()
        self._refresh(f)

    def set(self, key: str, value: Any) -> None:
        payload = as_bytes(value, "FileStore.set")
        with self._locked(True) as f:
            self._write(f, _SET, key, payload)

    def get(self, key: str) -> bytes:
        self.wait([key])
        return self._data[key]

    def add(self, key: str, amount: int) -> int:
        with self._locked(True) as f:
            value = int(self._data.get(key, b"0")) + int(amount)
            self._write(f, _SET, key, str(value).encode())
            return value

    def append(self, key: str, value: Any) -> None:
        with self._locked(True) as f:
            self._write(f, _SET, key, self._data.get(key, b"") + as_bytes(value, "FileStore.append"))

    def compare_set(self, key: str, expected_value: Any, desired_value: Any) -> bytes:
        expected, desired = as_bytes(expected_value, "compare_set"), as_bytes(desired_value, "compare_set")
        with self._locked(True) as f:
            current = self._data.get(key)
            if current is None and expected:
                return expected
            if current is None or current == expected:
                self._write(f, _SET, key, desired)
            return self._data[key]

    def delete_key(self, key: str) -> bool:
        with self._locked(True) as f:
            if key not in self._data:
                return False
            self._write(f, _DELETE, key)
            return True

    def num_keys(self) -> int:
        with self._locked(False):
            return len(self._data)

    def check(self, keys: list[str]) -> bool:
        with self._locked(False):
            return all(k in self._data for k in keys)

    def wait(self, keys: list[str], timeout: Any = None) -> None:
        limit = self.timeout if timeout is None else as_timedelta(timeout, "wait")
        deadline = time.monotonic() + limit.total_seconds()
        delay = 0.0005
        while not self.check(keys):
            if time.monotonic() > deadline:
                raise timeout_error([k for k in keys if k not in self._data], limit)
            time.sleep(delay)
            delay = min(2 * delay, 0.01)
