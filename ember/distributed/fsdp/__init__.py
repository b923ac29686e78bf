"""``torch.distributed.fsdp``: the policy descriptions are here; sharding is not (named, refused when used).

Example:
    >>> from ember.distributed.fsdp import MixedPrecisionPolicy
    >>> MixedPrecisionPolicy().cast_forward_inputs
    True
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ember.distributed._not_here import refused_class, refused_function

__all__ = ["CPUOffloadPolicy", "FSDPModule", "FullyShardedDataParallel", "MixedPrecisionPolicy", "OffloadPolicy",
           "fully_shard"]


@dataclasses.dataclass(frozen=True)
class MixedPrecisionPolicy:
    """FSDP2's dtypes for parameters, gradient reduction and outputs (a description; PyTorch's fields)."""

    param_dtype: Any = None
    reduce_dtype: Any = None
    output_dtype: Any = None
    cast_forward_inputs: bool = True


@dataclasses.dataclass
class OffloadPolicy:
    """No offloading (PyTorch's base policy)."""


@dataclasses.dataclass
class CPUOffloadPolicy(OffloadPolicy):
    """Keep sharded parameters on the CPU (a description; PyTorch's field)."""

    pin_memory: bool = True


FSDPModule = refused_class("torch.distributed.fsdp.FSDPModule", "A module sharded by fully_shard")
FullyShardedDataParallel = refused_class("torch.distributed.fsdp.FullyShardedDataParallel",
                                         "The FSDP1 wrapper module")
fully_shard = refused_function("torch.distributed.fsdp.fully_shard", "Shard a module's parameters (FSDP2)")
