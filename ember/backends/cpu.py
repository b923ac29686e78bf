"""The CPU backend: NumPy arrays.

Example:
    >>> from ember.backends import get_backend
    >>> get_backend("cpu").xp.__name__
    'numpy'
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ember.backends import Backend, cpu_kernels, cpu_math_kernels, register_backend
from ember.ops import special_table
from ember import _config


class CPUBackend(Backend):
    name = "cpu"
    xp = np

    def asarray(self, data: Any, np_dtype: Any = None, index: int = 0) -> np.ndarray:
        if _is_device_array(data):
            data = data.get()  # a device array (CuPy or the stand-in): copy device -> host
        return np.asarray(data, dtype=np_dtype)

    def to_numpy(self, array: Any) -> np.ndarray:
        return array

    def is_array(self, value: Any) -> bool:
        return isinstance(value, np.ndarray)

    def is_writeable(self, array: Any) -> bool:
        return array.flags.writeable

    def may_share_memory(self, a: Any, b: Any) -> bool:
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and bool(np.may_share_memory(a, b))

    def data_ptr(self, array: Any) -> int:
        return int(array.__array_interface__["data"][0])

    def memory_bounds(self, array: Any) -> tuple[int, int] | None:
        """The base class's bounds from one ``__array_interface__`` read (its strides are None for a
        C-contiguous array: then the bounds are the data pointer and ``nbytes`` past it)."""
        if not isinstance(array, np.ndarray) or array.size == 0:
            return None
        face = array.__array_interface__
        low = high = face["data"][0]
        strides = face["strides"]
        if strides is None:
            return low, low + array.nbytes
        for n, stride in zip(face["shape"], strides):
            if stride < 0:
                low += (n - 1) * stride
            else:
                high += (n - 1) * stride
        return low, high + array.itemsize

    def memory_owner(self, array: Any) -> Any:
        """A NumPy array that allocated its own memory (``OWNDATA``), when ``array`` is it or a view of it
        (NumPy points every view's ``base`` at the array owning the memory); None otherwise (memory maps,
        arrays over foreign buffers, subclasses). ~0.1 us, against ~1-3 us for ``memory_bounds``."""
        if type(array) is not np.ndarray:
            return None
        base = array.base
        if base is None:
            return array if array.flags.owndata else None
        if type(base) is np.ndarray and base.base is None and base.flags.owndata:
            return base
        return None

    def fuse(self, kernel: Any, outputs: list, single_loop: bool) -> Any:
        """Long groups, or big arrays, compile to one Numba loop when numba is installed; the rest
        run as NumPy ufunc calls into reused buffers (the generic replay)."""
        from ember.graph.passes import fuse_numba  # the graph package imports backends: import on use

        steps = kernel.steps
        if single_loop and fuse_numba.worth_compiling(steps, outputs) and \
                fuse_numba.supported(steps, len(outputs)) and fuse_numba.available() and \
                fuse_numba.native_dtypes([*kernel.input_dtypes, *(v.dtype for v in outputs)]):
            return fuse_numba.NumbaKernel(steps, kernel.n_inputs, kernel.outputs, kernel.source, outputs)
        return None

    def make_rng(self, seed: int, stream: int | None = None) -> np.random.Generator:
        if stream is None:
            return np.random.Generator(np.random.PCG64(seed))
        # Philox takes a 128-bit key as is (no hashing: ~20 us to set up); (seed, stream) keys give
        # independent streams, since each key is its own bijection of the counter.
        return np.random.Generator(np.random.Philox(key=seed + (stream << 64)))

    def rng_state(self, rng: np.random.Generator) -> dict:
        return rng.bit_generator.state

    def set_rng_state(self, rng: np.random.Generator, state: dict) -> None:
        rng.bit_generator.state = state

    def native_kernel(self, name: str) -> Any:
        return cpu_kernels.get(name)

    def special_function(self, name: str) -> Any:
        """ember's vectorized NumPy version (:mod:`ember.ops.special_table`), or SciPy's where it is
        installed, faster and gives the same values (``SCIPY_FASTER``; ``EMBER_SPECIAL_FUNCTIONS=numpy``
        turns SciPy off). Unary functions take ``out=``. ``erf`` of float32 arrays runs the native kernel
        when there is one (``cpu_math_kernels``: one vectorized pass on all cores, within 1 ulp; SciPy's
        takes 15x longer), else a NumPy table method (within 2 ulp, 6x faster than SciPy's)."""
        if name == "erf":  # its fallback is found on first use: float32 erf never needs SciPy's import
            return functools.partial(cpu_math_kernels.erf_float32_first, functools.partial(self._special_call, name))
        return self._special_function(name)

    def _special_call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """``special_function(name)(*args, **kwargs)``, the function chosen at call time (importing
        ``scipy.special`` costs ~0.25 s idle, seconds on a loaded machine, on the first gelu of a program)."""
        return self._special_function(name)(*args, **kwargs)

    def _special_function(self, name: str) -> Any:
        if _config.SPECIAL_FUNCTIONS == "scipy" and name in SCIPY_FASTER:
            try:
                import scipy.special as special

                return SCIPY_FASTER[name](special)
            except ImportError:
                pass
        return special_table.FUNCTIONS[name]


def _scipy_lgamma(special: Any) -> Any:
    """SciPy's gammaln with PyTorch's values where they differ: +inf at -inf, -log|x| for subnormal x
    (SciPy: -inf and inf)."""
    def lgamma(x: Any, out: Any = None) -> Any:
        values = special.gammaln(x, out=out)
        odd = (x == -np.inf) | ((x != 0) & (np.abs(x) < np.finfo(np.result_type(x, np.float32)).tiny))
        if odd.any():
            with np.errstate(divide="ignore"):
                values[...] = np.where(odd, np.where(x == -np.inf, np.inf, -np.log(np.abs(x))), values)
        return values

    return lgamma


# Functions SciPy computes faster than ember's NumPy versions with the same special-point values
# (benchmarks/bench_special_functions.py measures both; the rest are ember's even with SciPy, being as
# fast or faster, or more accurate: SciPy's Bessel J/Y lose ~1e-12 for x > 50 by rounding x - pi/4).
SCIPY_FASTER: dict[str, Any] = {
    "erf": lambda s: s.erf, "erfc": lambda s: s.erfc, "erfcx": lambda s: s.erfcx, "erfinv": lambda s: s.erfinv,
    "erfcinv": lambda s: s.erfcinv, "ndtri": lambda s: s.ndtri, "lgamma": _scipy_lgamma, "gammaln": _scipy_lgamma,
    "digamma": lambda s: s.psi, "psi": lambda s: s.psi, "ndtr": lambda s: s.ndtr, "log_ndtr": lambda s: s.log_ndtr,
}


def _is_device_array(data: Any) -> bool:
    """A CuPy or stand-in array (they copy to the host with ``.get()``; NumPy may not convert them)."""
    if isinstance(data, np.ndarray):
        return False
    module = type(data).__module__
    return hasattr(data, "__cuda_array_interface__") or module.startswith(("cupy", "ember.backends"))


def tune_allocator() -> bool:
    """Let glibc reuse freed large buffers instead of returning them to the OS.

    By default glibc serves every allocation over ~128 KiB with a fresh ``mmap`` and unmaps it on
    free, so each new activation or gradient array page-faults on first touch: measured at ~25% of a
    small CNN's training step here. Raising the mmap and trim thresholds turns the heap into a
    caching pool (what PyTorch's CPU caching allocator achieves). Process-wide; a no-op off glibc.
    Disable with ``EMBER_CPU_ALLOCATOR=system``.
    """
    if _config.CPU_ALLOCATOR != "tuned":
        return False
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3
        ok = libc.mallopt(m_mmap_threshold, 32 * 1024 * 1024)  # glibc's maximum on 64-bit
        ok &= libc.mallopt(m_trim_threshold, 512 * 1024 * 1024)
        return bool(ok)
    except (OSError, AttributeError):
        return False


ALLOCATOR_TUNED = tune_allocator()
register_backend("cpu", CPUBackend())
