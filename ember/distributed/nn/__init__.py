"""Differentiable communication for model parallelism (torch's ``torch.distributed.nn``).

Example:
    >>> from ember.distributed.nn import functional
    >>> sorted(n for n in ("send", "recv", "all_reduce", "all_gather", "broadcast") if hasattr(functional, n))
    ['all_gather', 'all_reduce', 'broadcast', 'recv', 'send']
"""
from ember.distributed.nn import functional  # noqa: F401
