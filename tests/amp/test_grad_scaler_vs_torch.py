"""ember.amp.GradScaler step by step against torch.amp.GradScaler('cpu') (torch 2.13): skipped steps on
inf/NaN gradients, scale backoff and growth, unscale_ + clipping, param groups, state_dict, errors."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
W1, B1 = RNG.standard_normal((6, 4)).astype(np.float32), RNG.standard_normal(6).astype(np.float32)
W2, B2 = RNG.standard_normal((3, 6)).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
X, Y = RNG.standard_normal((8, 4)).astype(np.float32), RNG.standard_normal((8, 3)).astype(np.float32)


def _setup(lib, **scaler_kwargs):
    params = [lib.tensor(a.copy()).requires_grad_() for a in (W1, B1, W2, B2)]
    # Two param groups with their own options: the scaler must unscale both.
    opt = lib.optim.SGD([{"params": params[:2]}, {"params": params[2:], "lr": 0.05}], lr=0.1, momentum=0.9)
    scaler = lib.amp.GradScaler("cpu", **scaler_kwargs)
    return params, opt, scaler


def _loss(lib, params):
    w1, b1, w2, b2 = params
    h = lib.tanh(lib.tensor(X) @ w1.T + b1)
    return ((h @ w2.T + b2 - lib.tensor(Y)) ** 2).mean()


BAD = {2: float("inf"), 3: float("nan"), 9: float("-inf")}  # step -> value injected into one gradient


def _run(lib, steps, use_unscale, **scaler_kwargs):
    params, opt, scaler = _setup(lib, **scaler_kwargs)
    history = []
    for step in range(steps):
        opt.zero_grad()
        scaler.scale(_loss(lib, params)).backward()
        if step in BAD:
            with lib.no_grad():
                params[step % 4].grad.view(-1)[0] = BAD[step]
        if use_unscale:
            scaler.unscale_(opt)
            grads = [p.grad.detach().clone() for p in params]
        else:
            grads = None
        scaler.step(opt)
        scaler.update()
        history.append((scaler.get_scale(), scaler._get_growth_tracker(),
                        [p.detach().numpy().copy() for p in params],
                        None if grads is None else [g.numpy() for g in grads]))
    return history, scaler


@pytest.mark.parametrize("use_unscale", [False, True])
def test_schedule_and_params_match_torch_step_by_step(use_unscale):
    kwargs = dict(init_scale=2.0 ** 10, growth_factor=2.0, backoff_factor=0.5, growth_interval=3)
    t_hist, t_scaler = _run(torch, 14, use_unscale, **kwargs)
    e_hist, e_scaler = _run(ember, 14, use_unscale, **kwargs)
    scales = []
    for step, ((ts, tt, tp, tg), (es, et, ep, eg)) in enumerate(zip(t_hist, e_hist)):
        assert es == ts, f"step {step}: scale {es} vs torch {ts}"
        assert et == tt, f"step {step}: growth tracker {et} vs torch {tt}"
        for a, b in zip(ep, tp):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"step {step}")
        if tg is not None:
            for a, b in zip(eg, tg):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=f"step {step}")
        scales.append(es)
    # The run covers growth, backoff after inf and after nan, and the tracker reset.
    assert scales[:4] == [1024.0, 1024.0, 512.0, 256.0]
    assert any(later > earlier for earlier, later in zip(scales, scales[1:]))  # grew after 3 good steps
    assert e_scaler.state_dict() == t_scaler.state_dict()


def test_skipped_step_leaves_params_untouched():
    params, opt, scaler = _setup(ember, init_scale=4.0)
    before = [p.detach().numpy().copy() for p in params]
    scaler.scale(_loss(ember, params)).backward()
    with ember.no_grad():
        params[0].grad.view(-1)[1] = float("nan")
    assert scaler.step(opt) is None
    scaler.update()
    for p, b in zip(params, before):
        np.testing.assert_array_equal(p.detach().numpy(), b)
    assert scaler.get_scale() == 2.0


def test_scale_is_float32_and_never_grows_to_inf():
    for lib in (ember, torch):
        params, opt, scaler = _setup(lib, init_scale=3e38, growth_interval=1, growth_factor=10.0)
        scaler.scale(lib.ones(()))  # builds the scale tensor
        for p in params:
            p.grad = lib.zeros(p.shape)
        scaler.step(opt)
        scaler.update()
        assert scaler.get_scale() == float(np.float32(3e38))
    e = ember.amp.GradScaler("cpu", init_scale=0.1, growth_interval=1, growth_factor=1.1)
    t = torch.amp.GradScaler("cpu", init_scale=0.1, growth_interval=1, growth_factor=1.1)
    for lib, scaler in ((ember, e), (torch, t)):
        params = [lib.tensor(W1.copy()).requires_grad_()]
        opt = lib.optim.SGD(params, lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            scaler.scale((params[0] ** 2).sum()).backward()
            scaler.step(opt)
            scaler.update()
    assert e.get_scale() == t.get_scale()


def test_scale_accepts_nested_outputs_and_keeps_dtypes():
    e = ember.amp.GradScaler("cpu", init_scale=8.0)
    t = torch.amp.GradScaler("cpu", init_scale=8.0)
    for lib, scaler in ((ember, e), (torch, t)):
        a, b = lib.ones(2), lib.ones(3).to(lib.bfloat16)
        out = scaler.scale([a, (b, a)])
        assert isinstance(out, list) and isinstance(out[1], tuple)
        assert str(out[1][0].dtype).endswith("bfloat16") and float(out[1][0][0]) == 8.0
        assert str(scaler.scale(lib.tensor(2.0)).dtype).endswith("float32")


def test_state_dict_round_trip_and_pickle():
    _, e_scaler = _run(ember, 5, False, init_scale=2.0 ** 8, growth_interval=2)
    state = e_scaler.state_dict()
    assert set(state) == {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}
    fresh = ember.amp.GradScaler("cpu")
    fresh.load_state_dict(state)
    assert fresh.state_dict() == state
    params, opt, _ = _setup(ember)
    fresh.scale(_loss(ember, params))  # lazily built scale tensor takes the loaded value
    assert fresh.get_scale() == state["scale"]
    clone = pickle.loads(pickle.dumps(e_scaler))
    assert clone.state_dict() == state
    torch_scaler = torch.amp.GradScaler("cpu")
    torch_scaler.load_state_dict(state)
    assert torch_scaler.state_dict() == state
    with pytest.raises(RuntimeError, match="empty"):
        fresh.load_state_dict({})


def test_disabled_scaler_is_a_pass_through():
    params, opt, _ = _setup(ember)
    scaler = ember.amp.GradScaler("cpu", enabled=False)
    loss = _loss(ember, params)
    assert scaler.scale(loss) is loss
    loss.backward()
    before = params[0].detach().numpy().copy()
    scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    assert not np.allclose(params[0].detach().numpy(), before)
    assert scaler.get_scale() == 1.0 and scaler.state_dict() == {} and not scaler.is_enabled()


def test_amp_training_loop_with_autocast_matches_torch():
    results = {}
    for lib in (ember, torch):
        params, opt, scaler = _setup(lib, init_scale=2.0 ** 12)
        for _ in range(4):
            opt.zero_grad()
            with lib.autocast("cpu", dtype=lib.bfloat16):
                loss = _loss(lib, params)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        results[lib.__name__] = [p.detach().numpy() for p in params]
        assert all(str(p.grad.dtype).endswith("float32") for p in params)
    for a, b in zip(results["ember"], results["torch"]):
        np.testing.assert_allclose(a, b, rtol=3e-2, atol=3e-2)


def test_errors_are_clear():
    params, opt, scaler = _setup(ember)
    with pytest.raises(AssertionError, match="did not use scaler.scale"):
        scaler.step(opt)
    with pytest.raises(AssertionError, match="did not use scaler.scale"):
        scaler.unscale_(opt)
    scaler.scale(_loss(ember, params)).backward()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called on this optimizer"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    scaler.update()
    with pytest.raises(RuntimeError, match="Closure"):
        scaler.step(opt, closure=lambda: 0.0)
    with pytest.raises(AssertionError, match="growth factor"):
        ember.amp.GradScaler("cpu", growth_factor=1.0)
    with pytest.raises(AssertionError, match="backoff factor"):
        ember.amp.GradScaler("cpu", backoff_factor=1.0)
    with pytest.raises(RuntimeError, match="unsupported autocast device_type"):
        ember.amp.GradScaler("tpu")
    half = [ember.ones(2, dtype=ember.float16, requires_grad=True)]
    opt16 = ember.optim.SGD(half, lr=0.1)
    scaler16 = ember.amp.GradScaler("cpu", init_scale=4.0)
    scaler16.scale(half[0].sum()).backward()
    with pytest.raises(ValueError, match="FP16 gradients"):
        scaler16.unscale_(opt16)
