"""``torch.fx.experimental``: graph-level optimizations for inference (``optimization.fuse``, ``remove_dropout``,
``extract_subgraph``) and ``proxy_tensor.make_fx`` (graphs of ATen calls)."""
from ember.fx.experimental import optimization, proxy_tensor  # noqa: F401
