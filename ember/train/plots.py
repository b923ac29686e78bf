"""Training curves as a picture (matplotlib, an optional dependency: ``pip install 'ember[plot]'``).

Example:
    >>> plot_history({"loss": [1.0, 0.5], "val_loss": [1.1, 0.7]}, [0, 1], "curves.png")  # doctest: +SKIP
    'curves.png'
"""
from __future__ import annotations

import os
import tempfile
from typing import Any, Sequence

INSTALL_HINT = "History.plot needs matplotlib: pip install matplotlib (or pip install 'ember[plot]')"


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    matplotlib.use("Agg", force=False)  # files only: never opens a window, works without a display
    import matplotlib.pyplot as plt

    return plt


def plot_history(history: dict, epochs: Sequence[int], path: str | os.PathLike = "history.png",
                 metrics: Sequence[str] | None = None, title: str | None = None) -> str:
    """One panel per metric with its train and ``val_`` curves; written atomically to ``path``."""
    if not history:
        raise ValueError("History.plot: nothing recorded yet - call fit() first")
    if metrics is None:
        metrics = [k for k in history if not k.startswith("val_") and k != "lr"]
        metrics += [k[4:] for k in history if k.startswith("val_") and k[4:] not in metrics]
    unknown = [m for m in metrics if m not in history and f"val_{m}" not in history]
    if unknown:
        raise ValueError(f"History.plot: no values for {unknown}; recorded: {sorted(history)}")
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    x = [e + 1 for e in epochs] if epochs else None
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.4), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        for key, style, label in ((metric, "-o", "train"), (f"val_{metric}", "--s", "validation")):
            values = history.get(key)
            if values:
                ax.plot(x[-len(values):] if x else range(1, len(values) + 1), values, style, label=label,
                        markersize=4)
        ax.set_title(metric)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if x and len(x) <= 12:  # few epochs: one tick per epoch (the locator falls back to fractions below two)
            ax.set_xticks(x)
            ax.set_xlim(x[0] - 0.5, x[-1] + 0.5)
        ax.grid(alpha=0.3)
        ax.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    suffix = os.path.splitext(path)[1] or ".png"
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".plot-", suffix=suffix)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 files; a picture is as readable as any other file
    try:
        fig.savefig(tmp, dpi=110)
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
