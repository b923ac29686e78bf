"""``torch.utils.tensorboard``: ``SummaryWriter`` writing real TensorBoard event files (through tensorboardX,
the optional ``train`` extra), taking ember tensors where PyTorch takes torch tensors.

Example:
    >>> from ember.utils.tensorboard import SummaryWriter     # doctest: +SKIP
    >>> w = SummaryWriter("runs/x"); w.add_scalar("loss", 0.5, 1); w.close()   # doctest: +SKIP
"""
from __future__ import annotations

from typing import Any

__all__ = ["SummaryWriter"]


def _plain(value: Any) -> Any:
    from ember.tensor import Tensor

    if isinstance(value, Tensor):
        return value.detach().numpy()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _writer_class() -> type:
    try:
        from tensorboardX import SummaryWriter as Base
    except ImportError:
        raise ImportError("torch.utils.tensorboard needs tensorboardX in ember: pip install 'ember[train]' "
                          "(or pip install tensorboardX)") from None
    return Base


class SummaryWriter:
    """Every ``add_*`` method of tensorboardX's writer, with ember tensors converted to NumPy first."""

    def __init__(self, log_dir: str | None = None, comment: str = "", purge_step: int | None = None,
                 max_queue: int = 10, flush_secs: int = 120, filename_suffix: str = "") -> None:
        self._writer = _writer_class()(logdir=log_dir, comment=comment, purge_step=purge_step, max_queue=max_queue,
                                       flush_secs=flush_secs, filename_suffix=filename_suffix)
        self.log_dir = self._writer.logdir

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._writer, name)
        if not callable(attr) or not name.startswith("add_"):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            return attr(*[_plain(a) for a in args], **{k: _plain(v) for k, v in kwargs.items()})
        return call

    def get_logdir(self) -> str:
        return self.log_dir

    def __enter__(self) -> "SummaryWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self._writer.close()
