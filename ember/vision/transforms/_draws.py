"""The random draws of torchvision's transforms, call for call, on ember's data generator.

torchvision's v1 transforms draw with ``torch.rand(1)``, ``torch.randint(lo, hi, (1,))``,
``torch.empty(1).uniform_(a, b)`` and ``torch.randperm(n)`` (and Python's ``random`` module for
``RandomOrder``/``RandomChoice``). ember's transforms make the same calls in the same order on the
generator :func:`ember.data.worker.data_generator` gives (the default one outside loader workers), so a
seeded pipeline augments exactly as torchvision does.

Example:
    >>> import ember
    >>> _ = ember.manual_seed(0)
    >>> round(uniform(-10.0, 10.0), 4)
    -0.0749
"""
from __future__ import annotations

import numpy as np

from ember import dtypes, random as ember_random
from ember.data.worker import data_generator
from ember.device import to_device

_CPU = to_device("cpu")


def rand() -> float:
    """``torch.rand(1).item()`` (a float32 value)."""
    return float(ember_random.sample_uniform((1,), dtypes.float32, _CPU, data_generator())[0])


def below(p: float) -> bool:
    """``torch.rand(1) < p``: the comparison happens in float32, as torch compares with a Python number."""
    return bool(np.float32(rand()) < np.float32(p))


def uniform(low: float, high: float) -> float:
    """``torch.empty(1).uniform_(low, high).item()`` (float32 arithmetic)."""
    return float(ember_random.sample_uniform((1,), dtypes.float32, _CPU, data_generator(), float(low),
                                             float(high))[0])


def randint(low: int, high: int) -> int:
    """``torch.randint(low, high, size=(1,)).item()``."""
    return int(ember_random.sample_integers((1,), dtypes.int64, _CPU, data_generator(), int(low), int(high))[0])


def randint_array(low: int, high: int, shape: tuple) -> np.ndarray:
    """``torch.randint(low, high, shape)`` as an int64 array."""
    return np.asarray(ember_random.sample_integers(tuple(shape), dtypes.int64, _CPU, data_generator(), int(low),
                                                   int(high)))


def numpy_stream() -> np.random.Generator:
    """The same stream as a NumPy Generator, for draws torch makes with samplers ember does not mirror."""
    return data_generator().numpy_rng


def randperm(n: int) -> list[int]:
    """``torch.randperm(n).tolist()``."""
    return ember_random.sample_permutation(int(n), _CPU, data_generator()).tolist()


def log_uniform(ratio: tuple[float, float]) -> float:
    """``torch.exp(torch.empty(1).uniform_(log_ratio[0], log_ratio[1])).item()`` with ``log_ratio`` the float32
    logs of ``ratio`` (RandomResizedCrop's and RandomErasing's aspect ratio)."""
    log_ratio = np.log(np.asarray(ratio, dtype=np.float32))
    return float(np.exp(np.float32(uniform(float(log_ratio[0]), float(log_ratio[1])))))


def uniform_array(shape: tuple) -> np.ndarray:
    """``torch.rand(shape)`` as a float32 array (ElasticTransform's displacement noise)."""
    return np.asarray(ember_random.sample_uniform(tuple(shape), dtypes.float32, _CPU, data_generator()))


def normal(shape: tuple) -> np.ndarray:
    """``torch.empty(shape, dtype=torch.float32).normal_()`` as an array (RandomErasing's random fill)."""
    return np.asarray(ember_random.sample_normal(tuple(shape), dtypes.float32, _CPU, data_generator()))
