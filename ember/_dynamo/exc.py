"""``torch._dynamo.exc``: the exceptions ``torch.compile`` raises (see :mod:`ember.graph.dynamo_errors`).

Example:
    >>> from ember._dynamo import exc
    >>> issubclass(exc.Unsupported, RuntimeError)
    True
"""
from ember.graph.dynamo_errors import (  # noqa: F401
    FailOnRecompileLimitHit, InvalidBackend, RecompileError, TorchDynamoException, Unsupported,
)

__all__ = ["FailOnRecompileLimitHit", "InvalidBackend", "RecompileError", "TorchDynamoException", "Unsupported"]
