"""``torch.distributed.tensor._utils``: DTensor's shape helpers (named; DTensor is not in ember)."""
from __future__ import annotations

from ember.distributed._not_here import refused_function

compute_local_shape_and_global_offset = refused_function(
    "torch.distributed.tensor._utils.compute_local_shape_and_global_offset", "A rank's shard shape and offset")
