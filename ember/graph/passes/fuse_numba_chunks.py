"""A fused Numba loop as a C function over a range of its elements, for the hot worker's native hand-off.

``NumbaKernel`` loops run on one thread, or in chunks over ember's pool, whose sleeping worker costs ~50 us to wake
and ~50 us to wake the caller back on a VM: W2's 401K-element Adam update (~230 us, bound by its divisions and
square root) gained nothing split that way. The hot worker (``ember/backends/cpu_hot_worker.py``) spins natively
for ~1 ms after each product, so a loop that follows a split GEMM (the Adam update after its weight gradient) can
hand it half of its elements for a few microseconds, if the worker can call the loop without Python: this module
compiles, per kernel, ``void chunk(int64 start, int64 stop, int64 args)``, a Numba ``cfunc`` that calls the kernel's
own compiled loop on elements ``[start, stop)``; ``args`` is the address of an int64 array holding each array
argument's data address (inputs, then the fresh outputs). Each element is computed by the same loop body as the
one-thread call: the same bits.

Example:
    >>> import numpy as np, numba
    >>> @numba.njit(nogil=True)
    ... def scale(n, x, s, o):
    ...     for i in range(n):
    ...         o[i] = x[i] * s[0]
    >>> f = chunk_function(scale, [np.dtype(np.float32)] * 3, [False, True, False])
    >>> x, s, o = np.arange(4, dtype=np.float32), np.array([2.0], np.float32), np.zeros(4, np.float32)
    >>> args = np.array([x.ctypes.data, s.ctypes.data, o.ctypes.data], np.int64)
    >>> f.ctypes(1, 3, args.ctypes.data); o.tolist()  # elements 1 and 2 only
    [0.0, 2.0, 4.0, 0.0]
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

_CACHE: dict = {}
_PTR: list = []


def _pointer_intrinsic() -> Any:
    """``as_pointer(address)``: an int64 address as a ``void*`` (for ``numba.carray``)."""
    if _PTR:
        return _PTR[0]
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    @intrinsic
    def as_pointer(typingctx: Any, address: Any) -> Any:
        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            return builder.inttoptr(args[0], ir.IntType(8).as_pointer())
        return types.voidptr(types.int64), codegen

    _PTR.append(as_pointer)
    return as_pointer


def chunk_function(loop: Any, dtypes: Sequence[np.dtype], one: Sequence[bool]) -> Any:
    """The ``cfunc`` running ``loop(n, *arrays)`` (a Numba-compiled elementwise loop over 1-D arrays) on elements
    ``[start, stop)``: array k of ``dtypes`` is read from the address in ``args[k]``, advanced to ``start`` unless
    ``one[k]`` (a one-element input, read whole by every chunk). Cached per loop and layout."""
    key = (id(loop), tuple(np.dtype(d).str for d in dtypes), tuple(one))
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is loop:
        return hit[1]
    import numba
    from numba.core import types

    as_pointer = _pointer_intrinsic()
    names = [f"a{k}" for k in range(len(dtypes))]
    lines = ["def chunk(start, stop, args):",
             f"    words = numba.carray(as_pointer(args), ({len(dtypes)},), np.int64)",
             "    n = stop - start"]
    for k, (name, dtype, single) in enumerate(zip(names, dtypes, one)):
        item = np.dtype(dtype).itemsize
        where = f"words[{k}]" if single else f"words[{k}] + start * {item}"
        lines.append(f"    {name} = numba.carray(as_pointer({where}), ({1 if single else 'n'},), "
                     f"np.{np.dtype(dtype).name})")
    lines.append(f"    loop(n, {', '.join(names)})")
    namespace: dict = {"numba": numba, "np": np, "as_pointer": as_pointer, "loop": loop}
    exec(compile("\n".join(lines), "<ember fused chunk>", "exec"), namespace)  # noqa: S102 - our own generated code
    compiled = numba.cfunc(types.void(types.int64, types.int64, types.int64), nopython=True)(namespace["chunk"])
    _CACHE[key] = (loop, compiled)
    return compiled

