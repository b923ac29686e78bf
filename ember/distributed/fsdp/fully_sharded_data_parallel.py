"""``torch.distributed.fsdp.fully_sharded_data_parallel``: the FSDP1 module path (named, refused when used)."""
from ember.distributed.fsdp import FullyShardedDataParallel  # noqa: F401
