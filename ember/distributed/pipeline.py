"""Pipeline model parallelism over ranks (GPipe schedule): each rank holds one stage of a model.

The batch is cut into ``chunks`` micro-batches. Every stage runs the forward of all micro-batches,
sending activations to the next rank with differentiable ``send``/``recv``; then the backward of
all micro-batches runs in the same order, each gradient travelling back to the previous rank. The
stages' parameters end up with the gradients of the whole batch's loss, as if one process had run
the unsplit model, and each rank steps its own optimizer.

Example (``python -m ember.distributed.run -n 2 script.py``; rank r builds stage r):
    >>> import ember, ember.distributed as dist                                   # doctest: +SKIP
    >>> from ember.distributed.pipeline import Pipeline                          # doctest: +SKIP
    >>> stage = ember.nn.Linear(8, 16) if dist.get_rank() == 0 else ember.nn.Linear(16, 1)  # doctest: +SKIP
    >>> pipe = Pipeline(stage, chunks=4)                                          # doctest: +SKIP
    >>> loss = pipe.step(x, y, loss_fn=ember.nn.MSELoss())  # x used on the first rank, y on the last  # doctest: +SKIP
"""
from __future__ import annotations

from typing import Any, Callable

from ember.distributed import collectives as dist
from ember.distributed.nn import functional as dF
from ember.distributed.process_group import default_group


class Pipeline:
    """One stage of a pipeline whose stages are the ranks of ``group`` in rank order."""

    def __init__(self, stage: Any, chunks: int = 1, group: Any = None) -> None:
        if chunks < 1:
            raise ValueError(f"Pipeline: chunks must be >= 1, got {chunks}")
        self.stage = stage
        self.chunks = chunks
        self.group = default_group(group, "Pipeline")
        self.rank = self.group.rank()
        self.size = self.group.size()
        ranks = self.group.world_ranks
        self.prev = ranks[self.rank - 1] if self.rank > 0 else None
        self.next = ranks[self.rank + 1] if self.rank < self.size - 1 else None

    @property
    def is_first(self) -> bool:
        return self.prev is None

    @property
    def is_last(self) -> bool:
        return self.next is None

    def _micro_batches(self, tensor: Any, what: str) -> list:
        if tensor is None:
            raise ValueError(f"Pipeline.step: rank {self.rank} is the {what} stage and needs its {what}")
        if tensor.shape[0] < self.chunks:
            raise ValueError(f"Pipeline.step: batch of {tensor.shape[0]} cannot be cut into {self.chunks} chunks")
        return list(tensor.chunk(self.chunks, dim=0))

    def step(self, inputs: Any = None, target: Any = None, loss_fn: Callable | None = None) -> Any:
        """Forward and backward of one batch. Returns the loss (mean over micro-batches) on the last
        stage and None elsewhere; gradients accumulate into every stage's parameters."""
        xs = self._micro_batches(inputs, "first") if self.is_first else None
        ys = self._micro_batches(target, "last") if self.is_last else None
        if self.is_last and loss_fn is None:
            raise ValueError("Pipeline.step: the last stage needs loss_fn")
        pending = []  # per micro-batch: what to call backward on
        total = None
        for i in range(self.chunks):
            if self.is_first:
                h = xs[i]
            else:
                header: list = [None]
                dist.recv_object_list(header, src=self.prev, group=self.group)
                shape, dtype = header[0]
                h = dF.recv(shape, src=self.prev, dtype=dtype, group=self.group, tag=i)
            out = self.stage(h)
            if self.is_last:
                loss = loss_fn(out, ys[i]) / self.chunks
                pending.append(loss)
                total = loss.detach() if total is None else total + loss.detach()
            else:
                dist.send_object_list([(tuple(out.shape), out.dtype)], dst=self.next, group=self.group)
                pending.append(dF.send(out, dst=self.next, group=self.group, tag=i))
        for root in pending:  # same order on every stage, so each gradient meets its receive
            root.backward()
        return total
