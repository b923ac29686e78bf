"""``torch.autograd.detect_anomaly`` / ``set_detect_anomaly``: stop backward at the first node whose
gradient contains NaN, naming it (PyTorch's message), instead of letting NaNs spread silently.

Example:
    >>> import ember
    >>> x = ember.tensor([0.0], requires_grad=True)
    >>> with ember.autograd.detect_anomaly():
    ...     try:
    ...         (x.sqrt() * 0).sum().backward()
    ...     except RuntimeError as e:
    ...         print(str(e).split(".")[0])
    Function 'SqrtBackward0' returned nan values in its 0th output
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

STATE = {"enabled": False, "check_nan": True}


def is_anomaly_enabled() -> bool:
    return STATE["enabled"]


def is_anomaly_check_nan_enabled() -> bool:
    return STATE["check_nan"]


class set_detect_anomaly:
    """Turn anomaly detection on or off (a function call, or a context manager restoring the old mode)."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self.prev = dict(STATE)
        STATE["enabled"], STATE["check_nan"] = bool(mode), bool(check_nan)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        STATE.update(self.prev)


class detect_anomaly:
    """Context manager (and decorator) enabling anomaly detection inside the block."""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
                      "enabled for debugging.", UserWarning, stacklevel=2)

    def __enter__(self) -> None:
        self.prev = dict(STATE)
        STATE["enabled"], STATE["check_nan"] = True, self.check_nan

    def __exit__(self, *exc: Any) -> None:
        STATE.update(self.prev)

    def __call__(self, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)
        return wrapper


def check_gradients(node: Any, grads: tuple) -> None:
    """Called by the engine after each node when anomaly mode checks NaNs."""
    for index, g in enumerate(grads):
        if g is None:
            continue
        data = g._data
        if getattr(data, "dtype", None) is not None and data.dtype.kind == "f" and bool(np.isnan(
                data if isinstance(data, np.ndarray) else g.detach().numpy()).any()):
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {index}th output.")
