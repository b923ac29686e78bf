"""Native (numba) float32 kernels for erf, gelu and gelu's backward: one vectorized pass each.

SciPy's float32 ``erf`` and libm's scalar ``erf``/``exp`` cost ~12 ns per element (80 ms for one
GPT MLP activation of 6.3M elements, where PyTorch's gelu takes 3 ms), and the NumPy formula of gelu
is five more passes over memory. These loops evaluate fitted polynomials (``_fast_math_coeffs.py``,
made by ``tools/fit_fast_math.py``) in float64 for every piece and select, so LLVM vectorizes them
(AVX-512/AVX2); each result is rounded once to float32. Accuracy: erf within 1 ulp of the correctly
rounded value for every float32 (checked exhaustively on a grid in the tests); NaN, +-inf, -0.0 and
subnormals as SciPy.

Every kernel works on elements ``[start, stop)`` of flat contiguous arrays and releases the GIL, so
``ember.backends.cpu_threads.parallel_for`` runs it on all cores.

``gelu_f32`` computes exactly the NumPy formula of ``ember/ops/nn_ops.py``'s gelu with this erf
(``0.5 * x * (1 + erf(x * 0.70710677))``, each operation rounded to float32 in the same order), so
eager results equal those of a fused graph, which replays that formula. ``gelu_backward_f32`` computes
``g * (cdf(x) + x * pdf(x))`` in float64 and rounds once.

Example:
    >>> from ember.backends.cpu_kernels import get
    >>> get("erf_f32") is None or callable(get("erf_f32"))
    True
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ember.backends import _fast_math_coeffs as C, cpu_erf_table, cpu_kernels
from ember.backends.cpu_threads import parallel_for

_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_ERF_ONE = 3.925  # erf(x) rounds to 1.0 in float32 from 3.9192 on
_EXP_CUTOFF = 14.5  # x * exp(-x**2 / 2) underflows float32 beyond


def _polynomial(coeffs: tuple) -> Callable[[float], float]:
    """``p(s)`` by Horner's rule with the coefficients written into the source: numba unrolls no
    loop over a tuple, and a loop per element kept the kernels from vectorizing (3x slower)."""
    expr = repr(float(coeffs[0]))
    for c in coeffs[1:]:
        expr = f"({expr}) * s + {float(c)!r}"  # floats from our own table, repr'd: nothing else enters
    namespace: dict = {}
    exec(f"def p(s):\n    return {expr}\n", namespace)  # noqa: S102 - source made of float literals
    return namespace["p"]


def build(numba: Any) -> dict[str, Callable]:
    """The kernels, compiled with ``numba`` (cached on disk)."""
    njit = numba.njit
    # contract: multiply-adds become FMAs inside the polynomials (2x fewer vector operations). The
    # float32 steps of gelu around erf have no multiply-add pattern, so they round as NumPy's do.
    fast = {"contract"}

    small, mid, far, unit = (njit(inline="always", fastmath=fast)(_polynomial(c)) for c in
                             (C.ERF_SMALL, C.ERF_MID, C.ERF_FAR, C.EXP_UNIT))

    @njit(inline="always", fastmath=fast)
    def erf64(x: float) -> float:  # pragma: no cover - compiled
        """erf(x) good to ~1e-9 absolute (float32 accuracy), every piece computed, then selected."""
        a = abs(x)
        p0 = x * small((x * x - C.ERF_SMALL_MID) * C.ERF_SMALL_INV_HALF)
        p1 = mid((min(a, 2.5) - C.ERF_MID_MID) * C.ERF_MID_INV_HALF)
        p2 = far((min(a, _ERF_ONE) - C.ERF_FAR_MID) * C.ERF_FAR_INV_HALF)
        r = math.copysign(p1 if a < 2.5 else (p2 if a < _ERF_ONE else 1.0), x)
        return p0 if a < 1.0 else (r if a == a else x)  # NaN stays NaN

    @njit(inline="always", fastmath=fast)
    def exp_neg_half_square(x: float) -> float:  # pragma: no cover - compiled
        """exp(-x**2 / 2) as exp(-x**2 / 128) ** 64 (a polynomial on [-1.65, 0], six squarings);
        0 beyond |x| = 14.5, where x * exp(-x**2 / 2) is below float32's smallest subnormal."""
        a = min(abs(x), _EXP_CUTOFF)
        e = unit((a * a * (-1.0 / 128.0) - C.EXP_UNIT_MID) * C.EXP_UNIT_INV_HALF)
        for _ in range(6):
            e = e * e
        return e if abs(x) < _EXP_CUTOFF else 0.0

    @njit(cache=True, nogil=True, fastmath=fast)
    def erf_f32(x: Any, out: Any, start: int, stop: int) -> None:  # pragma: no cover - compiled
        # Slices, then a loop from 0: a loop over range(start, stop) does not vectorize (8x slower).
        x, out = x[start:stop], out[start:stop]
        for i in range(x.size):
            out[i] = np.float32(erf64(np.float64(x[i])))

    @njit(cache=True, nogil=True, fastmath=fast)
    def gelu_f32(x: Any, out: Any, start: int, stop: int) -> None:  # pragma: no cover - compiled
        c, half, one = np.float32(_INV_SQRT_2), np.float32(0.5), np.float32(1.0)
        x, out = x[start:stop], out[start:stop]
        for i in range(x.size):
            v = x[i]
            e = np.float32(erf64(np.float64(v * c)))
            out[i] = (half * v) * (one + e)

    @njit(cache=True, nogil=True, fastmath=fast)
    def gelu_backward_f32(g: Any, x: Any, out: Any, start: int, stop: int) -> None:  # pragma: no cover - compiled
        g, x, out = g[start:stop], x[start:stop], out[start:stop]
        for i in range(x.size):
            v = np.float64(x[i])
            cdf = 0.5 * (1.0 + erf64(v * _INV_SQRT_2))
            tail = v * (exp_neg_half_square(v) * _INV_SQRT_2PI)  # inf * 0 = NaN at +-inf, as PyTorch
            out[i] = np.float32(np.float64(g[i]) * (cdf + tail))

    return {"erf_f32": erf_f32, "gelu_f32": gelu_f32, "gelu_backward_f32": gelu_backward_f32}


# Elements per thread below which a kernel runs on the calling thread alone (a hand-off costs ~20-50 us).
MIN_CHUNK = 1 << 16


def run_elementwise(kernel: Callable, out: np.ndarray, *arrays: np.ndarray) -> np.ndarray:
    """``kernel(*flat_arrays, flat_out, start, stop)`` over all elements, in chunks on ember's CPU
    threads; ``arrays`` are float32 arrays of ``out``'s shape (made contiguous here)."""
    flat = [np.ascontiguousarray(a).reshape(-1) for a in arrays]
    target = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
    flat_out = target.reshape(-1)
    parallel_for(lambda start, stop: kernel(*flat, flat_out, start, stop), flat_out.size, MIN_CHUNK)
    if target is not out:
        out[...] = target
    return out


def erf_float32_first(fallback: Callable, x: Any, out: Any = None) -> Any:
    """erf for the CPU backend: float32 arrays take the native kernel, or without numba the NumPy
    table method (``cpu_erf_table``: ~2 ns per element, where SciPy's float32 erf takes ~13); every
    other input takes ``fallback`` (SciPy's or ember's NumPy erf). Takes ``out=`` as a ufunc does.
    Eager gelu and a fused graph's replay of gelu's formula both come here, so they agree bit for bit."""
    if not isinstance(x, (np.ndarray, np.float32)) or x.dtype != np.float32 or (
            out is not None and (not isinstance(out, np.ndarray) or out.dtype != np.float32 or out.shape != np.shape(x))):
        return fallback(x) if out is None else fallback(x, out=out)
    array = np.asarray(x)
    target = np.empty(array.shape, np.float32) if out is None else out
    kernel = cpu_kernels.get("erf_f32")
    result = run_elementwise(kernel, target, array) if kernel is not None else cpu_erf_table.erf(array, target)
    return result if array.ndim or out is not None else result[()]
