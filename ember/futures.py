"""``torch.futures``: a thread-safe Future with PyTorch's methods, ``collect_all`` and ``wait_all``.

PyTorch's ``torch.futures.Future`` wraps a C++ future that RPC, ``torch.jit.fork`` and asynchronous code
(captum's async attribution, DDP comm hooks) complete from any thread. This one keeps PyTorch's semantics:
a future completes once (a second ``set_result`` raises RuntimeError), ``wait()`` blocks and re-raises a
stored exception, callbacks run in registration order (at once when added after completion), ``then``
returns a new future holding the callback's result or its exception.

Example:
    >>> import ember
    >>> fut = ember.futures.Future()
    >>> doubled = fut.then(lambda f: f.value() * 2)
    >>> fut.set_result(21)
    >>> doubled.wait()
    42
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")
S = TypeVar("S")

__all__ = ["Future", "collect_all", "wait_all"]

_UNSET = object()


class Future(Generic[T]):
    """A value that will exist later (``torch.futures.Future``)."""

    def __init__(self, *, devices: Any = None) -> None:
        # ``devices`` names CUDA devices whose streams the value uses; the CPU needs no synchronisation.
        self._lock = threading.Condition()
        self._value: Any = _UNSET
        self._error: BaseException | None = None
        self._callbacks: list[Callable[["Future[T]"], None]] = []

    def done(self) -> bool:
        """True once a result or an exception is set."""
        with self._lock:
            return self._value is not _UNSET or self._error is not None

    def wait(self) -> T:
        """Block until the future completes; return its value or raise its exception."""
        with self._lock:
            while self._value is _UNSET and self._error is None:
                self._lock.wait()
        return self.value()

    def value(self) -> T:
        """The value of a completed future (raises its exception; PyTorch's error when not completed)."""
        with self._lock:
            if self._error is not None:
                raise self._error
            if self._value is _UNSET:
                raise RuntimeError("Future::value: the future is not completed yet; call wait() first "
                                   "or read the value inside a then()/add_done_callback() callback")
            return self._value

    def set_result(self, result: T) -> None:
        """Complete the future with ``result``; runs the callbacks (a second completion raises)."""
        self._complete(result, None)

    def set_exception(self, result: BaseException) -> None:
        """Complete the future with an exception that ``wait()``/``value()`` will raise."""
        if not isinstance(result, BaseException):
            raise AssertionError(f"{result} is of type {type(result)}, not an Exception.")  # PyTorch's words
        self._complete(_UNSET, result)

    def _complete(self, value: Any, error: BaseException | None) -> None:
        with self._lock:
            if self._value is not _UNSET or self._error is not None:
                raise RuntimeError("Attempting to mark a completed Future as complete again. Note that a Future "
                                   "can only be marked completed once.")
            self._value, self._error = value, error
            callbacks, self._callbacks = self._callbacks, []
            self._lock.notify_all()
        for callback in callbacks:
            callback(self)

    def add_done_callback(self, callback: Callable[["Future[T]"], None]) -> None:
        """Run ``callback(self)`` when the future completes (now, if it already has)."""
        with self._lock:
            if self._value is _UNSET and self._error is None:
                self._callbacks.append(callback)
                return
        callback(self)

    def then(self, callback: Callable[["Future[T]"], S]) -> "Future[S]":
        """A new future completed with ``callback(self)``'s result, or with the exception it raised."""
        out: Future[S] = Future()

        def run(fut: "Future[T]") -> None:
            try:
                result = callback(fut)
            except Exception as error:  # noqa: BLE001 - PyTorch hands the callback's error to the new future
                # PyTorch wraps it: RuntimeError("Got the following error when running the callback: ...")
                wrapped = RuntimeError(f"Got the following error when running the callback: "
                                       f"{type(error).__name__}: {error}")
                wrapped.__cause__ = error
                out.set_exception(wrapped)
            else:
                out.set_result(result)

        self.add_done_callback(run)
        return out

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.{type(self).__name__} object at {hex(id(self))}>"


def collect_all(futures: list[Future]) -> Future[list[Future]]:
    """A future completed (with the list of ``futures``) when every one of them has completed."""
    futures = list(futures)
    out: Future[list[Future]] = Future()
    if not futures:
        out.set_result([])
        return out
    remaining = [len(futures)]
    lock = threading.Lock()

    def one_done(_: Future) -> None:
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            out.set_result(futures)

    for fut in futures:
        fut.add_done_callback(one_done)
    return out


def wait_all(futures: list[Future]) -> list:
    """Wait for every future and return their values (the first stored exception is raised)."""
    return [fut.wait() for fut in collect_all(futures).wait()]
