"""Train a small CNN on MNIST: the job behind ``ember train mnist``.

By default it uses the class-balanced MNIST subset carried inside ember (12,000 train / 2,000 test
images, no download); ``data_dir`` switches to the full IDX files (60,000 / 10,000). It prints the
test accuracy and writes a resumable checkpoint and TensorBoard logs under ``run_dir``.

Example:
    >>> from ember.train import mnist
    >>> result = mnist.run(epochs=1, verbose=0, limit=512)   # doctest: +SKIP
    >>> sorted(result)                                       # doctest: +SKIP
    ['checkpoint', 'history', 'run_dir', 'seconds', 'tensorboard', 'test_accuracy', 'test_loss']
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any
from ember import nn
from ember.data import DataLoader, Subset, transforms as T
from ember.data.datasets import MNIST
from ember.viz import draw

MEAN, STD = 0.1307, 0.3081
LR_DECAY = 0.5  # per-epoch multiplier of Adam's learning rate


def build_cnn() -> Any:
    """conv 1->32 3x3 pad 1, ReLU, maxpool 2, conv 32->64 3x3 pad 1, ReLU, maxpool 2, flatten, linear 3136->10."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 10),
    )


def load_data(data_dir: str | os.PathLike | None = None) -> tuple[Any, Any]:
    """(train, test) MNIST datasets, normalized with batched transforms; the carried subset by default."""

    transform = T.Compose([T.ToTensor(), T.Normalize((MEAN,), (STD,))])
    if data_dir is None:
        return MNIST.carried(True, transform), MNIST.carried(False, transform)
    return MNIST(data_dir, train=True, transform=transform), MNIST(data_dir, train=False, transform=transform)


def run(data_dir: str | os.PathLike | None = None, epochs: int | None = None, batch_size: int = 64,
        lr: float = 1e-3, run_dir: str | os.PathLike | None = None, seed: int = 0, num_workers: int = 0,
        verbose: int = 1, limit: int | None = None, resume: bool = False, device: str = "cpu") -> dict[str, Any]:
    """Train the CNN and return ``{test_accuracy, test_loss, seconds, checkpoint, tensorboard, run_dir, history}``.

    ``epochs`` defaults to 5 on the carried subset and 6 on full MNIST; the learning rate halves each epoch. ``limit`` trains on the first
    ``limit`` images only (smoke tests). ``resume=True`` continues from ``run_dir``'s checkpoint.
    ``device="cuda"`` trains on the GPU (batches pinned and copied with ``non_blocking``).
    """
    import ember
    from ember.train.callbacks import LearningRateScheduler, ModelCheckpoint
    from ember.train.model import Model
    from ember.train.tensorboard import TensorBoard

    ember.manual_seed(seed)
    train_set, test_set = load_data(data_dir)
    if limit is not None:
        train_set = Subset(train_set, range(min(limit, len(train_set))))
        test_set = Subset(test_set, range(min(limit, len(test_set))))
    if epochs is None:
        epochs = 5 if data_dir is None else 6
    run_dir = Path(run_dir) if run_dir is not None else Path("runs") / time.strftime("mnist-%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    checkpoint = run_dir / "checkpoint.ember"
    board_dir = run_dir / "tensorboard"

    on_gpu = ember.device(device).type != "cpu"
    model = Model(build_cnn(), device=device)
    model.configure(optimizer="adam", loss="cross_entropy", metrics=["accuracy"], lr=lr)
    train_loader = DataLoader(train_set, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                              pin_memory=on_gpu)
    test_loader = DataLoader(test_set, batch_size=500, num_workers=num_workers, pin_memory=on_gpu)
    source = "carried MNIST subset" if data_dir is None else f"MNIST from {data_dir}"
    if verbose:
        print(f"ember: training a CNN on {len(train_set)} images ({source}), testing on {len(test_set)}")
        model.summary(train_set[0][0].unsqueeze(0).to(device))
    start = time.perf_counter()
    history = model.fit(train_loader, epochs=epochs, verbose=verbose, validation_data=test_loader,
                        callbacks=[ModelCheckpoint(checkpoint), TensorBoard(board_dir),
                                   # halving the step size each epoch settles Adam into a sharper minimum
                                   LearningRateScheduler(lambda epoch: lr * LR_DECAY ** epoch)],
                        resume_from=checkpoint if resume and checkpoint.is_file() else None)
    seconds = time.perf_counter() - start
    if history.history.get("val_accuracy") and history.epoch and history.epoch[-1] == epochs - 1:
        # The last epoch already evaluated the final weights on the test set: don't pay for it twice.
        results = {"accuracy": history.history["val_accuracy"][-1], "loss": history.history["val_loss"][-1]}
    else:
        results = model.evaluate(test_loader, verbose=0, return_dict=True)
    pictures = write_pictures(model, history, train_set, run_dir)
    if verbose:
        print(f"test accuracy: {results['accuracy'] * 100:.2f}% (loss {results['loss']:.4f}) after {epochs} epochs "
              f"in {seconds:.1f}s")
        print(f"checkpoint:  {checkpoint}")
        print(f"tensorboard: {board_dir}  (view with: tensorboard --logdir {board_dir})")
        for label, (path, note) in pictures.items():
            print(f"{label + ':':<12} {path or '(skipped)'}" + (f"  ({note})" if note else ""))
    return {"test_accuracy": results["accuracy"], "test_loss": results["loss"], "seconds": seconds,
            "checkpoint": str(checkpoint), "tensorboard": str(board_dir), "run_dir": str(run_dir),
            "history": history.history, "pictures": {k: v[0] for k, v in pictures.items()}}


def write_pictures(model: Any, history: Any, train_set: Any, run_dir: Path) -> dict:
    """The training curves (PNG, needs matplotlib) and the autograd graph of one training loss (SVG, needs
    Graphviz's ``dot``; the DOT text otherwise) next to the checkpoint. Returns {label: (path, note)}."""
    import ember

    out: dict = {}
    try:
        out["curves"] = (history.plot(run_dir / "curves.png", title="ember demo: CNN on MNIST"), "")
    except ImportError as error:
        out["curves"] = (None, str(error))
    x, y = train_set[0]
    device = next(model.module.parameters()).device
    loss = model.loss_fn(model.module(x.unsqueeze(0).to(device)), ember.tensor([int(y)], device=device))
    doc = draw(loss, params=dict(model.module.named_parameters()), title="autograd graph of one training loss")
    try:
        out["graph"] = (doc.render(run_dir / "graph.svg"), "")
    except RuntimeError:  # no Graphviz: the DOT text still says everything
        out["graph"] = (doc.render(run_dir / "graph.dot"), "install Graphviz to get SVG: apt-get install graphviz; "
                        "then dot -Tsvg graph.dot -o graph.svg")
    return out
