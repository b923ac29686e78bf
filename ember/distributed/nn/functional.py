"""Communication that autograd can differentiate (torch's ``torch.distributed.nn.functional``).

These are the building blocks of model parallelism, where one model's graph is split across
processes: ``send``/``recv`` carry activations forward and their gradients back (pipeline stages),
and ``all_reduce``/``all_gather`` combine partial results of a layer split across ranks (tensor
parallelism). The backward of each is the matching communication in the other direction.

Example (rank 0 holds the first layer, rank 1 the second, under ``mpiexec -n 2``):
    >>> import ember, ember.distributed as dist                  # doctest: +SKIP
    >>> from ember.distributed.nn import functional as dF        # doctest: +SKIP
    >>> if dist.get_rank() == 0:                                 # doctest: +SKIP
    ...     dF.send(first(x), dst=1).backward()                  # gradient arrives from rank 1
    ... else:
    ...     h = dF.recv((32, 64), src=0)                         # requires grad
    ...     loss_fn(second(h), y).backward()                     # sends h's gradient to rank 0
"""
from __future__ import annotations

from typing import Any, Sequence

from ember.autograd.function import Function
from ember.distributed import collectives as C
from ember.distributed.collectives import ReduceOp
from ember import creation, dtypes
from ember.tensor import Tensor

# Gradients travel on their own tags so a backward message can never match a forward receive.
GRAD_TAG_OFFSET = 1 << 14


def _check_tag(tag: int, name: str) -> None:
    if not 0 <= tag < GRAD_TAG_OFFSET:
        raise ValueError(f"{name}: tag must lie in [0, {GRAD_TAG_OFFSET}) (higher tags carry gradients), got {tag}")


class _Send(Function):
    @staticmethod
    def forward(ctx: Any, tensor: Any, dst: int, group: Any, tag: int) -> Any:
        C.send(tensor.contiguous(), dst, group=group, tag=tag)
        ctx.dst, ctx.group, ctx.tag = dst, group, tag
        ctx.meta = (tuple(tensor.shape), tensor.dtype)
        return creation.zeros((), dtype=tensor.dtype)

    @staticmethod
    def backward(ctx: Any, grad: Any) -> tuple:
        shape, dtype = ctx.meta
        incoming = creation.empty(shape, dtype=dtype)
        C.recv(incoming, src=ctx.dst, group=ctx.group, tag=ctx.tag + GRAD_TAG_OFFSET)
        return incoming, None, None, None


class _Recv(Function):
    @staticmethod
    def forward(ctx: Any, anchor: Any, shape: tuple, dtype: Any, src: int, group: Any, tag: int) -> Any:
        out = creation.empty(shape, dtype=dtype)
        C.recv(out, src=src, group=group, tag=tag)
        ctx.src, ctx.group, ctx.tag = src, group, tag
        return out

    @staticmethod
    def backward(ctx: Any, grad: Any) -> tuple:
        C.send(grad.contiguous(), ctx.src, group=ctx.group, tag=ctx.tag + GRAD_TAG_OFFSET)
        return creation.zeros(()), None, None, None, None, None


def send(tensor: Any, dst: int, group: Any = None, tag: int = 0) -> Any:
    """Send ``tensor`` to rank ``dst``; returns a 0-d token whose ``backward()`` receives the gradient
    of ``tensor`` from ``dst`` and carries it on through this rank's graph."""
    _check_tag(tag, "send")
    return _Send.apply(tensor, dst, group, tag)


def recv(shape: Sequence[int], src: int, dtype: Any = None, group: Any = None, tag: int = 0,
         requires_grad: bool = True) -> Any:
    """Receive a tensor of ``shape`` from rank ``src``; its gradient is sent back to ``src`` in backward."""
    _check_tag(tag, "recv")
    dtype = dtype or dtypes.get_default_dtype()
    anchor = creation.zeros((), requires_grad=requires_grad)
    return _Recv.apply(anchor, tuple(shape), dtype, src, group, tag)


class _AllReduce(Function):
    @staticmethod
    def forward(ctx: Any, tensor: Any, op: ReduceOp, group: Any) -> Any:
        if op not in (ReduceOp.SUM, ReduceOp.AVG):
            raise RuntimeError(f"distributed.nn.functional.all_reduce: only SUM and AVG are differentiable, "
                               f"got {op.name}")
        ctx.op, ctx.group = op, group
        out = tensor.clone()
        C.all_reduce(out, op=op, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Any) -> tuple:
        # d(sum_r x_r)/d x_me: every rank's output depends on my input, so my gradient is the sum of
        # all ranks' output gradients (divided by the size for AVG).
        out = grad.clone()
        C.all_reduce(out, op=ctx.op, group=ctx.group)
        return out, None, None


def all_reduce(tensor: Any, op: ReduceOp = ReduceOp.SUM, group: Any = None) -> Any:
    """Out-of-place, differentiable all-reduce (SUM or AVG)."""
    return _AllReduce.apply(tensor, op, group)


class _AllGather(Function):
    @staticmethod
    def forward(ctx: Any, tensor: Any, group: Any) -> tuple:
        size = C.default_group(group, "all_gather").size()
        outs = [creation.empty(tuple(tensor.shape), dtype=tensor.dtype) for _ in range(size)]
        C.all_gather(outs, tensor.contiguous(), group=group)
        ctx.group = group
        ctx.rank = C.default_group(group, "all_gather").rank()
        return tuple(outs)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        # My input appears as output ``rank`` on every rank: sum those gradients here.
        mine = creation.empty(tuple(grads[0].shape), dtype=grads[0].dtype)
        import numpy as np

        stacked = Tensor._make(np.stack([g.contiguous()._data for g in grads]), grads[0].device, False)
        C.reduce_scatter_tensor(mine, stacked, group=ctx.group)
        return mine, None


def all_gather(tensor: Any, group: Any = None) -> tuple:
    """Differentiable all-gather: a tuple with every rank's ``tensor``."""
    return _AllGather.apply(tensor, group)


def broadcast(tensor: Any, src: int, group: Any = None) -> Any:
    """Differentiable broadcast from ``src``: gradients of all copies are summed into ``src``'s tensor."""
    return _Broadcast.apply(tensor, src, group)


class _Broadcast(Function):
    @staticmethod
    def forward(ctx: Any, tensor: Any, src: int, group: Any) -> Any:
        out = tensor.clone()
        C.broadcast(out, src, group=group)
        ctx.src, ctx.group = src, group
        return out

    @staticmethod
    def backward(ctx: Any, grad: Any) -> tuple:
        total = grad.clone()
        C.reduce(total, ctx.src, group=ctx.group)
        g = C.default_group(ctx.group, "broadcast")
        if g.world_ranks[g.rank()] != ctx.src:
            total = total * 0  # only the source's input fed the outputs
        return total, None, None
