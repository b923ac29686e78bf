"""``AdaptiveLogSoftmaxWithLoss``: the adaptive softmax of Grave et al. (2016) for large vocabularies.

Frequent classes (below ``cutoffs[0]``) are scored by a small "head" together with one logit per cluster of
rarer classes; a class in cluster ``i`` costs ``log p(cluster i) + log p(class | cluster i)``, where the
cluster's own scorer projects the input down by ``div_value ** (i + 1)`` first. Parameter names, shapes and
results are PyTorch's, so its checkpoints load into this module.

Example:
    >>> import ember
    >>> asm = ember.nn.AdaptiveLogSoftmaxWithLoss(16, 100, cutoffs=[10, 50])
    >>> out = asm(ember.randn(8, 16), ember.randint(0, 100, (8,)))
    >>> out.output.shape, out.loss.shape
    (ember.Size([8]), ember.Size([]))
"""
from __future__ import annotations

from collections import namedtuple
from typing import Any, Sequence

from ember.nn.modules.container import ModuleList, Sequential
from ember.nn.modules.linear import Linear
from ember.nn.modules.module import Module
from ember.ops.nn_ops import log_softmax
from ember.ops.views import cat

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive softmax: ``forward(input, target)`` gives ``(output, loss)``, ``output`` being each row's
    log-probability of its target and ``loss`` their negative mean; ``log_prob`` and ``predict`` score all
    classes."""

    def __init__(self, in_features: int, n_classes: int, cutoffs: Sequence[int], div_value: float = 4.0,
                 head_bias: bool = False, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted in an increasing "
                             f"order, where each value is between 1 and n_classes-1 (got {cutoffs} for "
                             f"n_classes={n_classes})")
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        factory = {"device": device, "dtype": dtype}
        self.head = Linear(in_features, self.head_size, bias=head_bias, **factory)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hidden, bias=False, **factory),
                                        Linear(hidden, size, bias=False, **factory)))

    def reset_parameters(self) -> None:
        self.head.reset_parameters()
        for down, up in self.tail:
            down.reset_parameters()
            up.reset_parameters()

    def forward(self, input_: Any, target_: Any) -> _ASMoutput:
        if target_.dim() == 1:
            if input_.size(0) != target_.size(0):
                raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: input and target should have the same size in the "
                                   f"batch dimension (input {tuple(input_.shape)}, target {tuple(target_.shape)})")
            if input_.dim() != 2:
                raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: a 1D target expects a 2D input, got input of shape "
                                   f"{tuple(input_.shape)}")
        elif target_.dim() == 0:
            if input_.dim() != 1:
                raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: a 0D target expects a 1D input, got input of shape "
                                   f"{tuple(input_.shape)}")
        else:
            raise RuntimeError("AdaptiveLogSoftmaxWithLoss: 0D or 1D target tensor expected, multi-target not "
                               f"supported (target of shape {tuple(target_.shape)})")
        batched = target_.dim() > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        batch = target.size(0)
        output = input.new_zeros(batch)
        # Which head column each row reads: its own class in the shortlist, else its cluster's column.
        head_column = target.new_empty(batch)
        covered = 0
        bounds = [0] + self.cutoffs
        for i, (low, high) in enumerate(zip(bounds, bounds[1:])):
            in_range = (target >= low) & (target < high)
            rows = in_range.nonzero().squeeze(1)
            if rows.numel() == 0:
                continue
            covered += rows.numel()
            if i == 0:
                head_column.index_copy_(0, rows, target[in_range])
                continue
            head_column.index_fill_(0, rows, self.shortlist_size + i - 1)
            scores = log_softmax(self.tail[i - 1](input.index_select(0, rows)), dim=1)
            within = scores.gather(1, (target[in_range] - low).unsqueeze(1)).squeeze(1)
            output.index_copy_(0, rows, within)
        if covered != batch:
            raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss: target values should be in [0, {self.n_classes - 1}], "
                               f"but values in range [{target.min().item()}, {target.max().item()}] were found")
        head_scores = log_softmax(self.head(input), dim=1)
        output = output + head_scores.gather(1, head_column.unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _full_log_prob(self, input: Any, head_output: Any) -> Any:
        head_scores = log_softmax(head_output, dim=1)
        pieces = [head_scores[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster = log_softmax(self.tail[i](input), dim=1)
            pieces.append(cluster + head_scores[:, self.shortlist_size + i].unsqueeze(1))
        return cat(pieces, dim=1)

    def log_prob(self, input: Any) -> Any:
        """Log-probabilities of every class: ``(N, n_classes)`` for ``(N, in_features)`` (or unbatched)."""
        batched = input.dim() == 2
        rows = input if batched else input.unsqueeze(0)
        out = self._full_log_prob(rows, self.head(rows))
        return out if batched else out.squeeze(0)

    def predict(self, input: Any) -> Any:
        """The most likely class of each row; the tail is scored only for rows whose head pick is a cluster."""
        batched = input.dim() == 2
        rows = input if batched else input.unsqueeze(0)
        head_output = self.head(rows)
        choice = head_output.argmax(dim=1)
        outside = choice >= self.shortlist_size
        if bool(outside.any()):
            if bool(outside.all()):
                choice = self._full_log_prob(rows, head_output).argmax(dim=1)
            else:
                choice[outside] = self._full_log_prob(rows[outside], head_output[outside]).argmax(dim=1)
        return choice if batched else choice.squeeze(0)
