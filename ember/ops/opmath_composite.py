"""float16/bfloat16 for functions ember writes as several op records but PyTorch runs as one CPU kernel.

ember/ops/opmath.py makes each record compute in float32 and round once. A function made of several records
(``lerp`` is a where of two fused multiply-adds, ``softplus`` a clamp, exp, log1p and where) still rounds after
each of them, where PyTorch's single kernel rounds once. :func:`float32_composite` runs such a function on
float32 copies of its half tensor arguments and rounds its result once; the two casts are ordinary ops, so
gradients flow (and arrive in the half dtype). Used only where PyTorch has one kernel: for PyTorch composites
(``normalize``, ``cosine_similarity``, ``kl_div``) ember already rounds where PyTorch's pieces do.

Example:
    >>> import ember
    >>> x = ember.tensor([0.3, -1.7]).to(ember.bfloat16)
    >>> ember.nn.functional.softplus(x).dtype
    ember.bfloat16
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from ember import dtypes
from ember.ops import dispatch


def _half_of(values: Any) -> Any:
    """The half dtype when every floating tensor of rank >= 1 among ``values`` has it (a wider one decides the
    result dtype itself: then None). 0-d tensors do not lift a dtype, so they count only when all tensors are 0-d."""
    tensors = [v for v in values if isinstance(v, dispatch.Tensor)]
    ranked = [t for t in tensors if t.ndim > 0] or tensors
    low = None
    for t in ranked:
        dt = t.dtype
        if dt.is_floating_point or dt.is_complex:
            if dt.itemsize != 2 or dt.is_complex or (low is not None and dt is not low):
                return None
            low = dt
    return low


def float32_composite(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` computed on float32 copies of its float16/bfloat16 tensor arguments, its tensor results rounded
    back once; other dtypes call ``fn`` unchanged."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        low = _half_of(tuple(args) + tuple(kwargs.values())) if kwargs else _half_of(args)
        if low is None:
            return fn(*args, **kwargs)

        def widen(v: Any) -> Any:
            return dispatch.cast(v, dtypes.float32) if isinstance(v, dispatch.Tensor) and v.dtype is low else v

        out = fn(*[widen(a) for a in args], **{k: widen(v) for k, v in kwargs.items()})
        if isinstance(out, dispatch.Tensor) and out.dtype is dtypes.float32:
            return dispatch.cast(out, low)
        return out

    return run
