"""``torch.functional``: the module where PyTorch defines a few top-level functions in Python (``einsum``,
``meshgrid``, ``stft``, ``cdist``, ``unique``, ...); programs and libraries import them from here.

Example:
    >>> from ember.functional import einsum, meshgrid
    >>> import ember
    >>> einsum("i,i->", ember.ones(3), ember.ones(3)).item()
    3.0
"""
from ember import (  # noqa: F401
    atleast_1d, atleast_2d, atleast_3d, block_diag, broadcast_shapes, broadcast_tensors, cartesian_prod, cdist,
    chain_matmul, einsum, istft, lu, meshgrid, norm, pca_lowrank, split, stft, svd_lowrank, tensordot, unique,
    unique_consecutive, unravel_index,
)
from ember.nn import functional as F  # noqa: F401
from ember.tensor import Tensor  # noqa: F401

__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "block_diag", "broadcast_shapes", "broadcast_tensors",
           "cartesian_prod", "cdist", "chain_matmul", "einsum", "istft", "lu", "meshgrid", "norm", "pca_lowrank",
           "split", "stft", "svd_lowrank", "tensordot", "unique", "unique_consecutive", "unravel_index"]
