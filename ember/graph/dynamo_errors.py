"""``torch._dynamo.exc``'s exceptions, raised by ``ember.compile`` where ``torch.compile`` raises them.

* :class:`Unsupported`: ``fullgraph=True`` and the function needs a graph break (data-dependent control flow,
  ``.item()``, ``.numpy()``, an in-place change a graph cannot hold); without ``fullgraph`` ember runs that
  signature eagerly instead (torch would break the graph there and run the rest compiled).
* :class:`InvalidBackend`: ``backend=`` names no backend torch knows (ember compiles every one with its graph).
* :class:`FailOnRecompileLimitHit`: the recompile limit was reached under ``fullgraph=True`` or
  ``torch._dynamo.config.fail_on_recompile_limit_hit``.

Example:
    >>> import ember
    >>> from ember._dynamo.exc import Unsupported
    >>> f = ember.compile(lambda x: x + 1 if x.sum() > 0 else x, fullgraph=True)
    >>> try:
    ...     f(ember.ones(2))
    ... except Unsupported as e:
    ...     print(type(e).__name__)
    Unsupported
"""
from __future__ import annotations

from ember.interpreters import TracingError


class TorchDynamoException(RuntimeError):
    """The base of torch._dynamo's exceptions."""


class Unsupported(TorchDynamoException, TracingError):
    """The function needs a graph break and ``fullgraph=True`` forbids one (also a ``TracingError``)."""


class InvalidBackend(TorchDynamoException):
    def __init__(self, name: str) -> None:
        super().__init__(f"Invalid backend: {name!r}, see `torch._dynamo.list_backends()` for available backends.")


class RecompileError(TorchDynamoException):
    """A recompile that the stance (``fail_on_recompile``) forbids."""


class FailOnRecompileLimitHit(Exception):
    """The recompile limit was reached and a hard failure was asked for."""
