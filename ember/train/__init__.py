"""Keras-style training for ember modules: ``Model``/``Trainer``, callbacks, metrics, checkpoints,
and multi-process data parallelism with ``DataParallelStrategy`` (ember/train/distributed.py).

Example:
    >>> import ember
    >>> from ember import nn
    >>> from ember.train import Model, EarlyStopping
    >>> model = Model(nn.Linear(3, 2))
    >>> _ = model.configure(optimizer="sgd", loss="cross_entropy", metrics=["accuracy"])
    >>> history = model.fit(ember.randn(20, 3), ember.randint(0, 2, (20,)), epochs=2, verbose=0)
    >>> len(history.history["loss"])
    2
"""
from ember.train import metrics  # noqa: F401
from ember.train import mnist  # noqa: F401
from ember.train.callbacks import (
    Callback, CallbackList, CSVLogger, EarlyStopping, History, LambdaCallback, LearningRateScheduler,
    ModelCheckpoint, TerminateOnNaN,
)
from ember.train.distributed import DataParallelStrategy, get_strategy
from ember.train.checkpoint import capture_rng_state, load_checkpoint, restore_rng_state, save_checkpoint
from ember.train.metrics import Accuracy, Mean, Metric, TopKAccuracy
from ember.train.model import Model, Trainer
from ember.train.progress import ProgbarLogger
from ember.train.tensorboard import TensorBoard

__all__ = [
    "Accuracy", "CSVLogger", "Callback", "CallbackList", "DataParallelStrategy", "EarlyStopping", "History", "LambdaCallback",
    "LearningRateScheduler", "Mean", "Metric", "Model", "ModelCheckpoint", "ProgbarLogger", "TensorBoard",
    "TerminateOnNaN", "TopKAccuracy", "Trainer", "capture_rng_state", "load_checkpoint", "metrics", "mnist",
    "get_strategy", "restore_rng_state", "save_checkpoint",
]
