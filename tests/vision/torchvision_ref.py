"""Import the real torchvision as a test-only reference, and move its state into ember.

The torchvision wheel that matches torch 2.13 is built against CUDA torch, so its C++ ops library
(``torchvision/_C.so``) does not load next to the CPU torch; the model code is pure Python and does
not need it. Importing torchvision then fails only because it registers fake kernels for two ops
(``nms``, ``qnms``) whose schemas the library would have defined; declaring those two schemas first
lets the import finish. Nothing else of torchvision's C++ side is used by the tests.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread() -> Any:
    """torch's thread pool slows to a crawl on a shared, loaded machine; one thread is fast and steady. A module
    that imports this name gets it as an autouse fixture."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def import_torchvision() -> Any:
    """Return the torchvision module (raises ImportError when it is not installed)."""
    import torch

    try:
        import torchvision
        return torchvision
    except RuntimeError as error:
        if "torchvision::nms" not in str(error):
            raise
    import sys

    for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
        del sys.modules[name]
    global _SCHEMAS
    _SCHEMAS = torch.library.Library("torchvision", "DEF")
    for op in ("nms", "qnms"):
        _SCHEMAS.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    import torchvision

    return torchvision


_SCHEMAS = None


def state_dict_to_numpy(module: Any) -> dict[str, np.ndarray]:
    """A torch module's state dict as NumPy arrays (copies)."""
    return {k: v.detach().cpu().numpy().copy() for k, v in module.state_dict().items()}


def randomize_(model: Any, seed: int = 0) -> Any:
    """Give a torch model non-trivial parameters and statistics so outputs are O(1) and eval differs from train.

    Default inits make some outputs tiny (classifier weights ~N(0, 0.01), batch-norm statistics 0/1),
    which would let a loose comparison pass on near-zero numbers.
    """
    import torch
    from torch import nn

    gen = torch.Generator().manual_seed(seed)

    def rand(shape: Any, low: float, high: float) -> Any:
        return torch.rand(shape, generator=gen) * (high - low) + low

    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm2d, nn.LayerNorm)):
                if m.weight is not None:
                    m.weight.copy_(rand(m.weight.shape, 0.5, 1.5))
                    m.bias.copy_(rand(m.bias.shape, -0.2, 0.2))
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.copy_(rand(m.running_mean.shape, -0.2, 0.2))
                    m.running_var.copy_(rand(m.running_var.shape, 0.5, 2.0))
                    m.num_batches_tracked.fill_(3)
            elif isinstance(m, nn.Linear):
                bound = 1.0 / m.in_features ** 0.5
                m.weight.copy_(rand(m.weight.shape, -bound, bound) * 1.7)
                if m.bias is not None:
                    m.bias.copy_(rand(m.bias.shape, -0.1, 0.1))
        for name, p in model.named_parameters():
            if name in ("class_token", "encoder.pos_embedding"):
                p.copy_(rand(p.shape, -0.1, 0.1))
    return model


def no_dropout_(model: Any) -> Any:
    """Set every dropout / stochastic-depth probability to 0 (their random masks cannot match across libraries)."""
    for m in model.modules():
        if hasattr(m, "p") and type(m).__name__ in ("Dropout", "StochasticDepth"):
            m.p = 0.0
        if type(m).__name__ == "MultiheadAttention":
            m.dropout = 0.0
    return model
