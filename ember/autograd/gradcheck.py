"""Numerical gradient checks: central finite differences in float64 against autograd.

Example:
    >>> import ember
    >>> x = ember.randn(3, dtype=ember.float64, requires_grad=True)
    >>> ember.autograd.gradcheck(lambda t: (t * t).sum(), (x,))
    True
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember.autograd.grad_mode import enable_grad, no_grad


def _api() -> tuple:
    """``ember.creation``, ``ember.autograd.grad`` and ``ember.ops.inplace``, imported on first use: this module is
    loaded while ``ember.autograd`` itself initializes (which ``ember.creation`` needs), a real cycle."""
    from ember import creation, func
    from ember.autograd import grad
    from ember.ops import inplace

    _api.vmap = func.vmap  # (check_batched_grad)
    return creation, grad, inplace


def _outputs(fn: Callable, inputs: Sequence[Any]) -> list:
    out = fn(*inputs)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def numerical_jacobian(fn: Callable, inputs: Sequence[Any], eps: float = 1e-6) -> list:
    """Jacobian blocks d(out_j)/d(in_i) by central differences, as float64 NumPy arrays."""

    blocks = []
    with no_grad():
        base = [np.asarray(o.detach().cpu().numpy(), dtype=np.float64) for o in _outputs(fn, inputs)]
        for t in inputs:
            if not (hasattr(t, "requires_grad") and t.requires_grad):
                blocks.append(None)
                continue
            data = _perturbable(t, inputs)
            jac = [np.zeros((data.size, b.size)) for b in base]
            for k in range(data.size):
                at = np.unravel_index(k, data.shape)  # (written in place: a reshape of a strided input is a copy)
                original = data[at].item()
                data[at] = original + eps
                plus = [np.asarray(o.detach().cpu().numpy(), dtype=np.float64).reshape(-1) for o in _outputs(fn, inputs)]
                data[at] = original - eps
                minus = [np.asarray(o.detach().cpu().numpy(), dtype=np.float64).reshape(-1) for o in _outputs(fn, inputs)]
                data[at] = original
                for j in range(len(base)):
                    jac[j][k] = (plus[j] - minus[j]) / (2 * eps)
            blocks.append(jac)
    return blocks


def analytical_jacobian(fn: Callable, inputs: Sequence[Any], create_graph: bool = False) -> list:
    creation, grad, _ = _api()

    outs = _outputs(fn, inputs)
    diff_inputs = [t for t in inputs if hasattr(t, "requires_grad") and t.requires_grad]
    # Identity, not ``in``: ``==`` on tensors is elementwise (and fails for different shapes).
    blocks = [[np.zeros((t.numel(), o.numel())) for o in outs] if any(t is d for d in diff_inputs) else None
              for t in inputs]
    for j, o in enumerate(outs):
        for k in range(o.numel()):
            seed = np.zeros(o.numel())
            seed[k] = 1.0
            grad_out = creation.tensor(seed.reshape(tuple(o.shape)), dtype=o.dtype, device=o.device)
            if not o.requires_grad:
                continue
            grads = grad([o], diff_inputs, [grad_out], retain_graph=True, allow_unused=True)
            gi = iter(grads)
            for i, t in enumerate(inputs):
                if blocks[i] is None:
                    continue
                g = next(gi)
                if g is not None:
                    blocks[i][j][:, k] = np.asarray(g.detach().cpu().numpy(), dtype=np.float64).reshape(-1)
    return blocks


def gradcheck(func: Callable, inputs: Any, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, nondet_tol: float = 0.0, check_undefined_grad: bool = True,
              check_grad_dtypes: bool = False, check_batched_grad: bool = False,
              check_batched_forward_grad: bool = False, check_forward_ad: bool = False,
              check_backward_ad: bool = True, fast_mode: bool = False, masked: bool | None = None) -> bool:
    """Compare autograd's derivatives with central finite differences (use float64 inputs), as PyTorch's.

    ``fast_mode`` compares one random projection ``u^T J v`` instead of the whole Jacobian; ``check_forward_ad``
    also compares Jacobian-vector products (forward mode); ``check_undefined_grad`` checks that a zero cotangent
    gives zero gradients; ``check_grad_dtypes`` that each gradient has its input's dtype; ``nondet_tol`` is the
    difference allowed between two backward runs on the same cotangent. ``masked`` is for sparse inputs
    (ember's sparse tensors are dense underneath: nothing to mask).
    """
    fn = func
    inputs = inputs if isinstance(inputs, (tuple, list)) else (inputs,)
    if check_batched_forward_grad:
        raise NotImplementedError("gradcheck(check_batched_forward_grad=True): ember does not check batched forward "
                                  "gradients here; compare ember.func.vmap of ember.func.jvp with a loop instead")
    if not _diff_inputs(inputs):
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of them have "
                         "requires_grad=True.")
    for t in inputs:
        if hasattr(t, "requires_grad") and t.requires_grad and t.dtype.name != "float64":
            import warnings

            warnings.warn(f"gradcheck: input of dtype {t.dtype} is not float64; the check may be imprecise")

    def fail(message: str) -> bool:
        if raise_exception:
            raise GradcheckError(message)
        return False

    if fast_mode:
        problem = _fast_check(fn, inputs, eps, atol, rtol, check_backward_ad, check_forward_ad)
        if problem:
            return fail(problem)
    else:
        numeric = numerical_jacobian(fn, inputs, eps)
        checks = ([("", analytical_jacobian(fn, inputs))] if check_backward_ad else []) + \
            ([("forward-mode ", _forward_jacobian(fn, inputs))] if check_forward_ad else [])
        for kind, analytic in checks:
            for i, (n_block, a_block) in enumerate(zip(numeric, analytic)):
                if n_block is None:
                    continue
                for j, (n, a) in enumerate(zip(n_block, a_block)):
                    if not np.allclose(a, n, atol=atol, rtol=rtol):
                        worst = np.abs(a - n).max()
                        what = "Jacobian computed with forward mode" if kind else "Jacobian"  # torch's words
                        return fail(f"{what} mismatch for output {j} with respect to input {i},\nnumerical:{n}\n"
                                    f"analytical:{a}\n(largest difference {worst:.3e})")
    if check_backward_ad:
        problem = _backward_properties(fn, inputs, check_undefined_grad, check_grad_dtypes, nondet_tol)
        if problem:
            return fail(problem)
    if check_batched_grad:
        problem = _batched_grad_check(fn, inputs, atol, rtol)
        if problem:
            return fail(problem)
    return True


def _batched_grad_check(fn: Callable, inputs: Sequence[Any], atol: float, rtol: float) -> str | None:
    """PyTorch's ``check_batched_grad``: the vjp of each output under ``vmap`` over two random cotangents equals
    the two vjps run one by one (this checks the batching rules of the backward's ops)."""
    creation, grad, _ = _api()

    diff = _diff_inputs(inputs)
    rng = np.random.default_rng(2)
    for j, o in enumerate(_outputs(fn, inputs)):
        if not getattr(o, "requires_grad", False):
            continue
        stacked = creation.tensor(rng.standard_normal((2,) + tuple(o.shape)), dtype=o.dtype, device=o.device)

        def vjp(cotangent: Any, o: Any = o) -> tuple:
            return grad([o], diff, [cotangent], retain_graph=True, materialize_grads=True)
        batched = _api.vmap(vjp)(stacked)
        for i, t in enumerate(diff):
            for k in range(2):
                want = vjp(stacked[k])[i]
                got = batched[i]
                if want is None or got is None:
                    continue
                want, got = want.detach().cpu().numpy(), got[k].detach().cpu().numpy()
                if not np.allclose(got, want, atol=atol, rtol=rtol):
                    return (f"For output {j} and input {i}:\n\ngradcheck or gradgradcheck failed while testing "
                            f"batched gradient computation (ember.func.vmap of the vjp against a loop).\n\nGot:\n"
                            f"{got}\n\nExpected:\n{want}")
    return None


def _perturbable(t: Any, inputs: Sequence[Any]) -> Any:
    """``t``'s array, writable in place (an expanded input with no overlapping elements, ``eye(3).expand(1, 3, 3)``,
    is a read-only NumPy view: a writable alias of the same memory); PyTorch's error for overlapping elements."""
    if _api()[2]._writeable(t):
        return t._data
    index = next(i for i, x in enumerate(inputs) if x is t)
    raise RuntimeError(f"The {index}th input has a dimension with stride 0. gradcheck only supports inputs that are "
                       "non-overlapping to be able to compute the numerical gradients correctly. You should call "
                       ".contiguous on the input before passing it to gradcheck.")


def _diff_inputs(inputs: Sequence[Any]) -> list:
    return [t for t in inputs if hasattr(t, "requires_grad") and t.requires_grad]


def _fast_check(fn: Callable, inputs: Sequence[Any], eps: float, atol: float, rtol: float, backward: bool,
                forward: bool) -> str | None:
    """PyTorch's fast mode: ``u^T J v`` by a central difference along ``v`` against ``(J^T u) . v`` (and ``u . J v``)."""
    creation, grad, _ = _api()

    rng = np.random.default_rng(0)
    diff = _diff_inputs(inputs)
    directions = [rng.uniform(-1, 1, tuple(t.shape)) for t in diff]
    outs = _outputs(fn, inputs)
    seeds = [rng.uniform(-1, 1, tuple(o.shape)) for o in outs]
    arrays = [_perturbable(t, inputs) for t in diff]
    originals = [a.copy() for a in arrays]
    values = []
    with no_grad():
        for sign in (1, -1):
            for a, v, orig in zip(arrays, directions, originals):
                a[...] = orig + sign * eps * v.astype(orig.dtype)
            values.append(sum(float((np.asarray(o.detach().cpu().numpy(), dtype=np.float64) * u).sum())
                              for o, u in zip(_outputs(fn, inputs), seeds)))
        for a, orig in zip(arrays, originals):
            a[...] = orig
    numeric = (values[0] - values[1]) / (2 * eps)
    live = [(o, u) for o, u in zip(outs, seeds) if o.requires_grad]
    if backward:
        grads = grad([o for o, _ in live], diff, [creation.tensor(u, dtype=o.dtype, device=o.device) for o, u in live],
                     retain_graph=True, allow_unused=True) if live else [None] * len(diff)
        analytic = sum(float((np.asarray(g.detach().cpu().numpy(), dtype=np.float64) * v).sum())
                       for g, v in zip(grads, directions) if g is not None)
        if not np.isclose(analytic, numeric, atol=atol, rtol=rtol):
            return (f"gradcheck (fast mode): Jacobian mismatch: u^T J v is {analytic:.6e} from autograd and "
                    f"{numeric:.6e} from finite differences; rerun with fast_mode=False to see the whole Jacobian")
    if forward:
        forward_value = sum(float((np.asarray(jv, dtype=np.float64) * u).sum())
                            for jv, u in zip(_jvp(fn, inputs, directions), seeds))
        if not np.isclose(forward_value, numeric, atol=atol, rtol=rtol):
            return (f"gradcheck (fast mode): forward-mode Jacobian mismatch: u^T J v is {forward_value:.6e} from "
                    f"Jacobian-vector products and {numeric:.6e} from finite differences")
    return None


def _jvp(fn: Callable, inputs: Sequence[Any], directions: list) -> list:
    """``J v`` for each output, by differentiating the vjp ``J^T u`` with respect to ``u`` (the double-vjp trick)."""
    creation, grad, _ = _api()

    diff = _diff_inputs(inputs)
    outs = _outputs(fn, inputs)
    results = []
    for o in outs:
        if not o.requires_grad:
            results.append(np.zeros(tuple(o.shape)))
            continue
        u = creation.zeros(tuple(o.shape), dtype=o.dtype, device=o.device, requires_grad=True)
        grads = grad([o], diff, [u], create_graph=True, retain_graph=True, allow_unused=True)
        inner = None
        for g, v in zip(grads, directions):
            if g is not None:
                term = (g * creation.tensor(v, dtype=g.dtype, device=g.device)).sum()
                inner = term if inner is None else inner + term
        if inner is None or not inner.requires_grad:
            results.append(np.zeros(tuple(o.shape)))
            continue
        (jv,) = grad([inner], [u], retain_graph=True, allow_unused=True)
        results.append(np.zeros(tuple(o.shape)) if jv is None else jv.detach().cpu().numpy())
    return results


def _forward_jacobian(fn: Callable, inputs: Sequence[Any]) -> list:
    """Jacobian blocks built column by column from Jacobian-vector products (same layout as the others)."""
    diff = _diff_inputs(inputs)
    blocks = []
    for t in inputs:
        if not any(t is d for d in diff):
            blocks.append(None)
            continue
        columns = None
        for k in range(t.numel()):
            directions = [np.zeros(tuple(d.shape)) for d in diff]
            index = next(i for i, d in enumerate(diff) if d is t)
            directions[index].reshape(-1)[k] = 1.0
            jvs = _jvp(fn, inputs, directions)
            if columns is None:
                columns = [np.zeros((t.numel(), jv.size)) for jv in jvs]
            for j, jv in enumerate(jvs):
                columns[j][k] = np.asarray(jv, dtype=np.float64).reshape(-1)
        blocks.append(columns or [])
    return blocks


def _backward_properties(fn: Callable, inputs: Sequence[Any], undefined: bool, dtypes_: bool,
                         nondet_tol: float) -> str | None:
    """Zero cotangents give zero gradients; gradients keep their input's dtype; two runs agree within nondet_tol."""
    creation, grad, _ = _api()

    diff = _diff_inputs(inputs)
    outs = [o for o in _outputs(fn, inputs) if getattr(o, "requires_grad", False)]
    if not outs or not diff:
        return None
    rng = np.random.default_rng(1)
    seeds = [creation.tensor(rng.uniform(-1, 1, tuple(o.shape)), dtype=o.dtype, device=o.device) for o in outs]
    first = grad(outs, diff, seeds, retain_graph=True, allow_unused=True)
    second = grad(outs, diff, seeds, retain_graph=True, allow_unused=True)
    for i, (a, b, t) in enumerate(zip(first, second, diff)):
        if a is None or b is None:
            continue
        if dtypes_ and a.dtype != t.dtype:
            return f"gradcheck: the gradient of input {i} has dtype {a.dtype}, the input {t.dtype}"
        gap = float(np.abs(a.detach().cpu().numpy() - b.detach().cpu().numpy()).max(initial=0.0))
        if gap > nondet_tol:
            return (f"gradcheck: backward is not reentrant: two runs with the same cotangent differ by {gap:.3e} "
                    f"for input {i} (more than nondet_tol={nondet_tol}); pass nondet_tol= for nondeterministic ops")
    if undefined:
        zeros = [creation.zeros(tuple(o.shape), dtype=o.dtype, device=o.device) for o in outs]
        for i, g in enumerate(grad(outs, diff, zeros, retain_graph=True, allow_unused=True)):
            if g is not None and np.any(g.detach().cpu().numpy() != 0):
                return f"gradcheck: a zero output gradient gave a nonzero gradient for input {i}"
    return None


def gradgradcheck(func: Callable, inputs: Any, grad_outputs: Any = None, *, eps: float = 1e-6, atol: float = 1e-5,
                  rtol: float = 1e-3, gen_non_contig_grad_outputs: bool = False, raise_exception: bool = True,
                  nondet_tol: float = 0.0, check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
                  check_batched_grad: bool = False, check_fwd_over_rev: bool = False, check_rev_over_rev: bool = True,
                  fast_mode: bool = False, masked: bool = False) -> bool:
    """Check second derivatives: gradcheck of the (vector-Jacobian product) gradient function, with random
    cotangents unless ``grad_outputs`` are given (PyTorch's signature; ``check_fwd_over_rev`` checks the forward-
    mode derivative of the gradient too)."""
    fn = func
    creation, grad, _ = _api()

    inputs = inputs if isinstance(inputs, (tuple, list)) else (inputs,)
    diff = [t for t in inputs if hasattr(t, "requires_grad") and t.requires_grad]
    outs = _outputs(fn, inputs)
    rng = np.random.default_rng(0)
    if grad_outputs is not None:
        given = grad_outputs if isinstance(grad_outputs, (tuple, list)) else (grad_outputs,)
        seeds = [g.detach() for g in given]
    else:
        seeds = [creation.tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype, device=o.device) for o in outs]

    def first_order(*args: Any) -> tuple:

        # The numerical Jacobian calls this under no_grad; the inner gradient still needs a graph.
        with enable_grad():
            results = _outputs(fn, args)
            live = [t for t in args if hasattr(t, "requires_grad") and t.requires_grad]
            grads = grad(results, live, seeds, create_graph=True, allow_unused=True)
        return tuple(g if g is not None else creation.zeros_like(t) for g, t in zip(grads, live))

    if not diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of them have "
                         "requires_grad=True.")
    return gradcheck(first_order, inputs, eps=eps, atol=atol, rtol=rtol, raise_exception=raise_exception,
                     nondet_tol=nondet_tol, check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, check_batched_grad=check_batched_grad,
                     check_forward_ad=check_fwd_over_rev, check_backward_ad=check_rev_over_rev, fast_mode=fast_mode)


class GradcheckError(RuntimeError):
    pass
