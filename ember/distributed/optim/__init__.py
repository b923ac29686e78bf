"""``torch.distributed.optim``: :class:`ZeroRedundancyOptimizer` (optimizer state sharded over the ranks).

PyTorch's RPC-based ``DistributedOptimizer``, ``PostLocalSGDOptimizer`` and the functional optimizers are not
here (ember has no RPC framework nor DDP communication hooks).

Example:
    >>> from ember.distributed.optim import ZeroRedundancyOptimizer  # doctest: +SKIP
"""
from ember.distributed.optim.zero_redundancy_optimizer import ZeroRedundancyOptimizer

__all__ = ["ZeroRedundancyOptimizer"]
