"""``torch.fx.experimental``: graph-level optimizations for inference (``optimization.fuse``, ``remove_dropout``,
``extract_subgraph``)."""
from ember.fx.experimental import optimization  # noqa: F401
