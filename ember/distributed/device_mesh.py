"""``torch.distributed.device_mesh``: named, refused when used (see :mod:`ember.distributed._not_here`)."""
from __future__ import annotations

from ember.distributed._not_here import refused_class, refused_function

__all__ = ["DeviceMesh", "init_device_mesh"]

DeviceMesh = refused_class("torch.distributed.device_mesh.DeviceMesh", "An n-dimensional grid of ranks")
init_device_mesh = refused_function("torch.distributed.device_mesh.init_device_mesh", "Make a DeviceMesh")
