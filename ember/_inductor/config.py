"""``torch._inductor.config``: PyTorch's names with their defaults, read by nothing in ember (see
``ember/_inductor/__init__.py``); ``triton`` is a namespace of its own, as in PyTorch.

Example:
    >>> from ember._inductor import config
    >>> config.triton.cudagraphs
    False
"""
from types import SimpleNamespace

coordinate_descent_tuning = False
epilogue_fusion = True
max_autotune = False
fx_graph_cache = True
freezing = False
force_fuse_int_mm_with_mul = False
use_mixed_mm = True
triton = SimpleNamespace(cudagraphs=False, unique_kernel_names=False, cudagraph_trees=True)
cpp = SimpleNamespace(threads=-1, enable_kernel_profile=False)
