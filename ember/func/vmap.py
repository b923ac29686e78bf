"""``ember.func.vmap``: run a per-sample function on a whole batch at once (``torch.func.vmap``).

The function runs once, on batched tensors (:mod:`ember.func.batched`); each op goes through its record's
batching rule, so a batch of matrix-vector products becomes one matrix product, not a Python loop.

Example:
    >>> import ember
    >>> from ember.func import vmap
    >>> x, y = ember.randn(5, 3), ember.randn(5, 3)
    >>> vmap(ember.dot)(x, y).shape
    ember.Size([5])
"""
from __future__ import annotations

import functools
import threading
from typing import Any, Callable

from ember import interpreters
from ember.func.batched import BatchedValue, BatchInterpreter
from ember.func.pytree import broadcast_prefix, tree_flatten, tree_unflatten
from ember.ops import batching, dispatch
from ember.ops.views import cat

__all__ = ["vmap"]


class _Depth(threading.local):
    def __init__(self) -> None:
        self.value = 0


_DEPTH = _Depth()


def _name(func: Any) -> str:
    if hasattr(func, "__name__"):
        return func.__name__
    if isinstance(func, functools.partial):
        return f"functools.partial({_name(func.func)}, ...)"
    return repr(func)


def vmap(func: Callable, in_dims: Any = 0, out_dims: Any = 0, randomness: str = "error", *,
         chunk_size: int | None = None) -> Callable:
    """``func`` mapped over dimension ``in_dims`` of its inputs; results stacked at ``out_dims``.

    ``in_dims``/``out_dims``: an int, None (not mapped / not stacked), or a tree of them matching the
    inputs/outputs (a prefix: one entry may cover a whole dict or tuple). ``randomness``: 'error' (random
    ops raise), 'same' (one draw shared by all samples), 'different' (a draw per sample, for ember's
    random functions and dropout). ``chunk_size``: run that many samples at a time (less memory).

    Example:
        >>> vmap(lambda x, w: x @ w, in_dims=(0, None))(ember.ones(4, 3), ember.ones(3, 2)).shape
        ember.Size([4, 2])
    """
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    checked: list = []  # out_dims is fixed: checked on the first call (PyTorch raises at call time), then skipped

    @functools.wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        size, flat_dims, flat_args, spec = _batched_inputs(func, in_dims, args)
        if not checked:
            _check_out_dims(func, out_dims)
            checked.append(True)
        if chunk_size is None or chunk_size >= size:
            return _run(func, flat_args, flat_dims, spec, size, out_dims, randomness, kwargs)
        return _chunked(func, flat_args, flat_dims, spec, size, out_dims, randomness, kwargs, chunk_size)

    return wrapped


def _batched_inputs(func: Callable, in_dims: Any, args: tuple) -> tuple:
    """Check ``in_dims`` against the inputs (PyTorch's messages) and find the batch size."""
    name = _name(func)
    if not isinstance(in_dims, (int, tuple)) or isinstance(in_dims, bool):
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to be int or a "
                         f"(potentially nested) tuple matching the structure of inputs, got: {type(in_dims)}.")
    if not args:
        raise ValueError(f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are trying "
                         "to vmap over a function with no inputs. The latter is unsupported.")
    flat_args, spec = tree_flatten(args)
    flat_dims = broadcast_prefix(in_dims, spec)
    if flat_dims is None:
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with the "
                         f"structure of `inputs`. in_dims has structure {tree_flatten(in_dims)[1]} but inputs has "
                         f"structure {spec}.")
    for i, (arg, d) in enumerate(zip(flat_args, flat_dims)):
        if d is not None and (not isinstance(d, int) or isinstance(d, bool)):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input but "
                             "in_dim must be either an integer dimension or None.")
        if d is not None and not isinstance(arg, dispatch.Tensor):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input but "
                             f"the input is of type {type(arg)}. We cannot vmap over non-Tensor arguments, please "
                             "use None as the respective in_dim")
        if d is not None:
            n = arg.dim()
            if not -n <= d < n:
                raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for some input, "
                                 f"but that input is a Tensor of dimensionality {n} so expected in_dim to satisfy "
                                 f"-{n} <= in_dim < {n}.")
            flat_dims[i] = d % n
    sizes = [arg.shape[d] for arg, d in zip(flat_args, flat_dims) if d is not None]
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                         f"{sizes} for the mapped dimension")
    return sizes[0], flat_dims, flat_args, spec


def _check_out_dims(func: Callable, out_dims: Any) -> None:
    leaves, _ = tree_flatten(out_dims)
    for d in leaves:
        if d is not None and (not isinstance(d, int) or isinstance(d, bool)):
            raise ValueError(f"vmap({_name(func)}, ..., out_dims={out_dims}): `out_dims` must be an int, None or a "
                             "python collection of ints representing where in the outputs the vmapped dimension "
                             "should appear.")


def _run(func: Callable, flat_args: list, flat_dims: list, spec: Any, size: int, out_dims: Any, randomness: str,
         kwargs: dict) -> Any:
    level = BatchInterpreter(size, randomness, _DEPTH.value + 1)
    interpreters.push(level)
    _DEPTH.value += 1
    try:
        inputs = [level.wrap(a, d) if d is not None else a for a, d in zip(flat_args, flat_dims)]
        out = func(*tree_unflatten(inputs, spec), **kwargs)
        flat_out, out_spec = tree_flatten(out)
        unwrapped = [level.unwrap(o) if isinstance(o, dispatch.Tensor) else (o, None) for o in flat_out]
    finally:
        _DEPTH.value -= 1
        interpreters.pop(level)
        level.live = False
    flat_out_dims = _out_dims_for(func, out, out_dims, out_spec)
    results = []
    for original, (value, bdim), d in zip(flat_out, unwrapped, flat_out_dims):
        results.append(_stacked(func, original, value, bdim, d, size, level))
    return tree_unflatten(results, out_spec)


def _out_dims_for(func: Callable, out: Any, out_dims: Any, out_spec: Any) -> list:
    def incompatible() -> ValueError:
        return ValueError(f"vmap({_name(func)}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible "
                          f"with the structure of `outputs`. out_dims has structure {tree_flatten(out_dims)[1]} but "
                          f"outputs has structure {out_spec}.")

    if isinstance(out, dispatch.Tensor):
        if isinstance(out_dims, int) or out_dims is None:
            return [out_dims]
        if isinstance(out_dims, tuple) and len(out_dims) == 1:
            return list(out_dims)
        raise incompatible()
    flat = broadcast_prefix(out_dims, out_spec)
    if flat is None:
        raise incompatible()
    return flat


def _stacked(func: Callable, original: Any, value: Any, bdim: int | None, out_dim: int | None, size: int,
             level: BatchInterpreter) -> Any:
    """One output with its batch dim at ``out_dim`` (an unbatched output is broadcast to the batch)."""
    if out_dim is None:
        if bdim is not None:
            name = _name(func)
            raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim is None")
        return value
    if not isinstance(original, dispatch.Tensor):
        name = _name(func)
        raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(original)}. Did you "
                         "mean to set out_dims= to None for output?")
    rank = value.ndim - (bdim is not None) + 1
    if not -rank <= out_dim < rank:
        raise IndexError(f"vmap({_name(func)}, ...): out_dim={out_dim} is out of range for an output of "
                         f"{rank - 1} dims (expected -{rank} <= out_dim < {rank})")
    out_dim %= rank
    if bdim is None:
        value = value.unsqueeze(out_dim)
        shape = list(value.shape)
        shape[out_dim] = size
        return value.expand(*shape)
    return batching.move(value, bdim, out_dim)


def _chunked(func: Callable, flat_args: list, flat_dims: list, spec: Any, size: int, out_dims: Any,
             randomness: str, kwargs: dict, chunk_size: int) -> Any:
    pieces = []
    for start in range(0, size, chunk_size):
        stop = min(start + chunk_size, size)
        chunk = [a.narrow(d, start, stop - start) if d is not None else a for a, d in zip(flat_args, flat_dims)]
        pieces.append(_run(func, chunk, flat_dims, spec, stop - start, out_dims, randomness, kwargs))
    first = pieces[0]
    flat_first, out_spec = tree_flatten(first)
    flat_out_dims = _out_dims_for(func, first, out_dims, out_spec)
    per_piece = [tree_flatten(p)[0] for p in pieces]
    merged = []
    for k, d in enumerate(flat_out_dims):
        if d is None:
            merged.append(flat_first[k])
        else:
            parts = [p[k] for p in per_piece]
            merged.append(cat(parts, dim=d % (parts[0].ndim)))
    return tree_unflatten(merged, out_spec)


def is_batched(tensor: Any) -> bool:
    """True for a tensor batched by an enclosing vmap (its shape is the per-sample shape)."""
    return isinstance(getattr(tensor, "_data", None), BatchedValue)
