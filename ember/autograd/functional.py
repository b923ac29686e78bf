"""``torch.autograd.functional``: jacobian, hessian, vjp, jvp, hvp, vhp built on ``ember.autograd.grad``.

Example:
    >>> import ember
    >>> ember.autograd.functional.jacobian(lambda x: x ** 2, ember.tensor([1.0, 2.0])).tolist()
    [[2.0, 0.0], [0.0, 4.0]]
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ember.autograd import grad
from ember.autograd.grad_mode import enable_grad
from ember.creation import ones_like, zeros, zeros_like
from ember.ops.views import stack

if TYPE_CHECKING:
    from ember.tensor import Tensor

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


def _tuple(x: Any) -> tuple[tuple, bool]:
    return (tuple(x), True) if isinstance(x, (tuple, list)) else ((x,), False)


def _prepare(inputs: tuple, create_graph: bool) -> tuple:
    return tuple(x.detach().requires_grad_(True) if not create_graph or not x.requires_grad else
                 x.view_as(x) if hasattr(x, "view_as") else x for x in inputs)


def _grad(outputs: tuple, inputs: tuple, grad_outputs: tuple, create_graph: bool, strict: bool) -> tuple:
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs:
        if strict:
            raise RuntimeError("The output of the user-provided function is independent of the inputs. This is "
                               "not allowed in strict mode.")
        return tuple(zeros_like(x) for x in inputs)
    grads = grad([o for o, _ in pairs], list(inputs), grad_outputs=[g for _, g in pairs],
                                create_graph=create_graph, allow_unused=True)
    out = []
    for x, g in zip(inputs, grads):
        if g is None:
            if strict:
                raise RuntimeError("The output of the user-provided function is independent of input "
                                   f"{inputs.index(x)}. This is not allowed in strict mode.")
            g = zeros_like(x)
        out.append(g)
    return tuple(out)


def vjp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False) -> tuple:
    ins, multi_in = _tuple(inputs)
    with enable_grad():
        ins = _prepare(ins, create_graph)
        outs_raw = func(*ins)
        outs, multi_out = _tuple(outs_raw)
        vs = _tuple(v)[0] if v is not None else tuple(ones_like(o) for o in outs)
        if v is None and any(o.numel() != 1 for o in outs):
            raise RuntimeError("The vector v can only be None if the user-provided function returns a single "
                               "Tensor with a single element.")
        grads = _grad(outs, ins, vs, create_graph, strict)
    outs = tuple(o if create_graph else o.detach() for o in outs)
    return (outs if multi_out else outs[0]), (grads if multi_in else grads[0])


def jvp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False) -> tuple:
    """J v by the double-vjp trick: u -> (J^T u) is linear in u, and its vjp with v is J v."""
    ins, multi_in = _tuple(inputs)
    vs = _tuple(v)[0] if v is not None else tuple(ones_like(x) for x in ins)
    with enable_grad():
        ins = _prepare(ins, create_graph)
        outs, multi_out = _tuple(func(*ins))
        dummies = tuple(zeros_like(o).requires_grad_(True) for o in outs)
        grads = grad(list(outs), list(ins), grad_outputs=list(dummies), create_graph=True,
                                    allow_unused=True)
        pairs = [(g, vv) for g, vv in zip(grads, vs) if g is not None]
        if not pairs:
            result = tuple(zeros_like(o) for o in outs)
        else:
            result = grad([g for g, _ in pairs], list(dummies), grad_outputs=[vv for _, vv in pairs],
                                         create_graph=create_graph, allow_unused=True)
            result = tuple(r if r is not None else zeros_like(o) for r, o in zip(result, outs))
    outs = tuple(o if create_graph else o.detach() for o in outs)
    result = tuple(r if create_graph else r.detach() for r in result)
    return (outs if multi_out else outs[0]), (result if multi_out else result[0])


def jacobian(func: Callable, inputs: Any, create_graph: bool = False, strict: bool = False,
             vectorize: bool = False, strategy: str = "reverse-mode") -> Any:
    """Row by row (one vjp per output element), as PyTorch's default reverse mode."""
    ins, multi_in = _tuple(inputs)
    with enable_grad():
        ins = _prepare(ins, create_graph)
        outs, multi_out = _tuple(func(*ins))
        table = []
        for o in outs:
            flat = o.reshape(-1)
            rows: list[list] = [[] for _ in ins]
            for k in range(flat.shape[0]):
                if o.requires_grad:
                    gs = grad([flat[k]], list(ins), retain_graph=True, create_graph=create_graph,
                                             allow_unused=True)
                else:
                    gs = [None] * len(ins)
                for j, (x, g) in enumerate(zip(ins, gs)):
                    rows[j].append(g if g is not None else zeros_like(x))
            per_input = []
            for j, x in enumerate(ins):
                stacked = stack(rows[j]) if rows[j] else zeros(0, *x.shape, dtype=x.dtype)
                per_input.append(stacked.reshape(*o.shape, *x.shape))
            table.append(tuple(per_input) if multi_in else per_input[0])
    if not create_graph:
        table = [tuple(t.detach() for t in row) if isinstance(row, tuple) else row.detach() for row in table]
    return tuple(table) if multi_out else table[0]


def hessian(func: Callable, inputs: Any, create_graph: bool = False, strict: bool = False,
            vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode") -> Any:
    ins, multi_in = _tuple(inputs)

    def gradient(*xs: Tensor) -> Any:
        out = func(*xs)
        if out.numel() != 1:
            raise RuntimeError("The function given to hessian should return a single element Tensor")
        gs = grad([out], list(xs), create_graph=True, allow_unused=True)
        gs = tuple(g if g is not None else zeros_like(x) for g, x in zip(gs, xs))
        return gs if multi_in else gs[0]

    return jacobian(gradient, inputs, create_graph=create_graph, strict=strict)


def vhp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False) -> tuple:
    ins, multi_in = _tuple(inputs)
    vs = _tuple(v)[0] if v is not None else tuple(ones_like(x) for x in ins)
    with enable_grad():
        ins = _prepare(ins, create_graph)
        out = func(*ins)
        gs = grad([out], list(ins), create_graph=True, allow_unused=True)
        pairs = [(g, vv) for g, vv in zip(gs, vs) if g is not None]
        res = grad([g for g, _ in pairs], list(ins), grad_outputs=[vv for _, vv in pairs],
                                  create_graph=create_graph, allow_unused=True) if pairs else [None] * len(ins)
        res = tuple(r if r is not None else zeros_like(x) for r, x in zip(res, ins))
    out = out if create_graph else out.detach()
    res = tuple(r if create_graph else r.detach() for r in res)
    return out, (res if multi_in else res[0])


def hvp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False) -> tuple:
    """H v; the Hessian of a scalar function is symmetric, so it equals v^T H."""
    return vhp(func, inputs, v, create_graph, strict)
