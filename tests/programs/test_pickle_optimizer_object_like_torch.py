"""An optimizer object pickles, deep-copies and saves whole (``torch.save({'model': m, 'optimizer': opt})``, as
sgrvinod's super-resolution tutorial and many older scripts do), and the copy keeps stepping as torch's copy does.
ember failed: the optimizer's cache of compiled updates held closures pickle cannot name."""
from __future__ import annotations

import copy
import io
import pickle

import numpy as np
import pytest
import torch

import ember


def _trained(lib, opt_name):
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 1))
    opt = getattr(lib.optim, opt_name)(model.parameters(), lr=0.05)
    x = lib.linspace(-1, 1, 15).reshape(5, 3)
    for _ in range(3):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    return model, opt, x


def _continue(lib, model, opt, x):
    for _ in range(2):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    return [p.detach().numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("how", ["pickle", "deepcopy", "save"])
@pytest.mark.parametrize("opt_name", ["Adam", "SGD"])
def test_optimizer_object_round_trip_keeps_stepping_like_torch(how, opt_name):
    out = []
    for lib in (ember, torch):
        model, opt, x = _trained(lib, opt_name)
        if how == "pickle":
            model, opt = pickle.loads(pickle.dumps((model, opt)))
        elif how == "deepcopy":
            model, opt = copy.deepcopy((model, opt))
        else:
            buf = io.BytesIO()
            lib.save({"model": model, "optimizer": opt}, buf)
            buf.seek(0)
            ck = lib.load(buf, weights_only=False)
            model, opt = ck["model"], ck["optimizer"]
        assert opt.param_groups[0]["params"][0] is next(model.parameters())
        out.append(_continue(lib, model, opt, x))
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
