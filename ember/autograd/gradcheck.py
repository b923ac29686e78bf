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


def _outputs(fn: Callable, inputs: Sequence[Any]) -> list:
    out = fn(*inputs)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def numerical_jacobian(fn: Callable, inputs: Sequence[Any], eps: float = 1e-6) -> list:
    """Jacobian blocks d(out_j)/d(in_i) by central differences, as float64 NumPy arrays."""
    from ember.autograd.grad_mode import no_grad

    blocks = []
    with no_grad():
        base = [np.asarray(o.detach().cpu().numpy(), dtype=np.float64) for o in _outputs(fn, inputs)]
        for t in inputs:
            if not (hasattr(t, "requires_grad") and t.requires_grad):
                blocks.append(None)
                continue
            data = t._data
            flat = data.reshape(-1)
            jac = [np.zeros((flat.size, b.size)) for b in base]
            for k in range(flat.size):
                original = flat[k].item()
                flat[k] = original + eps
                plus = [np.asarray(o.detach().cpu().numpy(), dtype=np.float64).reshape(-1) for o in _outputs(fn, inputs)]
                flat[k] = original - eps
                minus = [np.asarray(o.detach().cpu().numpy(), dtype=np.float64).reshape(-1) for o in _outputs(fn, inputs)]
                flat[k] = original
                for j in range(len(base)):
                    jac[j][k] = (plus[j] - minus[j]) / (2 * eps)
            blocks.append(jac)
    return blocks


def analytical_jacobian(fn: Callable, inputs: Sequence[Any], create_graph: bool = False) -> list:
    from ember import creation
    from ember.autograd import grad

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


def gradcheck(fn: Callable, inputs: Any, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True) -> bool:
    """Compare autograd's Jacobian with finite differences (use float64 inputs)."""
    inputs = inputs if isinstance(inputs, (tuple, list)) else (inputs,)
    for t in inputs:
        if hasattr(t, "requires_grad") and t.requires_grad and t.dtype.name != "float64":
            import warnings

            warnings.warn(f"gradcheck: input of dtype {t.dtype} is not float64; the check may be imprecise")
    numeric = numerical_jacobian(fn, inputs, eps)
    analytic = analytical_jacobian(fn, inputs)
    for i, (n_block, a_block) in enumerate(zip(numeric, analytic)):
        if n_block is None:
            continue
        for j, (n, a) in enumerate(zip(n_block, a_block)):
            if not np.allclose(a, n, atol=atol, rtol=rtol):
                if raise_exception:
                    worst = np.abs(a - n).max()
                    raise GradcheckError(
                        f"gradcheck: Jacobian mismatch for output {j} with respect to input {i}; "
                        f"largest difference {worst:.3e}\nnumerical:\n{n}\nanalytical:\n{a}")
                return False
    return True


def gradgradcheck(fn: Callable, inputs: Any, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3) -> bool:
    """Check second derivatives: gradcheck of the (vector-Jacobian product) gradient function."""
    from ember import creation
    from ember.autograd import grad

    inputs = inputs if isinstance(inputs, (tuple, list)) else (inputs,)
    diff = [t for t in inputs if hasattr(t, "requires_grad") and t.requires_grad]
    outs = _outputs(fn, inputs)
    rng = np.random.default_rng(0)
    seeds = [creation.tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype) for o in outs]

    def first_order(*args: Any) -> tuple:
        from ember.autograd.grad_mode import enable_grad

        # The numerical Jacobian calls this under no_grad; the inner gradient still needs a graph.
        with enable_grad():
            results = _outputs(fn, args)
            live = [t for t in args if hasattr(t, "requires_grad") and t.requires_grad]
            grads = grad(results, live, seeds, create_graph=True, allow_unused=True)
        return tuple(g if g is not None else creation.zeros_like(t) for g, t in zip(grads, live))

    return gradcheck(first_order, inputs, eps=eps, atol=atol, rtol=rtol) if diff else True


class GradcheckError(RuntimeError):
    pass
