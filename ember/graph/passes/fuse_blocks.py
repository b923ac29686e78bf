"""A fused elementwise kernel's NumPy steps run block by block, so its temporaries stay in cache.

Without a native loop (no numba), a fused kernel is one NumPy call per step, each a sweep over whole
arrays: an optimizer's update (Adam: ~12 steps over every parameter) reads and writes memory a dozen
times where the native loop does it once. Run on pieces of ``BLOCK`` elements, every step after the
first few reads its operands from the L2 cache (a sweep over 1M float32 there costs ~1/4 of one from
memory). Elementwise steps give the same values piece by piece, bit for bit.

Used by :class:`ember.graph.passes.fuse.FusedKernel` on NumPy when every step is elementwise and every
array is either the kernel's full shape or 0-d (a hyperparameter); 0-d steps run once, before the
pieces. ``fma`` steps take :func:`ember.ops.fma_fast.fma_into` (one BLAS axpy or one complex multiply
per piece, where verified) instead of the general ``fma_arrays``.

Example:
    >>> plan = plan_blocks(kernel, arrays, results)   # None: this kernel runs whole  # doctest: +SKIP
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.ops import fma_fast
from ember.ops.fma import fma_arrays

BLOCK = 1 << 15  # elements per piece: a dozen float32 temporaries of 128 KiB fit in a 2 MiB L2 cache
# (measured on Adam's update of 1M float32: 16K 5.5 ms, 32K 4.8 ms, 64K 5.6 ms, whole arrays 9.3 ms)
_ELEMENTWISE_MODES = ("ufunc", "cast", "where", "copy", "fma", "out")
_OUT_ELEMENTWISE = ("clip", "round")  # the "out" functions that are elementwise (sum/mean reduce)


class BlockPlan:
    """What one blocked run needs: the 0-d steps (run once), the full-shape steps with where each writes
    (an input in place, an output, or a block buffer), and the outputs' dtypes."""

    def __init__(self, shape: tuple, scalar_steps: list, block_steps: list, outputs: dict, fma: bool,
                 run: Any) -> None:
        self.run = run  # fuse._run: how the whole-array executor runs one step (the 0-d steps here)
        self.shape = shape
        self.size = int(np.prod(shape))
        self.scalar_steps = scalar_steps  # (name, f, mode, operands, kwargs, buf)
        self.block_steps = block_steps    # (name, f, mode, operands, kwargs, ("in", k) | ("out", _) | ("buf", array))
        self.outputs = outputs            # name -> ("in", k) | ("new", dtype)
        self.fma = fma


def plan_blocks(kernel: Any, arrays: tuple, results: dict, run: Any) -> BlockPlan | None:
    """The blocked form of ``kernel`` (its ``plan`` built by a whole-array run on ``arrays`` whose step
    results are ``results``; ``run(xp, f, mode, values, kwargs, out)`` runs one step whole), or None when it must run whole: not NumPy, a reduction or an unknown
    function among its steps, arrays of other shapes than one full shape and 0-d, or too small."""
    if kernel.xp is not np or not kernel.plan or kernel.relu_grad_sum_rows is not None:
        return None
    if any(not isinstance(a, (np.ndarray, np.generic)) for a in arrays):
        return None
    shapes = {a.shape for a in arrays if a.ndim}
    if len(shapes) != 1:
        return None
    (shape,) = shapes
    if int(np.prod(shape)) < 4 * BLOCK:
        return None
    full = {f"in{k}" for k, a in enumerate(arrays) if a.ndim}
    scalar_steps, block_steps, has_fma = [], [], False
    for (name, f, mode, operands, kwargs, buf), (_, fn, _, _) in zip(kernel.plan, kernel.steps):
        result = results.get(name)
        if not isinstance(result, np.ndarray) or mode == "plain" or (
                mode == "out" and fn not in _OUT_ELEMENTWISE and fn != "fma"):
            return None
        reads_full = any(isinstance(o, str) and o in full for o in operands)
        if result.ndim == 0 and not reads_full:
            scalar_steps.append((name, f, mode, operands, kwargs, buf))
            continue
        if result.shape != shape:
            return None
        full.add(name)
        if name in kernel.out_into:
            target: tuple = ("in", kernel.out_into[name])
        elif name in kernel.outputs:
            target = ("out", None)
        elif isinstance(buf, np.ndarray):
            target = ("buf", buf)  # shared with the steps that share the whole-array buffer
        else:
            target = ("buf", np.empty(0, result.dtype))  # its own (where, copy: no whole-array buffer)
        if fn == "fma":
            has_fma = True
            mode = "fma"
        elif mode == "where" and _select_is_safe(kernel, name, operands, arrays):
            mode, target = "select", ("none", None)
        block_steps.append((name, f, mode, operands, kwargs, target))
    outputs = {}
    for o in kernel.outputs:
        if o not in full:
            return None
        outputs[o] = ("in", kernel.out_into[o]) if o in kernel.out_into else ("new", results[o].dtype)
    # One block buffer per whole-array buffer (keeps the plan's sharing: a step may write over an operand
    # it is the last to read)
    blocks: dict[int, np.ndarray] = {}
    planned = []
    for name, f, mode, operands, kwargs, target in block_steps:
        if target[0] == "none":
            planned.append((name, f, mode, operands, kwargs, ("buf", blocks.setdefault(-1, np.empty(0)))))
            continue
        if target[0] == "buf":
            whole = target[1]
            key = id(whole) if whole.size else id(target)
            if key not in blocks:
                blocks[key] = np.empty(BLOCK, whole.dtype)
            target = ("buf", blocks[key])
        planned.append((name, f, mode, operands, kwargs, target))
    _plan_fmas(kernel, planned, results)
    return BlockPlan(shape, scalar_steps, planned, outputs, has_fma, run)


def _plan_fmas(kernel: Any, planned: list, results: dict) -> None:
    """Prepare the fma steps in place: numbers become 0-d arrays of the step's dtype; a step whose two
    factors are arrays of its dtype takes the complex route with scratch of its own, ``x = a + c i`` and
    ``y = b - i`` (y's imaginary parts set once). (Writing the operands' producing steps straight into
    the scratch, a strided ``out=``, measured slower than copying: NumPy's strided-output loops.)"""
    for k, (name, f, mode, operands, kwargs, target) in enumerate(planned):
        if mode != "fma":
            continue
        dtype = results[name].dtype
        values = [o if isinstance(o, str) else np.asarray(o, dtype) for o in operands]
        dtypes = [results[o].dtype if isinstance(o, str) else o.dtype for o in values]
        scalar = [not isinstance(o, str) or results[o].ndim == 0 for o in values]
        if any(d != dtype for d in dtypes):
            planned[k] = (name, f, mode, values, kwargs, target)
            continue
        if scalar[0] != scalar[1]:  # a number times an array: BLAS axpy on addresses (see run_blocked)
            vector = 1 if scalar[0] else 0
            if isinstance(values[vector], str) and fma_fast.verified("axpy", dtype):
                planned[k] = (name, f, "afma", values, {"scalar": 1 - vector, "vector": vector, "name": name},
                              target)
            else:
                planned[k] = (name, f, mode, values, kwargs, target)
            continue
        if scalar[0] or not fma_fast.verified("complex", dtype):
            planned[k] = (name, f, mode, values, kwargs, target)
            continue
        x = np.zeros(BLOCK + 2, fma_fast._COMPLEX[dtype])  # (+2: a last piece of one element multiplies two)
        y = np.zeros(BLOCK + 2, fma_fast._COMPLEX[dtype])
        y.imag = -1
        slots = (x.view(dtype)[0::2], y.view(dtype)[0::2], x.view(dtype)[1::2])  # a, b, c
        planned[k] = (name, f, "cfma", values, {"x": x, "y": y, "slots": slots}, target)


def _select_is_safe(kernel: Any, name: str, operands: list, arrays: tuple) -> bool:
    """Whether ``where(cond, x, y)`` with a 0-d ``cond`` may return ``x`` or ``y`` itself instead of a copy:
    both are full-shape inputs of the result's dtype, the result is no output, and no step writes into
    either input before the result's last reader (which may: ufuncs and fma read before they write)."""
    cond, x, y = operands
    if name in kernel.outputs or not all(isinstance(v, str) and v.startswith("in") for v in (cond, x, y)):
        return False
    inputs = {int(x[2:]), int(y[2:])}
    if arrays[int(cond[2:])].ndim or any(arrays[k].ndim == 0 for k in inputs):
        return False
    if len({arrays[k].dtype for k in inputs}) != 1:
        return False
    names = [step[0] for step in kernel.steps]
    at = names.index(name)
    last = max((k for k, step in enumerate(kernel.steps) if name in step[2]), default=at)
    return not any(kernel.out_into.get(names[k]) in inputs for k in range(at + 1, last))


def _fma_step(a: Any, b: Any, c: Any, out: np.ndarray) -> None:
    values = [v if isinstance(v, np.ndarray) else np.asarray(v, out.dtype) for v in (a, b, c)]
    if all(v.dtype == out.dtype for v in values) and fma_fast.fma_into(*values, out):
        return
    fma_arrays(np, a, b, c, out=out)


def _complex_fma(vals: list, scratch: dict, target: np.ndarray) -> None:
    """target = fma(a, b, c) by the complex route on a piece of n elements (see ``_plan_fmas``)."""
    n = target.size
    slots = scratch["slots"]
    for role, value in enumerate(vals):
        slots[role][:n] = value
    m = max(n, 2)  # NumPy multiplies a single element outside its vector loop
    x = scratch["x"][:m]
    np.multiply(x, scratch["y"][:m], out=x)
    fma_fast.real_parts(x[:n], target)


def _step(f: Any, mode: str, vals: list, kwargs: dict, target: np.ndarray) -> np.ndarray:
    if mode == "ufunc" or mode == "out":
        return f(*vals, out=target, **kwargs)
    if mode == "cfma":
        _complex_fma(vals, kwargs, target)
    elif mode == "fma":
        _fma_step(*vals, target)
    elif mode == "cast" or mode == "copy":
        np.copyto(target, vals[0], casting="unsafe")
    elif mode == "select":  # where(0-d cond, x, y): x or y itself (see _select_is_safe)
        return vals[1] if vals[0] else vals[2]
    else:  # where
        cond, x, y = vals
        if cond.ndim == 0:
            np.copyto(target, x if cond else y, casting="unsafe")
        else:
            np.copyto(target, y, casting="unsafe")
            np.copyto(target, x, casting="unsafe", where=cond)
    return target


def run_blocked(plan: BlockPlan, arrays: tuple) -> dict | None:
    """The kernel's outputs by name, computed piece by piece; None when these arrays do not fit the plan
    (another shape, or a full-shape input that is not C-contiguous): the caller runs it whole."""
    for a in arrays:
        if not isinstance(a, (np.ndarray, np.generic)) or a.ndim and (
                a.shape != plan.shape or not a.flags.c_contiguous):
            return None
    env: dict[str, Any] = {f"in{k}": a for k, a in enumerate(arrays) if not a.ndim}
    for name, f, mode, operands, kwargs, buf in plan.scalar_steps:
        env[name] = plan.run(np, f, mode, [env[o] if isinstance(o, str) else o for o in operands], kwargs, buf)
    flat = [a.reshape(-1) if a.ndim else None for a in arrays]
    outputs = {o: arrays[spec[1]] if spec[0] == "in" else np.empty(plan.shape, spec[1])
               for o, spec in plan.outputs.items()}
    flat_out = {o: v.reshape(-1) for o, v in outputs.items()}
    full_inputs = [(f"in{k}", v) for k, v in enumerate(flat) if v is not None]
    steps = [(name, f, mode, operands, kwargs, target[0],
              flat[target[1]] if target[0] == "in" else flat_out[name] if target[0] == "out" else target[1])
             for name, f, mode, operands, kwargs, target in plan.block_steps]
    size = plan.size
    # Addresses of each value's piece, for the axpy steps (ndarray.ctypes.data costs ~1-5 us a call): the base
    # of the array a step writes (a block buffer's does not move; an input's or output's moves by the piece)
    tracked = any(step[2] == "afma" for step in steps)
    if tracked:
        bases = {key: (v.ctypes.data, v.itemsize) for key, v in full_inputs}
        for name, _, mode, _, _, kind, where in steps:
            if mode != "select":
                bases[name] = (where.ctypes.data, 0 if kind == "buf" else where.itemsize)
        addresses: dict[str, int] = {}
    # (the complex fma route's imaginary part may overflow where the result does not: see fma_fast)
    with np.errstate(over="ignore", invalid="ignore", under="ignore") if plan.fma else _NULL:
        for start in range(0, size, BLOCK):
            stop = min(size, start + BLOCK)
            for key, v in full_inputs:
                env[key] = v[start:stop]
            if tracked:
                for key, (base, step) in bases.items():
                    addresses[key] = base + start * step
            for name, f, mode, operands, kwargs, kind, where in steps:
                target = where[:stop - start] if kind == "buf" else where[start:stop]
                vals = [env[o] if o.__class__ is str else o for o in operands]
                if mode == "ufunc" and not kwargs:  # the common step, without _step's dispatch (~0.5 us)
                    env[name] = f(*vals, out=target)
                elif mode == "afma":
                    env[name] = _axpy_step(vals, operands, kwargs, target, addresses)
                else:
                    env[name] = _step(f, mode, vals, kwargs, target)
                    if mode == "select" and tracked:
                        addresses[name] = addresses[operands[1] if vals[0] else operands[2]]
    return outputs


def _axpy_step(vals: list, operands: list, roles: dict, target: np.ndarray, addresses: dict) -> np.ndarray:
    """target = fma(a, b, c) with one of a, b a number: target = c, then BLAS ``target += alpha * x``."""
    alpha = float(vals[roles["scalar"]])
    x, c = vals[roles["vector"]], vals[2]
    if alpha == 0.0:  # BLAS skips alpha = 0; fma(0, x, c) = c + (+-0 or NaN), exact in two steps
        np.add(c, alpha * x, out=target)
        return target
    name_x, name_c = operands[roles["vector"]], operands[2]
    px = addresses[name_x]
    py = addresses[target_name] if (target_name := roles.get("name")) else target.ctypes.data
    if not (isinstance(name_c, str) and addresses.get(name_c) == py):
        if px == py:  # the result goes over the vector operand: keep a copy of it
            x = x.copy()
            px = x.ctypes.data
        np.copyto(target, c, casting="unsafe")
    fma_fast.axpy_addresses(alpha, target.size, px, py, target.dtype)
    return target


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


_NULL = _Null()
