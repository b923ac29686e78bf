"""``torch.autograd.functional``: jacobian, hessian, vjp, jvp, hvp, vhp built on ``ember.autograd.grad``.

Example:
    >>> import ember
    >>> ember.autograd.functional.jacobian(lambda x: x ** 2, ember.tensor([1.0, 2.0])).tolist()
    [[2.0, 0.0], [0.0, 4.0]]
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ember import func
from ember.autograd import grad
from ember.autograd.grad_mode import enable_grad
from ember.creation import ones_like, zeros, zeros_like
from ember.ops.views import stack

if TYPE_CHECKING:
    from ember.tensor import Tensor

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]

_JACOBIANS = {"reverse-mode": func.jacrev, "forward-mode": func.jacfwd}


def _tuple(x: Any) -> tuple[tuple, bool]:
    return (tuple(x), True) if isinstance(x, (tuple, list)) else ((x,), False)


def _inputs(x: Any, arg_name: str, fn_name: str) -> tuple[tuple, bool]:
    """``x`` as a tuple of tensors, refusing anything else with PyTorch's message."""
    items, multi = _tuple(x)
    for i, item in enumerate(items):
        if not hasattr(item, "_data"):
            where = f"the value at index {i} has type {type(item)}" if multi else f"the given {arg_name} has type " \
                                                                               f"{type(item)}"
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but "
                            f"{where}.")
    return items, multi


def _check_v(v: tuple, other: tuple) -> None:
    if len(v) != len(other):
        if len(other) == 1:
            raise RuntimeError("The given v should contain a single Tensor.")
        raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}.")
    for i, (a, b) in enumerate(zip(v, other)):
        if tuple(a.shape) != tuple(b.shape):
            prefix = f"Entry {i} in " if len(other) > 1 else ""
            raise RuntimeError(f"{prefix}v has invalid size: should be {b.shape} but got {a.shape}.")


def _check_outputs_differentiable(outputs: tuple, strict: bool) -> None:
    if strict:
        for i, o in enumerate(outputs):
            if not o.requires_grad:
                raise RuntimeError(f"Output {i} of the user-provided function does not require gradients. The outputs "
                                   "must be computed in a differentiable manner from the input when running in strict "
                                   "mode.")


def _check_jacobian_strict(gradients: Any, strict: bool) -> None:
    """hessian/vhp/hvp in strict mode: the first derivative must depend on the inputs (torch's words)."""
    if strict:
        for i, g in enumerate(gradients):
            if g is None:
                raise RuntimeError(f"The output of the user-provided function is independent of input {i}. This is "
                                   "not allowed in strict mode.")
            if not g.requires_grad:
                raise RuntimeError(f"While computing the hessian, found that the jacobian of the user-provided "
                                   f"function with respect to input {i} is independent of the input. This is not "
                                   "allowed in strict mode. You should ensure that your function is twice "
                                   "differentiable and that the jacobian depends on the inputs (this would be "
                                   "violated by a linear function for example).")


def _check_strategy(strategy: str, vectorize: bool) -> None:
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
                             'function has more outputs than inputs, "forward-mode" tends to be more performant. '
                             'Otherwise, prefer to use "reverse-mode".')
    if strategy == "forward-mode" and not vectorize:
        raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse Hessian is only "
                                  "implemented for `vectorize=True`.")


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
    """``(func(inputs), v^T J)`` (``torch.autograd.functional.vjp``)."""
    ins, multi_in = _inputs(inputs, "inputs", "vjp")
    with enable_grad():
        ins = _prepare(ins, create_graph)
        outs_raw = func(*ins)
        outs, multi_out = _inputs(outs_raw, "outputs of the user-provided function", "vjp")
        _check_outputs_differentiable(outs, strict)
        vs = _inputs(v, "v", "vjp")[0] if v is not None else tuple(ones_like(o) for o in outs)
        if v is None and any(o.numel() != 1 for o in outs):
            raise RuntimeError("The vector v can only be None if the user-provided function returns a single "
                               "Tensor with a single element.")
        _check_v(vs, outs)
        grads = _grad(outs, ins, vs, create_graph, strict)
    outs = tuple(o if create_graph else o.detach() for o in outs)
    return (outs if multi_out else outs[0]), (grads if multi_in else grads[0])


def jvp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False) -> tuple:
    """J v by the double-vjp trick: u -> (J^T u) is linear in u, and its vjp with v is J v."""
    ins, multi_in = _inputs(inputs, "inputs", "jvp")
    vs = _inputs(v, "v", "jvp")[0] if v is not None else tuple(ones_like(x) for x in ins)
    if v is None and any(x.numel() != 1 for x in ins):
        raise RuntimeError("The vector v can only be None if the input to the user-provided function is a single "
                           "Tensor with a single element.")
    _check_v(vs, ins)
    with enable_grad():
        ins = _prepare(ins, create_graph)
        outs, multi_out = _inputs(func(*ins), "outputs of the user-provided function", "jvp")
        _check_outputs_differentiable(outs, strict)
        live = [i for i, o in enumerate(outs) if o.requires_grad]
        dummies = tuple(zeros_like(o).requires_grad_(True) for o in outs)
        grads = grad([outs[i] for i in live], list(ins), grad_outputs=[dummies[i] for i in live], create_graph=True,
                     allow_unused=True) if live else [None] * len(ins)
        pairs = [(g, vv) for g, vv in zip(grads, vs) if g is not None and g.requires_grad]
        if not pairs:
            result = tuple(zeros_like(o) for o in outs)
        else:
            result = grad([g for g, _ in pairs], list(dummies), grad_outputs=[vv for _, vv in pairs],
                          create_graph=create_graph, allow_unused=True)
            result = tuple(r if r is not None else zeros_like(o) for r, o in zip(result, outs))
    outs = tuple(o if create_graph else o.detach() for o in outs)
    result = tuple(r if create_graph else r.detach() for r in result)
    return (outs if multi_out else outs[0]), (result if multi_out else result[0])


def _vectorized_jacobian(func: Callable, ins: tuple, multi_in: bool, create_graph: bool, strict: bool,
                         strategy: str) -> Any:
    """The Jacobian with every row (reverse) or column (forward) at once: ember.func's jacrev/jacfwd, which
    batch the vjps/jvps with vmap instead of looping over them."""
    with enable_grad():
        ins = _prepare(ins, create_graph)
        probe = func(*ins)  # the output structure (and strict mode's check)
        outs, multi_out = _inputs(probe, "outputs of the user-provided function", "jacobian")
        _check_outputs_differentiable(outs, strict)
        jac_of = _JACOBIANS[strategy](lambda *xs: _tuple(func(*xs))[0], argnums=tuple(range(len(ins))))
        table = jac_of(*ins)
    if not create_graph:
        table = tuple(tuple(t.detach() for t in row) for row in table)
    rows = [row if multi_in else row[0] for row in table]
    return tuple(rows) if multi_out else rows[0]


def jacobian(func: Callable, inputs: Any, create_graph: bool = False, strict: bool = False,
             vectorize: bool = False, strategy: str = "reverse-mode") -> Any:
    """Row by row (one vjp per output element), as PyTorch's default reverse mode; ``vectorize=True``
    computes all rows (or, with ``strategy="forward-mode"``, all columns) in one batched pass (ember.func)."""
    _check_strategy(strategy, vectorize)
    ins, multi_in = _inputs(inputs, "inputs", "jacobian")
    if vectorize:
        return _vectorized_jacobian(func, ins, multi_in, create_graph, strict, strategy)
    with enable_grad():
        ins = _prepare(ins, create_graph)
        outs, multi_out = _inputs(func(*ins), "outputs of the user-provided function", "jacobian")
        _check_outputs_differentiable(outs, strict)
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
    """The Hessian of a scalar function: the Jacobian of its gradient (``vectorize=True`` batches it)."""
    _check_strategy(outer_jacobian_strategy, vectorize)
    ins, multi_in = _inputs(inputs, "inputs", "hessian")

    def gradient(*xs: Tensor) -> Any:
        out = func(*xs)
        outs, multi_out = _inputs(out, "outputs of the user-provided function", "hessian")
        if multi_out:
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should contain a single element")
        if strict and not out.requires_grad:
            _check_jacobian_strict([zeros_like(x) for x in xs], strict)
        if not out.requires_grad:
            return tuple(zeros_like(x) for x in xs) if multi_in else zeros_like(xs[0])
        gs = grad([out], list(xs), create_graph=True, allow_unused=True)
        _check_jacobian_strict(gs, strict)
        gs = tuple(g if g is not None else zeros_like(x) for g, x in zip(gs, xs))
        return gs if multi_in else gs[0]

    return jacobian(gradient, inputs, create_graph=create_graph, strict=strict, vectorize=vectorize,
                    strategy=outer_jacobian_strategy)


def vhp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False) -> tuple:
    """``(func(inputs), v^T H)`` for a scalar function."""
    return _vhp(func, inputs, v, create_graph, strict, "vhp")


def _vhp(func: Callable, inputs: Any, v: Any, create_graph: bool, strict: bool, name: str) -> tuple:
    ins, multi_in = _inputs(inputs, "inputs", name)
    vs = _inputs(v, "v", name)[0] if v is not None else tuple(ones_like(x) for x in ins)
    if v is None and any(x.numel() != 1 for x in ins):
        raise RuntimeError("The vector v can only be None if the input to the user-provided function is a single "
                           "Tensor with a single element.")
    _check_v(vs, ins)
    with enable_grad():
        ins = _prepare(ins, create_graph)
        out = func(*ins)
        outs, multi_out = _inputs(out, "outputs of the user-provided function", name)
        if multi_out:
            raise RuntimeError(f"The function given to {name} should return a single Tensor")
        if outs[0].numel() != 1:
            raise RuntimeError(f"The Tensor returned by the function given to {name} should contain a single element")
        out = outs[0]
        _check_outputs_differentiable((out,), strict)
        gs = grad([out], list(ins), create_graph=True, allow_unused=True) if out.requires_grad else [None] * len(ins)
        _check_jacobian_strict(gs, strict)
        pairs = [(g, vv) for g, vv in zip(gs, vs) if g is not None and g.requires_grad]
        res = grad([g for g, _ in pairs], list(ins), grad_outputs=[vv for _, vv in pairs],
                                  create_graph=create_graph, allow_unused=True) if pairs else [None] * len(ins)
        res = tuple(r if r is not None else zeros_like(x) for r, x in zip(res, ins))
    out = out if create_graph else out.detach()
    res = tuple(r if create_graph else r.detach() for r in res)
    return out, (res if multi_in else res[0])


def hvp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False) -> tuple:
    """H v; the Hessian of a scalar function is symmetric, so it equals v^T H."""
    return _vhp(func, inputs, v, create_graph, strict, "hvp")
