"""Intel MKL's GEMMs, one thread per call, as ember's BLAS where MKL is installed (the optional ``mkl`` extra).

Why: on an Intel Xeon (AVX-512) MKL's one-thread sgemm runs 5-17% faster than the OpenBLAS NumPy bundles, on
every product the workloads make (W1's 64 x 1000 x 100 forward 91 against 103-108 us, GPT's 4096 x 384 x 1536
24.1 against 28.2 ms: docs/cpu-performance.md, "mkl20"), and GEMMs are most of a GPT, W2, W4, ResNet or MNIST
step. NumPy keeps its own OpenBLAS; ember calls MKL's ``cblas_sgemm``/``cblas_dgemm`` itself for the products it
makes (``matmul``, ``linear``, the convolutions' GEMMs, attention, compiled graphs' ``matmul_t``).

The provider is chosen once per process, on the first product (``provider()``), by ``EMBER_BLAS``:

* ``openblas``: NumPy's OpenBLAS, exactly as without the extra;
* ``mkl``: MKL wherever its library loads (a RuntimeWarning and OpenBLAS where it does not);
* ``auto`` (the default): MKL where it loads and the CPU is an Intel one (``GenuineIntel``). MKL's fast paths
  are Intel's; on other CPUs (AMD Zen) it is not known to be faster here, so OpenBLAS stays (decision: a vendor
  check, not a timing probe, so a program's numbers never depend on a measurement's noise).

The library is the ``mkl`` wheel's ``libmkl_rt`` (found through ``importlib.metadata.files("mkl")``, else in
``sys.prefix/lib``), loaded ``RTLD_LOCAL`` so its symbols cannot replace OpenBLAS's ``cblas_*`` for NumPy. Its
threading layer is set to SEQUENTIAL before any other MKL call: ember splits large products over its own
threads (``cpu_blas_gemm.split_gemm``, the hot worker), and MKL's OpenMP threads would spin after each call as
OpenBLAS's do (docs/cpu-performance.md, "blas18"). The interface layer is set to LP64 (32-bit sizes), whatever
``MKL_INTERFACE_LAYER`` says. Where MKL is already loaded with another layer (a NumPy built on MKL), the layer
cannot be set and OpenBLAS is used.

Numerics: MKL blocks its sums differently from OpenBLAS, so products differ from NumPy's in the last bits
(within float32 GEMM error); every ember path uses the same provider, so ember's own equalities (a product split
over threads against one thread, compiled against eager) hold with either. With ``beta = 0`` MKL never reads the
output (NaN in a fresh ``numpy.empty`` does not leak). Complex, integer and mixed dtypes stay with NumPy.

Example:
    >>> import numpy as np
    >>> a, b = np.ones((4, 3), np.float32), np.ones((3, 2), np.float32)
    >>> gemm(a, b).tolist()
    [[3.0, 3.0], [3.0, 3.0], [3.0, 3.0], [3.0, 3.0]]
    >>> gemm(a, b, alpha=2.0, beta=1.0, c=np.arange(2, dtype=np.float32)).tolist()[0]
    [6.0, 7.0]
"""
from __future__ import annotations

import ctypes
import os
import platform
import sys
import warnings
from typing import Any

import numpy

from ember import _config
from ember.backends import native_kernel

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_SEQUENTIAL, _LP64 = 1, 0  # MKL_THREADING_SEQUENTIAL, MKL_INTERFACE_LP64
_CBWR_AUTO_STRICT = 0x10002  # MKL_CBWR_AUTO | MKL_CBWR_STRICT
_INT_MAX = 2**31 - 1
PROVIDERS = ("auto", "mkl", "openblas")

# provider: "mkl" or "openblas" once chosen; lib: the CDLL; funcs: ctypes functions by name; fast: the numba
# caller (False: none); use: whether ember's products go to MKL (the hot-path flag, a list for speed).
_STATE: dict[str, Any] = {"provider": None, "lib": None, "funcs": {}, "fast": None, "path": None}
_USE = [False]


def library_path() -> str | None:
    """Path of the ``mkl`` wheel's ``libmkl_rt`` (or one in ``sys.prefix/lib``: a conda MKL), or None."""
    try:
        import importlib.metadata as metadata

        for entry in metadata.files("mkl") or ():
            if entry.name.startswith("libmkl_rt.so"):
                path = str(entry.locate())
                if os.path.exists(path):
                    return os.path.realpath(path)
    except Exception:  # noqa: BLE001 - no wheel, or a broken RECORD: look in the prefix instead
        pass
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        for name in ("libmkl_rt.so.3", "libmkl_rt.so.2", "libmkl_rt.so"):
            path = os.path.join(prefix, "lib", name)
            if os.path.exists(path):
                return path
    return None


def _intel_cpu() -> bool:
    """Whether the CPU's vendor is Intel (``GenuineIntel`` in /proc/cpuinfo, else ``platform.processor()``)."""
    if "intel" not in _STATE:
        _STATE["intel"] = _read_vendor()
    return _STATE["intel"]


def _read_vendor() -> bool:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("vendor_id"):
                    return "GenuineIntel" in line
    except OSError:
        pass
    return "intel" in platform.processor().lower()


def _load(path: str) -> Any:
    """MKL's runtime library with its sequential threading layer and 32-bit interface set, or None."""
    try:
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
        layer, interface, cbwr = lib.MKL_Set_Threading_Layer, lib.MKL_Set_Interface_Layer, lib.MKL_CBWR_Set
    except (OSError, AttributeError):
        return None
    for fn in (layer, interface, cbwr):
        fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
    # The two layers return the layer now in force (-1: another one was fixed by an earlier MKL call). Strict
    # conditional numerical reproducibility (0 on success) makes every element's sum run in one order whatever
    # the product's shape, layout, alignment or blocking: a product split by rows or columns over threads, or
    # computed transposed, gives the bits of the whole (MKL's default mode does not: a 256 x 784 x 512 product
    # split in two row blocks differed in the last bits).
    if interface(_LP64) != _LP64 or layer(_SEQUENTIAL) != _SEQUENTIAL or cbwr(_CBWR_AUTO_STRICT) != 0:
        return None
    return lib


def _choose() -> str:
    setting = (_config.BLAS or "auto").lower()
    if setting not in PROVIDERS:
        raise ValueError(f"EMBER_BLAS={_config.BLAS!r}: expected one of {', '.join(PROVIDERS)}")
    if setting == "openblas" or (setting == "auto" and not _intel_cpu()):
        return "openblas"
    if _STATE["lib"] is not None:  # loaded before (``use`` switching back): its layers are set for good
        return "mkl"
    path = library_path()
    lib = _load(path) if path else None
    if lib is None:
        if setting == "mkl":
            warnings.warn("EMBER_BLAS=mkl but Intel MKL's libmkl_rt was not found or its sequential layer could "
                          "not be set; ember uses NumPy's BLAS (install it with `pip install ember[mkl]`)",
                          RuntimeWarning, stacklevel=3)
        return "openblas"
    _STATE["lib"], _STATE["path"] = lib, path
    return "mkl"


def provider() -> str:
    """``"mkl"`` or ``"openblas"``: the BLAS ember's products use in this process (chosen on first use).

    Example:
        >>> provider() in ("mkl", "openblas")
        True
    """
    chosen = _STATE["provider"]
    if chosen is None:
        chosen = _STATE["provider"] = _choose()
        _USE[0] = chosen == "mkl"
    return chosen


def use(name: str | None) -> str:
    """Choose the provider again (``"auto"``, ``"mkl"``, ``"openblas"``; None: ``EMBER_BLAS``) for tests and
    benchmarks, between products (the hot worker, if running, is pointed at it); returns the one now in force."""
    saved = _config.BLAS
    if name is not None:
        _config.BLAS = name
    try:
        _STATE["provider"] = None
        _USE[0] = False
        chosen = provider()
    finally:
        _config.BLAS = saved
    hot = sys.modules.get("ember.backends.cpu_hot_worker")  # running: its jobs call the new provider's GEMM
    if hot is not None:
        hot.rebind()
    return chosen


def _func(name: str, kind: str) -> Any:
    """MKL's ctypes function ``name`` with ``kind``'s argument types ("gemm" or "batch"), or None."""
    funcs = _STATE["funcs"]
    if name not in funcs:
        fn = getattr(_STATE["lib"], name, None)
        if fn is not None:
            real = ctypes.c_float if name.startswith("cblas_s") else ctypes.c_double
            i, p = ctypes.c_int, ctypes.c_void_p
            fn.restype = None
            if kind == "gemm":
                fn.argtypes = [i, i, i, i, i, i, real, p, i, p, i, real, p, i]
            else:  # cblas_?gemm_batch_strided: each operand's stride between matrices after its leading dim
                fn.argtypes = [i, i, i, i, i, i, real, p, i, i, p, i, i, real, p, i, i, i]
        funcs[name] = fn
    return funcs[name]


def cblas(kind: str) -> Any:
    """MKL's ``cblas_sgemm`` (kind ``"s"``) or ``cblas_dgemm`` (``"d"``) as a ctypes function (row-major cblas
    arguments, 32-bit sizes), or None when MKL is not the provider here. ``cpu_blas_gemm._cblas`` returns it in
    place of OpenBLAS's, so the bias-in-GEMM and split products and the hot worker use MKL too."""
    if provider() != "mkl":
        return None
    return _func(f"cblas_{kind}gemm", "gemm")


def cblas_pointer(kind: str) -> int | None:
    """The C address of :func:`cblas` (for compiled callers), or None."""
    fn = cblas(kind)
    return None if fn is None else ctypes.cast(fn, ctypes.c_void_p).value


def _fast() -> Any:
    """The numba caller (``cpu_mkl_call``), or False without numba (then ctypes: ~3 us more per product)."""
    fast = _STATE["fast"]
    if fast is None:
        make = native_kernel(numpy, "cblas_gemm_arrays")
        fast = _STATE["fast"] = make() if make is not None else False
    return fast


def _operand(m: Any) -> tuple[int, int] | None:
    """(transpose flag, leading dimension) under which BLAS reads matrix ``m`` in place, or None (copy it):
    rows or columns contiguous, the other stride a positive multiple of the item size, within 32 bits."""
    item = m.itemsize
    rows, cols = m.shape
    s_row, s_col = m.strides
    # A size-1 axis's stride is never used (and may be anything: 0 after broadcast_to, any value in a view).
    if cols == 1:
        s_col = item
    if rows == 1:
        s_row = max(cols, 1) * item if s_col == item else item
    if s_col == item and s_row % item == 0 and _INT_MAX >= s_row // item >= max(cols, 1):
        return _NO_TRANS, s_row // item
    if s_row == item and s_col % item == 0 and _INT_MAX >= s_col // item >= max(rows, 1):
        return _TRANS, s_col // item
    return None


def _readable(m: Any) -> tuple[Any, tuple[int, int]]:
    """``m`` and its (flag, ld), copied first when BLAS cannot read it in place (negative or zero strides,
    neither axis contiguous, unaligned data)."""
    layout = _operand(m) if m.flags.aligned else None
    if layout is None:
        m = numpy.ascontiguousarray(m)
        layout = _NO_TRANS, max(m.shape[1], 1)
    return m, layout


_KINDS = {numpy.dtype(numpy.float32): "s", numpy.dtype(numpy.float64): "d"}  # native byte order only
_FLIP = {_NO_TRANS: _TRANS, _TRANS: _NO_TRANS}
_ADDRESSES: dict[str, int] = {}
# Products narrower than this (N columns, with more rows than columns) are computed as ``(b^T a^T)^T``: in
# strict CNR mode MKL runs a (256, 512) @ (512, 10) product at 1.4x OpenBLAS's time, its transpose at 0.75x.
NARROW = 16


def _blas_kind(a: Any, b: Any) -> str | None:
    """``"s"``/``"d"`` for two NumPy arrays of one native-order float32/float64 dtype, else None."""
    if a.__class__ is not numpy.ndarray or b.__class__ is not numpy.ndarray:
        return None
    dtype = a.dtype
    if b.dtype is not dtype and b.dtype != dtype:
        return None
    return _KINDS.get(dtype)


def _address(kind: str) -> int:
    """The C address of MKL's ``cblas_?gemm`` (what the numba caller calls)."""
    address = _ADDRESSES.get(kind)
    if address is None:
        address = _ADDRESSES[kind] = ctypes.cast(_func(f"cblas_{kind}gemm", "gemm"), ctypes.c_void_p).value
    return address


def _call(kind: str, ta: int, tb: int, m: int, n: int, k: int, alpha: float, a: Any, lda: int, b: Any, ldb: int,
          beta: float, c: Any, ldc: int) -> None:
    """One row-major MKL GEMM on the first elements of the 2-D arrays ``a``, ``b``, ``c``."""
    fast = _STATE["fast"]
    if fast is None:
        fast = _fast()
    if fast:
        fast(_address(kind), ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
    else:
        _func(f"cblas_{kind}gemm", "gemm")(_ROW_MAJOR, ta, tb, m, n, k, alpha, a.ctypes.data, lda, b.ctypes.data,
                                             ldb, beta, c.ctypes.data, ldc)


def _writable_out(out: Any, shape: tuple, dtype: Any) -> bool:
    """Whether BLAS can write ``out`` directly: the right shape and dtype, rows' elements contiguous, rows at
    least a row apart (32-bit), aligned and writeable."""
    if out.shape != shape or out.dtype != dtype or out.__class__ is not numpy.ndarray:
        return False
    item = out.itemsize
    s_row, s_col = out.strides
    return (s_col == item or shape[1] <= 1) and s_row % item == 0 and _INT_MAX >= s_row // item >= max(shape[1], 1) \
        and out.flags.aligned and out.flags.writeable


def _gemm_2d(kind: str, a: Any, b: Any, out: Any, alpha: float, beta: float) -> Any:
    """``out = alpha * a @ b + beta * out`` (a fresh ``out`` when None, ``beta`` then 0) by MKL."""
    m, k = a.shape
    n = b.shape[1]
    fresh = out is None
    if fresh:
        out = numpy.empty((m, n), a.dtype)
        beta = 0.0
    if m == 0 or n == 0:
        return out
    if k == 0 or alpha == 0 or max(m, n, k) > _INT_MAX:  # BLAS would reject lda = 0 / 64-bit sizes: NumPy's way
        return _numpy_gemm(a, b, out, alpha, beta)
    a, (ta, lda) = _readable(a)
    b, (tb, ldb) = _readable(b)
    if n < NARROW and m > n and beta == 0:  # the transposed product, then one small transposing copy
        target = numpy.empty((n, m), a.dtype)
        _call(kind, _FLIP[tb], _FLIP[ta], n, m, k, alpha, b, ldb, a, lda, 0.0, target, m)
        out[...] = target.T
        return out
    if fresh:
        _call(kind, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, out, n)
        return out
    direct = _writable_out(out, (m, n), a.dtype) and not (numpy.may_share_memory(out, a)
                                                             or numpy.may_share_memory(out, b))
    target = out if direct else (numpy.empty((m, n), a.dtype) if beta == 0 else numpy.array(out, a.dtype))
    _call(kind, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, target, max(target.strides[0] // target.itemsize, n))
    if target is not out:
        out[...] = target
    return out


def _numpy_gemm(a: Any, b: Any, out: Any, alpha: float, beta: float) -> Any:
    """``out = alpha * a @ b + beta * out`` by NumPy (``beta = 0``: ``out`` not read)."""
    product = numpy.matmul(a, b)
    if alpha != 1:
        product = product * alpha
    if out is None:
        return product
    if beta == 0:
        out[...] = product
    else:
        if beta != 1:
            out *= beta
        out += product
    return out


def gemm(a: Any, b: Any, out: Any = None, alpha: float = 1.0, beta: float = 0.0, c: Any = None) -> Any:
    """``alpha * a @ b + beta * c`` of two matrices, into ``out`` when given (else a new array), by the
    provider's BLAS (MKL here when it is the provider, NumPy otherwise).

    ``c`` is anything that broadcasts to the product's shape (a bias row, a matrix); without it, ``beta``
    scales what ``out`` holds (``beta = 0``: ``out`` is never read, so garbage or NaN in it do not leak).
    Transposed and strided operands are read in place (BLAS's transpose flags and leading dimensions); only
    what BLAS cannot read (negative or zero strides, neither axis contiguous) is copied. float32/float64
    operands of one dtype go to BLAS; anything else (complex, integers, mixed dtypes) to NumPy.

    Example:
        >>> import numpy as np
        >>> x = np.arange(6, dtype=np.float64).reshape(2, 3)
        >>> gemm(x, x.T).tolist()
        [[5.0, 14.0], [14.0, 50.0]]
    """
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"gemm: expected matrices (M, K) and (K, N), got shapes {tuple(a.shape)} and "
                         f"{tuple(b.shape)}; use numpy.matmul for stacks and vectors")
    if c is not None and beta != 0:
        if out is None:
            out = numpy.empty((a.shape[0], b.shape[1]), numpy.result_type(a, b, c))
        out[...] = c
    elif out is None:
        beta = 0.0
    kind = _blas_kind(a, b)
    if kind is not None and provider() == "mkl" and (out is None or out.dtype == a.dtype):
        return _gemm_2d(kind, a, b, out, float(alpha), float(beta))
    return _numpy_gemm(a, b, out, alpha, beta)


def matmul(a: Any, b: Any, out: Any = None) -> Any:
    """``numpy.matmul(a, b, out=out)`` by MKL for float32/float64 matrices and stacks of them, or None when MKL
    is not the provider or the operands are not for it (vectors, other dtypes): then the caller multiplies as
    before. Stacks broadcast as in NumPy; each stack is one ``cblas_?gemm_batch_strided`` call per matrix
    layout run (attention's heads, the convolutions' per-tap products).

    Example:
        >>> import numpy as np
        >>> out = matmul(np.ones((2, 3, 4), np.float32), np.ones((4, 5), np.float32))
        >>> out is None or out.shape == (2, 3, 5)
        True
    """
    if not _USE[0]:
        if _STATE["provider"] is not None or provider() != "mkl":
            return None
    kind = _blas_kind(a, b)
    if kind is None or a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        return None
    if out is not None and (out.dtype != a.dtype or out.__class__ is not numpy.ndarray):
        return None
    if a.ndim == 2 and b.ndim == 2:
        if out is not None and out.shape != (a.shape[0], b.shape[1]):
            return None
        return _gemm_2d(kind, a, b, out, 1.0, 0.0)  # (beta 0: out is only written)
    return _stack(kind, a, b, out)


def _stack(kind: str, a: Any, b: Any, out: Any) -> Any:
    """Stacked products (broadcast batch dims) by MKL's strided batch GEMM, one call per run of the last batch
    axis (a loop over the others, which are few: attention's batch over its heads)."""
    try:
        batch = numpy.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        return None
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    shape = batch + (m, n)
    if out is not None and out.shape != shape:
        return None
    result = out if out is not None and out.flags.c_contiguous and out.flags.aligned and out.flags.writeable \
        and not (numpy.may_share_memory(out, a) or numpy.may_share_memory(out, b)) \
        else numpy.empty(shape, a.dtype)
    if result.size and k == 0:
        result[...] = 0
    elif result.size:
        if not _stack_blas(kind, a, b, result, batch):
            return None
    if out is not None and result is not out:
        out[...] = result
    return result


def _stack_blas(kind: str, a: Any, b: Any, result: Any, batch: tuple) -> bool:
    """``result = a @ b`` over the broadcast ``batch`` by ``cblas_?gemm_batch_strided``; False where MKL lacks it.
    An operand whose matrices BLAS cannot read in place, or whose last batch axis steps backwards, is copied."""
    fn = _func(f"cblas_{kind}gemm_batch_strided", "batch")
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if fn is None or not batch or max(m, n, k, batch[-1]) > _INT_MAX:
        return False
    a_full, fa, sa = _stacked(a, batch)
    b_full, fb, sb = _stacked(b, batch)
    for index in numpy.ndindex(*batch[:-1]):
        fn(_ROW_MAJOR, fa[0], fb[0], m, n, k, 1.0, a_full[index].ctypes.data, fa[1], sa, b_full[index].ctypes.data,
           fb[1], sb, 0.0, result[index].ctypes.data, n, m * n, batch[-1])
    return True


def _stacked(x: Any, batch: tuple) -> tuple[Any, tuple[int, int], int]:
    """``x`` broadcast to ``batch`` (a view), its matrices' (flag, ld), and the step in elements between matrices
    along the last batch axis (0 where ``x`` is broadcast along it)."""
    for attempt in (x, None):
        if attempt is None:  # a fresh copy: canonical strides (a C-contiguous view's size-1 axes may have any)
            x = numpy.array(x, order="C")
        full = numpy.broadcast_to(x, batch + x.shape[-2:])
        layout = _operand(full[(0,) * len(batch)]) if x.flags.aligned else None
        step, rest = divmod(full.strides[-3], x.itemsize) if batch[-1] > 1 else (0, 0)
        if layout is not None and not rest and 0 <= step <= _INT_MAX:
            return full, layout, step
    raise AssertionError("a fresh C-ordered stack is always readable")  # pragma: no cover


def xp_matmul(xp: Any, a: Any, b: Any, out: Any = None) -> Any:
    """``xp.matmul(a, b, out=out)``, by MKL where it is ember's provider and takes the operands (the
    convolutions' and attention's GEMM call sites).

    Example:
        >>> import numpy as np
        >>> xp_matmul(np, np.eye(2, dtype=np.float32), np.ones((2, 3), np.float32)).shape
        (2, 3)
    """
    if xp is numpy:
        result = matmul(a, b, out)
        if result is not None:
            return result
    return xp.matmul(a, b) if out is None else xp.matmul(a, b, out=out)
