"""A sweep over files real ``torch.save`` writes (torch 2.13, into ``tmp_path``), read by ``ember.load``: zip and
legacy formats, ``mmap``, every ``map_location`` spelling torch accepts for the CPU, tensors sharing storage through
views with offsets and strides, nested state dicts of optimizers, lr schedulers and GradScaler, whole models with
``weights_only=False`` (they must come back as ember modules that run), and TorchScript archives given to ``load``.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _same(ours, theirs, path="root"):
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, ember.Tensor), (path, type(ours))
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1], path
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=path)
    elif isinstance(theirs, dict):
        assert isinstance(ours, dict) and list(ours) == list(theirs), (path, list(ours)[:4], list(theirs)[:4])
        for key in theirs:
            _same(ours[key], theirs[key], f"{path}.{key}")
    elif isinstance(theirs, (list, tuple)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs), (path, type(ours), type(theirs))
        for k, (a, b) in enumerate(zip(ours, theirs)):
            _same(a, b, f"{path}[{k}]")
    else:
        assert ours == theirs or (ours != ours and theirs != theirs), (path, ours, theirs)


def _training_state():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=10)
    for _ in range(2):
        opt.zero_grad()
        model(torch.randn(8, 4)).sum().backward()
        opt.step()
        sched.step()
    sgd = torch.optim.SGD([torch.nn.Parameter(torch.randn(3))], lr=0.1, momentum=0.9, nesterov=True)
    sgd.param_groups[0]["params"][0].grad = torch.ones(3)
    sgd.step()
    chained = torch.optim.lr_scheduler.SequentialLR(
        opt, [torch.optim.lr_scheduler.LinearLR(opt), torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)], [2])
    base = torch.arange(20.0)
    return {"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
            "chained": chained.state_dict(), "plateau": torch.optim.lr_scheduler.ReduceLROnPlateau(opt).state_dict(),
            "sgd": sgd.state_dict(), "scaler": torch.amp.GradScaler("cpu").state_dict(),
            "lbfgs": torch.optim.LBFGS([torch.nn.Parameter(torch.randn(2))]).state_dict(),
            "views": {"a": base[3:9], "b": base[5:].view(5, 3), "c": base.view(4, 5).t(), "d": base[::2]},
            "keys": {0: torch.ones(2), (1, 2): torch.zeros(1), "x": [torch.ones(1), (torch.ones(1), None)]},
            "epoch": 3, "rng": torch.get_rng_state()}


@pytest.mark.parametrize("legacy", [False, True])
@pytest.mark.parametrize("map_location", [None, "cpu", "device", {"cpu": "cpu"}, "callable"])
def test_training_checkpoints_with_every_cpu_map_location(tmp_path, legacy, map_location):
    state = _training_state()
    path = tmp_path / "ckpt.pt"
    torch.save(state, path, _use_new_zipfile_serialization=not legacy)
    location = map_location
    if map_location == "device":
        location = ember.device("cpu")
    elif map_location == "callable":
        location = lambda storage, loc: storage  # noqa: E731 - torch's idiom
    for mmap in ([False] if legacy else [False, True]):
        ours = ember.load(path, map_location=location, mmap=mmap)
        _same(ours, torch.load(path))
        views = ours["views"]
        views["a"][2] = -7.0  # base[5]: views saved together share one storage, so the write shows in the others
        assert views["b"][0, 0].item() == -7.0 and views["c"][0, 1].item() == -7.0
        opt = ember.optim.AdamW(ember.nn.Sequential(ember.nn.Linear(4, 4), ember.nn.BatchNorm1d(4)).parameters())
        opt.load_state_dict(ours["optimizer"])
        assert opt.state_dict()["state"][0]["step"].item() == 2


@pytest.mark.parametrize("legacy", [False, True])
def test_whole_models_load_as_ember_modules(tmp_path, legacy):
    """torch.save(model) + ember.load(weights_only=False): an ember module that computes what torch's does, even
    where torch is installed (before: torch's own classes came back holding ember tensors, and calling them
    failed); the legacy format's ('module', class, file, source) records are read."""
    torch.manual_seed(1)
    cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                              torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 5)).eval()
    lstm = torch.nn.LSTM(4, 3, num_layers=2, batch_first=True)
    for model, x in ((cnn, torch.randn(2, 3, 8, 8)), (lstm, torch.randn(2, 5, 4))):
        path = tmp_path / "whole.pt"
        torch.save(model, path, _use_new_zipfile_serialization=not legacy)
        ours = ember.load(path, weights_only=False)
        assert isinstance(ours, ember.nn.Module) and type(ours).__name__ == type(model).__name__
        a, b = model(x), ours(ember.tensor(x.numpy()))
        a, b = (a[0], b[0]) if isinstance(a, tuple) else (a, b)
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5, atol=1e-6)
        with pytest.raises(ember.serialization.UnsafeGlobalError, match="torch.nn.modules"):
            ember.load(path)


def test_torchscript_archive_given_to_load(tmp_path):
    """As torch.load: refused with weights_only=True (naming ember.jit.load), sent to jit.load with a warning
    otherwise."""
    path = tmp_path / "scripted.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(3, 2)), str(path))
    with pytest.raises(RuntimeError, match="ember.jit.load"):
        ember.load(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = ember.load(path, weights_only=False)
    assert any("TorchScript archive" in str(w.message) for w in caught)
    x = torch.randn(4, 3)
    np.testing.assert_allclose(module(ember.tensor(x.numpy())).detach().numpy(),
                               torch.jit.load(str(path))(x).detach().numpy(), rtol=1e-6, atol=1e-6)
