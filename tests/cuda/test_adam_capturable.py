"""Adam/AdamW ``capturable=True`` (ember/optim/adam.py): the step count on the parameter's device and torch's
capturable formulas, so a compiled training step with Adam replays as a CUDA graph. References: torch's own
capturable single-tensor Adam run on the CPU (its device check lifted for the test), the same ember step run
eagerly (the replayed graph equals it bit for bit on the stand-in), torch's CPU refusal."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

import ember
from ember.backends import capture_state, standin
from ember.testing import standin_cuda


@pytest.fixture()
def cuda():
    with standin_cuda():
        yield
    assert not capture_state.ACTIVE and not standin.BACKEND.is_capturing()


def _pair(kind: str, **kwargs):
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((5, 3)).astype(np.float32)
    pe = ember.tensor(w0, device="cuda", requires_grad=True)
    pt = torch.tensor(w0, requires_grad=True)
    oe = getattr(ember.optim, kind)([pe], capturable=True, **kwargs)
    ot = getattr(torch.optim, kind)([pt], capturable=True, foreach=False, **kwargs)
    return rng, pe, pt, oe, ot


@pytest.mark.parametrize("kind, kwargs", [
    ("Adam", {"lr": 0.01}),
    ("Adam", {"lr": 0.02, "weight_decay": 0.1, "amsgrad": True}),
    ("AdamW", {"lr": 0.01, "weight_decay": 0.05, "betas": (0.8, 0.95)}),
])
def test_capturable_adam_is_torch_capturable_adam(cuda, monkeypatch, kind, kwargs):
    # torch refuses capturable on the CPU; lift its device check to get its numbers as the reference
    monkeypatch.setattr(importlib.import_module("torch.optim.adam"), "_get_capturable_supported_devices", lambda *a, **k: ["cpu"])
    rng, pe, pt, oe, ot = _pair(kind, **kwargs)
    for _ in range(6):
        g = rng.standard_normal((5, 3)).astype(np.float32)
        pe.grad = ember.tensor(g, device="cuda")
        pt.grad = torch.tensor(g)
        oe.step()
        ot.step()
    step = oe.state[pe]["step"]
    assert step.device.type == "cuda" and step.dtype == ember.float32 and step.shape == ()
    assert float(step.cpu()) == 6.0
    np.testing.assert_allclose(pe.detach().cpu().numpy(), pt.detach().numpy(), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(oe.state[pe]["exp_avg_sq"].cpu().numpy(), ot.state[pt]["exp_avg_sq"].numpy(),
                               rtol=1e-6, atol=0)


def test_capturable_on_the_cpu_raises_as_torch():
    w = ember.ones(3, requires_grad=True)
    opt = ember.optim.Adam([w], capturable=True)
    w.grad = ember.ones(3)
    with pytest.raises(AssertionError, match="capturable=True, params and state_steps must be on supported"):
        opt.step()
    wt = torch.ones(3, requires_grad=True)
    optt = torch.optim.Adam([wt], capturable=True, foreach=False)
    wt.grad = torch.ones(3)
    with pytest.raises(AssertionError, match="capturable=True, params and state_steps must be on supported"):
        optt.step()


def test_a_checkpoint_loaded_on_the_cpu_puts_capturable_steps_back_on_the_device(cuda):
    """torch's loading: a capturable group's step goes to its parameter's device (a checkpoint read with
    map_location='cpu' has it on the CPU); a non-capturable group's stays where it is."""
    w = ember.ones(3, device="cuda", requires_grad=True)
    first = ember.optim.AdamW([w], capturable=True)
    w.grad = ember.ones(3, device="cuda")
    first.step()
    saved = first.state_dict()
    saved["state"][0]["step"] = saved["state"][0]["step"].cpu()  # as map_location="cpu" leaves it
    opt = ember.optim.AdamW([w], capturable=True)
    opt.load_state_dict(saved)
    assert opt.state[w]["step"].device.type == "cuda" and float(opt.state[w]["step"].cpu()) == 1.0
    opt.step()
    assert float(opt.state[w]["step"].cpu()) == 2.0
    saved["param_groups"][0]["capturable"] = False
    plain = ember.optim.AdamW([w])
    plain.load_state_dict(saved)
    assert plain.state[w]["step"].device.type == "cpu"


def _training(**kwargs):
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(4, 16), ember.nn.ReLU(), ember.nn.Linear(16, 3)).cuda()
    optimizer = ember.optim.AdamW(model.parameters(), **kwargs)

    def step(x, y):
        optimizer.zero_grad()
        loss = ember.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    return model, step


def test_compiled_step_with_capturable_adamw_replays_a_graph_equal_to_eager(cuda):
    m1, s1 = _training(lr=0.01, capturable=True)
    m2, s2 = _training(lr=0.01, capturable=True)
    compiled = ember.compile(s1, mode="reduce-overhead")
    rng = np.random.default_rng(1)
    for _ in range(6):
        x = ember.tensor(rng.standard_normal((8, 4)).astype(np.float32), device="cuda")
        y = ember.tensor(rng.integers(0, 3, 8), device="cuda")
        assert compiled(x, y).item() == s2(x, y).item()
    executable = compiled.last.executable
    assert executable.captures == 1 and executable.replays >= 3, executable.status
    for p, q in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_array_equal(p.detach().cpu().numpy(), q.detach().cpu().numpy())
