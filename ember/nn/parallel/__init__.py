"""Parallel wrappers (torch's ``torch.nn.parallel``).

Example:
    >>> import ember
    >>> ember.nn.parallel.DistributedDataParallel.__name__
    'DistributedDataParallel'
"""
from ember.nn.parallel.distributed import DataParallel, DistributedDataParallel
from ember.nn.parallel.scatter_gather import gather, scatter

__all__ = ["DataParallel", "DistributedDataParallel", "gather", "scatter"]
