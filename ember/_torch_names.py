"""PyTorch names ember adds to its top-level namespace (imported by ``ember/__init__.py`` in one line).

Kept apart from ``ember/__init__.py`` so the PyTorch surface grows in one place; the families are built
from tables in :mod:`ember.surface.families`.

Example:
    >>> import ember as torch
    >>> torch.pi > 3, torch.accelerator.is_available(), torch.tensor_split(torch.arange(5), 2)[1].tolist()
    (True, False, [3, 4])
"""
from __future__ import annotations

from ember import accelerator, jit, linalg, sparse, special, testing, types  # noqa: F401  (torch.accelerator, ...)
from ember.sparse import sparse_coo_tensor, spmm  # noqa: F401
from ember.sparse.compressed import sparse_compressed_tensor, sparse_csc_tensor, sparse_csr_tensor  # noqa: F401
from ember.surface import constants as _constants, families as _families, functions as _functions
from ember.surface.constants import *  # noqa: F401,F403
from ember.surface.functions import *  # noqa: F401,F403
from ember.surface.special_linalg import *  # noqa: F401,F403
from ember.surface import special_linalg as _special_linalg
from ember.surface.linalg_aliases import *  # noqa: F401,F403  (torch.svd, torch.qr, torch.inverse, ...)
from ember.surface import linalg_aliases as _linalg_aliases
from ember.surface.deprecated_linalg import eig, lstsq, matrix_rank, solve, symeig  # noqa: F401  (removed: torch's error)
from ember.surface.runtime_names import *  # noqa: F401,F403  (binomial, poisson, histogramdd, Stream, ...)
from ember.surface import runtime_names as _runtime_names
from ember.surface.rnn_functional import *  # noqa: F401,F403  (torch.lstm, torch.gru_cell, ...)
from ember.surface import rnn_functional as _rnn_functional
from ember.surface.more_functions import *  # noqa: F401,F403
from ember.surface import more_functions as _more_functions
from ember.surface.hash_tensor import hash_tensor  # noqa: F401
from ember.amp import GradScaler  # noqa: F401  (torch.GradScaler)
from ember.ops.complex_ops import (  # noqa: F401  (complex numbers: docs/complex-fft.md)
    adjoint, angle, complex, conj, conj_physical, is_conj, is_neg, polar, resolve_conj, resolve_neg, view_as_complex,
    view_as_real,
)
from ember import fft  # noqa: F401  (torch.fft)
from ember.surface.spectral import istft, stft  # noqa: F401  (torch.stft / torch.istft)
from ember.nn import ParameterDict  # noqa: F401
from ember.nn._grid_sample import grid_sampler, grid_sampler_2d, grid_sampler_3d  # noqa: F401
from ember.nn._functional_more import affine_grid_generator  # noqa: F401
from ember.surface.lowrank import pca_lowrank, svd_lowrank  # noqa: F401

from ember.surface import symbolic as _symbolic
from ember.surface.symbolic import *  # noqa: F401,F403  (torch.SymInt, torch.sym_int, torch.sym_max, ...)
from ember import signal, version  # noqa: F401  (torch.signal.windows, torch.version.cuda)
from ember.storage import LEGACY_STORAGES as _LEGACY_STORAGES, TypedStorage, UntypedStorage  # noqa: F401
globals().update(_LEGACY_STORAGES)  # torch.FloatStorage, torch.LongStorage, ...
Storage = _LEGACY_STORAGES["FloatStorage"]  # torch.Storage: the default dtype's legacy storage class
from ember.utils.dlpack import from_dlpack, to_dlpack  # noqa: F401
from ember.surface.control_flow import cond, while_loop  # noqa: F401  (torch.cond, torch.while_loop)
from ember.surface.native_norms import *  # noqa: F401,F403  (torch.native_layer_norm, ...)
from ember.surface import native_norms as _native_norms
from ember.surface.signature_forms import *  # noqa: F401,F403  (torch.swapaxes(axis0=), torch.dropout(train=), ...)
from ember.surface import signature_forms as _signature_forms

sparse.install()
_linalg_aliases.install_methods()
_signature_forms.install_methods()

# The Tensor methods and top-level names generated from the whole top-level namespace
# (_families.install_methods, top_level_names) are made by ember/__init__.py right after this import.
__all__ = ["accelerator", "jit", "linalg", "sparse", "special", "testing", "types", "sparse_coo_tensor", "spmm", "sparse_csr_tensor", "sparse_csc_tensor", "sparse_compressed_tensor", *_constants.__all__, *_functions.__all__, *_special_linalg.__all__, *_linalg_aliases.__all__, "eig", "lstsq", "matrix_rank", "solve", "symeig", *_runtime_names.__all__, *_rnn_functional.__all__, *_more_functions.__all__, "hash_tensor", "GradScaler", "ParameterDict", "adjoint", "angle", "complex", "conj", "conj_physical", "is_conj", "is_neg", "polar", "resolve_conj", "resolve_neg", "view_as_complex", "view_as_real", "fft", "stft", "istft", "grid_sampler", "grid_sampler_2d", "grid_sampler_3d", "affine_grid_generator", "svd_lowrank", "pca_lowrank", *_symbolic.__all__, "signal", "version",
           "TypedStorage", "UntypedStorage", "Storage", *_LEGACY_STORAGES, "from_dlpack", "to_dlpack", "cond", "while_loop",
           *_native_norms.__all__, *_signature_forms.__all__]
