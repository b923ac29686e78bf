"""``torch.distributed._composable``: the older path of FSDP2 (see :mod:`ember.distributed.fsdp`)."""
