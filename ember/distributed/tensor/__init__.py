"""``torch.distributed.tensor``: the placement types are here; DTensor itself is not (named, refused when made).

See :mod:`ember.distributed._not_here` for why. ``Shard``/``Replicate``/``Partial`` are PyTorch's descriptions
(:mod:`ember.distributed.tensor.placement_types`).

Example:
    >>> from ember.distributed.tensor import DTensor, Shard
    >>> Shard(0).is_shard()
    True
"""
from __future__ import annotations

from ember.distributed._not_here import refused_class, refused_function
from ember.distributed.device_mesh import DeviceMesh, init_device_mesh  # noqa: F401
from ember.distributed.tensor.placement_types import Partial, Placement, Replicate, Shard  # noqa: F401
from ember.tensor import Tensor

__all__ = ["DTensor", "DeviceMesh", "Partial", "Placement", "Replicate", "Shard", "distribute_module",
           "distribute_tensor", "init_device_mesh"]

DTensor = refused_class("torch.distributed.tensor.DTensor", "A tensor sharded over a device mesh", Tensor)
distribute_tensor = refused_function("torch.distributed.tensor.distribute_tensor", "Shard a tensor over a mesh")
distribute_module = refused_function("torch.distributed.tensor.distribute_module", "Shard a module's parameters")
