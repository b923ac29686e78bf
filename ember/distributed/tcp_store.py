"""``TCPStore``: a key-value store served over TCP by one process (the master) to all, torch's semantics.

The master (``is_master=True``) starts a server thread on ``port`` (0: a free port, read it back from
``.port``); every process, the master included, talks to it as a client. Blocking operations (``get``
of a missing key, ``wait``) wait *in the server*, which answers when the keys appear or the timeout
passes, so a client never reads a stale answer. Values are bytes; nothing received is executed
(requests are length-prefixed byte strings).

Wire format (ember's own, not torch's): a request is one op byte, a count, then that many
length-prefixed byte strings; an answer is a status byte (0 ok, 1 timed out, 2 error) and strings.

Example:
    >>> from ember.distributed.tcp_store import TCPStore
    >>> from datetime import timedelta
    >>> master = TCPStore("127.0.0.1", 0, 1, True, timeout=timedelta(seconds=5))
    >>> master.set("k", "v"); master.get("k"), master.add("n", 3)
    (b'v', 3)
    >>> master.shutdown()
"""
from __future__ import annotations

import ipaddress
import socket
import struct
import threading
import time
from datetime import timedelta
from typing import Any

from ember.distributed.store import DEFAULT_STORE_TIMEOUT, DistStoreError, Store, as_bytes, as_timedelta, timeout_error

_U32 = struct.Struct("<I")
_SET, _GET, _ADD, _CAS, _DEL, _NUM, _CHECK, _WAIT, _APPEND, _HELLO, _WORKERS = range(1, 12)
_OK, _TIMEOUT, _ERROR = 0, 1, 2
_MAX_STRING = 1 << 31  # refuse absurd lengths from a stray client instead of allocating them


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("the other side closed the connection")
        got += k
    return bytes(buf)


def _pack(head: int, strings: list[bytes]) -> bytes:
    parts = [bytes([head]), _U32.pack(len(strings))]
    for s in strings:
        parts += [_U32.pack(len(s)), s]
    return b"".join(parts)


def _unpack(sock: socket.socket) -> tuple[int, list[bytes]]:
    head = _read_exact(sock, 1)[0]
    count = _U32.unpack(_read_exact(sock, 4))[0]
    if count > 1 << 20:
        raise ConnectionError(f"TCPStore: a message claims {count} parts; not an ember store peer")
    strings = []
    for _ in range(count):
        n = _U32.unpack(_read_exact(sock, 4))[0]
        if n >= _MAX_STRING:
            raise ConnectionError(f"TCPStore: a message part claims {n} bytes; not an ember store peer")
        strings.append(_read_exact(sock, n))
    return head, strings


class _Server:
    """The master's store: a dict, a condition for waiters, one thread per client connection."""

    def __init__(self, host: str, port: int) -> None:
        self.data: dict[str, bytes] = {}
        self.workers = 0
        self.changed = threading.Condition()
        self.listener = socket.create_server((_bind_address(host), port), family=_family(host), backlog=128,
                                             reuse_port=False)
        self.port = self.listener.getsockname()[1]
        self.closed = False
        self.clients: list[socket.socket] = []
        threading.Thread(target=self._accept, name="ember-tcpstore-server", daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.clients.append(conn)
            threading.Thread(target=self._serve, args=(conn,), name="ember-tcpstore-client", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            while True:
                op, args = _unpack(conn)
                status, answer = self._handle(op, args)
                conn.sendall(_pack(status, answer))
        except (ConnectionError, OSError, ValueError):
            conn.close()

    def _wait_for(self, ready: Any, timeout_ms: int) -> bool:
        deadline = time.monotonic() + timeout_ms / 1000
        with self.changed:
            while not ready():
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    return False
                self.changed.wait(min(left, 1.0))
        return True

    def _handle(self, op: int, args: list[bytes]) -> tuple[int, list[bytes]]:
        d, changed = self.data, self.changed
        key = args[0].decode() if args and op not in (_WAIT, _CHECK, _WORKERS) else ""
        if op == _GET:
            if not self._wait_for(lambda: key in d, int(args[1])):
                return _TIMEOUT, []
            with changed:
                return _OK, [d[key]]
        if op == _WAIT:
            keys = [a.decode() for a in args[1:]]
            if not self._wait_for(lambda: all(k in d for k in keys), int(args[0])):
                return _TIMEOUT, [k.encode() for k in keys if k not in d]
            return _OK, []
        if op == _WORKERS:
            need = int(args[0])
            return (_OK if self._wait_for(lambda: self.workers >= need, int(args[1])) else _TIMEOUT), []
        with changed:
            if op == _SET:
                d[key] = args[1]
            elif op == _APPEND:
                d[key] = d.get(key, b"") + args[1]
            elif op == _ADD:
                try:
                    value = int(d.get(key, b"0")) + int(args[1])
                except ValueError:
                    return _ERROR, [f"add: the value of key {key!r} is not an integer".encode()]
                d[key] = str(value).encode()
            elif op == _CAS:
                current = d.get(key)
                if current is None and args[1]:
                    return _OK, [args[1]]
                if current is None or current == args[1]:
                    d[key] = args[2]
            elif op == _DEL:
                return _OK, [b"1" if d.pop(key, None) is not None else b"0"]
            elif op == _NUM:
                return _OK, [str(len(d)).encode()]
            elif op == _CHECK:
                return _OK, [b"1" if all(a.decode() in d for a in args) else b"0"]
            elif op == _HELLO:
                self.workers += 1
            else:
                return _ERROR, [f"unknown store operation {op}".encode()]
            changed.notify_all()
            if op in (_ADD, _CAS):
                return _OK, [d[key]]
            return _OK, []

    def close(self) -> None:
        self.closed = True
        with self.changed:
            self.changed.notify_all()
        try:
            self.listener.close()
        except OSError:
            pass
        for c in self.clients:
            try:
                c.close()
            except OSError:
                pass


def _family(host: str) -> int:
    try:
        return socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        return socket.AF_INET


def _bind_address(host: str) -> str:
    """Loopback hosts bind loopback only (nothing outside the machine can reach the store); any other
    host binds every interface, as torch's TCPStore does, so other machines can connect."""
    try:
        if ipaddress.ip_address(host).is_loopback:
            return host
    except ValueError:
        if host == "localhost":
            return "127.0.0.1"
    return "::" if _family(host) == socket.AF_INET6 else "0.0.0.0"


class TCPStore(Store):
    """torch.distributed.TCPStore: ``TCPStore(host_name, port, world_size=None, is_master=False, timeout=...)``.

    The master serves the store; with ``wait_for_workers`` (default) and ``world_size`` it waits in the
    constructor until ``world_size`` clients (itself included) have connected. Clients retry connecting
    until ``timeout``, so they may start before the master. ``get``/``wait`` raise
    :class:`~ember.distributed.DistStoreError` after the timeout. ``num_keys`` counts the keys set
    (torch's also counts one key of its own).
    """

    def __init__(self, host_name: str, port: int, world_size: int | None = None, is_master: bool = False,
                 timeout: Any = DEFAULT_STORE_TIMEOUT, wait_for_workers: bool = True, multi_tenant: bool = False,
                 master_listen_fd: int | None = None, use_libuv: bool = True) -> None:
        super().__init__(as_timedelta(timeout, "TCPStore"))
        self.host = host_name
        self.world_size = world_size
        self.libuvBackend = use_libuv  # noqa: N815 - torch's attribute name (no libuv here: plain sockets)
        self._server = _Server(host_name, port) if is_master else None
        self.port = self._server.port if self._server is not None else int(port)
        self._lock = threading.Lock()
        self._sock = self._connect()
        self._request(_HELLO, [b"-"])
        if is_master and wait_for_workers and world_size:
            status, _ = self._request(_WORKERS, [str(world_size).encode(), self._ms()])
            if status == _TIMEOUT:
                raise DistStoreError(f"TCPStore: timed out after {self.timeout} waiting for {world_size} workers to "
                                     f"connect to {host_name}:{self.port}")

    def _ms(self, timeout: timedelta | None = None) -> bytes:
        return str(int((timeout or self.timeout).total_seconds() * 1000)).encode()

    def _connect(self) -> socket.socket:
        deadline = time.monotonic() + self.timeout.total_seconds()
        delay = 0.01
        while True:
            try:
                sock = socket.create_connection((self.host, self.port), timeout=max(1.0, min(30.0, delay * 100)))
                sock.settimeout(None)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return sock
            except OSError as error:
                if time.monotonic() > deadline:
                    raise DistStoreError(f"TCPStore: could not connect to {self.host}:{self.port} within "
                                         f"{self.timeout} ({error}); is the master (rank 0) running and the "
                                         "address reachable?") from error
                time.sleep(delay)
                delay = min(2 * delay, 0.5)

    def _request(self, op: int, args: list[bytes]) -> tuple[int, list[bytes]]:
        with self._lock:
            try:
                self._sock.sendall(_pack(op, args))
                status, answer = _unpack(self._sock)
            except (ConnectionError, OSError) as error:
                raise DistStoreError(f"TCPStore: lost the connection to the store at {self.host}:{self.port} "
                                     f"({error}); the master process (rank 0) may have ended") from error
        if status == _ERROR:
            raise DistStoreError(f"TCPStore: {answer[0].decode()}")
        return status, answer

    @property
    def is_master(self) -> bool:
        return self._server is not None

    def set(self, key: str, value: Any) -> None:
        self._request(_SET, [key.encode(), as_bytes(value, "TCPStore.set")])

    def get(self, key: str) -> bytes:
        status, answer = self._request(_GET, [key.encode(), self._ms()])
        if status == _TIMEOUT:
            raise timeout_error([key], self.timeout)
        return answer[0]

    def add(self, key: str, amount: int) -> int:
        return int(self._request(_ADD, [key.encode(), str(int(amount)).encode()])[1][0])

    def append(self, key: str, value: Any) -> None:
        self._request(_APPEND, [key.encode(), as_bytes(value, "TCPStore.append")])

    def compare_set(self, key: str, expected_value: Any, desired_value: Any) -> bytes:
        return self._request(_CAS, [key.encode(), as_bytes(expected_value, "compare_set"),
                                    as_bytes(desired_value, "compare_set")])[1][0]

    def delete_key(self, key: str) -> bool:
        return self._request(_DEL, [key.encode()])[1][0] == b"1"

    def num_keys(self) -> int:
        return int(self._request(_NUM, [])[1][0])

    def check(self, keys: list[str]) -> bool:
        return self._request(_CHECK, [k.encode() for k in keys])[1][0] == b"1"

    def wait(self, keys: list[str], timeout: Any = None) -> None:
        limit = self.timeout if timeout is None else as_timedelta(timeout, "wait")
        status, missing = self._request(_WAIT, [self._ms(limit)] + [k.encode() for k in keys])
        if status == _TIMEOUT:
            raise timeout_error([m.decode() for m in missing], limit)

    def local_address(self) -> str:
        """The address this process uses to reach the master (the interface other ranks can reach it on)."""
        return self._sock.getsockname()[0]

    def shutdown(self) -> None:
        """Close this client (and the server, on the master)."""
        try:
            self._sock.close()
        except OSError:
            pass
        if self._server is not None:
            self._server.close()
            self._server = None

    def __del__(self) -> None:
        try:
            self.shutdown()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
