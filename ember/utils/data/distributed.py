"""``torch.utils.data.distributed`` under ember's name.

Example:
    >>> from ember.utils.data.distributed import DistributedSampler
    >>> len(DistributedSampler(range(5), num_replicas=2, rank=1))
    3
"""
from ember.data.distributed import DistributedSampler

__all__ = ["DistributedSampler"]
