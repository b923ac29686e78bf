"""``torch.optim.LBFGS``: limited-memory BFGS (two-loop recursion over the last ``history_size`` steps).

Follows torch's algorithm step for step (first step length ``min(1, 1/|g|_1) * lr``, the curvature test
``y.s > 1e-10``, the same stopping tests), so parameters agree with torch to rounding.
``line_search_fn="strong_wolfe"`` is not implemented in ember and raises.

Example:
    >>> import ember
    >>> w = ember.tensor([3.0, -2.0], requires_grad=True)
    >>> opt = ember.optim.LBFGS([w], lr=1)
    >>> def closure():
    ...     opt.zero_grad(); loss = ((w - 1) ** 2).sum(); loss.backward(); return loss
    >>> _ = opt.step(closure); [round(v, 4) for v in w.tolist()]
    [1.0, 1.0]
"""
from __future__ import annotations

from typing import Any, Callable

from ember.creation import zeros
from ember.ops.linalg import dot
from ember.ops.views import cat
from ember.autograd import grad_mode
from ember.optim.optimizer import Optimizer
from ember.tensor import Tensor


class LBFGS(Optimizer):
    def __init__(self, params: Any, lr: float = 1, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        if line_search_fn is not None:
            if line_search_fn != "strong_wolfe":
                raise RuntimeError("only 'strong_wolfe' is supported")
            raise NotImplementedError("LBFGS: line_search_fn='strong_wolfe' is not implemented in ember; use "
                                      "line_search_fn=None (a fixed step of lr)")
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change, history_size=history_size,
                                      line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def _flat_grad(self) -> Tensor:
        parts = [p.grad.reshape(-1) if p.grad is not None else zeros(p.numel(), dtype=p.dtype)
                 for p in self._params]
        return cat(parts)

    def _add_grad(self, step: float, direction: Tensor) -> None:
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(direction[offset:offset + n].reshape(p.shape) * step)
            offset += n

    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # noqa: C901 - torch's algorithm, kept whole
        if closure is None:
            raise RuntimeError("LBFGS.step needs a closure that re-evaluates the model and returns the loss")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        def evaluate() -> Any:
            with grad_mode.enable_grad():
                return closure()

        orig_loss = evaluate()
        with grad_mode.no_grad():  # torch's step runs under no_grad: float() of the loss does not warn there
            loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        with grad_mode.no_grad():
            flat_grad = self._flat_grad()
            if float(flat_grad.abs().max()) <= tolerance_grad:
                return orig_loss
            d, t = state.get("d"), state.get("t")
            old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
            h_diag, prev_flat_grad, prev_loss = state.get("H_diag"), state.get("prev_flat_grad"), state.get("prev_loss")
            n_iter = 0
            while n_iter < max_iter:
                n_iter += 1
                state["n_iter"] += 1
                if state["n_iter"] == 1:
                    d = -flat_grad
                    old_dirs, old_stps, ro, h_diag = [], [], [], 1.0
                else:
                    y = flat_grad - prev_flat_grad
                    s = d * t
                    ys = float(dot(y, s))
                    if ys > 1e-10:
                        if len(old_dirs) == history_size:
                            old_dirs.pop(0)
                            old_stps.pop(0)
                            ro.pop(0)
                        old_dirs.append(y)
                        old_stps.append(s)
                        ro.append(1.0 / ys)
                        h_diag = ys / float(dot(y, y))
                    al = [0.0] * len(old_dirs)
                    q = -flat_grad
                    for i in range(len(old_dirs) - 1, -1, -1):
                        al[i] = float(dot(old_stps[i], q)) * ro[i]
                        q = q - old_dirs[i] * al[i]
                    r = q * h_diag
                    for i in range(len(old_dirs)):
                        be_i = float(dot(old_dirs[i], r)) * ro[i]
                        r = r + old_stps[i] * (al[i] - be_i)
                    d = r
                prev_flat_grad = flat_grad.clone()
                prev_loss = loss
                t = min(1.0, 1.0 / float(flat_grad.abs().sum())) * lr if state["n_iter"] == 1 else lr
                gtd = float(dot(flat_grad, d))
                if gtd > -tolerance_change:
                    break
                ls_func_evals = 0
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    loss = float(evaluate())
                    flat_grad = self._flat_grad()
                    opt_cond = float(flat_grad.abs().max()) <= tolerance_grad
                    ls_func_evals = 1
                current_evals += ls_func_evals
                state["func_evals"] += ls_func_evals
                if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                    break
                if float((d * t).abs().max()) <= tolerance_change:
                    break
                if abs(loss - prev_loss) < tolerance_change:
                    break
            state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
                         prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss
