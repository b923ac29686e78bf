"""Which GEMM multiplies a float32 matrix product on CPU: ember's AVX-512 kernel or NumPy's BLAS.

ember's kernel (``cpu_gemm_kernels``) exists because NumPy's OpenBLAS runs the kernels
``OPENBLAS_CORETYPE`` names, and where that names an AVX2 core (``Haswell``, set on this project's VM)
an AVX-512 CPU multiplies at ~115 GFLOP/s per core where ember's kernel reaches ~200-250. Where
OpenBLAS runs its own AVX-512 kernels (``SkylakeX`` and later: what it picks by itself on an AVX-512
CPU), they beat ember's kernel on almost every shape (1.1-4.7x, one thread), so then BLAS takes every
product. The rule, per product ``(M, K) @ (K, N)`` (docs/cpu-performance.md, "The GEMM chosen per
product", has the measured grid it comes from):

1. ``EMBER_GEMM=blas``: BLAS; ``EMBER_GEMM=ember``: ember's kernel for every float32 product of
   ``MIN_MACS``+ multiply-adds (its old behaviour; for measurements).
2. ``auto`` (default): ember's kernel only when the CPU has AVX-512F and numba compiles for it, and
   NumPy's OpenBLAS does not run AVX-512 kernels (its core name, ``openblas_get_corename``, is not
   one of ``AVX512_CORES``; a BLAS whose core cannot be read, MKL or Accelerate, counts as AVX-512:
   BLAS keeps the products). Then, per shape:
   - at least ``MIN_MACS`` multiply-adds (smaller calls cost about what the kernel saves),
   - ``K >= 8``: each 12 x 32 tile of C is loaded and stored once per K block, so very short sums run the
     kernel at a fraction of its rate (a 10-class layer's input gradient, K = 10: 0.55-0.9x BLAS's time;
     K = 8: 0.6-1.0x); ``K >= 16`` when C's rows are a multiple of 4 KB apart (``N % 1024 == 0``): a
     tile's 12 rows then share one L1 cache set, which short sums feel most (K = 8, N = 1024: 1.5-2x),
   - ``N >= 16``: the kernel's column panels are 32 wide, so N = 10 wastes 22 of 32 lanes (0.9-1.4x BLAS's
     time, where BLAS's 16 x 6 Haswell tiles waste little; N = 16: 0.8-1.0x),
   - ``M >= 32`` when B's rows are not contiguous (a transposed weight): B is copied into panels first
     (``cpu_gemm_pack``, ~0.1 ns per element of B), a cost only enough rows of A repay (M = 32: 0.7-1.0x
     BLAS's time, M = 64: 0.65-1.0x).
   Products it takes run at 0.5-0.85x BLAS's time (one thread), at least ``THREADED_MACS`` on
   ember's threads; but a product it would split needs ``MIN_MACS_SPLIT`` (a split's hand-off costs more
   than BLAS's own threads lose below it).

Without AVX-512 (an AVX2-only CPU), or without numba, there is no kernel and BLAS takes everything.

Threads of a product BLAS takes: below ``cpu_blas.SMALL_GEMM_MACS`` one BLAS thread; from
``cpu_blas_gemm.SPLIT_MACS`` (8M) on, where ember splits BLAS work (``cpu_blas.available()``: an OpenBLAS
whose thread count ember can hold, numba's AVX-512 kernels present or ``EMBER_BLAS_SPLIT=1``), one BLAS call
per ember thread on its block of rows or columns (``cpu_blas_gemm.split_gemm``), so OpenBLAS's own workers
never wake and spin; otherwise BLAS's own threads.

Example:
    >>> from ember.backends.cpu_gemm_choice import shape_prefers_ember
    >>> shape_prefers_ember(256, 784, 512, b_rows_contiguous=False)   # W2's first layer
    True
    >>> shape_prefers_ember(256, 512, 10, b_rows_contiguous=False)    # its 10-class output layer
    False
    >>> shape_prefers_ember(256, 10, 512, b_rows_contiguous=True)     # that layer's input gradient
    True
"""
from __future__ import annotations

import ctypes
from typing import Any

from ember import _config
from ember.backends import cpu_blas

# A product smaller than this (multiply-adds) stays with BLAS: its call costs about what the kernel saves.
MIN_MACS = 1 << 20
# The three shape bounds below were read from one-thread grids (docs/cpu-performance.md, "The GEMM kernel's
# driver, the transposing pack, and the rule", gemm14). They were 128, 32 and 256 while the kernel's driver
# cost ~20% per tile and the pack of a transposed B ran at NumPy's strided-copy speed.
MIN_K = 8  # shorter sums: the C tile's loads and stores per K block dominate
MIN_K_ALIASED = 16  # ... when C's rows are a multiple of 4 KB apart (all rows of a tile in one L1 set)
ALIASED_N = 1024  # floats in 4 KB
MIN_N = 16  # narrower products: most of a 32-column panel's lanes would be masked off
MIN_M_PACKED = 32  # a B that must be copied into panels first needs this many rows of A to repay it
# A product the kernel would split over two or more of ember's threads needs this many multiply-adds, else BLAS's
# own threads take it: ember's pool wakes a sleeping worker for each split (20-35 us a hand-off, measured) where
# OpenBLAS's workers start at once, so below ~8M the split kernel is no faster than BLAS's two threads, and a
# step that mixes both pools has OpenBLAS's workers spinning on the core ember's worker needs (W1's forward,
# 64 x 1000 x 100: the idle run's step 0.4 ms this way against 0.3 ms with every product on BLAS).
MIN_MACS_SPLIT = 1 << 23

# OpenBLAS core names whose SGEMM kernels use AVX-512 (OpenBLAS's ``driver/others/dynamic.c`` names).
AVX512_CORES = frozenset({"skylakex", "cooperlake", "sapphirerapids"})

_CORE: dict[str, Any] = {}


def blas_core_name() -> str | None:
    """NumPy's OpenBLAS core name (``openblas_get_corename``: ``"Haswell"``, ``"SkylakeX"``, ...), or None
    when NumPy's BLAS is not an OpenBLAS that says (MKL, Accelerate, a build without the call)."""
    if "name" not in _CORE:
        name = None
        for path in cpu_blas._loaded_openblas():
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for symbol in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename",
                           "openblas_get_corename64_", "openblas_get_corename"):
                if hasattr(lib, symbol):
                    fn = getattr(lib, symbol)
                    fn.restype, fn.argtypes = ctypes.c_char_p, []
                    raw = fn()
                    name = raw.decode("ascii", "replace").strip() if raw else None
                    break
            if name:
                break
        _CORE["name"] = name
    return _CORE["name"]


def blas_has_avx512() -> bool:
    """Whether NumPy's BLAS multiplies with AVX-512 kernels (or cannot say which: then it is trusted)."""
    name = blas_core_name()
    return name is None or name.lower() in AVX512_CORES


def shape_prefers_ember(m: int, k: int, n: int, b_rows_contiguous: bool) -> bool:
    """Whether ember's kernel beats AVX2 OpenBLAS on ``(m, k) @ (k, n)`` by the measured rule above."""
    return (m * k * n >= MIN_MACS and k >= (MIN_K_ALIASED if n % ALIASED_N == 0 else MIN_K) and n >= MIN_N
            and (b_rows_contiguous or m >= MIN_M_PACKED))


def use_ember(m: int, k: int, n: int, b_rows_contiguous: bool, threads: int = 1) -> bool:
    """The choice for a float32 product on a CPU where ember's kernel exists (AVX-512F, numba), which the
    kernel would run on ``threads`` of ember's threads."""
    mode = _config.GEMM
    if mode == "blas":
        return False
    if mode == "ember":
        return m * k * n >= MIN_MACS
    return (not blas_has_avx512() and shape_prefers_ember(m, k, n, b_rows_contiguous)
            and (threads <= 1 or m * k * n >= MIN_MACS_SPLIT))


def kernel_in_use() -> bool:
    """Whether ember's kernel takes some products in this process (so BLAS's threads, woken by the
    products left to BLAS, would spin on the cores the kernel's threads need)."""
    mode = _config.GEMM
    return mode == "ember" or (mode == "auto" and not blas_has_avx512())
