"""leaky_relu, threshold, hardshrink and softshrink as one record whose gradient is PyTorch's backward node.

These were ``where`` composites. Their first derivative was right, but it did not depend on the input: under
``create_graph=True`` the gradient of a function of ``x`` alone did not require grad, and differentiating it again
raised "does not require grad". PyTorch's ``leaky_relu_backward(grad, self)``, ``threshold_backward``,
``hardshrink_backward`` and ``softshrink_backward`` take ``self``, so their result requires grad and its derivative
in ``self`` is zeros (derivatives.yaml: ``self: zeros_like(grad)``). The record's vjp builds the same masked
gradient and joins it to ``x`` with a zero gradient (:func:`ember.ops.elementwise.kink_join`, recorded only
under ``create_graph`` when ``x`` requires grad: a plain backward pays nothing).

``kind`` is one of ``"leaky_relu"`` (``a``: the negative slope), ``"threshold"`` (``a``: threshold, ``b``: value),
``"hardshrink"`` and ``"softshrink"`` (``a``: lambda). Values are the composites' to the bit.

Example:
    >>> import ember
    >>> x = ember.tensor([-1.0, 2.0], requires_grad=True)
    >>> g, = ember.autograd.grad(ember.nn.functional.leaky_relu(x, 0.1).sum(), x, create_graph=True)
    >>> ember.autograd.grad(g.sum(), x)[0]
    tensor([0., 0.])
"""
from __future__ import annotations

from typing import Any

from ember.ops import dispatch, elementwise as ew
from ember.ops.elementwise import elementwise_rule
from ember.ops.registry import OpDef, register

_TORCH_NAMES = {"leaky_relu": "LeakyReluBackward0", "threshold": "ThresholdBackward0",
                "hardshrink": "HardshrinkBackward0", "softshrink": "SoftshrinkBackward0"}


def _impl(xp: Any, x: Any, kind: str = "leaky_relu", a: float = 0.0, b: float = 0.0) -> Any:
    # Python numbers against the array keep its dtype (NumPy's weak scalars); written so the fuser can replay it
    if kind == "leaky_relu":
        return xp.where(x > 0, x, x * a)
    if kind == "threshold":
        return xp.where(x <= a, b, x)  # NaN is not <= anything: it passes through, as torch
    if kind == "hardshrink":
        return xp.where((x >= -a) & (x <= a), 0.0, x)
    # softshrink: torch's x - clamp(x, -lambd, lambd) (+0 in the middle, also for -0.0 and -lambd; NaN stays NaN)
    return x - xp.clip(x, -a, a)


def _vjp(ctx: Any, g: Any) -> tuple:
    (x,) = ctx.inputs
    kind, a = ctx.attrs["kind"], ctx.attrs.get("a", 0.0)
    if kind == "leaky_relu":  # torch: self > 0 ? grad : grad * negval
        grad = ew.where(x > 0, g, g * a)
    elif kind == "threshold":  # self <= threshold ? 0 : grad
        grad = ew.grad_mask(g, ew.logical_not(x <= a))
    else:  # torch's vector kernel: (self < -lambd | self > lambd) & grad, so a NaN input gets 0 (its scalar tail,
        # the last n % 8 float64 elements, passes grad there: ember takes the vector rule everywhere)
        grad = ew.grad_mask(g, ew.logical_or(x < -a, x > a))
    return (ew.kink_join(grad, x),)


def _onnx(b: Any, n: Any) -> str:
    (x,) = n.inputs
    kind, a = n.attrs["kind"], float(n.attrs.get("a", 0.0))
    dtype = n.in_specs[0].dtype
    if kind == "leaky_relu":
        return b.node("LeakyRelu", [x], alpha=a)
    if kind == "threshold":
        return b.node("Where", [b.node("LessOrEqual", [x, b.scalar(a, dtype)]),
                                b.scalar(float(n.attrs.get("b", 0.0)), dtype), x])
    return b.node("Shrink", [x], lambd=a, bias=a if kind == "softshrink" else 0.0)


PIECEWISE_LINEAR = register(OpDef(
    name="piecewise_linear", category="unary", impl=_impl, vjp=_vjp, shape_rule=elementwise_rule(), onnx=_onnx,
    torch_backward_name=lambda node: _TORCH_NAMES[node.attrs["kind"]],
    doc="leaky_relu / threshold / hardshrink / softshrink (attr kind), gradient joined to x as torch's backward.",
))


def piecewise_linear(x: Any, kind: str, a: float = 0.0, b: float = 0.0) -> Any:
    """``kind`` applied to floating ``x`` (one record; see the module docstring)."""
    attrs = {"kind": kind, "a": float(a)}
    if kind == "threshold":
        attrs["b"] = float(b)
    return dispatch.unary(PIECEWISE_LINEAR, x, attrs)
