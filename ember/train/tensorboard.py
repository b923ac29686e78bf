"""The ``TensorBoard`` callback: real event files (through tensorboardX) that ``tensorboard --logdir`` reads.

Laid out as Keras lays it out, so TensorBoard draws training and validation on one chart: two runs,
``<log_dir>/train`` and ``<log_dir>/validation``, with the same tag names per epoch: ``epoch_loss``,
``epoch_accuracy``..., the validation values (``val_loss`` in the logs) written as ``epoch_loss`` into the
validation run. With ``update_freq='batch'`` (or an int N) the train run also gets the running batch values every
N batches (``batch_loss``...); with ``histogram_freq=N`` the weights (``weights/<name>``, and gradients
``grads/<name>`` when present) every N epochs. While ``fit`` runs the train run also gets ``perf/mfu``,
``perf/gflops_per_s``, ``perf/data_wait_share`` and ``perf/transfer_share`` per epoch (``batch_perf/...`` per
N batches), and (``write_graph=True``, as in Keras) the model's graph for the Graphs tab.

Example:
    >>> from ember.train import TensorBoard
    >>> board = TensorBoard(log_dir="runs/mnist", histogram_freq=1)   # pass to Model.fit(callbacks=[board])
"""
from __future__ import annotations

import os
from typing import Any

from ember.train.callbacks import Callback


def _summary_writer(log_dir: str) -> Any:
    try:
        from ember.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ImportError("TensorBoard callback: tensorboardX is not installed; install it with "
                          "`pip install tensorboardX` (or `pip install ember[train]`)") from None
    return SummaryWriter(log_dir)


class TensorBoard(Callback):
    """Log scalars (and optionally weight histograms) for TensorBoard under ``log_dir``."""

    chief_only = True  # one event file under DataParallelStrategy
    wants_perf = True  # fit measures MFU and the data-wait / transfer shares of the step time (perf/*)

    def __init__(self, log_dir: str | os.PathLike = "logs", histogram_freq: int = 0, update_freq: str | int = "epoch",
                 write_grads: bool = True, write_graph: bool = True) -> None:
        super().__init__()
        if update_freq not in ("epoch", "batch") and not (isinstance(update_freq, int) and update_freq > 0):
            raise ValueError(f"TensorBoard: update_freq must be 'epoch', 'batch' or a positive int, got "
                             f"{update_freq!r}")
        self.log_dir = os.fspath(log_dir)
        self.histogram_freq = histogram_freq
        self.update_freq = 1 if update_freq == "batch" else update_freq
        self.write_grads = write_grads
        self.write_graph = write_graph  # the model's graph for the Graphs tab, traced at the first batch (Keras)
        self.writer: Any = None  # the train run's writer (<log_dir>/train)
        self.val_writer: Any = None  # the validation run's (<log_dir>/validation), made when validation logs come
        self._step = 0

    def on_train_begin(self, logs: dict | None = None) -> None:
        if self.writer is None:
            self.writer = _summary_writer(os.path.join(self.log_dir, "train"))

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._step = epoch * int(self.params.get("steps") or 0)

    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        example = getattr(self.model, "_example_input", None)
        if not self.write_graph or self.writer is None or example is None:
            return
        self.write_graph = False  # once per fit
        try:
            self.writer.add_graph(self.model.module, example)
        except Exception as error:  # a model the tracer cannot follow (data-dependent Python): no graph, say why
            import warnings

            warnings.warn(f"TensorBoard: could not trace the model for the Graphs tab ({type(error).__name__}: "
                          f"{error}); pass write_graph=False to skip it", RuntimeWarning, stacklevel=2)

    def on_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self._step += 1
        if self.update_freq == "epoch" or self.writer is None or self._step % self.update_freq:
            return
        for key, value in (logs or {}).items():
            if key not in ("batch", "size") and isinstance(value, (int, float)):
                self.writer.add_scalar(f"batch_{key}", float(value), self._step)
        for tag, value in self._perf_scalars().items():
            self.writer.add_scalar(tag.replace("perf/", "batch_perf/"), value, self._step)

    def _perf_scalars(self) -> dict:
        perf = getattr(self.model, "perf", None) if self.model is not None else None
        return perf.scalars() if perf is not None and perf.steps else {}

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if self.writer is None:
            return
        for key, value in (logs or {}).items():
            if not isinstance(value, (int, float)):
                continue
            if key.startswith("val_"):  # the same tag in the validation run: one chart, two curves
                if self.val_writer is None:
                    self.val_writer = _summary_writer(os.path.join(self.log_dir, "validation"))
                self.val_writer.add_scalar(f"epoch_{key[4:]}", float(value), epoch)
            else:
                self.writer.add_scalar(f"epoch_{key}", float(value), epoch)
        for tag, value in self._perf_scalars().items():
            self.writer.add_scalar(tag, value, epoch)
        if self.histogram_freq and epoch % self.histogram_freq == 0:
            for name, param in self.model.module.named_parameters():
                self.writer.add_histogram(f"weights/{name}", param.detach().cpu().numpy(), epoch)
                if self.write_grads and param.grad is not None:
                    self.writer.add_histogram(f"grads/{name}", param.grad.detach().cpu().numpy(), epoch)
        self.writer.flush()
        if self.val_writer is not None:
            self.val_writer.flush()

    def on_train_end(self, logs: dict | None = None) -> None:
        for writer in (self.writer, self.val_writer):
            if writer is not None:
                writer.close()
        self.writer = self.val_writer = None
