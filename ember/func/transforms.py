"""``torch.func``'s autodiff transforms: grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian.

They are built on ember's one reverse-mode engine (``ember.autograd.grad``). Composition works as in
torch.func: inside ``vmap`` the differentiated inputs become tensors of the innermost vmap level, so the
backward pass runs through the batching rules (``vmap(grad(f))`` gives per-sample gradients in one pass);
a transform nested in another (``grad(grad(f))``, ``jacfwd(jacrev(f))``) keeps the inner gradient's graph
(``create_graph``) so the outer one can differentiate it.

Forward mode (``jvp``, ``jacfwd``) is the double-vjp trick, not dual numbers: for a linear ``u -> J^T u``
(a backward pass with a cotangent ``u`` that requires grad), the vjp with ``v`` is ``J v``. It costs one
forward and two backward passes, and needs every op on the path to have a differentiable backward (all of
ember's records do); ``jacfwd`` batches the second backward over the basis vectors with ``vmap``.

Example:
    >>> import ember
    >>> from ember.func import grad
    >>> grad(lambda x: (x ** 3).sum())(ember.tensor([1.0, 2.0])).tolist()
    [3.0, 12.0]
"""
from __future__ import annotations

import threading
from typing import Any, Callable

from ember import autograd
from ember.autograd import grad_mode
from ember.creation import eye, zeros_like
from ember.func.batched import BatchedValue, top_level
from ember.func.pytree import tree_flatten, tree_map, tree_unflatten
from ember.func.vmap import vmap
from ember.ops import dispatch

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "linearize"]


class _Nesting(threading.local):
    def __init__(self) -> None:
        self.depth = 0


_NESTING = _Nesting()


class _Transform:
    """Counts the autodiff transforms running on this thread (an inner one keeps its graph for the outer)."""

    def __enter__(self) -> bool:
        outer = _NESTING.depth > 0
        _NESTING.depth += 1
        return outer

    def __exit__(self, *exc: Any) -> None:
        _NESTING.depth -= 1


def _tracked(t: Any) -> bool:
    """True when some level differentiates through ``t`` (it, or the batch it wraps, requires grad)."""
    while True:
        if t._requires_grad:
            return True
        data = t._data
        if type(data) is not BatchedValue:
            return False
        t = data.value


def _watch(t: Any, keep_graph: bool) -> Any:
    """``t`` as an input to differentiate with respect to. Inside vmap it becomes a tensor of the innermost
    level (so its gradient is per sample); a tensor an outer level differentiates stays connected to it."""
    if not isinstance(t, dispatch.Tensor):
        raise RuntimeError(f"expected the inputs to differentiate to be Tensors, got {type(t).__name__}")
    level = top_level()
    if level is not None:
        value, bdim = level.unwrap(t)
        if bdim is None and not (type(t._data) is BatchedValue and t._data.level is level):
            t = level.wrap(t, None)
            if not keep_graph or not t._requires_grad:  # already a fresh tensor: no detached copy of it
                return t.requires_grad_(True)
    if keep_graph and t._requires_grad:
        return t.view_as(t)  # an alias that keeps t's history: outer levels see through this one
    return t.detach().requires_grad_(True)


def _argnums_tuple(argnums: Any, nargs: int, name: str) -> tuple:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums:
        raise RuntimeError(f"{name}: argnums must be non-empty")
    for n in nums:
        if not isinstance(n, int):
            raise RuntimeError(f"{name}: argnums must be int or Tuple[int, ...], got: {type(n)}")
        if not -nargs <= n < nargs:
            raise RuntimeError(f"Got argnum={n}, but only {nargs} positional inputs")
    normalized = tuple(n % nargs for n in nums)
    if len(set(normalized)) != len(normalized):
        raise RuntimeError(f"{name}: argnums must be unique, got {argnums}")
    return normalized


def _select(args: tuple, argnums: Any) -> Any:
    return args[argnums] if isinstance(argnums, int) else tuple(args[n] for n in argnums)


def _replace(args: tuple, argnums: Any, new: Any) -> tuple:
    out = list(args)
    if isinstance(argnums, int):
        out[argnums] = new
    else:
        for n, value in zip(argnums, new):
            out[n] = value
    return tuple(out)


def _grads(outputs: list, inputs: list, cotangents: list | None, create_graph: bool, retain: bool) -> list:
    """Gradients of ``outputs`` (with ``cotangents``) for each input; zeros where an input is unused."""
    pairs = [(o, c) for o, c in zip(outputs, cotangents or [None] * len(outputs)) if o.requires_grad]
    if not pairs:
        return [zeros_like(x) for x in inputs]
    found = autograd.grad([o for o, _ in pairs], inputs, grad_outputs=[c for _, c in pairs], retain_graph=retain,
                          create_graph=create_graph, allow_unused=True)
    return [g if g is not None else zeros_like(x) for g, x in zip(found, inputs)]


def _release(t: Any, keep_graph: bool) -> Any:
    return t if keep_graph or not isinstance(t, dispatch.Tensor) else t.detach()


# ---- grad, grad_and_value -----------------------------------------------------------------------------
def grad_and_value(func: Callable, argnums: Any = 0, has_aux: bool = False) -> Callable:
    """``(gradient, value)`` of a function returning a scalar tensor (``(gradient, (value, aux))`` with
    ``has_aux``); the gradient has the structure of the ``argnums`` inputs (a tensor, a tuple, a dict...).

    Example:
        >>> g, v = grad_and_value(lambda x: (x * x).sum())(ember.tensor([3.0]))
        >>> g.tolist(), v.item()
        ([6.0], 9.0)
    """
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return _grad_and_value(func, argnums, has_aux, args, kwargs, True)

    return wrapper


def _grad_and_value(func: Callable, argnums: Any, has_aux: bool, args: tuple, kwargs: dict, want_value: bool) -> Any:
    """grad_and_value's work; ``want_value=False`` (``grad``) skips detaching a value nobody reads."""
    nums = _argnums_tuple(argnums, len(args), "grad_and_value(f)(*args)")
    chosen = argnums if isinstance(argnums, int) else nums
    with _Transform() as nested, grad_mode.enable_grad():
        flat, spec = tree_flatten(_select(args, chosen))
        keep = nested or any(_tracked(t) for t in flat if isinstance(t, dispatch.Tensor))
        watched = [_watch(t, keep) for t in flat]
        output = func(*_replace(args, chosen, tree_unflatten(watched, spec)), **kwargs)
        aux = None
        if has_aux:
            if not (isinstance(output, tuple) and len(output) == 2):
                raise RuntimeError("grad_and_value(f)(*args): output of function f should be a tuple: "
                                   "(output, aux) if has_aux is True")
            output, aux = output
        if not isinstance(output, dispatch.Tensor):
            raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got "
                               f"{type(output)}")
        if output.dim() != 0:
            raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got "
                               f"tensor with {output.dim()} dims. Maybe you wanted to use the vjp or jacrev "
                               "APIs instead?")
        grads = _grads([output], watched, None, keep, keep)
    gradient = tree_unflatten(grads, spec)
    value = _release(output, keep) if want_value else None
    if has_aux:
        return gradient, (value, tree_map(lambda a: _release(a, keep), aux))
    return gradient, value


def grad(func: Callable, argnums: Any = 0, has_aux: bool = False) -> Callable:
    """The gradient of a scalar-valued ``func`` with respect to input(s) ``argnums`` (``torch.func.grad``).

    Example:
        >>> grad(lambda x: x.sin().sum())(ember.zeros(2)).tolist()
        [1.0, 1.0]
    """
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        gradient, value = _grad_and_value(func, argnums, has_aux, args, kwargs, False)
        return (gradient, value[1]) if has_aux else gradient

    return wrapper


# ---- vjp, jvp -----------------------------------------------------------------------------------------
def vjp(func: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """``(func(*primals), vjp_fn)``; ``vjp_fn(cotangents)`` gives the cotangents of every primal (a tuple).

    Example:
        >>> out, fn = vjp(lambda x: x * 2, ember.ones(3))
        >>> fn(ember.tensor([1.0, 2.0, 3.0]))[0].tolist()
        [2.0, 4.0, 6.0]
    """
    with _Transform() as nested, grad_mode.enable_grad():
        flat, spec = tree_flatten(primals)
        keep = nested or any(_tracked(t) for t in flat if isinstance(t, dispatch.Tensor))
        watched = [_watch(t, keep) for t in flat]
        output = func(*tree_unflatten(watched, spec))
        aux = None
        if has_aux:
            if not (isinstance(output, tuple) and len(output) == 2):
                raise RuntimeError("vjp(f, *primals): output of function f should be a tuple: (output, aux) if "
                                   "has_aux is True")
            output, aux = output
    flat_out, out_spec = tree_flatten(output)
    for o in flat_out:
        if not isinstance(o, dispatch.Tensor):
            raise RuntimeError(f"vjp(f, *primals): Expected f to be a function that has non-empty output of "
                               f"Tensors, got {type(o)}")

    def vjp_fn(cotangents: Any, retain_graph: bool = True, create_graph: bool | None = None) -> tuple:
        flat_cot, cot_spec = tree_flatten(cotangents)
        if cot_spec != out_spec:
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree structure of "
                               f"outputs to the function. cotangents: {cot_spec}, primal output: {out_spec}")
        for c, o in zip(flat_cot, flat_out):
            if tuple(c.shape) != tuple(o.shape):
                raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of {tuple(c.shape)} and "
                                   f"output[0] has a shape of {tuple(o.shape)}.")
        graph = keep if create_graph is None else create_graph
        with _Transform() as inner_nested, grad_mode.enable_grad():
            grads = _grads(flat_out, watched, flat_cot, graph or inner_nested, True)
        return tuple(tree_unflatten(grads, spec))

    result = tree_unflatten([_release(o, keep) for o in flat_out], out_spec)
    if has_aux:
        return result, vjp_fn, tree_map(lambda a: _release(a, keep), aux)
    return result, vjp_fn


def _linearized(func: Callable, primals: tuple, has_aux: bool, name: str) -> tuple:
    """Run ``func`` once and return ``(outputs, out_spec, push, aux, keep)`` where ``push(tangents)`` gives
    J v by the double-vjp trick (ready to be vmapped over many tangents)."""
    with _Transform() as nested, grad_mode.enable_grad():
        flat, spec = tree_flatten(primals)
        keep = nested or any(_tracked(t) for t in flat if isinstance(t, dispatch.Tensor))
        watched = [_watch(t, True) for t in flat]
        output = func(*tree_unflatten(watched, spec))
        aux = None
        if has_aux:
            if not (isinstance(output, tuple) and len(output) == 2):
                raise RuntimeError(f"{name}: output of function f should be a tuple: (output, aux) if has_aux is "
                                   "True")
            output, aux = output
        flat_out, out_spec = tree_flatten(output)
        for o in flat_out:
            if not isinstance(o, dispatch.Tensor):
                raise RuntimeError(f"{name}: Expected f to be a function that has non-empty output of Tensors, "
                                   f"got {type(o)}")
        level = top_level()
        dummies = []
        for o in flat_out:
            u = zeros_like(o)
            if level is not None:
                u = level.wrap(u, None)
            dummies.append(u.requires_grad_(True))
        differentiable = [(o, u) for o, u in zip(flat_out, dummies) if o.requires_grad and o.is_floating_point()]
        if differentiable:
            back = autograd.grad([o for o, _ in differentiable], watched,
                                 grad_outputs=[u for _, u in differentiable], create_graph=True, allow_unused=True)
        else:
            back = [None] * len(watched)

    def push(flat_tangents: list) -> list:
        pairs = [(b, v) for b, v in zip(back, flat_tangents) if b is not None and b.requires_grad]
        with _Transform() as inner_nested, grad_mode.enable_grad():
            if pairs:
                found = autograd.grad([b for b, _ in pairs], dummies, grad_outputs=[v for _, v in pairs],
                                      retain_graph=True, create_graph=keep or inner_nested, allow_unused=True)
            else:
                found = [None] * len(dummies)
        out = []
        for g, o in zip(found, flat_out):
            if g is None:
                g = zeros_like(o)
            out.append(g if keep else g.detach())
        return out

    return flat_out, out_spec, push, aux, keep, flat, spec


def linearize(func: Callable, *primals: Any) -> tuple:
    """``(func(*primals), jvp_fn)``: ``jvp_fn(*tangents)`` gives J tangents at ``primals`` (``torch.func.linearize``).

    ``func`` runs once; each ``jvp_fn`` call is one backward pass through the kept first backward (the double-vjp
    trick of :func:`jvp`), so many tangents cost one forward in all.

    Example:
        >>> out, jvp_fn = linearize(lambda x: x.sin(), ember.zeros(2))
        >>> jvp_fn(ember.ones(2)).tolist()
        [1.0, 1.0]
    """
    flat_out, out_spec, push, _, keep, flat_primals, primals_spec = _linearized(func, primals, False, "linearize")
    metas = [(p.shape, p.device, p.dtype) for p in flat_primals]

    def jvp_fn(*tangents: Any) -> Any:
        flat_tangents, tangents_spec = tree_flatten(tangents)
        if tangents_spec != primals_spec:
            raise RuntimeError(f"Expected the tangents {tangents_spec} to have the same argspec as the primals "
                               f"{primals_spec}")
        for idx, (t, (shape, device, dtype)) in enumerate(zip(flat_tangents, metas)):
            for what, got, want in (("shape", t.shape, shape), ("device", t.device, device),
                                    ("dtype", t.dtype, dtype)):
                if got != want:
                    raise RuntimeError(f"tangent:{idx} with {what} {got} in flattened pytree doesn't match the "
                                       f"{what} {want} of the corresponding primal.")
        return tree_unflatten(push(flat_tangents), out_spec)

    return tree_unflatten([_release(o, keep) for o in flat_out], out_spec), jvp_fn


def jvp(func: Callable, primals: Any, tangents: Any, *, strict: bool = False, has_aux: bool = False) -> tuple:
    """``(func(*primals), J tangents)``: forward mode by the double-vjp trick (see the module doc).

    Example:
        >>> out, jv = jvp(lambda x: x ** 2, (ember.tensor([3.0]),), (ember.tensor([1.0]),))
        >>> jv.tolist()
        [6.0]
    """
    if not isinstance(primals, tuple):
        raise RuntimeError(f"jvp(f, primals, tangents): Expected primals to be a tuple. E.g. it should be valid to "
                           f"call f(*primals).")
    if not isinstance(tangents, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected tangents to be a tuple with the same structure "
                           "as primals.")
    flat_t, t_spec = tree_flatten(tangents)
    if t_spec != tree_flatten(primals)[1]:
        raise RuntimeError(f"jvp(f, primals, tangents): Expected primals and tangents to have the same python "
                           f"structure. For example, if primals is a tuple of 3 tensors, tangents also must be. Got "
                           f"primals with structure {tree_flatten(primals)[1]} and tangents with structure {t_spec}")
    for p, t in zip(tree_flatten(primals)[0], flat_t):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(f"jvp(f, primals, tangents): Expected primals and tangents to have the same shape. "
                               f"Got primal of shape {tuple(p.shape)} and tangent of shape {tuple(t.shape)}")
    flat_out, out_spec, push, aux, keep, _, _ = _linearized(func, primals, has_aux, "jvp(f, primals, tangents)")
    result = tree_unflatten([_release(o, keep) for o in flat_out], out_spec)
    tangent_out = tree_unflatten(push(flat_t), out_spec)
    if has_aux:
        return result, tangent_out, tree_map(lambda a: _release(a, keep), aux)
    return result, tangent_out


# ---- Jacobians ----------------------------------------------------------------------------------------
def _basis(like: list) -> Any:
    """Identity rows for the concatenated flat elements of ``like``: (total, total) in their dtype."""
    total = sum(t.numel() for t in like)
    return eye(total, dtype=like[0].dtype, device=like[0].device), total


def _split_rows(rows: Any, like: list) -> list:
    """(N, total) basis rows cut into one (N, *t.shape) block per tensor of ``like``."""
    out, start = [], 0
    for t in like:
        n = t.numel()
        out.append(rows[:, start:start + n].reshape((rows.shape[0],) + tuple(t.shape)))
        start += n
    return out


def jacrev(func: Callable, argnums: Any = 0, *, has_aux: bool = False, chunk_size: int | None = None,
           _preallocate_and_copy: bool = False) -> Callable:
    """The Jacobian of ``func`` with respect to input(s) ``argnums`` by reverse mode: one vjp per output
    element, all of them batched by ``vmap`` over the identity (``chunk_size`` rows at a time).

    Example:
        >>> jacrev(lambda x: x.sin())(ember.zeros(2)).tolist()
        [[1.0, 0.0], [0.0, 1.0]]
    """
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nums = _argnums_tuple(argnums, len(args), "jacrev")
        chosen = argnums if isinstance(argnums, int) else nums
        flat_in, in_spec = tree_flatten(_select(args, chosen))

        def partial(*selected: Any) -> Any:
            return func(*_replace(args, chosen, tree_unflatten(list(selected), in_spec)), **kwargs)

        results = vjp(partial, *flat_in, has_aux=has_aux)
        output, vjp_fn = results[0], results[1]
        flat_out, out_spec = tree_flatten(output)
        basis, total = _basis(flat_out)
        cotangent_rows = _split_rows(basis, flat_out)

        def pull(*rows: Any) -> tuple:
            return vjp_fn(tree_unflatten(list(rows), out_spec))

        per_input = vmap(pull, chunk_size=chunk_size)(*cotangent_rows)  # tuple over inputs of (total, *in)
        blocks = []  # blocks[i][j]: d out_i / d in_j
        start = 0
        for o in flat_out:
            n = o.numel()
            row = [g[start:start + n].reshape(tuple(o.shape) + tuple(x.shape)) for g, x in zip(per_input, flat_in)]
            blocks.append(tree_unflatten(row, in_spec))
            start += n
        jac = tree_unflatten(blocks, out_spec)
        return (jac, results[2]) if has_aux else jac

    return wrapper


def jacfwd(func: Callable, argnums: Any = 0, has_aux: bool = False, *, randomness: str = "error") -> Callable:
    """The Jacobian of ``func`` by forward mode: one jvp per input element (double-vjp, see the module doc),
    all of them batched by ``vmap`` over the identity.

    Example:
        >>> jacfwd(lambda x: x ** 2)(ember.tensor([1.0, 2.0])).tolist()
        [[2.0, 0.0], [0.0, 4.0]]
    """
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nums = _argnums_tuple(argnums, len(args), "jacfwd")
        chosen = argnums if isinstance(argnums, int) else nums
        selected = _select(args, chosen)
        flat_in, in_spec = tree_flatten(selected)

        def partial(*inputs: Any) -> Any:
            return func(*_replace(args, chosen, tree_unflatten(list(inputs), in_spec)), **kwargs)

        flat_out, out_spec, push, aux, keep, _, _ = _linearized(partial, tuple(flat_in), has_aux, "jacfwd")
        basis, total = _basis(flat_in)
        tangent_rows = _split_rows(basis, flat_in)
        columns = vmap(lambda *rows: tuple(push(list(rows))), randomness=randomness)(*tangent_rows)
        blocks = []  # columns[i]: (total_in, *out_i)
        for col, o in zip(columns, flat_out):
            row, start = [], 0
            for x in flat_in:
                n = x.numel()
                piece = col[start:start + n]  # (n, *out)
                piece = piece.movedim(0, -1) if o.dim() else piece
                row.append(piece.reshape(tuple(o.shape) + tuple(x.shape)))
                start += n
            blocks.append(tree_unflatten(row, in_spec))
        jac = tree_unflatten(blocks, out_spec)
        return (jac, tree_map(lambda a: _release(a, keep), aux)) if has_aux else jac

    return wrapper


def hessian(func: Callable, argnums: Any = 0) -> Callable:
    """The Hessian of a scalar ``func``: ``jacfwd(jacrev(func))``, as in torch.func.

    Example:
        >>> hessian(lambda x: (x ** 3).sum())(ember.tensor([1.0, 2.0])).tolist()
        [[6.0, 0.0], [0.0, 12.0]]
    """
    return jacfwd(jacrev(func, argnums), argnums)
