"""Anomaly detection (PyTorch's ``torch.autograd.detect_anomaly`` / ``set_detect_anomaly``).

While it is on, every node recorded in the forward keeps the traceback of the call that created it,
and the backward checks each node's gradients: a node whose gradient holds NaN raises
``RuntimeError: Function 'DivBackward0' returned nan values in its 0th output.``, and any error
inside a node's backward comes with a warning showing the forward call that created the node.

Off (the default) it costs one flag test per recorded node and per backward call.

Example:
    >>> import ember
    >>> x = ember.tensor([0.0], requires_grad=True)
    >>> with ember.autograd.detect_anomaly():              # doctest: +SKIP
    ...     (x / x).sum().backward()                        # RuntimeError naming DivBackward0
"""
from __future__ import annotations

import os
import traceback
import warnings
import weakref
from typing import Any, Callable


class _State:
    """Process-wide, as in PyTorch (the flag is not thread-local there either)."""

    enabled = False
    check_nan = True


STATE = _State()
# node -> the formatted forward traceback; weak, so the graph's lifetime is unchanged.
_TRACES: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()


def is_anomaly_enabled() -> bool:
    return STATE.enabled


def is_anomaly_check_nan_enabled() -> bool:
    return STATE.check_nan


class set_detect_anomaly:
    """Turn anomaly detection on or off: as a call (``set_detect_anomaly(True)``) or a context manager
    (``with set_detect_anomaly(False): ...``) that restores the previous setting on exit."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self.prev = (STATE.enabled, STATE.check_nan)
        STATE.enabled, STATE.check_nan = bool(mode), bool(check_nan)

    def __enter__(self) -> "set_detect_anomaly":
        return self

    def __exit__(self, *exc: Any) -> None:
        STATE.enabled, STATE.check_nan = self.prev


class detect_anomaly:
    """Context manager (and decorator) enabling anomaly detection for its block.

    ``check_nan=False`` keeps the forward tracebacks (shown when a backward fails) without the NaN check.
    """

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan
        self.prev = (STATE.enabled, STATE.check_nan)
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
                      "enabled for debugging.", UserWarning, stacklevel=2)

    def __enter__(self) -> "detect_anomaly":
        self.prev = (STATE.enabled, STATE.check_nan)
        STATE.enabled, STATE.check_nan = True, self.check_nan
        return self

    def __exit__(self, *exc: Any) -> None:
        STATE.enabled, STATE.check_nan = self.prev

    def __call__(self, fn: Callable) -> Callable:
        import functools

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)

        return wrapper


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../ember


def record(node: Any) -> None:
    """Keep the traceback of the forward call creating ``node`` (called only while enabled): the user's
    frames, as PyTorch shows them, without ember's own dispatch frames."""
    frames = [f for f in traceback.extract_stack()[:-1] if not os.path.abspath(f.filename).startswith(_PACKAGE_DIR)]
    _TRACES[node] = "".join(traceback.format_list(frames))


def forward_trace(node: Any) -> str | None:
    try:
        return _TRACES.get(node)
    except TypeError:  # not weakly referenceable: no trace
        return None


def run_node(node: Any, grads: list) -> tuple:
    """``node.apply(grads)`` with the anomaly checks: NaN in any returned gradient raises, and any error
    is preceded by a warning with the forward traceback of the op that created the node."""
    try:
        result = node.apply(grads)
        if STATE.check_nan:
            for i, g in enumerate(result):
                if g is not None and hasattr(g, "_data") and (g.dtype.is_floating_point or g.dtype.is_complex) and bool(g.isnan().any()):
                    raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")
        return result
    except Exception:
        trace = forward_trace(node)
        if trace is None:
            warnings.warn(f"Error detected in {node.name()}. No forward pass information available. Enable "
                          "detect_anomaly during the forward pass to see where the failing op was created.",
                          UserWarning, stacklevel=2)
        else:
            warnings.warn(f"Error detected in {node.name()}. Traceback of forward call that caused the error:\n"
                          f"{trace}", UserWarning, stacklevel=2)
        raise
