"""Gradients for values computed outside autograd: PyTorch's results of ``frexp``, ``nextafter``, ``fill``,
``norm(p=0)``, ... require grad and pass torch's gradient back (zeros, or a scale), where ember's were detached
(backward through them alone raised, and ``x * frexp(x).mantissa`` silently lost the mantissa's term).

``zero_grad_join(value, x)`` returns ``value`` unchanged whose gradient to ``x`` is zeros (``x``'s shape; a
``value`` with history of its own passes ``g`` on, so joins chain);
``scaled_grad_join(value, x, scale)`` passes ``g * scale`` to ``x`` (summed over broadcast dims). Both record
a node only when ``x`` requires grad under grad mode; otherwise they return ``value`` itself.

Example:
    >>> m = scaled_grad_join(mantissa, x, two_to_minus_e)   # d mantissa / dx = 2**-e, as torch's frexp
"""
from __future__ import annotations

from typing import Any

from ember.autograd import grad_mode
from ember.autograd.node import torch_named
from ember.autograd.torch_edges import record_inputs
from ember.ops import dispatch
from ember.ops import elementwise as ew


ZERO_GRAD_JOIN, SCALED_GRAD_JOIN = ew.ZERO_GRAD_JOIN, ew.SCALED_GRAD_JOIN  # the records live with elementwise's


def _wants_grad(x: Any) -> bool:
    return isinstance(x, dispatch.Tensor) and x.requires_grad and grad_mode.is_grad_enabled()


def zero_grad_join(value: Any, *inputs: Any) -> Any:
    """``value`` (a floating tensor) with a zero gradient to each of ``inputs`` that requires grad."""
    if not value.dtype.is_floating_point and not value.dtype.is_complex:
        return value
    for x in inputs:
        if _wants_grad(x):
            value = dispatch.apply(ZERO_GRAD_JOIN, (value, x))
    return value


def curvature_link(value: Any, x: Any, name: str | None = None, inputs: tuple | None = None) -> Any:
    """``value`` (a composite's result) whose gradient to ``x``, taken with ``create_graph``, requires grad with a
    zero derivative in ``x``, as PyTorch's backward nodes that take ``self`` (``prelu``, adaptive pools): the
    link adds nothing to a plain backward, and under ``create_graph`` zeros joined to ``x``. ``name`` is torch's node
    (``grad_fn``'s name) and ``inputs`` its edges (``(input, weight)``), which the link node then shows.

    Example:
        >>> out = curvature_link(where(x > 0, x, x * w), x)   # prelu: d/dx of its gradient is zeros, not an error
    """
    if not _wants_grad(x) or not (value.dtype.is_floating_point or value.dtype.is_complex):
        return value
    out = dispatch.apply(ZERO_GRAD_JOIN, (value, x), {"link": True})
    if name is not None:
        torch_named(out, name)
        record_inputs(out, (x,) if inputs is None else inputs)
    return out


def scaled_grad_join(value: Any, x: Any, scale: Any, divide: bool = False, masked: bool = False) -> Any:
    """``value`` with the gradient ``g * scale`` (``g / scale`` with ``divide``) to ``x`` (``scale``: a tensor
    without grad); ``masked``: exactly 0 where ``scale`` is 0, whatever ``g`` (torch's masked_fill)."""
    if not _wants_grad(x):
        return value
    attrs = {"divide": True} if divide else ({"masked": True} if masked else None)
    return dispatch.apply(SCALED_GRAD_JOIN, (value, x, scale), attrs)
