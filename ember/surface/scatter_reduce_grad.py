"""Gradients of ``scatter_reduce`` with ``reduce`` in prod, amax, amin (PyTorch's ``scatter_reduce_backward``).

The forward runs on the arrays (NumPy's ``ufunc.at``); without this the result was detached and the gradient of a
loss through ``x.scatter_reduce(0, i, s, "amax")`` silently missed every path through it.

- amax/amin: the gradient of each result element is shared evenly among the elements (of input and src) equal to
  it, as ``torch.amax``'s ties.
- prod: ``grad * result / x`` with zeros handled: an input or src element that is the only zero of its group gets
  the product of the others.
- ``include_self=False``: input's scattered positions get no gradient.

Example:
    >>> x = ember.zeros(3, requires_grad=True); s = ember.tensor([1., 5., 5.], requires_grad=True)
    >>> x.scatter_reduce(0, ember.tensor([0, 0, 0]), s, "amax").sum().backward()   # s.grad: [0, 0.5, 0.5]
"""
from __future__ import annotations

from typing import Any, Callable

from ember.autograd.function import Function


class ScatterReduceExtreme(Function):
    """scatter_reduce prod/amax/amin with torch's backward; ``forward_arrays`` computes the values."""

    @staticmethod
    def forward(ctx: Any, input: Any, src: Any, dim: int, index: Any, reduce: str, include_self: bool,
                forward_arrays: Callable) -> Any:
        out = forward_arrays(input, dim, index, src, reduce, include_self)
        ctx.save_for_backward(input, src, index, out)
        ctx.dim, ctx.reduce, ctx.include_self, ctx.forward_arrays = dim, reduce, include_self, forward_arrays
        return out

    @staticmethod
    def backward(ctx: Any, grad: Any) -> tuple:
        input, full_src, index, result = ctx.saved_tensors
        dim, reduce, include_self = ctx.dim, ctx.reduce, ctx.include_self
        used = tuple(slice(0, n) for n in index.shape)  # src may be larger than index: only this corner is read
        src = full_src[used]
        if reduce in ("amax", "amin"):
            value = result.gather(dim, index)
            self_is = (input == result).to(grad.dtype)
            src_is = (src == value).to(grad.dtype)
            count = self_is.scatter_add(dim, index, src_is)
            shared = grad / count
            grad_self = self_is * shared
            grad_src = src_is * shared.gather(dim, index)
        else:  # prod
            fwd = ctx.forward_arrays
            masked_self = input.masked_fill(input == 0, 1)
            grad_self = grad * fwd(masked_self, dim, index, src, "prod", include_self) / masked_self
            src_zero = src == 0
            zeros_in_group = input.new_zeros(tuple(input.shape)).scatter_add(
                dim, index, src_zero.to(input.dtype)).gather(dim, index)
            single_zero = src_zero & (zeros_in_group == 1)
            others = fwd(input, dim, index, src.masked_fill(single_zero, 1), "prod", include_self)
            grad_src = (grad * others).gather(dim, index).where(
                single_zero, (grad * result).gather(dim, index) / src.masked_fill(src_zero, 1))
        if not include_self:
            grad_self = grad_self.scatter(dim, index, 0.0)
        if tuple(grad_src.shape) != tuple(full_src.shape):
            padded = grad_src.new_zeros(tuple(full_src.shape))
            padded[used] = grad_src
            grad_src = padded
        return grad_self, grad_src, None, None, None, None, None
