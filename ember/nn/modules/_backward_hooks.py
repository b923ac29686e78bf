"""Module backward hooks (PyTorch's ``torch.utils.hooks.BackwardHook``), built from identity Functions.

``Module.__call__`` wraps the module's tensor inputs, and later its tensor outputs, in an identity
autograd Function. In backward the output wrapper runs first: it sees ``grad_output`` (the gradient
w.r.t. the module's outputs), runs the backward *pre*-hooks, which may replace it, and remembers it.
The input wrapper runs once the module's own graph is done: it sees ``grad_input`` (w.r.t. the
module's tensor inputs) and runs the full backward hooks ``hook(module, grad_input, grad_output)``;
a hook returning a tuple replaces ``grad_input``. Both tuples are aligned with the positional
arguments / outputs, with ``None`` for non-tensors, as in PyTorch.

Example:
    >>> import ember
    >>> lin = ember.nn.Linear(3, 2)
    >>> seen = []
    >>> h = lin.register_full_backward_hook(lambda m, gi, go: seen.append((gi[0].shape, go[0].shape)))
    >>> lin(ember.randn(4, 3, requires_grad=True)).sum().backward()
    >>> seen
    [(ember.Size([4, 3]), ember.Size([4, 2]))]
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

from ember.autograd import grad_mode
from ember.autograd.function import Function
from ember.tensor import Tensor


class _BackwardHookFunction(Function):
    """Identity on its tensors; its backward hands the incoming gradients to ``callback``."""

    @staticmethod
    def forward(ctx: Any, callback: Callable, *tensors: Tensor) -> tuple:
        ctx.callback = callback
        ctx.set_materialize_grads(False)
        # Fresh tensor objects (sharing data) so Function.apply links them to this node; inputs that
        # take no gradient stay non-differentiable, as PyTorch marks them.
        outs = tuple(t.detach() for t in tensors)
        ctx.mark_non_differentiable(*[o for o, t in zip(outs, tensors) if not t.requires_grad])
        return outs

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        return (None,) + tuple(ctx.callback(tuple(grads)))


def _pack(indices: list, values: tuple, size: int) -> tuple:
    out: list = [None] * size
    for i, v in zip(indices, values):
        out[i] = v
    return tuple(out)


class BackwardHook:
    """One forward call's link between the gradients at a module's outputs and at its inputs."""

    def __init__(self, module: Any, user_hooks: list, user_pre_hooks: list) -> None:
        self.module = module
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.grad_outputs: tuple | None = None
        self.n_inputs = self.n_outputs = -1
        self.input_tensors_index: list | None = None
        self.output_tensors_index: list | None = None

    def _wrap(self, args: tuple, callback: Callable) -> tuple[tuple, list | None]:
        index = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        tensors = [args[i] for i in index]
        if not (grad_mode.is_grad_enabled() and any(t.requires_grad for t in tensors)):
            return args, None
        wrapped = _BackwardHookFunction.apply(callback, *tensors)
        out = list(args)
        for i, t in zip(index, wrapped):
            out[i] = t
        return tuple(out), index

    # ---- inputs: the full hooks fire here, once grad_input is known --------------------------------
    def setup_input_hook(self, args: tuple) -> tuple:
        out, index = self._wrap(args, self._on_input_grads)
        self.n_inputs = len(args)
        self.input_tensors_index = index
        return out

    def _on_input_grads(self, grads: tuple) -> tuple:
        if self.grad_outputs is None:
            # Gradient reached the inputs without passing the outputs (e.g. double backward): no hook.
            return grads
        res = _pack(self.input_tensors_index, grads, self.n_inputs)
        for hook in self.user_hooks:
            out = hook(self.module, res, self.grad_outputs)
            if out is None:
                continue
            out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
            if len(out) != len(res):
                raise RuntimeError(f"Backward hook of {type(self.module).__name__} returned an invalid number of "
                                   f"grad_input, got {len(out)}, but expected {len(res)} (one per positional "
                                   "argument of forward, None for non-tensors)")
            res = out
        self.grad_outputs = None
        return tuple(res[i] for i in self.input_tensors_index)

    # ---- outputs: the pre-hooks fire here, with grad_output ----------------------------------------
    def setup_output_hook(self, result: Any) -> Any:
        is_tuple = isinstance(result, tuple)
        args = result if is_tuple else (result,)
        out, index = self._wrap(args, self._on_output_grads)
        self.n_outputs = len(args)
        self.output_tensors_index = index
        return out if is_tuple else out[0]

    def _on_output_grads(self, grads: tuple) -> tuple:
        self.grad_outputs = _pack(self.output_tensors_index, grads, self.n_outputs)
        for hook in self.user_pre_hooks:
            replaced = hook(self.module, self.grad_outputs)
            if replaced is None:
                continue
            replaced = tuple(replaced) if isinstance(replaced, (tuple, list)) else (replaced,)
            if len(replaced) != len(self.grad_outputs):
                raise RuntimeError(f"Backward pre hook of {type(self.module).__name__} returned an invalid number "
                                   f"of grad_output, got {len(replaced)}, but expected {len(self.grad_outputs)}")
            self.grad_outputs = replaced
        local = self.grad_outputs
        if self.input_tensors_index is None:
            # No input takes gradient: the module's graph never reaches an input wrapper, so the full
            # hooks fire now with grad_input all None (PyTorch does the same, with this warning).
            warnings.warn("Full backward hook is firing when gradients are computed with respect to module "
                          "outputs since no inputs require gradients.", UserWarning, stacklevel=2)
            empty = (None,) * self.n_inputs
            for hook in self.user_hooks:
                res = hook(self.module, empty, self.grad_outputs)
                if res is not None and not (isinstance(res, tuple) and all(r is None for r in res)):
                    raise RuntimeError("Backward hook for Modules where no input requires gradient should always "
                                       "return None or None for all gradients.")
            self.grad_outputs = None
        return tuple(local[i] for i in self.output_tensors_index)
