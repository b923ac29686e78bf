"""Progress display for ``fit``: a tqdm bar (``verbose=1``) or one plain line per epoch (``verbose=2``).

Both show the loss, the metrics and the throughput in samples/s. tqdm is optional: without it
``verbose=1`` says so once and falls back to the plain lines.

Example:
    >>> from ember.train.progress import format_logs
    >>> format_logs({"loss": 0.25, "accuracy": 0.9})
    'loss: 0.2500 - accuracy: 0.9000'
"""
from __future__ import annotations

import sys
import time
import warnings
from typing import Any

from ember.train.callbacks import Callback

_WARNED = False


def format_logs(logs: dict[str, Any], skip: tuple[str, ...] = ("batch", "size")) -> str:
    parts = []
    for key, value in logs.items():
        if key in skip:
            continue
        if isinstance(value, float):
            parts.append(f"{key}: {value:.4g}" if key == "lr" else f"{key}: {value:.4f}")
        else:
            parts.append(f"{key}: {value}")
    return " - ".join(parts)


def _tqdm() -> Any:
    global _WARNED
    try:
        from tqdm.auto import tqdm
    except ImportError:
        if not _WARNED:
            warnings.warn("ember.train: verbose=1 shows a progress bar through tqdm, which is not installed "
                          "(pip install tqdm); printing one line per epoch instead (verbose=2)", stacklevel=3)
            _WARNED = True
        return None
    return tqdm


class ProgbarLogger(Callback):
    """Shows training progress; added by ``Model.fit`` when ``verbose > 0``."""

    order = 90  # after callbacks that add logs (lr), before ModelCheckpoint prints its path
    chief_only = True
    wants_perf = True  # fit measures MFU and the data-wait / transfer shares of the step time for it

    def __init__(self, verbose: int = 1, file: Any = None) -> None:
        super().__init__()
        self.verbose = verbose
        self.file = file
        self._bar: Any = None
        self._tqdm: Any = None

    def on_train_begin(self, logs: dict | None = None) -> None:
        self._tqdm = _tqdm() if self.verbose == 1 else None

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._start = time.perf_counter()
        self._seen = 0
        self._last_postfix = 0.0
        epochs = self.params.get("epochs")
        self._title = f"Epoch {epoch + 1}/{epochs}"
        if self._tqdm is not None:
            self._bar = self._tqdm(total=self.params.get("steps"), desc=self._title, unit="batch", leave=True,
                                   file=self.file, dynamic_ncols=True)

    def _perf(self) -> str:
        perf = getattr(self.model, "perf", None) if self.model is not None else None
        return f" - {perf.postfix()}" if perf is not None and perf.steps else ""

    def _rate(self) -> float:
        elapsed = time.perf_counter() - self._start
        return self._seen / elapsed if elapsed > 0 else 0.0

    def on_batch_end(self, batch: int, logs: dict | None = None) -> None:
        logs = logs or {}
        self._seen += int(logs.get("size", 0))
        if self._bar is not None:
            self._bar.update(1)
            now = time.perf_counter()
            if now - self._last_postfix > 0.25:  # formatting every batch would cost more than it shows
                self._last_postfix = now
                self._bar.set_postfix_str(f"{format_logs(logs)} - {self._rate():.0f} samples/s{self._perf()}",
                                          refresh=False)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        logs = logs or {}
        elapsed = time.perf_counter() - self._start
        summary = f"{format_logs(logs)} - {self._rate():.0f} samples/s{self._perf()}"
        if self._bar is not None:
            self._bar.set_postfix_str(summary, refresh=False)
            self._bar.close()
            self._bar = None
        elif self.verbose:
            print(f"{self._title} - {elapsed:.1f}s - {summary}", file=self.file or sys.stdout, flush=True)

    def on_train_end(self, logs: dict | None = None) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
