"""Native range kernels for ``cpu_hot_ufuncs``: one elementwise pass over elements ``[start, stop)`` (numba ``cfunc``).

The hot worker (``cpu_hot_worker.split_call_into``) calls ``void f(int64 start, int64 stop, int64 args)`` by
address; here there is one such function per dtype (float32, float64). ``args`` is the address of ``WORDS``
int64 words: the operation, the form, the output's, first and second operand's data addresses, and a scalar (its
float64 bits; a float32 scalar is stored exactly as a float64). Each element is one IEEE operation (``+ - * /``
rounded once, as NumPy's loops), so a pass run as two ranges gives the bits of one NumPy call.

Everything compiles (or loads from numba's cache) on first use; ``cpu_kernels``' table holds this module under
``"hot_ufuncs"``.

Example:
    >>> import numpy as np
    >>> a, b, out = np.arange(4, dtype=np.float32), np.ones(4, np.float32), np.zeros(4, np.float32)
    >>> words = np.array([ADD, ARRAYS, out.ctypes.data, a.ctypes.data, b.ctypes.data, 0], np.int64)
    >>> import ctypes
    >>> call = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)(address("f"))
    >>> call(1, 3, words.ctypes.data); out.tolist()  # elements 1 and 2 only
    [0.0, 2.0, 3.0, 0.0]
"""
from __future__ import annotations

import sys

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ember.backends import cpu_hot_kernels as hot

# The words: OP, FORM, OUT, A, B (addresses; an unused operand holds OUT's), SCALAR (float64 bits).
OP, FORM, OUT, A, B, SCALAR = range(6)
WORDS = 6
ADD, SUB, MUL, DIV, FILL, COPY = range(6)
ARRAYS, ARRAY_SCALAR, SCALAR_ARRAY = range(3)  # out = a op b, a op s, s op a


@intrinsic
def as_pointer(typingctx, address):
    """An int64 address as a ``void*`` (for ``numba.carray``)."""
    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], ir.IntType(8).as_pointer())
    return types.voidptr(types.int64), codegen


@numba.njit(nogil=True, cache=True, error_model="numpy")  # IEEE division: x / 0 is +-inf or NaN, never raises
def apply(op, form, out, a, b, s, same_a, same_b):  # pragma: no cover - compiled
    """``out = a op b`` (``ARRAYS``), ``a op s`` or ``s op a`` over equal-length 1-D arrays, ``out = s``
    (``FILL``) or ``out = a`` (``COPY``); ``same_a``/``same_b``: ``out`` is that operand (in place). Every loop is written out: LLVM
    vectorizes a loop only behind a runtime test that ``out`` does not overlap its other operands, which an in-place
    call written ``out[i] = a[i] + b[i]`` fails (then the scalar loop, 3-6x slower), and it did not hoist an op test
    out of the loops of one function this size (6x slower)."""
    n = out.size
    if op == FILL:
        for i in range(n):
            out[i] = s
    elif op == COPY:
        for i in range(n):
            out[i] = a[i]
    elif op == ADD:
        if form == ARRAYS:
            if same_a:
                for i in range(n):
                    out[i] = out[i] + b[i]
            elif same_b:
                for i in range(n):
                    out[i] = a[i] + out[i]
            else:
                for i in range(n):
                    out[i] = a[i] + b[i]
        elif form == ARRAY_SCALAR:
            if same_a:
                for i in range(n):
                    out[i] = out[i] + s
            else:
                for i in range(n):
                    out[i] = a[i] + s
        elif same_a:
            for i in range(n):
                out[i] = s + out[i]
        else:
            for i in range(n):
                out[i] = s + a[i]
    elif op == SUB:
        if form == ARRAYS:
            if same_a:
                for i in range(n):
                    out[i] = out[i] - b[i]
            elif same_b:
                for i in range(n):
                    out[i] = a[i] - out[i]
            else:
                for i in range(n):
                    out[i] = a[i] - b[i]
        elif form == ARRAY_SCALAR:
            if same_a:
                for i in range(n):
                    out[i] = out[i] - s
            else:
                for i in range(n):
                    out[i] = a[i] - s
        elif same_a:
            for i in range(n):
                out[i] = s - out[i]
        else:
            for i in range(n):
                out[i] = s - a[i]
    elif op == MUL:
        if form == ARRAYS:
            if same_a:
                for i in range(n):
                    out[i] = out[i] * b[i]
            elif same_b:
                for i in range(n):
                    out[i] = a[i] * out[i]
            else:
                for i in range(n):
                    out[i] = a[i] * b[i]
        elif form == ARRAY_SCALAR:
            if same_a:
                for i in range(n):
                    out[i] = out[i] * s
            else:
                for i in range(n):
                    out[i] = a[i] * s
        elif same_a:
            for i in range(n):
                out[i] = s * out[i]
        else:
            for i in range(n):
                out[i] = s * a[i]
    elif op == DIV:
        if form == ARRAYS:
            if same_a:
                for i in range(n):
                    out[i] = out[i] / b[i]
            elif same_b:
                for i in range(n):
                    out[i] = a[i] / out[i]
            else:
                for i in range(n):
                    out[i] = a[i] / b[i]
        elif form == ARRAY_SCALAR:
            if same_a:
                for i in range(n):
                    out[i] = out[i] / s
            else:
                for i in range(n):
                    out[i] = a[i] / s
        elif same_a:
            for i in range(n):
                out[i] = s / out[i]
        else:
            for i in range(n):
                out[i] = s / a[i]


_SIGNATURE = types.void(types.int64, types.int64, types.int64)


def range_f4(start, stop, args):  # pragma: no cover - compiled
    """The pass described at ``args`` on float32 elements ``[start, stop)``."""
    words = numba.carray(as_pointer(args), (WORDS,), np.int64)
    scalar = numba.carray(as_pointer(args + SCALAR * 8), (1,), np.float64)
    n = stop - start
    out = numba.carray(as_pointer(words[OUT] + start * 4), (n,), np.float32)
    a = numba.carray(as_pointer(words[A] + start * 4), (n,), np.float32)
    b = numba.carray(as_pointer(words[B] + start * 4), (n,), np.float32)
    apply(words[OP], words[FORM], out, a, b, np.float32(scalar[0]), words[A] == words[OUT],
          words[B] == words[OUT])


def range_f8(start, stop, args):  # pragma: no cover - compiled
    """The pass described at ``args`` on float64 elements ``[start, stop)``."""
    words = numba.carray(as_pointer(args), (WORDS,), np.int64)
    scalar = numba.carray(as_pointer(args + SCALAR * 8), (1,), np.float64)
    n = stop - start
    out = numba.carray(as_pointer(words[OUT] + start * 8), (n,), np.float64)
    a = numba.carray(as_pointer(words[A] + start * 8), (n,), np.float64)
    b = numba.carray(as_pointer(words[B] + start * 8), (n,), np.float64)
    apply(words[OP], words[FORM], out, a, b, scalar[0], words[A] == words[OUT], words[B] == words[OUT])


_CFUNCS: dict = {}


def address(char: str) -> int:
    """The C address of the range function for dtype ``char`` ("f" float32, "d" float64), compiled (or loaded from
    numba's cache) on first use: the kernel table imports this module for every native kernel, and most processes
    never split a pass."""
    compiled = _CFUNCS.get(char)
    if compiled is None:
        fn = range_f4 if char == "f" else range_f8
        compiled = _CFUNCS[char] = numba.cfunc(_SIGNATURE, nopython=True, cache=True, error_model="numpy")(fn)
    return compiled.address


@numba.njit(nogil=True, cache=True)
def split_pass(slot, address, op, form, out, a, b, scalar, cut):  # pragma: no cover - compiled
    """The pass ``op``/``form`` over ``out``'s elements in two ranges at once: ``[cut, n)`` posted to the hot
    worker, ``[0, cut)`` run here, then the wait (``cpu_hot_kernels.split``: a job the worker has not started is
    taken back and run here). Its words (addresses from the arrays themselves, no Python ``ctypes`` objects) go in
    the slot's ``ARGS`` area, which the caller's hold on the worker's lock keeps to this job. ``a``/``b`` unused by
    the form are ``out``. Returns ``split``'s code (1: the worker sleeps, the caller wakes it and finishes)."""
    base = hot.ARGS
    slot[base + OP] = op
    slot[base + FORM] = form
    slot[base + OUT] = out.ctypes.data
    slot[base + A] = a.ctypes.data
    slot[base + B] = b.ctypes.data
    args = slot.ctypes.data + base * 8
    numba.carray(as_pointer(args + SCALAR * 8), (1,), np.float64)[0] = scalar
    job, own = hot.JOB, hot.OWN
    slot[job], slot[job + 1], slot[job + 2], slot[job + 3], slot[job + 4] = hot.CALL, address, cut, out.size, args
    slot[own], slot[own + 1], slot[own + 2], slot[own + 3], slot[own + 4] = hot.CALL, address, 0, cut, args
    return hot.split(slot)


def build() -> dict:
    """For ``cpu_kernels``' table: this module under ``"hot_ufuncs"``."""
    return {"hot_ufuncs": sys.modules[__name__]}
