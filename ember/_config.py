"""Process-wide defaults for ember: the one place that reads environment variables.

Example:
    >>> import ember
    >>> ember.get_default_dtype()
    ember.float32
"""
from __future__ import annotations

import os

# Where the data loaders look for data sets when no root is given.
DATA_HOME: str = os.environ.get("EMBER_DATA", os.path.join(os.path.expanduser("~"), ".ember", "data"))

# CPU allocator tuning: "tuned" keeps freed large buffers in glibc's heap for reuse (see
# ember/backends/cpu.py); "system" leaves malloc's defaults alone.
CPU_ALLOCATOR: str = os.environ.get("EMBER_CPU_ALLOCATOR", "tuned")

# Native CPU kernels for a few memory-bound ops (ember/backends/cpu_kernels.py): "numba" uses them
# when numba is installed; "numpy" always takes the pure-NumPy path.
CPU_KERNELS: str = os.environ.get("EMBER_CPU_KERNELS", "numba")

# Special functions (erf, erfinv, lgamma, ...) on CPU: "scipy" uses SciPy's when installed; "numpy"
# always takes ember's vectorized NumPy versions (ember/ops/special_math.py).
SPECIAL_FUNCTIONS: str = os.environ.get("EMBER_SPECIAL_FUNCTIONS", "scipy")

# Convolution algorithm on CPU (ember/ops/conv.py, winograd_tile): "auto" picks Winograd F(4x4) or
# F(2x2) or im2col per layer; "winograd2" caps Winograd at F(2x2) (rounding close to im2col's);
# "im2col" never uses Winograd; "winograd4" lets the fused Winograd kernels (AVX-512 with numba, which run
# F(2x2) by default: float32 error of torch's order) take F(4x4) (faster, ~10-25x torch's error).
CONV_ALGORITHM: str = os.environ.get("EMBER_CONV_ALGORITHM", "auto")

# Threads for ember's own memory-bound CPU work (ember/backends/cpu_threads.py); 0: all CPUs this
# process may use. BLAS keeps its own setting (OPENBLAS_NUM_THREADS).
CPU_THREADS: int = int(os.environ.get("EMBER_CPU_THREADS", "0") or 0)

# Medium and large BLAS products split in two with a worker thread that spins (without the GIL, yielding its core
# on every turn) for ~1 ms after each job instead of sleeping on a lock (ember/backends/cpu_hot_worker.py). "0": off
# (products below the pool's split size on one thread, larger ones over ember's pool).
HOT_WORKER: bool = os.environ.get("EMBER_HOT_WORKER", "1") not in ("", "0")

# Convolutions (and other BLAS-heavy ops) split their work, GEMMs included, over ember's threads with
# NumPy's OpenBLAS held to one thread meanwhile (ember/backends/cpu_blas.py). "0": leave BLAS
# threading to BLAS (each GEMM on BLAS's threads, the work around it on ember's); "1": always split.
# Unset (None): split where ember's own AVX-512 kernels (numba) multiply the convolutions' products (the
# direct convolutions, ember's GEMM inside each chunk): there OpenBLAS's threads would only wake to spin
# against ember's. Without those kernels (an AVX2-only CPU, no numba) it stays off: on an idle 2-core machine
# OpenBLAS's threaded GEMMs measured 7-8% faster per ResNet-18 and MNIST step than one-thread OpenBLAS GEMMs
# split over ember's threads (medians, benchmarks/bench_cnn_threads.py), while on a loaded machine the split is
# 12-40x faster (no spinning BLAS threads). It is correct: the suspected OpenBLAS race was a ResNet-18 step's
# sensitivity to rounding (docs/cpu-performance.md, "The BLAS split is safe").
BLAS_SPLIT: bool | None = (None if os.environ.get("EMBER_BLAS_SPLIT") is None
                           else os.environ["EMBER_BLAS_SPLIT"] not in ("", "0"))

# The BLAS ember's own products call (ember/backends/cpu_mkl.py): "auto" Intel MKL (the optional `mkl` wheel,
# sequential, 5-17% faster per core on an Intel Xeon) where it is installed and the CPU is Intel, else NumPy's
# OpenBLAS; "mkl" MKL wherever it loads; "openblas" NumPy's BLAS always.
BLAS: str = os.environ.get("EMBER_BLAS", "auto")

# float32 matrix products on CPU: ember's AVX-512 GEMM (numba, ember/backends/cpu_gemm_kernels.py) or NumPy's
# BLAS, chosen per product by ember/backends/cpu_gemm_choice.py. "auto": ember's GEMM only where NumPy's OpenBLAS
# runs no AVX-512 kernels (OPENBLAS_CORETYPE=Haswell on an AVX-512 CPU) and only for the shapes where it measured
# faster (K >= 128, N >= 32, 1M+ multiply-adds, ...); then the small products left to BLAS run on one BLAS
# thread, so OpenBLAS's workers never wake to spin against ember's threads. "ember": every float32 product of
# 1M+ multiply-adds; "blas": none (docs/cpu-performance.md, "The GEMM chosen per product").
GEMM: str = os.environ.get("EMBER_GEMM", "auto")

# The stand-in CUDA device for tests without a GPU (ember/backends/standin.py, docs/devices.md):
# EMBER_CUDA_STANDIN=1 makes device "cuda" a NumPy-backed device that refuses silent host conversion.
CUDA_STANDIN: bool = os.environ.get("EMBER_CUDA_STANDIN", "") not in ("", "0")
