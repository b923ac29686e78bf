"""Native (numba) kernels for gelu's backward (erf and tanh forms) and the softmax rows, and the glue of erf/gelu.

SciPy's float32 ``erf`` and libm's scalar ``erf``/``exp`` cost ~12 ns per element (80 ms for one
GPT MLP activation of 6.3M elements, where PyTorch's gelu takes 3 ms), and the NumPy formula of gelu
is five more passes over memory. ``erf_f32`` and ``gelu_f32`` are 16-lane float32 vector passes in
``cpu_vector_rows`` (the pieces of ``_fast_math_coeffs.py``, made by ``tools/fit_fast_math.py``, evaluated in
float32: erf within 1 ulp of the correctly rounded value for every float32, checked on a grid in the tests; NaN,
+-inf, -0.0 and subnormals as SciPy). The loops here run in float64 and round each result once to float32.

Every kernel works on elements ``[start, stop)`` of flat contiguous arrays and releases the GIL, so
``ember.backends.cpu_threads.parallel_for`` runs it on all cores.

``gelu_f32`` computes exactly the NumPy formula of ``ember/ops/nn_ops.py``'s gelu with that erf
(``0.5 * x * (1 + erf(x * 0.70710677))``, each operation rounded to float32 in the same order), so
eager results equal those of a fused graph, which replays that formula. ``gelu_backward_f32`` (also
``cpu_vector_rows``) computes ``g * (cdf(x) + x * pdf(x))`` in float32 with cdf from the scaled erfc for negative x
(no ``1 + erf`` cancellation); the tanh form's backward here runs in float64 and rounds once.

Example:
    >>> from ember.backends.cpu_kernels import get
    >>> get("erf_f32") is None or callable(get("erf_f32"))
    True
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ember.backends import cpu_erf_table, cpu_kernels
from ember.backends.cpu_threads import parallel_for

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_TANH_A = 0.044715


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

    # The helpers the cached kernels call are module globals, not closure cells: numba keys its disk cache on the
    # pickled closure, and a dispatcher pickles differently in every process (every run recompiled: 2-8 s).
    global _EXP64, _ROW_MAX

    _EXP64, _ROW_MAX = _exp64(numba), _row_max(numba)

    # error_model="numpy": numba's default checks every float division for zero, which keeps the loop scalar (4x)
    @njit(cache=True, nogil=True, fastmath=fast, error_model="numpy")
    def gelu_tanh_backward_f32(g: Any, x: Any, out: Any, start: int, stop: int) -> None:  # pragma: no cover
        """``g * (0.5 (1 + t) + 0.5 x (1 - t^2) u')``, ``t = tanh(u) = 1 - 2 / (exp(2u) + 1)``, in float64."""
        g, x, out = g[start:stop], x[start:stop], out[start:stop]
        for i in range(x.size):
            v = np.float64(x[i])
            v2 = v * v
            u = v * (_SQRT_2_OVER_PI + (_SQRT_2_OVER_PI * _TANH_A) * v2)
            t = 1.0 - 2.0 / (_EXP64(2.0 * u) + 1.0)
            du = _SQRT_2_OVER_PI + (3.0 * _SQRT_2_OVER_PI * _TANH_A) * v2
            out[i] = np.float32(np.float64(g[i]) * (0.5 * (1.0 + t) * (1.0 + v * (1.0 - t) * du)))

    # erf_f32, gelu_f32 and gelu_backward_f32: cpu_vector_rows (16-lane float32 vector passes)
    kernels = {"gelu_tanh_backward_f32": gelu_tanh_backward_f32}
    for name, kernel in _softmax_kernels(numba).items():  # one kernel for both dtypes (numba compiles each)
        kernels[f"{name}_f32"] = kernels[f"{name}_f64"] = kernel
    return kernels


def _softmax_kernels(numba: Any) -> dict[str, Callable]:
    """softmax / log_softmax over the last dim of (rows, n) arrays and their backward, with ``exp`` by
    ``_exp64`` (float64 throughout, an ulp or two: float32 and float64 results alike). Scalars that a pass applies
    are cast to the array's dtype first (``out.dtype.type``): the output passes then run in it."""
    njit = numba.njit

    @njit(cache=True, nogil=True, fastmath=_ROWS)
    def softmax_rows(x: Any, out: Any, r0: int, r1: int) -> None:  # pragma: no cover - compiled
        """Rows ``[r0, r1)``: ``exp(x - max) / sum``, the sum in float64."""
        n = x.shape[1]
        for r in range(r0, r1):
            xr, yr = x[r], out[r]
            top = np.float64(_ROW_MAX(xr))
            total = 0.0
            for i in range(n):
                e = _EXP64(np.float64(xr[i]) - top)
                yr[i] = e
                total += e
            inv = out.dtype.type(1.0 / total)  # in the array's dtype: a float64 factor made this pass 3x slower
            for i in range(n):
                yr[i] *= inv

    @njit(cache=True, nogil=True, fastmath=_ROWS)
    def log_softmax_rows(x: Any, out: Any, r0: int, r1: int) -> None:  # pragma: no cover - compiled
        """``x - max - log(sum(exp(x - max)))`` per row, the sum and its log in float64."""
        n = x.shape[1]
        for r in range(r0, r1):
            xr, yr = x[r], out[r]
            top = _ROW_MAX(xr)
            top64 = np.float64(top)
            total = 0.0
            for i in range(n):
                total += _EXP64(np.float64(xr[i]) - top64)
            log_total = out.dtype.type(math.log(total))
            for i in range(n):  # (x - max) is exact near the max; then one rounding, as NumPy's and torch's
                yr[i] = (xr[i] - top) - log_total

    @njit(cache=True, nogil=True, fastmath=_ROWS)
    def softmax_backward_rows(g: Any, y: Any, out: Any, r0: int, r1: int) -> None:  # pragma: no cover - compiled
        """``y * (g - sum(g * y))`` per row, the sum in float64."""
        n = y.shape[1]
        for r in range(r0, r1):
            gr, yr, o = g[r], y[r], out[r]
            dot = 0.0
            for i in range(n):
                dot += np.float64(gr[i]) * np.float64(yr[i])
            dot_low = out.dtype.type(dot)
            for i in range(n):
                o[i] = yr[i] * (gr[i] - dot_low)

    @njit(cache=True, nogil=True, fastmath=_ROWS)
    def log_softmax_backward_rows(g: Any, y: Any, out: Any, r0: int, r1: int) -> None:  # pragma: no cover
        """``g - exp(y) * sum(g)`` per row, the sum in float64."""
        n = y.shape[1]
        for r in range(r0, r1):
            gr, yr, o = g[r], y[r], out[r]
            total = 0.0
            for i in range(n):
                total += gr[i]
            total_low = out.dtype.type(total)
            for i in range(n):
                o[i] = gr[i] - out.dtype.type(_EXP64(np.float64(yr[i]))) * total_low

    return {"softmax_rows": softmax_rows, "log_softmax_rows": log_softmax_rows,
            "softmax_backward_rows": softmax_backward_rows, "log_softmax_backward_rows": log_softmax_backward_rows}


def _row_max(numba: Any) -> Callable:
    """The largest element of a 1-D array with 16 running maxima (a single one is a serial chain LLVM does not
    vectorize: 3.5x slower). A NaN may be skipped: softmax's NaN still reaches the whole row through its exp."""
    @numba.njit(nogil=True)
    def row_max(xr: Any) -> Any:  # pragma: no cover - compiled
        n = xr.shape[0]
        t0 = t1 = t2 = t3 = t4 = t5 = t6 = t7 = xr[0]
        t8 = t9 = t10 = t11 = t12 = t13 = t14 = t15 = xr[0]
        i = 0
        while i + 16 <= n:
            t0, t1, t2, t3 = max(t0, xr[i]), max(t1, xr[i + 1]), max(t2, xr[i + 2]), max(t3, xr[i + 3])
            t4, t5, t6, t7 = max(t4, xr[i + 4]), max(t5, xr[i + 5]), max(t6, xr[i + 6]), max(t7, xr[i + 7])
            t8, t9, t10, t11 = max(t8, xr[i + 8]), max(t9, xr[i + 9]), max(t10, xr[i + 10]), max(t11, xr[i + 11])
            t12, t13 = max(t12, xr[i + 12]), max(t13, xr[i + 13])
            t14, t15 = max(t14, xr[i + 14]), max(t15, xr[i + 15])
            i += 16
        top = max(max(max(max(t0, t1), max(t2, t3)), max(max(t4, t5), max(t6, t7))),
                  max(max(max(t8, t9), max(t10, t11)), max(max(t12, t13), max(t14, t15))))
        while i < n:
            top = max(top, xr[i])
            i += 1
        return top

    return row_max


# Set by build(): the helpers the cached kernels call (module globals: see build).
_EXP64 = _ROW_MAX = None
# Row kernels: reassociation lets LLVM keep several partial sums (and max) in vector registers; FMAs inside exp.
_ROWS = {"contract", "reassoc"}
_LOG2E = 1.0 / math.log(2.0)
_LN2_HI = 0.6931471803691238  # ln 2 split so k * _LN2_HI is exact for |k| < 2**11
_LN2_LO = 1.9082149292705877e-10


def _exp64(numba: Any, degree: int = 13) -> Callable:
    """A float64 ``exp`` LLVM vectorizes (numba's calls libm once per element: 4x slower than NumPy's): ``2**k *
    exp(r)``, ``r = x - k ln 2`` in [-ln2/2, ln2/2], exp(r) by its Taylor polynomial (degree 13: within an ulp
    or two of float64; 7: 5e-9 relative, for float32 results), ``2**k`` built from its bits in two factors (no overflow of the exponent field for
    results down to the smallest subnormal). x > 709.78 gives inf, x < -745.2 gives 0, NaN stays NaN."""
    import llvmlite.ir as llvm_ir  # noqa: PLC0415 - numba's own dependency, only with numba
    from numba.core import types  # noqa: PLC0415
    from numba.extending import intrinsic  # noqa: PLC0415

    @intrinsic
    def bits_to_float64(typingctx: Any, bits: Any) -> Any:
        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            return builder.bitcast(args[0], llvm_ir.DoubleType())
        return types.float64(types.int64), codegen

    @intrinsic
    def float64_bits(typingctx: Any, value: Any) -> Any:
        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            return builder.bitcast(args[0], llvm_ir.IntType(64))
        return types.int64(types.float64), codegen

    taylor = tuple(1.0 / math.factorial(k) for k in range(degree, -1, -1))
    poly = numba.njit(inline="always", fastmath={"contract"})(_polynomial(taylor))
    magic = 6755399441055744.0  # 1.5 * 2**52: adding it rounds to an integer, which its low bits then hold
    magic_bits = 0x4338000000000000

    @numba.njit(inline="always", fastmath={"contract"})
    def exp64(x: float) -> float:  # pragma: no cover - compiled
        clamped = x if x > -746.0 else -746.0  # selects, not min/max: numba's NaN-aware min/max do not vectorize
        clamped = clamped if clamped < 710.0 else 710.0
        shifted = clamped * _LOG2E + magic
        k = shifted - magic
        r = (clamped - k * _LN2_HI) - k * _LN2_LO
        ki = float64_bits(shifted) - magic_bits
        half = ki >> 1
        e = (poly(r) * bits_to_float64((half + 1023) << 52)) * bits_to_float64((ki - half + 1023) << 52)
        e = math.inf if x > 709.782712893384 else e
        e = 0.0 if x < -745.2 else e
        return e if x == x else x

    return exp64


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


_ROW_DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
_ROW_KERNEL_NAMES: dict = {}  # (name, "f32"/"f64") -> the kernel's name (no string built per call)


def run_rows(name: str, out: np.ndarray, *arrays: np.ndarray) -> np.ndarray | None:
    """The row kernel ``name`` (``softmax_rows``, ``log_softmax_backward_rows``, ...; the ``_f32``/``_f64`` one
    for the arrays' dtype) over the last dim of ``arrays`` into ``out`` (all of one float32/float64 dtype and
    shape), rows split over ember's CPU threads (MIN_CHUNK elements or more each); None without the kernel (no
    numba) or for other dtypes."""
    dtype = out.dtype
    suffix = _ROW_DTYPES.get(dtype)
    if suffix is None or out.ndim == 0:
        return None
    for a in arrays:
        if a.dtype is not dtype and a.dtype != dtype:
            return None
    key = (name, suffix)
    full_name = _ROW_KERNEL_NAMES.get(key)
    if full_name is None:
        full_name = _ROW_KERNEL_NAMES[key] = f"{name}_{suffix}"
    kernel = cpu_kernels.get(full_name)
    if kernel is None:
        return None
    width = out.shape[-1]
    chunk = max(1, MIN_CHUNK // width)
    if out.size < chunk * width * 2 and out.flags.c_contiguous:
        # fewer rows than two chunks: parallel_for would run the kernel on all rows inline; call it so (its
        # closure, thread count and the checks above cost ~2 us of a 5x5 softmax's 3.5)
        flat_out = out.reshape(-1, width)
        kernel(*[a.reshape(-1, width) if a.flags.c_contiguous else np.ascontiguousarray(a).reshape(-1, width)
                 for a in arrays], flat_out, 0, flat_out.shape[0])
        return out
    rows = [np.ascontiguousarray(a).reshape(-1, width) for a in arrays]
    target = out if out.flags.c_contiguous else np.empty(out.shape, dtype)
    flat_out = target.reshape(-1, width)
    parallel_for(lambda r0, r1: kernel(*rows, flat_out, r0, r1), flat_out.shape[0], chunk)
    if target is not out:
        out[...] = target
    return out
