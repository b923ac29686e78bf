"""A Module subclass whose ``__getattr__`` falls back to a child (zuko's ``BayesianModel``: ``getattr(self.base,
name)``) saves, loads and deep-copies in torch; in ember ``torch.load``/``copy.deepcopy`` recursed forever: pickle
looks ``__setstate__`` up on the empty instance, which torch's Module defines on the class and ember's did not."""
from __future__ import annotations

import copy
import io

import numpy as np
import pytest
import torch

import ember


def _wrapper_class(lib):
    class Wrapper(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.base = lib.nn.Linear(3, 2)

        def forward(self, x):
            return self.base(x)

        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(self.base, name)

    return Wrapper


# module-level names, so that pickle finds the classes
TorchWrapper = _wrapper_class(torch)
TorchWrapper.__qualname__ = TorchWrapper.__name__ = "TorchWrapper"
EmberWrapper = _wrapper_class(ember)
EmberWrapper.__qualname__ = EmberWrapper.__name__ = "EmberWrapper"


@pytest.mark.parametrize("how", ["save_load", "deepcopy"])
def test_getattr_fallback_module_round_trips_like_torch(how):
    outs = []
    for lib in (torch, ember):
        lib.manual_seed(0)
        model = (TorchWrapper if lib is torch else EmberWrapper)()
        if how == "deepcopy":
            twin = copy.deepcopy(model)
        else:
            buffer = io.BytesIO()
            lib.save(model, buffer)
            buffer.seek(0)
            twin = lib.load(buffer, weights_only=False)
        assert twin.in_features == 3  # the fallback still works on the copy
        assert twin.base.weight is not model.base.weight
        outs.append(twin(lib.ones(1, 3)).detach().numpy())
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-6)
