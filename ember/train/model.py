"""``Model``: Keras's ``compile``/``fit``/``evaluate``/``predict`` around any ember ``nn.Module``.

The configuring call is ``configure(optimizer, loss, metrics)``; ``compile`` is the same method under
Keras's name. (It only sets the loss/optimizer/metrics, like Keras; it does not trace or JIT the
step, which is what ``ember.compile`` does.) ``Trainer`` is another name for ``Model``.

``fit`` takes tensors/arrays (``x``, ``y``), a ``Dataset`` or a ``DataLoader``, returns a ``History``
and can continue a run exactly from a checkpoint with ``resume_from=path``. Shuffling draws from
``generator`` (default: ember's default generator), whose state every checkpoint stores.

Data parallel training over several processes: build the Model under a
:class:`ember.train.DataParallelStrategy` (``with strategy.scope(): model = Model(net)`` or
``Model(net, strategy=strategy)``) and launch with ``python -m ember.distributed.run -n N script.py``;
see ``ember/train/distributed.py`` for what changes (per-replica ``batch_size``, global logs, rank-0 I/O).

Example:
    >>> import ember
    >>> from ember import nn
    >>> from ember.train import Model
    >>> _ = ember.manual_seed(0)
    >>> x = ember.randn(64, 4); y = (x.sum(1) > 0).long()
    >>> model = Model(nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2)))
    >>> _ = model.configure(optimizer="adam", loss="cross_entropy", metrics=["accuracy"], lr=0.01)
    >>> history = model.fit(x, y, epochs=3, batch_size=16, verbose=0)
    >>> sorted(history.history)
    ['accuracy', 'loss']
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Sequence

import numpy as np

from ember.train.callbacks import Callback, CallbackList, History
from ember.train.distributed import get_strategy, quiet_on_workers
from ember.train.metrics import Mean, Metric, get_metric
from ember import dtypes, hardware, nn, optim
from ember.autograd import no_grad
from ember.creation import as_tensor
from ember.data import DataLoader, Dataset, Subset, TensorDataset
from ember.device import to_device
from ember.ops.views import cat
from ember.tensor import Tensor
from ember.utils.flop_counter import FlopCounterMode
from ember.utils.model_summary import summary

_LOSSES = {
    "cross_entropy": "CrossEntropyLoss", "crossentropy": "CrossEntropyLoss",
    "categorical_crossentropy": "CrossEntropyLoss", "sparse_categorical_crossentropy": "CrossEntropyLoss",
    "nll": "NLLLoss", "nll_loss": "NLLLoss",
    "mse": "MSELoss", "mean_squared_error": "MSELoss",
    "mae": "L1Loss", "l1": "L1Loss", "mean_absolute_error": "L1Loss",
    "bce": "BCELoss", "binary_crossentropy": "BCELoss",
    "bce_with_logits": "BCEWithLogitsLoss", "binary_crossentropy_with_logits": "BCEWithLogitsLoss",
    "huber": "HuberLoss", "smooth_l1": "SmoothL1Loss", "kl_div": "KLDivLoss",
}
_OPTIMIZERS = {"sgd": ("SGD", 0.01), "adam": ("Adam", 1e-3), "adamw": ("AdamW", 1e-3),
               "rmsprop": ("RMSprop", 1e-3), "adagrad": ("Adagrad", 1e-2)}


def _resolve_loss(loss: Any) -> Callable:
    if isinstance(loss, str):
        name = _LOSSES.get(loss.lower())
        if name is None:
            raise ValueError(f"Model.configure: unknown loss {loss!r}; known: {sorted(_LOSSES)}, or pass a loss "
                             "module or a function(output, target)")

        return getattr(nn, name)()
    if not callable(loss):
        raise TypeError(f"Model.configure: loss must be a name or a callable, got {type(loss).__name__}")
    return loss


def _resolve_optimizer(optimizer: Any, module: Any, lr: float | None, kwargs: dict) -> Any:
    if isinstance(optimizer, str):
        entry = _OPTIMIZERS.get(optimizer.lower())
        if entry is None:
            raise ValueError(f"Model.configure: unknown optimizer {optimizer!r}; known: {sorted(_OPTIMIZERS)}, or "
                             "pass an ember.optim optimizer")

        name, default_lr = entry
        return getattr(optim, name)(module.parameters(), lr=default_lr if lr is None else lr, **kwargs)
    if not (hasattr(optimizer, "step") and hasattr(optimizer, "param_groups")):
        raise TypeError(f"Model.configure: optimizer must be a name or an ember.optim optimizer, got "
                        f"{type(optimizer).__name__}")
    if lr is not None:
        for group in optimizer.param_groups:
            group["lr"] = lr
    return optimizer


def _as_input(value: Any, name: str) -> Any:
    """Arrays/tensors as tensors; float64 NumPy data becomes the default float dtype (as Keras casts)."""

    if isinstance(value, Tensor):
        return value
    array = np.asarray(value)
    if array.dtype.kind == "f" and array.dtype != np.float32:
        array = array.astype(dtypes.get_default_dtype().np)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"Model: {name} has dtype {array.dtype}; expected numbers")
    return as_tensor(array)


class Model:
    """Wrap an ``nn.Module`` for Keras-style training: ``Model(module).configure(...).fit(...)``.

    ``strategy``: a :class:`~ember.train.DataParallelStrategy` (default: the one whose ``scope()`` is
    open, if any). Under it the network is wrapped in ``DistributedDataParallel`` here, so every rank
    must build its Models in the same order; ``self.module`` stays the plain network.
    """

    def __init__(self, module: Any, device: Any = None, generator: Any = None, strategy: Any = None) -> None:
        if not callable(module):
            raise TypeError(f"Model: expected an nn.Module (callable), got {type(module).__name__}")
        self.module = module
        if device is not None:
            module.to(device)
        self.strategy = strategy if strategy is not None else get_strategy()
        # The module that train_step runs forward through: DDP under a strategy. (DDP's gradient hooks
        # sit on the parameters, so a custom train_step calling self.module still averages gradients;
        # only DDP's buffer broadcast is skipped.)
        self._net = self.strategy.wrap_module(module) if self.strategy is not None else module
        self.generator = generator
        self.optimizer: Any = None
        self.loss_fn: Callable | None = None
        self.metrics: list[Metric] = []
        self.stop_training = False
        self.history = History()
        self.perf: Any = None  # ember.train.perf.StepStats during fit, when a callback shows it
        self._example_input: Any = None
        self._callbacks: CallbackList | None = None

    # ---- configuration ----------------------------------------------------------------------------
    def configure(self, optimizer: Any = "adam", loss: Any = None, metrics: Sequence[Any] | None = None, *,
                  lr: float | None = None, **optimizer_kwargs: Any) -> "Model":
        """Set the optimizer (a name such as 'adam'/'sgd' or an ``ember.optim`` object), the loss (a name
        such as 'cross_entropy'/'mse', a loss module or a function) and the metrics ('accuracy', ...)."""
        if loss is None:
            raise ValueError("Model.configure: give a loss, e.g. loss='cross_entropy' or loss=nn.MSELoss()")
        self.loss_fn = _resolve_loss(loss)
        self.optimizer = _resolve_optimizer(optimizer, self.module, lr, optimizer_kwargs)
        self.metrics = [get_metric(m) for m in (metrics or [])]
        names = [m.name for m in self.metrics]
        if len(set(names)) != len(names) or "loss" in names:
            raise ValueError(f"Model.configure: metric names must be unique and not 'loss', got {names}")
        return self

    compile = configure  # Keras's name; see the module docstring

    def _require_configured(self, what: str) -> None:
        if self.loss_fn is None or self.optimizer is None:
            raise RuntimeError(f"Model.{what}: call model.configure(optimizer=..., loss=..., metrics=...) first "
                               "(Keras's model.compile)")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    # ---- data plumbing ----------------------------------------------------------------------------
    def _device(self) -> Any:
        for param in self.module.parameters():
            return param.device

        return to_device("cpu")

    def _loader(self, x: Any, y: Any, batch_size: int, shuffle: bool, num_workers: int, train: bool = True) -> Any:
        """A DataLoader over the data; under a strategy, this replica's shard of it."""
        loader = self._full_loader(x, y, batch_size, shuffle, num_workers)
        return self.strategy.distribute_loader(loader, train) if self.strategy is not None else loader

    def _full_loader(self, x: Any, y: Any, batch_size: int, shuffle: bool, num_workers: int) -> Any:
        if isinstance(x, DataLoader):
            if y is not None:
                raise ValueError("Model: y must be None when x is a DataLoader (its batches carry the targets)")
            return x
        if isinstance(x, Dataset):
            if y is not None:
                raise ValueError("Model: y must be None when x is a Dataset")
            dataset = x
        else:
            dataset = TensorDataset(_as_input(x, "x")) if y is None else \
                TensorDataset(_as_input(x, "x"), _as_input(y, "y"))
        return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, generator=self.generator,
                          num_workers=num_workers)

    def _split(self, x: Any, y: Any, fraction: float) -> tuple[Any, Any, Any]:
        """Keras's validation_split: the last ``fraction`` of the samples, taken before shuffling."""
        if not 0.0 < fraction < 1.0:
            raise ValueError(f"Model.fit: validation_split must be in (0, 1), got {fraction}")
        if isinstance(x, DataLoader):
            raise ValueError("Model.fit: validation_split needs tensors or a Dataset, not a DataLoader; pass "
                             "validation_data instead")
        n = len(x)
        cut = n - int(n * fraction)
        if cut <= 0 or cut >= n:
            raise ValueError(f"Model.fit: validation_split={fraction} leaves an empty split of {n} samples")
        if isinstance(x, Dataset):
            return Subset(x, range(cut)), None, Subset(x, range(cut, n))
        x, y = _as_input(x, "x"), _as_input(y, "y")
        return x[:cut], y[:cut], (x[cut:], y[cut:])

    def _batch(self, batch: Any) -> tuple[Any, Any]:
        """(inputs, targets) of a loader batch, moved to the module's device."""
        if isinstance(batch, (list, tuple)):
            if len(batch) == 0:
                raise ValueError("Model: got an empty batch")
            x, y = batch[0], (batch[1] if len(batch) > 1 else None)
        elif isinstance(batch, Tensor):
            x, y = batch, None
        else:
            raise TypeError(f"Model: batches must be (inputs, targets) tuples or tensors, got {type(batch).__name__}")
        device = self._device()
        if isinstance(x, Tensor) and x.device != device:
            x = x.to(device)
        if isinstance(y, Tensor) and y.device != device:
            y = y.to(device)
        return x, y

    @staticmethod
    def _size(x: Any) -> int:
        return int(x.shape[0]) if hasattr(x, "shape") and len(x.shape) else 1

    # ---- steps --------------------------------------------------------------------------------------
    def train_step(self, x: Any, y: Any) -> tuple[Any, Any]:
        """One optimization step; returns (detached output, detached loss). Override for custom steps."""
        self.optimizer.zero_grad()
        output = self._net(x)
        loss = self.loss_fn(output, y)
        loss.backward()
        self.optimizer.step()
        return output.detach(), loss.detach()

    def test_step(self, x: Any, y: Any) -> tuple[Any, Any]:
        output = self.module(x)
        return output, self.loss_fn(output, y)

    def _run_epoch(self, loader: Any, callbacks: CallbackList, train: bool, steps: int | None = None) -> dict:
        loss_mean = Mean("loss")
        for metric in self.metrics:
            metric.reset()
        # Under a strategy, training batches all-reduce the running sums (global logs on every rank);
        # evaluation shards may differ in length, so they reduce once, at the end.
        strategy = self.strategy
        seen = 0
        begin = callbacks.on_train_batch_begin if train else callbacks.on_test_batch_begin
        end = callbacks.on_train_batch_end if train else callbacks.on_test_batch_end
        was_training = getattr(self.module, "training", True)
        if hasattr(self.module, "train"):
            self.module.train(train)
        perf = self.perf if train else None  # set by fit when the progress bar or TensorBoard shows it
        if perf is not None:
            perf.reset()
        ready = time.perf_counter()
        try:
            for step, batch in enumerate(loader):
                if steps is not None and step >= steps:
                    break
                arrived = time.perf_counter()  # the wait since the last step ended is the DataLoader's
                x, y = self._batch(batch)
                moved = time.perf_counter()
                if y is None:
                    raise ValueError("Model: training and evaluation batches need targets: pass y, or a "
                                     "Dataset/DataLoader whose samples are (input, target)")
                size = self._size(x)
                if getattr(self, "_example_input", None) is None and hasattr(x, "shape"):
                    self._example_input = x[:1].detach()  # for summary(): shapes and FLOPs per layer
                begin(step, {"batch": step, "size": size})
                counted = train and perf is not None and not perf.flops_per_sample
                if counted:
                    output, loss = self._counted_step(x, y, size)
                elif train:
                    output, loss = self.train_step(x, y)
                else:
                    with no_grad():
                        output, loss = self.test_step(x, y)
                loss_mean.update(loss.item(), size)
                seen += size
                if strategy is not None and train:
                    for metric in self.metrics:
                        metric.update(output, y)
                    global_logs, global_size = strategy.reduce_logs(loss_mean, self.metrics, seen, size)
                    logs = {"batch": step, "size": global_size, **global_logs}
                else:
                    logs = {"batch": step, "size": size, "loss": loss_mean.result()}
                    for metric in self.metrics:
                        metric.update(output, y)
                        logs[metric.name] = metric.result()
                if perf is not None and not counted:  # the counted step runs under the FLOP counter and pays
                    now = time.perf_counter()  # first-call costs (tracing, JIT): it would understate MFU
                    perf.add(arrived - ready, moved - arrived, now - ready, size)
                end(step, logs)
                ready = time.perf_counter()
                if train and strategy is not None:
                    self.stop_training = strategy.any(self.stop_training)
                if train and self.stop_training:
                    break
        finally:
            if hasattr(self.module, "train"):
                self.module.train(was_training)
        if strategy is not None:
            return strategy.reduce_logs(loss_mean, self.metrics, seen, 0)[0]
        out = {"loss": loss_mean.result()}
        out.update({m.name: m.result() for m in self.metrics})
        return out

    def _counted_step(self, x: Any, y: Any, size: int) -> tuple[Any, Any]:
        """The first training step, with its FLOPs counted (forward, backward and optimizer)."""

        with FlopCounterMode(display=False) as counter:
            result = self.train_step(x, y)
        self.perf.flops_per_sample = counter.get_total_flops() / max(size, 1)
        self.perf.bytes_per_sample = counter.bytes_moved / max(size, 1)
        dtype = next((p.dtype for p in self.module.parameters()), "float32")
        device = self._device()  # a model on a GPU is measured against the GPU's peak
        self.perf.device = "cpu" if device.type == "cpu" else str(device)
        peak = hardware.peak(self.perf.device)
        self.perf.peak_flops = peak.flops_for(dtype)
        self.perf.peak_bandwidth = peak.bandwidth
        self.perf.dtype = getattr(dtype, "name", None) or str(dtype)
        return result

    # ---- fit / evaluate / predict ----------------------------------------------------------------------
    @quiet_on_workers
    def fit(self, x: Any = None, y: Any = None, batch_size: int | None = None, epochs: int = 1, verbose: int = 1,
            callbacks: Sequence[Callback] | None = None, validation_split: float = 0.0,
            validation_data: Any = None, shuffle: bool = True, initial_epoch: int = 0,
            steps_per_epoch: int | None = None, validation_batch_size: int | None = None,
            validation_freq: int = 1, num_workers: int = 0, resume_from: str | os.PathLike | None = None) -> History:
        """Train for ``epochs`` epochs (counting from ``initial_epoch``); returns the ``History``.

        ``x``: tensor/array (with ``y``), ``Dataset`` or ``DataLoader``. ``validation_data``: ``(x, y)``,
        a Dataset or a DataLoader. ``resume_from``: a checkpoint from ``ModelCheckpoint``/``save_checkpoint``;
        model, optimizer, schedulers, callbacks, RNG states and history are restored and training continues
        after its last completed epoch, giving the same result as an uninterrupted run.

        Under a ``DataParallelStrategy``, ``batch_size`` (and ``validation_batch_size``, ``steps_per_epoch``)
        are per replica, logs are global, and progress/TensorBoard/checkpoints happen on rank 0 only.
        """
        self._require_configured("fit")
        if x is None:
            raise ValueError("Model.fit: give training data (x and y, a Dataset or a DataLoader)")
        batch_size = batch_size or 32
        if validation_split and validation_data is None:
            x, y, validation_data = self._split(x, y, validation_split)
        train_loader = self._loader(x, y, batch_size, shuffle, num_workers)
        val_loader = None
        if validation_data is not None:
            vx, vy = (validation_data[0], validation_data[1]) if isinstance(validation_data, (tuple, list)) \
                else (validation_data, None)
            val_loader = self._loader(vx, vy, validation_batch_size or batch_size, False, num_workers, train=False)
        if steps_per_epoch is None:
            try:
                steps = len(train_loader)
            except TypeError:  # an IterableDataset without __len__: run until it ends
                steps = None
        else:
            steps = steps_per_epoch
        self.history = History()
        chain: list[Callback] = [self.history, *(callbacks or [])]
        if verbose:
            from ember.train.progress import ProgbarLogger

            chain.append(ProgbarLogger(verbose))
        if self.strategy is not None and not self.strategy.is_chief:
            chain = [c for c in chain if not getattr(c, "chief_only", False)]  # rank 0 prints and writes
        cbs = CallbackList(chain, model=self, params={"epochs": epochs, "steps": steps, "verbose": verbose})
        if any(getattr(c, "wants_perf", False) for c in chain):  # MFU and time shares for the bar / TensorBoard
            from ember.train.perf import StepStats

            self.perf = StepStats()
        else:
            self.perf = None
        self._callbacks = cbs
        self.stop_training = False
        logs: dict = {}
        try:
            cbs.on_train_begin()
            if resume_from is not None:
                checkpoint = self.load_checkpoint(resume_from)
                cbs.load_state_dict(checkpoint["callbacks"])
                initial_epoch = max(initial_epoch, int(checkpoint["epochs_completed"] or 0))
            for epoch in range(initial_epoch, epochs):
                if self.strategy is not None:
                    self.strategy.set_epoch(train_loader, epoch)  # a new, rank-consistent shuffle each epoch
                cbs.on_epoch_begin(epoch, {})
                logs = self._run_epoch(train_loader, cbs, train=True, steps=steps)
                if val_loader is not None and (epoch + 1) % validation_freq == 0:
                    cbs.on_test_begin()
                    val_logs = self._run_epoch(val_loader, cbs, train=False)
                    cbs.on_test_end(val_logs)
                    logs.update({f"val_{k}": v for k, v in val_logs.items()})
                cbs.on_epoch_end(epoch, logs)
                if self.strategy is not None:  # one rank stopping alone would hang the others
                    self.stop_training = self.strategy.any(self.stop_training)
                if self.stop_training:
                    break
            cbs.on_train_end(logs)
        finally:
            self._callbacks = None
        return self.history

    @quiet_on_workers
    def evaluate(self, x: Any = None, y: Any = None, batch_size: int | None = None, verbose: int = 1,
                 callbacks: Sequence[Callback] | None = None, steps: int | None = None, return_dict: bool = False,
                 num_workers: int = 0) -> Any:
        """Loss and metrics over the data: a dict with ``return_dict=True``, else Keras's list (or scalar).

        Under a ``DataParallelStrategy`` each rank evaluates a contiguous shard and the figures are
        all-reduced: every rank returns the global loss/metrics.
        """
        self._require_configured("evaluate")
        loader = self._loader(x, y, batch_size or 32, False, num_workers, train=False)
        cbs = CallbackList(callbacks or [], model=self, params={"steps": steps, "verbose": verbose})
        cbs.on_test_begin()
        logs = self._run_epoch(loader, cbs, train=False, steps=steps)
        cbs.on_test_end(logs)
        if verbose and (self.strategy is None or self.strategy.is_chief):
            from ember.train.progress import format_logs

            print(f"evaluate - {format_logs(logs)}", flush=True)
        if return_dict:
            return logs
        values = list(logs.values())
        return values[0] if len(values) == 1 else values

    @quiet_on_workers
    def predict(self, x: Any, batch_size: int | None = None, verbose: int = 0, steps: int | None = None,
                callbacks: Sequence[Callback] | None = None, num_workers: int = 0) -> Any:
        """The module's outputs for all inputs, concatenated along dim 0 (in eval mode, without grad).

        Under a ``DataParallelStrategy`` each rank predicts a contiguous shard and the shards are
        gathered: every rank returns the full predictions, in input order.
        """

        loader = self._loader(x, None, batch_size or 32, False, num_workers, train=False)
        cbs = CallbackList(callbacks or [], model=self, params={"verbose": verbose})
        outputs = []
        was_training = getattr(self.module, "training", False)
        if hasattr(self.module, "eval"):
            self.module.eval()
        cbs.on_predict_begin()
        try:
            with no_grad():
                for step, batch in enumerate(loader):
                    if steps is not None and step >= steps:
                        break
                    inputs, _ = self._batch(batch)
                    cbs.on_predict_batch_begin(step, {"batch": step})
                    out = self.module(inputs)
                    outputs.append(out)
                    cbs.on_predict_batch_end(step, {"batch": step, "outputs": out})
        finally:
            if hasattr(self.module, "train"):
                self.module.train(was_training)
        cbs.on_predict_end()
        if self.strategy is not None:
            return self.strategy.gather_outputs(outputs)
        if not outputs:
            raise ValueError("Model.predict: no batches (empty input)")
        if isinstance(outputs[0], (tuple, list)):
            return type(outputs[0])(cat([o[i] for o in outputs]) for i in range(len(outputs[0])))
        return cat(outputs)

    # ---- checkpoints --------------------------------------------------------------------------------
    def _generators(self) -> dict[str, Any] | None:
        return {"model": self.generator} if self.generator is not None else None

    def save_checkpoint(self, path: str | os.PathLike, epochs_completed: int | None = None, extra: Any = None) -> Any:
        """Write a full training checkpoint (see ``ember.train.checkpoint``) atomically to ``path``.

        Under a ``DataParallelStrategy`` only rank 0 writes (replicas hold the same state); the others
        return the path without writing.
        """
        from pathlib import Path

        from ember.train.checkpoint import save_checkpoint

        if self.strategy is not None and not self.strategy.is_chief:
            return Path(path)

        if epochs_completed is None:
            epochs_completed = len(self.history.epoch)
        callbacks = self._callbacks.state_dict() if self._callbacks is not None else {}
        history = {"history": self.history.history, "epoch": self.history.epoch}
        return save_checkpoint(path, self.module, self.optimizer, epochs_completed=epochs_completed, history=history,
                               callbacks=callbacks, generators=self._generators(), extra=extra)

    def load_checkpoint(self, path: str | os.PathLike, restore_rng: bool = True) -> dict:
        """Restore module, optimizer, history (and RNG states) from ``path``; returns the checkpoint dict."""
        from ember.train.checkpoint import load_checkpoint

        checkpoint = load_checkpoint(path, self.module, self.optimizer, restore_rng=restore_rng,
                                     generators=self._generators())
        saved = checkpoint.get("history") or {}
        self.history.history = {k: list(v) for k, v in (saved.get("history") or {}).items()}
        self.history.epoch = list(saved.get("epoch") or [])
        return checkpoint

    def summary(self, input_data: Any = None, print_fn: Any = print) -> str | None:
        """Keras' table (layer, output shape, parameters, trainable) plus FLOPs per layer. As Keras, it is
        printed (with ``print_fn``) and nothing is returned; ``print_fn=None`` returns the text instead. Output
        shapes and FLOPs need an example input: ``input_data``, or one batch of the data ``fit`` has seen (its
        first sample is used)."""
        if input_data is None and getattr(self, "_example_input", None) is not None:
            input_data = self._example_input
        text = str(summary(self.module, input_data, print_fn=None))
        if print_fn is None:
            return text
        print_fn(text)
        return None


Trainer = Model
