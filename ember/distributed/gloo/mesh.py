"""A full mesh of TCP connections between the ranks of a job, with a reader thread per peer.

Every rank listens on a free port, publishes ``host:port`` in the rendezvous store, connects to the
lower ranks and accepts the higher ones (a connection proves itself with the job's random token, so a
stray connection is dropped). After that, each connection has a *reader thread* that reads framed
messages as soon as they arrive and files them in mailboxes; so a send never waits for the receiver
to post its receive (no deadlock, whatever order ranks send in), and a rank busy computing still
answers the others' "where are you?" queries.

A frame is a fixed header (kind, group id, two integers that name the message, payload length) and
the payload bytes. Collective messages are named (group, collective number, step) and so can never
match another collective's; point-to-point messages are (group, tag), matched in order as torch does.
Nothing received is executed: payloads are bytes (uint8 arrays that tensors view, control messages
JSON). Large receive buffers are recycled (:meth:`Mesh.recycle`): the same messages recur every step.

Example (two ranks in one process, through a HashStore):
    >>> import threading
    >>> from datetime import timedelta
    >>> from ember.distributed.store import HashStore
    >>> from ember.distributed.gloo.mesh import Mesh
    >>> store, meshes = HashStore(), [None, None]
    >>> def join(r): meshes[r] = Mesh(r, 2, store, timedelta(seconds=10))
    >>> ts = [threading.Thread(target=join, args=(r,)) for r in (0, 1)]; _ = [t.start() for t in ts]; _ = [t.join() for t in ts]
    >>> meshes[0].send(1, COLLECTIVE, 0, 1, 0, b"hi"); meshes[1].receive(0, COLLECTIVE, 0, 1, 0, None).tobytes()
    b'hi'
    >>> for m in meshes: m.close()
"""
from __future__ import annotations

import json
import os
import secrets
import socket
import struct
import threading
import time
import uuid
from collections import deque
from datetime import timedelta
from typing import Any, Callable

import numpy as np

from ember.distributed.watchdog import DistBackendError

COLLECTIVE, P2P, QUERY, ANSWER, LEAVE, HELLO = range(1, 7)
_HEADER = struct.Struct("<BIqqQ")  # kind, group id, a (collective number / tag), b (step), payload bytes
_SMALL = 1 << 16  # payloads below this go out in one sendall with their header
_SOCKET_BUFFER = 4 << 20
_RECYCLE_BYTES = 1 << 20  # received buffers from this size up are reused for the next message of their size


def _read_exact(sock: socket.socket, n: int, buf: Any = None) -> Any:
    """``n`` bytes from ``sock`` into ``buf`` (a new bytearray when None)."""
    buf = bytearray(n) if buf is None else buf
    view = memoryview(buf).cast("B")
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("connection closed")
        got += k
    return buf


class _Peer:
    def __init__(self, rank: int, sock: socket.socket) -> None:
        self.rank = rank
        self.sock = sock
        self.send_lock = threading.Lock()
        self.closed = False  # the connection ended
        self.left: dict | None = None  # its leave notice, when it ended its group / script normally
        self.error = ""


class Mesh:
    """Connections from this rank to every other rank of the world, and the mailboxes they fill."""

    def __init__(self, rank: int, size: int, store: Any, timeout: timedelta, host: str | None = None) -> None:
        self.rank, self.size = rank, size
        self.timeout = timeout
        self.peers: list[_Peer | None] = [None] * size
        self.changed = threading.Condition()
        self.mail: dict[tuple, deque] = {}
        self.pool: dict[int, list] = {}  # message size -> spare receive buffers
        self.answers: dict[str, dict] = {}
        self.state: Callable[[], dict] = lambda: {}
        self.pid = os.getpid()
        self.closing = False
        if size > 1:
            self._connect(store, host)

    # ---- setup ---------------------------------------------------------------------------------------
    def _connect(self, store: Any, host: str | None) -> None:
        if self.rank == 0:
            store.set("token", secrets.token_hex(16))
        token = store.get("token")
        bind = host or _reachable_address(store)
        listener = socket.create_server((bind, 0), backlog=max(16, self.size))
        _big_buffers(listener)  # accepted connections inherit them
        listener.settimeout(1.0)
        store.set(f"addr/{self.rank}", f"{bind}:{listener.getsockname()[1]}")
        deadline = time.monotonic() + self.timeout.total_seconds()
        for r in range(self.rank):  # connect down: their listeners exist before they publish their address
            where = store.get(f"addr/{r}").decode()
            address, port = where.rsplit(":", 1)
            info = socket.getaddrinfo(address, int(port), type=socket.SOCK_STREAM)[0]
            sock = socket.socket(info[0], info[1], info[2])
            _big_buffers(sock)  # before connecting, so the window scale is negotiated for them
            sock.settimeout(self.timeout.total_seconds())
            sock.connect(info[4])
            sock.settimeout(None)
            sock.sendall(_HEADER.pack(HELLO, 0, self.rank, 0, len(token)) + token)
            self._add_peer(r, sock)
        waiting = set(range(self.rank + 1, self.size))
        while waiting:  # accept up: each proves itself with the token and says its rank
            if time.monotonic() > deadline:
                listener.close()
                raise DistBackendError(f"init_process_group: rank {self.rank} timed out after {self.timeout} "
                                       f"waiting for rank(s) {sorted(waiting)} to connect; did every rank start "
                                       f"and call init_process_group with world_size={self.size}?")
            try:
                sock, _ = listener.accept()
            except socket.timeout:
                continue
            sock.settimeout(5.0)
            try:
                kind, _, r, _, n = _HEADER.unpack(_read_exact(sock, _HEADER.size))
                ok = kind == HELLO and r in waiting and n == len(token) and bytes(_read_exact(sock, n)) == token
            except (OSError, ConnectionError, struct.error):
                ok = False
            if not ok:
                sock.close()
                continue
            sock.settimeout(None)
            waiting.discard(r)
            self._add_peer(r, sock)
        listener.close()

    def _add_peer(self, r: int, sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = _Peer(r, sock)
        self.peers[r] = peer
        threading.Thread(target=self._read, args=(peer,), name=f"ember-gloo-reader-{r}", daemon=True).start()

    # ---- receiving (the reader threads) ---------------------------------------------------------------------
    def _read(self, peer: _Peer) -> None:
        try:
            while True:
                kind, gid, a, b, n = _HEADER.unpack(_read_exact(peer.sock, _HEADER.size))
                payload = _read_exact(peer.sock, n, self._buffer(n)) if n else np.empty(0, np.uint8)
                if kind in (QUERY, ANSWER, LEAVE):
                    payload = payload.tobytes()
                if kind == QUERY:
                    answer = dict(self.state(), nonce=json.loads(payload)["nonce"])
                    self._send_frame(peer, ANSWER, 0, 0, 0, json.dumps(answer).encode())
                    continue
                with self.changed:
                    if kind == ANSWER:
                        message = json.loads(payload)
                        self.answers[f"{message.get('nonce')}/{peer.rank}"] = message
                    elif kind == LEAVE:
                        peer.left = json.loads(payload)
                    else:
                        self.mail.setdefault((peer.rank, kind, gid, a, b), deque()).append(payload)
                    self.changed.notify_all()
        except (ConnectionError, OSError, struct.error, ValueError) as error:
            with self.changed:
                peer.closed = True
                peer.error = str(error)
                self.changed.notify_all()

    def _buffer(self, n: int) -> np.ndarray:
        """A buffer for an ``n``-byte message: a recycled one of that size when there is one (the same large
        messages recur every step, e.g. DDP's buckets, and fresh memory costs a page fault per 4 KiB)."""
        if n >= _RECYCLE_BYTES:
            with self.changed:
                spare = self.pool.get(n)
                if spare:
                    return spare.pop()
        return np.empty(n, np.uint8)

    def recycle(self, *payloads: Any) -> None:
        """Give received buffers back once their bytes have been used (copied out or reduced)."""
        with self.changed:
            for p in payloads:
                if isinstance(p, np.ndarray) and p.nbytes >= _RECYCLE_BYTES and p.base is None:
                    spare = self.pool.setdefault(p.nbytes, [])
                    if len(spare) < 4:
                        spare.append(p)

    def receive(self, src: int, kind: int, gid: int, a: int, b: int, deadline: float | None,
                on_timeout: Callable[[], None] | None = None, what: str = "a message") -> bytearray:
        """The next message from ``src`` named (kind, gid, a, b); waits until ``deadline`` (monotonic seconds)."""
        key = (src, kind, gid, a, b)
        peer = self.peers[src]
        with self.changed:
            while True:
                box = self.mail.get(key)
                if box:
                    payload = box.popleft()
                    if not box:
                        del self.mail[key]
                    return payload
                if peer is None or peer.closed or peer.left is not None:
                    raise self.departed(src, what)
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self.changed.wait(left if left is not None else 1.0)
        if on_timeout is not None:
            on_timeout()
        raise DistBackendError(f"{what} timed out")

    def receive_any(self, sources: list[int], kind: int, gid: int, a: int, deadline: float | None,
                    on_timeout: Callable[[], None] | None = None, what: str = "a message") -> tuple[int, bytearray]:
        """The first message named (kind, gid, a, 0) from any of ``sources`` (lowest rank first when several wait)."""
        with self.changed:
            while True:
                for src in sources:
                    box = self.mail.get((src, kind, gid, a, 0))
                    if box:
                        payload = box.popleft()
                        if not box:
                            del self.mail[(src, kind, gid, a, 0)]
                        return src, payload
                gone = [s for s in sources if self.peers[s] is None or self.peers[s].closed
                        or self.peers[s].left is not None]
                if len(gone) == len(sources):
                    raise self.departed(gone[0], what)
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self.changed.wait(left if left is not None else 1.0)
        if on_timeout is not None:
            on_timeout()
        raise DistBackendError(f"{what} timed out")

    def departed(self, src: int, what: str) -> DistBackendError:
        peer = self.peers[src]
        failure = (peer.left or {}).get("failure") if peer is not None else None
        how = (f"raised {failure} (its script ended)" if failure else
               "ended its script or destroyed its process group (it sent its leave notice)"
               if peer is not None and peer.left is not None else
               f"closed its connection without a leave notice (its process crashed or was killed: {peer.error})"
               if peer is not None else "is not connected")
        return DistBackendError(
            f"{what} can never complete: rank {src} {how} without sending its part. Every rank must run the same "
            "collectives in the same order; end a job early on every rank together (e.g. decide with an all_reduce).")

    # ---- sending ---------------------------------------------------------------------------------------------
    def send(self, dst: int, kind: int, gid: int, a: int, b: int, payload: Any, what: str = "a message") -> None:
        peer = self.peers[dst]
        if peer is None or peer.closed:
            raise self.departed(dst, what)
        try:
            self._send_frame(peer, kind, gid, a, b, payload)
        except OSError as error:
            raise DistBackendError(f"{what}: sending to rank {dst} failed ({error}); rank {dst} has ended or "
                                   "crashed") from error

    def _send_frame(self, peer: _Peer, kind: int, gid: int, a: int, b: int, payload: Any) -> None:
        view = memoryview(payload).cast("B") if not isinstance(payload, (bytes, bytearray)) else payload
        n = len(view)
        header = _HEADER.pack(kind, gid, a, b, n)
        with peer.send_lock:
            if n < _SMALL:
                peer.sock.sendall(header + bytes(view))
            else:
                peer.sock.sendall(header)
                peer.sock.sendall(view)

    # ---- asking the others where they are ------------------------------------------------------------------
    def ask(self, ranks: list[int], wait_s: float = 1.0) -> dict[int, dict]:
        """Each rank's answer to "where are you?" (its collective counts and current wait), for up to ``wait_s``."""
        nonce = uuid.uuid4().hex
        asked = []
        for r in ranks:
            peer = self.peers[r]
            if peer is not None and not peer.closed and peer.left is None:
                try:
                    self._send_frame(peer, QUERY, 0, 0, 0, json.dumps({"nonce": nonce}).encode())
                    asked.append(r)
                except OSError:
                    pass
        deadline = time.monotonic() + wait_s
        def settled(r: int) -> bool:  # answered, or left since it was asked (its leave notice will do)
            peer = self.peers[r]
            return f"{nonce}/{r}" in self.answers or peer is None or peer.closed or peer.left is not None

        with self.changed:
            while time.monotonic() < deadline and not all(settled(r) for r in asked):
                self.changed.wait(deadline - time.monotonic())
            return {r: self.answers.pop(f"{nonce}/{r}") for r in asked if f"{nonce}/{r}" in self.answers}

    # ---- the end ---------------------------------------------------------------------------------------------
    def close(self, notice: dict | None = None) -> None:
        """Tell every peer this rank is done (with its counts), then close the connections."""
        if self.closing or os.getpid() != self.pid:  # a forked child (a DataLoader worker) owns nothing here
            return
        self.closing = True
        body = json.dumps(notice or {}).encode()
        for peer in self.peers:
            if peer is None or peer.closed:
                continue
            try:
                self._send_frame(peer, LEAVE, 0, 0, 0, body)
                peer.sock.shutdown(socket.SHUT_WR)  # a FIN after the last frame; the reader keeps draining
            except OSError:
                pass


def _big_buffers(sock: socket.socket) -> None:
    """4 MiB socket buffers (the kernel may cap them): a 64 MiB exchange on one machine ran 0.27-0.29 s with
    them against 0.41-1.19 s with the defaults (fewer wake-ups of the reader thread, which needs the GIL)."""
    for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, option, _SOCKET_BUFFER)
        except OSError:  # a platform that refuses: the defaults work, only slower
            pass


def _reachable_address(store: Any) -> str:
    """The address the other ranks can reach this one on: the interface that reaches the TCP store's
    master, or the loopback for stores on one machine (``EMBER_GLOO_ADDR`` overrides)."""
    chosen = os.environ.get("EMBER_GLOO_ADDR")
    if chosen:
        return chosen
    base = store
    while hasattr(base, "underlying_store"):
        base = base.underlying_store
    local = getattr(base, "local_address", None)
    if local is not None:
        address = local()
        return address[7:] if address.startswith("::ffff:") else address
    return "127.0.0.1"
