"""``torch.distributed._composable.fsdp``: the older path of ``torch.distributed.fsdp``'s FSDP2 names."""
from ember.distributed.fsdp import (  # noqa: F401
    CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy, fully_shard,
)
