"""``torch.distributed.checkpoint``: sharded checkpoints (named, refused when used). ``ember.save`` writes
PyTorch's single-file format."""
from __future__ import annotations

from ember.distributed._not_here import refused_function

load = refused_function("torch.distributed.checkpoint.load", "Load a sharded checkpoint")
save = refused_function("torch.distributed.checkpoint.save", "Save a sharded checkpoint")
