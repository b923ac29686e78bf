"""nn.LSTM through the fused layer op (ember/ops/lstm_layer.py) against PyTorch, and the op against the
per-step composite it replaces."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.ops import lstm_layer as fused

torch = pytest.importorskip("torch")


def _pair(bidirectional: bool, bias: bool, layers: int, batch_first: bool = False, dtype: str = "float64"):
    torch.manual_seed(0)
    t = torch.nn.LSTM(5, 3, num_layers=layers, bidirectional=bidirectional, bias=bias, batch_first=batch_first)
    t = t.double() if dtype == "float64" else t
    e = ember.nn.LSTM(5, 3, num_layers=layers, bidirectional=bidirectional, bias=bias, batch_first=batch_first,
                      dtype=getattr(ember, dtype))
    e.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    return t, e


def _grads(module, params_of):
    return [p.grad.numpy() if hasattr(p.grad, "numpy") else None for p in params_of(module)]


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("layers", [1, 2])
def test_lstm_matches_torch_float64(bidirectional, bias, layers):
    t, e = _pair(bidirectional, bias, layers)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 2, 5))
    d = (2 if bidirectional else 1) * layers
    h0, c0 = rng.standard_normal((d, 2, 3)), rng.standard_normal((d, 2, 3))
    tin = [torch.tensor(a, requires_grad=True) for a in (x, h0, c0)]
    ein = [ember.tensor(a, requires_grad=True) for a in (x, h0, c0)]
    to, (th, tc) = t(tin[0], (tin[1], tin[2]))
    eo, (eh, ec) = e(ein[0], (ein[1], ein[2]))
    for a, b in ((to, eo), (th, eh), (tc, ec)):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-12, atol=1e-12)
    (to.sin().sum() + th.pow(2).sum() + (tc * 0.5).sum()).backward()
    (eo.sin().sum() + eh.pow(2).sum() + (ec * 0.5).sum()).backward()
    for a, b in zip(tin, ein):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-10, atol=1e-12)
    for (name, a), (_, b) in zip(t.named_parameters(), e.named_parameters()):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


def test_the_fused_op_runs():
    _, e = _pair(False, True, 1)
    out, _ = e(ember.randn(3, 2, 5, dtype=ember.float64))
    assert out.grad_fn.name() == "LstmLayerBackward0"


def test_only_the_final_state_used_float32_batch_first():
    t, e = _pair(True, True, 1, batch_first=True, dtype="float32")
    x = np.random.default_rng(2).standard_normal((2, 6, 5)).astype(np.float32)
    tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    _, (th, _) = t(tx)  # out and c_n take no gradient: the op sees None for them
    _, (eh, _) = e(ex)
    th.sum().backward()
    eh.sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    for (name, a), (_, b) in zip(t.named_parameters(), e.named_parameters()):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)


def test_unbatched_input_matches_torch():
    t, e = _pair(False, True, 1)
    x = np.random.default_rng(3).standard_normal((4, 5))
    to, (th, _) = t(torch.tensor(x))
    eo, (eh, _) = e(ember.tensor(x))
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(eh.detach().numpy(), th.detach().numpy(), rtol=1e-12, atol=1e-12)


def test_second_order_through_the_composite_matches_torch():
    t, e = _pair(False, True, 1)
    x = np.random.default_rng(4).standard_normal((3, 2, 5))
    tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    (tg,) = torch.autograd.grad(t(tx)[0].pow(2).sum(), tx, create_graph=True)
    (eg,) = ember.autograd.grad(e(ex)[0].pow(2).sum(), ex, create_graph=True)
    np.testing.assert_allclose(eg.detach().numpy(), tg.detach().numpy(), rtol=1e-10, atol=1e-12)
    tg.pow(2).sum().backward()
    eg.pow(2).sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
    for (name, a), (_, b) in zip(t.named_parameters(), e.named_parameters()):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_forward_equals_the_composite_bit_for_bit(dtype):
    rng = np.random.default_rng(5)
    args = [ember.tensor(rng.standard_normal(s).astype(dtype)) for s in ((5, 3, 8), (3, 2), (3, 2), (8, 2), (8,))]
    got = fused.lstm_layer(*args)
    want = fused._composite(*args)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy(), strict=True)


def test_weight_changed_in_place_after_forward_raises():
    _, e = _pair(False, True, 1)
    out, _ = e(ember.randn(3, 2, 5, dtype=ember.float64))
    with ember.no_grad():
        e.weight_hh_l0.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_standin_device_matches_cpu():
    _, e = _pair(True, True, 1, dtype="float32")
    x = np.random.default_rng(6).standard_normal((3, 2, 5)).astype(np.float32)
    ex = ember.tensor(x, requires_grad=True)
    want, _ = e(ex)
    want.sum().backward()
    with ember.testing.standin_cuda():
        e_dev = e.to("cuda")
        xd = ember.tensor(x, device="cuda", requires_grad=True)
        got, _ = e_dev(xd)
        got.sum().backward()
        np.testing.assert_allclose(got.cpu().detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(xd.grad.cpu().numpy(), ex.grad.numpy(), rtol=1e-5, atol=1e-6)
