"""Results laid out channels-last when the input is, as PyTorch's CPU convolution, normalization and pooling.

PyTorch's CPU kernels for ``conv2d``, ``conv_transpose2d``, ``batch_norm``, ``group_norm``, ``max_pool2d`` and
``avg_pool2d`` write a channels-last (NHWC-strided) input's result channels-last, and a convolution also does so
when its weight is channels-last (``model.to(memory_format=torch.channels_last)``). Values do not depend on it,
but what follows does: ``dropout`` draws its mask in memory order, so after an attention block that permutes
back to NCHW (diffusion U-Nets) the same seed dropped other elements in ember; ``.view`` of a permute succeeds or
fails by layout; ``stride()`` is printed. ``layer_norm``/``instance_norm`` give row-major results in both.
Convolution, pooling and group norm ask c10's strides rule (``suggest_memory_format``: a ``(1, C, H, W)``
tensor permuted from ``(1, 1, HW, C)``, as einops' ``'b h (x y) d -> b (h d) x y'`` makes, is row-major to it);
``batch_norm`` asks ``is_contiguous(memory_format=channels_last)``, which ignores size-1 dims.

Example:
    >>> import ember, ember.nn.functional as F
    >>> x = ember.randn(1, 4, 3, 3).contiguous(memory_format=ember.channels_last)
    >>> F.max_pool2d(x, 2).stride()
    (4, 1, 4, 4)
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from ember.ops import views


def _relayout(out: Any, layout: str) -> Any:
    if isinstance(out, tuple):  # max_pool2d(..., return_indices=True): values and indices alike
        return type(out)(_relayout(o, layout) for o in out)
    if getattr(out, "ndim", 0) != 4:
        return out
    return views.contiguous(out, layout)


def follow_input_layout(fn: Callable, weight_arg: int | None = None, strides_rule: bool = True) -> Callable:
    """``fn`` whose 4-D result takes the channels-last layout of its first argument (or of argument
    ``weight_arg``, the convolution weight); row-major inputs cost one flag test. ``strides_rule``: decide by
    ``suggest_memory_format`` (c10's strides rule), else by ``is_contiguous(memory_format=)`` (batch_norm)."""
    suggest = views.suggest_memory_format if strides_rule else views.channels_last_format

    @functools.wraps(fn)
    def wrapper(input: Any, *args: Any, **kwargs: Any) -> Any:
        out = fn(input, *args, **kwargs)
        data = getattr(input, "_data", None)
        if data is not None and not data.flags.c_contiguous and input.ndim == 4:
            layout = suggest(input)
            if layout is not None:
                return _relayout(out, layout)
        if weight_arg is not None:
            weight = args[weight_arg - 1] if len(args) >= weight_arg else kwargs.get("weight")
            wdata = getattr(weight, "_data", None)
            if wdata is not None and not wdata.flags.c_contiguous and getattr(input, "ndim", 0) == 4:
                layout = suggest(weight)
                if layout is not None:
                    return _relayout(out, layout)
        return out

    return wrapper
