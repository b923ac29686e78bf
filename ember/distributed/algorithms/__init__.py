"""``torch.distributed.algorithms``: ``join`` only (named, refused when used)."""
