"""``torch.distributed.checkpoint.hf_storage``: named, refused when used (see ``ember.distributed.checkpoint``)."""
from __future__ import annotations

from ember.distributed._not_here import refused_class

HuggingFaceStorageReader = refused_class("torch.distributed.checkpoint.hf_storage.HuggingFaceStorageReader",
                                         "Read a sharded checkpoint from safetensors files")
HuggingFaceStorageWriter = refused_class("torch.distributed.checkpoint.hf_storage.HuggingFaceStorageWriter",
                                         "Write a sharded checkpoint as safetensors files")
