"""A compiled step that calls backward() itself leaves each ``p.grad`` as eager code (and torch) would.

The graph was traced from one call, so it assumed what ``p.grad`` was then; ``opt.zero_grad()`` outside the
compiled step (``p.grad = None``) used to leave every gradient None after compiled runs (training silently
stopped), and an argument's ``.grad`` was never written. Compared with torch 2.13 running the same loop eagerly.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember

SCHEDULES = {
    "zero_outside": lambda step: True,            # opt.zero_grad() before every call
    "never_zeroed": lambda step: False,           # gradients accumulate across calls
    "every_second": lambda step: step % 2 == 0,   # gradient accumulation over two calls
}


def _loop(lib, schedule, zero_inside: bool, steps: int = 6) -> tuple[list, np.ndarray]:
    lib.manual_seed(0)
    model = lib.nn.Linear(3, 2)
    opt = lib.optim.SGD(model.parameters(), lr=0.05)
    x = lib.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))

    def step(xb):
        if zero_inside:
            opt.zero_grad()
        loss = model(xb).pow(2).sum()
        loss.backward()
        return loss

    fn = ember.compile(step, measure=False) if lib is ember else step
    losses = []
    for k in range(steps):
        if not zero_inside and schedule(k):
            opt.zero_grad()
        losses.append(float(fn(x)))
        grad = model.weight.grad
        losses.append(None if grad is None else float(grad.sum()))
        opt.step()
    return losses, model.weight.detach().numpy()


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_zero_grad_outside_the_compiled_step_like_torch(name):
    got, w_got = _loop(ember, SCHEDULES[name], zero_inside=False)
    want, w_want = _loop(torch, SCHEDULES[name], zero_inside=False)
    assert None not in got
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w_got, w_want, rtol=1e-5, atol=1e-6)


def test_zero_grad_inside_the_compiled_step_still_compiles():
    got, _ = _loop(ember, SCHEDULES["zero_outside"], zero_inside=True)
    want, _ = _loop(torch, SCHEDULES["zero_outside"], zero_inside=True)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_set_to_none_outside_runs_the_graph():
    w = ember.ones(3, requires_grad=True)

    def step(x):
        loss = (w * x).sum()
        loss.backward()
        return loss

    fn = ember.compile(step, measure=False)
    for _ in range(4):
        w.grad = None
        fn(ember.full((3,), 2.0))
        assert w.grad.tolist() == [2.0, 2.0, 2.0]
    assert fn.eager_reason is None and fn.last is not None  # the graph ran, not an eager fallback


def test_backward_into_an_argument_accumulates_like_torch():
    for lib in (ember, torch):
        w = lib.ones(3, requires_grad=True)

        def step(x, w):
            loss = (w * x).sum()
            loss.backward()
            return loss

        fn = ember.compile(step, measure=False) if lib is ember else step
        for _ in range(3):
            fn(lib.full((3,), 2.0), w)
        assert w.grad.tolist() == [6.0, 6.0, 6.0], lib.__name__
