"""Callbacks with Keras's hook names, called by ``ember.train.Model.fit``/``evaluate``/``predict``.

Hooks: ``on_train_begin/end``, ``on_epoch_begin/end(epoch, logs)``, ``on_batch_begin/end(batch, logs)``
(alias ``on_train_batch_*``), ``on_test_*`` and ``on_predict_*``. ``self.model`` is the ``Model``,
``self.params`` holds ``epochs``, ``steps`` and ``verbose``. A callback with state that matters for
an exact resume (EarlyStopping's patience counter, a scheduler) returns it from ``state_dict``; the
training checkpoint stores it.

Callbacks run in list order, except that each class has an ``order``: ``ProgbarLogger`` (90),
``History`` (95) and ``ModelCheckpoint`` (100) run after the rest, so a checkpoint sees the epoch's
history and already-stepped schedulers.

Example:
    >>> from ember.train.callbacks import EarlyStopping
    >>> stop = EarlyStopping(monitor="val_loss", patience=2, restore_best_weights=True)
"""
from __future__ import annotations

import csv
import inspect
import math
import os
import warnings
from typing import Any, Callable, Iterable, Sequence

import numpy as np
from ember.serialization import save


class Callback:
    """Base class: override the hooks you need.

    ``chief_only = True`` marks a callback with side effects (printing, files) that runs on rank 0
    only under ``ember.train.DataParallelStrategy``.
    """

    order = 0
    chief_only = False

    def __init__(self) -> None:
        self.model: Any = None
        self.params: dict[str, Any] = {}

    def set_model(self, model: Any) -> None:
        self.model = model

    def set_params(self, params: dict[str, Any]) -> None:
        self.params = params

    # training
    def on_train_begin(self, logs: dict | None = None) -> None: ...
    def on_train_end(self, logs: dict | None = None) -> None: ...
    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None: ...
    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None: ...
    def on_batch_begin(self, batch: int, logs: dict | None = None) -> None: ...
    def on_batch_end(self, batch: int, logs: dict | None = None) -> None: ...

    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        self.on_batch_begin(batch, logs)

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self.on_batch_end(batch, logs)

    # evaluation and prediction
    def on_test_begin(self, logs: dict | None = None) -> None: ...
    def on_test_end(self, logs: dict | None = None) -> None: ...
    def on_test_batch_begin(self, batch: int, logs: dict | None = None) -> None: ...
    def on_test_batch_end(self, batch: int, logs: dict | None = None) -> None: ...
    def on_predict_begin(self, logs: dict | None = None) -> None: ...
    def on_predict_end(self, logs: dict | None = None) -> None: ...
    def on_predict_batch_begin(self, batch: int, logs: dict | None = None) -> None: ...
    def on_predict_batch_end(self, batch: int, logs: dict | None = None) -> None: ...

    # checkpointing
    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


class CallbackList:
    """Dispatches each hook to every callback, in (``order``, position) order."""

    def __init__(self, callbacks: Iterable[Callback] = (), model: Any = None, params: dict | None = None) -> None:
        self.callbacks = sorted(callbacks, key=lambda c: getattr(c, "order", 0))
        for callback in self.callbacks:
            if model is not None:
                callback.set_model(model)
            if params is not None:
                callback.set_params(params)

    def __iter__(self) -> Any:
        return iter(self.callbacks)

    def __getattr__(self, hook: str) -> Callable[..., None]:
        if not hook.startswith("on_"):
            raise AttributeError(hook)

        def call(*args: Any) -> None:
            for callback in self.callbacks:
                getattr(callback, hook)(*args)

        return call

    def state_dict(self) -> dict[str, Any]:
        """Each stateful callback's state, keyed by its class name and position among that class."""
        out, seen = {}, {}
        for callback in self.callbacks:
            key = type(callback).__name__
            seen[key] = seen.get(key, -1) + 1
            state = callback.state_dict()
            if state:
                out[f"{key}.{seen[key]}"] = state
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        seen: dict[str, int] = {}
        for callback in self.callbacks:
            key = type(callback).__name__
            seen[key] = seen.get(key, -1) + 1
            if f"{key}.{seen[key]}" in state:
                callback.load_state_dict(state[f"{key}.{seen[key]}"])


class History(Callback):
    """Records each epoch's logs: ``history.history == {'loss': [...], 'val_loss': [...], ...}``.

    It runs after the other callbacks' ``on_epoch_end`` (so it sees logs they add, like ``lr``)
    and before ``ModelCheckpoint`` (so a checkpoint holds the epoch just finished).
    """

    order = 95

    def __init__(self) -> None:
        super().__init__()
        self.history: dict[str, list] = {}
        self.epoch: list[int] = []

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.epoch.append(epoch)
        for key, value in (logs or {}).items():
            self.history.setdefault(key, []).append(value)

    def __repr__(self) -> str:
        return f"History({self.history})"

    def plot(self, path: str | os.PathLike = "history.png", metrics: Sequence[str] | None = None,
             title: str | None = None) -> str:
        """Save the training (and validation) curves to ``path`` (PNG/SVG/PDF by suffix); returns the path.

        One panel per metric (``loss``, ``accuracy``...), train solid and ``val_`` dashed, over epochs.
        Needs matplotlib (``pip install matplotlib`` or ``pip install 'ember[plot]'``).

        Example:
            >>> history = trainer.fit(loader, epochs=5, validation_data=test_loader)   # doctest: +SKIP
            >>> history.plot("curves.png")                                            # doctest: +SKIP
        """
        from ember.train.plots import plot_history

        return plot_history(self.history, self.epoch, path, metrics, title)


def _mode_better(mode: str, monitor: str) -> str:
    if mode not in ("auto", "min", "max"):
        raise ValueError(f"mode must be 'auto', 'min' or 'max', got {mode!r}")
    if mode == "auto":
        return "max" if ("acc" in monitor or monitor.startswith(("auc", "val_auc")) or "f1" in monitor) else "min"
    return mode


def _copy_state(state: dict) -> dict:
    return {k: v.detach().clone() if hasattr(v, "detach") else v for k, v in state.items()}


class EarlyStopping(Callback):
    """Stop when ``monitor`` has not improved by ``min_delta`` for ``patience`` epochs (Keras semantics)."""

    def __init__(self, monitor: str = "val_loss", min_delta: float = 0.0, patience: int = 0, verbose: int = 0,
                 mode: str = "auto", baseline: float | None = None, restore_best_weights: bool = False,
                 start_from_epoch: int = 0) -> None:
        super().__init__()
        self.monitor = monitor
        self.mode = _mode_better(mode, monitor)
        self.min_delta = abs(min_delta)
        self.patience = patience
        self.verbose = verbose
        self.baseline = baseline
        self.restore_best_weights = restore_best_weights
        self.start_from_epoch = start_from_epoch
        self._reset()

    def _reset(self) -> None:
        self.wait = 0
        self.stopped_epoch = 0
        self.best = math.inf if self.mode == "min" else -math.inf
        self.best_epoch = 0
        self.best_weights: dict | None = None

    def _improved(self, value: float, reference: float) -> bool:
        if self.mode == "min":
            return value + self.min_delta < reference
        return value - self.min_delta > reference

    def on_train_begin(self, logs: dict | None = None) -> None:
        self._reset()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        current = (logs or {}).get(self.monitor)
        if current is None or epoch < self.start_from_epoch:
            if current is None:
                warnings.warn(f"EarlyStopping: monitor {self.monitor!r} is not in the logs (available: "
                              f"{sorted(logs or {})}); pass validation data or monitor 'loss'", stacklevel=2)
            return
        self.wait += 1
        if self._improved(current, self.best):
            self.best, self.best_epoch = current, epoch
            if self.restore_best_weights:
                self.best_weights = _copy_state(self.model.module.state_dict())
            if self.baseline is None or self._improved(current, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True
            if self.restore_best_weights and self.best_weights is not None:
                if self.verbose:
                    print(f"EarlyStopping: restoring weights from the end of the best epoch ({self.best_epoch + 1})")
                self.model.module.load_state_dict(self.best_weights)

    def on_train_end(self, logs: dict | None = None) -> None:
        if self.stopped_epoch > 0 and self.verbose:
            print(f"Epoch {self.stopped_epoch + 1}: early stopping")

    def state_dict(self) -> dict[str, Any]:
        return {"wait": self.wait, "stopped_epoch": self.stopped_epoch, "best": self.best,
                "best_epoch": self.best_epoch, "best_weights": self.best_weights}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.wait, self.stopped_epoch = state["wait"], state["stopped_epoch"]
        self.best, self.best_epoch, self.best_weights = state["best"], state["best_epoch"], state["best_weights"]


class ModelCheckpoint(Callback):
    """Save at each epoch end to ``filepath``, formatted with ``epoch`` (1-based) and the logs.

    By default the file is a full training checkpoint (model, optimizer, schedulers, RNG states,
    history: ``Model.fit(resume_from=path)`` continues from it); ``save_weights_only=True`` saves
    only ``module.state_dict()``. Example: ``ModelCheckpoint("ckpt/epoch{epoch:02d}.ember")``.
    """

    order = 100
    chief_only = True  # one writer under DataParallelStrategy

    def __init__(self, filepath: str | os.PathLike, monitor: str = "val_loss", verbose: int = 0,
                 save_best_only: bool = False, save_weights_only: bool = False, mode: str = "auto",
                 save_freq: str | int = "epoch") -> None:
        super().__init__()
        self.filepath = os.fspath(filepath)
        self.monitor = monitor
        self.verbose = verbose
        self.save_best_only = save_best_only
        self.save_weights_only = save_weights_only
        self.mode = _mode_better(mode, monitor)
        if save_freq != "epoch":
            raise ValueError("ModelCheckpoint: only save_freq='epoch' is supported")
        self.best = math.inf if self.mode == "min" else -math.inf
        self.last_path: str | None = None

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        logs = logs or {}
        try:
            path = self.filepath.format(epoch=epoch + 1, **logs)
        except KeyError as error:
            raise KeyError(f"ModelCheckpoint: filepath {self.filepath!r} names {error}, which is not in the logs "
                           f"{sorted(logs)}") from None
        if self.save_best_only:
            current = logs.get(self.monitor)
            if current is None:
                warnings.warn(f"ModelCheckpoint: monitor {self.monitor!r} is not in the logs; saving anyway",
                              stacklevel=2)
            elif (current < self.best) if self.mode == "min" else (current > self.best):
                if self.verbose:
                    print(f"Epoch {epoch + 1}: {self.monitor} improved from {self.best:.5f} to {current:.5f}, "
                          f"saving to {path}")
                self.best = current
            else:
                return
        if self.save_weights_only:
            save(self.model.module.state_dict(), path)
        else:
            self.model.save_checkpoint(path, epochs_completed=epoch + 1)
        self.last_path = path
        if self.verbose and not self.save_best_only:
            print(f"Epoch {epoch + 1}: saved checkpoint to {path}")

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best = state["best"]


def _current_lr(optimizer: Any) -> float:
    return float(optimizer.param_groups[0]["lr"])


class LearningRateScheduler(Callback):
    """Set the learning rate per epoch from ``schedule``.

    ``schedule`` is an ``ember.optim.lr_scheduler`` object (stepped at each epoch end, or each batch
    with ``interval='batch'``; a ReduceLROnPlateau gets ``logs[monitor]``), or a function
    ``epoch -> lr`` / ``(epoch, lr) -> lr`` (Keras) applied at each epoch start. Logs record ``lr``.
    """

    def __init__(self, schedule: Any, verbose: int = 0, interval: str = "epoch", monitor: str = "val_loss") -> None:
        super().__init__()
        if interval not in ("epoch", "batch"):
            raise ValueError(f"LearningRateScheduler: interval must be 'epoch' or 'batch', got {interval!r}")
        self.schedule = schedule
        self.verbose = verbose
        self.interval = interval
        self.monitor = monitor
        self.is_scheduler = hasattr(schedule, "step") and hasattr(schedule, "state_dict")
        if not self.is_scheduler and not callable(schedule):
            raise TypeError("LearningRateScheduler: schedule must be an lr_scheduler or a function epoch -> lr")
        self._epoch_lr = float("nan")

    def _optimizer(self) -> Any:
        if self.is_scheduler and hasattr(self.schedule, "optimizer"):
            return self.schedule.optimizer
        return self.model.optimizer

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        optimizer = self._optimizer()
        if not self.is_scheduler:
            try:
                n_args = len(inspect.signature(self.schedule).parameters)
            except (TypeError, ValueError):
                n_args = 1
            lr = self.schedule(epoch, _current_lr(optimizer)) if n_args >= 2 else self.schedule(epoch)
            if not isinstance(lr, (float, int, np.floating, np.integer)):
                raise ValueError(f"LearningRateScheduler: the schedule returned {lr!r}; it should return a number")
            for group in optimizer.param_groups:
                group["lr"] = float(lr)
            if self.verbose:
                print(f"Epoch {epoch + 1}: LearningRateScheduler setting learning rate to {float(lr)}")
        self._epoch_lr = _current_lr(optimizer)

    def on_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if self.is_scheduler and self.interval == "batch":
            self.schedule.step()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if logs is not None:
            logs["lr"] = self._epoch_lr
        if self.is_scheduler and self.interval == "epoch":
            if type(self.schedule).__name__ == "ReduceLROnPlateau":
                value = (logs or {}).get(self.monitor)
                if value is None:
                    raise KeyError(f"LearningRateScheduler: ReduceLROnPlateau needs {self.monitor!r} in the logs")
                self.schedule.step(value)
            else:
                self.schedule.step()

    def state_dict(self) -> dict[str, Any]:
        return {"scheduler": self.schedule.state_dict()} if self.is_scheduler else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.is_scheduler and "scheduler" in state:
            self.schedule.load_state_dict(state["scheduler"])


class CSVLogger(Callback):
    """Append each epoch's logs as a CSV row (``epoch`` first), flushed every epoch."""

    chief_only = True

    def __init__(self, filename: str | os.PathLike, separator: str = ",", append: bool = False) -> None:
        super().__init__()
        self.filename = os.fspath(filename)
        self.separator = separator
        self.append = append
        self._file: Any = None
        self._writer: Any = None
        self._keys: list[str] | None = None

    def on_train_begin(self, logs: dict | None = None) -> None:
        exists = self.append and os.path.isfile(self.filename) and os.path.getsize(self.filename) > 0
        folder = os.path.dirname(self.filename)
        if folder:
            os.makedirs(folder, exist_ok=True)
        self._file = open(self.filename, "a" if self.append else "w", newline="")
        self._keys = None
        if exists:
            with open(self.filename, newline="") as f:
                first = f.readline().strip()
            self._keys = first.split(self.separator)[1:] if first else None

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        logs = logs or {}
        if self._keys is None:
            self._keys = sorted(logs)
            self._writer = csv.writer(self._file, delimiter=self.separator)
            self._writer.writerow(["epoch", *self._keys])
        elif self._writer is None:
            self._writer = csv.writer(self._file, delimiter=self.separator)
        self._writer.writerow([epoch, *(logs.get(k, "NA") for k in self._keys)])
        self._file.flush()

    def on_train_end(self, logs: dict | None = None) -> None:
        if self._file is not None:
            self._file.close()
            self._file = self._writer = None


class TerminateOnNaN(Callback):
    """Stop training when a batch's loss is NaN or infinite."""

    def on_batch_end(self, batch: int, logs: dict | None = None) -> None:
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(loss):
            print(f"Batch {batch}: invalid loss {loss}, terminating training")
            self.model.stop_training = True


class LambdaCallback(Callback):
    """A callback from functions: ``LambdaCallback(on_epoch_end=lambda epoch, logs: print(epoch))``."""

    def __init__(self, **hooks: Callable) -> None:
        super().__init__()
        for name, fn in hooks.items():
            if not name.startswith("on_") or not hasattr(Callback, name):
                raise ValueError(f"LambdaCallback: unknown hook {name!r}")
            setattr(self, name, fn)
