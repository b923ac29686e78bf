"""Data loading: datasets, samplers, collation, ``DataLoader`` (worker processes), transforms, MNIST.

``ember.data`` plays the role of ``torch.utils.data`` (also importable as ``ember.utils.data``) plus a
few ``torchvision`` pieces (``transforms``, ``datasets``).

Example:
    >>> import ember
    >>> from ember.data import DataLoader, TensorDataset
    >>> x, y = ember.randn(10, 3), ember.arange(10)
    >>> batches = list(DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True))
    >>> [tuple(b[0].shape) for b in batches]
    [(4, 3), (4, 3), (2, 3)]
"""
from ember.data import datasets, transforms  # noqa: F401
from ember.data.collate import default_collate, default_convert
from ember.data.dataloader import DataLoader, set_pin_memory_hook
from ember.data.distributed import DistributedSampler
from ember.data.dataset import (
    ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split,
)
from ember.data.sampler import (
    BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler, WeightedRandomSampler,
)
from ember.data.worker import WorkerInfo, get_worker_info
from ember.data.stack_dataset import StackDataset  # noqa: F401

__all__ = [
    "BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset", "IterableDataset", "RandomSampler",
    "DistributedSampler", "Sampler", "SequentialSampler", "Subset", "SubsetRandomSampler", "TensorDataset", "WeightedRandomSampler",
    "WorkerInfo", "datasets", "default_collate", "default_convert", "get_worker_info", "random_split",
    "set_pin_memory_hook", "transforms", "StackDataset",
]
