"""Training metrics: running values over an epoch (accuracy, top-k accuracy, mean loss, MSE/MAE).

A metric sees each batch's model output and target through ``update`` and reports ``result()``;
the running sums are plain Python/NumPy numbers so metrics never touch the autograd graph.

Example:
    >>> import ember
    >>> from ember.train.metrics import Accuracy
    >>> acc = Accuracy()
    >>> acc.update(ember.tensor([[2.0, 1.0], [0.0, 3.0]]), ember.tensor([0, 0]))
    >>> acc.result()
    0.5
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np


def _array(value: Any) -> np.ndarray:
    """Host NumPy view of a tensor/array/number (detached; copied from the GPU when needed)."""
    if hasattr(value, "detach"):
        return value.detach().cpu().numpy()  # an explicit device -> host copy (a no-op on the CPU)
    return np.asarray(value)


class Metric:
    """Base class: ``reset()``, ``update(output, target)``, ``result() -> float``; ``name`` keys the logs."""

    name = "metric"

    def reset(self) -> None:
        raise NotImplementedError

    def update(self, output: Any, target: Any) -> None:
        raise NotImplementedError

    def result(self) -> float:
        raise NotImplementedError

    # Merging across data-parallel replicas (ember.train.DataParallelStrategy): a metric whose running
    # state is a vector of sums returns it here, and the global result is computed from the summed vectors.
    def state(self) -> list[float] | None:
        """Additive running state (summed across replicas), or None: then the strategy averages
        ``result()`` weighted by each replica's sample count."""
        return None

    def result_from_state(self, state: Any) -> float:
        """The result for a (summed) ``state()`` vector."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class _Ratio(Metric):
    """A metric that is a total divided by a count."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.total = 0.0
        self.count = 0

    def result(self) -> float:
        return self.total / self.count if self.count else float("nan")

    def state(self) -> list[float]:
        return [float(self.total), float(self.count)]

    def result_from_state(self, state: Any) -> float:
        return float(state[0] / state[1]) if state[1] else float("nan")


class Mean(_Ratio):
    """The (weighted) mean of the values given to ``update(value, weight=1)``, e.g. the epoch's loss."""

    def __init__(self, name: str = "mean") -> None:
        self.name = name
        super().__init__()

    def update(self, value: Any, weight: Any = 1) -> None:  # type: ignore[override]
        self.total += float(value) * float(weight)
        self.count += float(weight)  # type: ignore[assignment]


class Accuracy(_Ratio):
    """Top-1 accuracy.

    ``output`` of shape (N, C, ...) against integer ``target`` (N, ...): argmax over dim 1.
    Same-shape ``output``/``target`` with C > 1 (one-hot targets): argmax of both.
    Same-shape with one column or 1-D (binary): ``output > threshold`` against ``target > 0.5``.
    """

    name = "accuracy"

    def __init__(self, threshold: float = 0.5, name: str = "accuracy") -> None:
        self.threshold = threshold
        self.name = name
        super().__init__()

    def update(self, output: Any, target: Any) -> None:
        out, tgt = _array(output), _array(target)
        if out.ndim == tgt.ndim + 1:
            correct = out.argmax(axis=1) == tgt
        elif out.shape == tgt.shape and out.ndim >= 2 and out.shape[1] > 1:
            correct = out.argmax(axis=1) == tgt.argmax(axis=1)
        elif out.shape == tgt.shape:
            correct = (out > self.threshold) == (tgt > 0.5)
        else:
            raise ValueError(f"Accuracy: cannot compare output of shape {out.shape} with target of shape "
                             f"{tgt.shape}; expected (N, C) logits with (N,) labels, or equal shapes")
        self.total += float(np.count_nonzero(correct))
        self.count += correct.size


class TopKAccuracy(_Ratio):
    """The fraction of samples whose label is among the ``k`` largest outputs (class dim 1)."""

    def __init__(self, k: int = 5, name: str | None = None) -> None:
        self.k = k
        self.name = name or f"top{k}_accuracy"
        super().__init__()

    def update(self, output: Any, target: Any) -> None:
        out, tgt = _array(output), _array(target)
        if out.ndim != tgt.ndim + 1:
            raise ValueError(f"TopKAccuracy: expected output (N, C, ...) and integer target (N, ...), got "
                             f"{out.shape} and {tgt.shape}")
        k = min(self.k, out.shape[1])
        top = np.argpartition(-out, k - 1, axis=1).take(range(k), axis=1)
        correct = (top == np.expand_dims(tgt, 1)).any(axis=1)
        self.total += float(np.count_nonzero(correct))
        self.count += correct.size


class MeanSquaredError(_Ratio):
    name = "mse"

    def update(self, output: Any, target: Any) -> None:
        diff = _array(output).astype(np.float64) - _array(target).astype(np.float64)
        self.total += float(np.sum(diff * diff))
        self.count += diff.size


class MeanAbsoluteError(_Ratio):
    name = "mae"

    def update(self, output: Any, target: Any) -> None:
        diff = _array(output).astype(np.float64) - _array(target).astype(np.float64)
        self.total += float(np.sum(np.abs(diff)))
        self.count += diff.size


class FunctionMetric(_Ratio):
    """Wrap ``fn(output, target) -> number`` (a batch mean); averaged over samples."""

    def __init__(self, fn: Callable[[Any, Any], Any], name: str | None = None) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "metric")
        super().__init__()

    def update(self, output: Any, target: Any) -> None:
        n = len(output) if hasattr(output, "__len__") and getattr(output, "ndim", 1) else 1
        self.total += float(_array(self.fn(output, target))) * n
        self.count += n


_NAMED: dict[str, Callable[[], Metric]] = {
    "accuracy": Accuracy, "acc": Accuracy, "top1": Accuracy,
    "top5": lambda: TopKAccuracy(5), "top_5_accuracy": lambda: TopKAccuracy(5),
    "top_k_accuracy": lambda: TopKAccuracy(5), "top3": lambda: TopKAccuracy(3),
    "mse": MeanSquaredError, "mean_squared_error": MeanSquaredError,
    "mae": MeanAbsoluteError, "mean_absolute_error": MeanAbsoluteError,
}


def get_metric(spec: Any) -> Metric:
    """A ``Metric`` from a name ('accuracy', 'top5', 'mse', 'mae'), a Metric, or a function."""
    if isinstance(spec, Metric):
        return spec
    if isinstance(spec, str):
        key = spec.lower()
        if key in _NAMED:
            metric = _NAMED[key]()
            if key in ("acc", "accuracy"):
                metric.name = key
            return metric
        raise ValueError(f"unknown metric {spec!r}; known names: {sorted(_NAMED)}, or pass a Metric or a "
                         "function(output, target)")
    if isinstance(spec, type) and issubclass(spec, Metric):
        return spec()
    if callable(spec):
        return FunctionMetric(spec)
    raise TypeError(f"a metric must be a name, a Metric or a function, got {type(spec).__name__}")
