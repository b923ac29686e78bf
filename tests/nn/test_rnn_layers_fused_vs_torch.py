"""nn.LSTM, nn.GRU and nn.RNN through the fused layer ops (ember/ops/lstm_layer.py, gru_rnn_layer.py) against
PyTorch, and the ops against the per-step composites they replace."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.ops import gru_rnn_layer, lstm_layer as fused

torch = pytest.importorskip("torch")


MODES = ["LSTM", "GRU", "RNN_TANH", "RNN_RELU"]


def _pair(bidirectional: bool, bias: bool, layers: int, batch_first: bool = False, dtype: str = "float64",
          mode: str = "LSTM"):
    torch.manual_seed(0)
    kw = dict(num_layers=layers, bidirectional=bidirectional, bias=bias, batch_first=batch_first)
    if mode in ("LSTM", "GRU"):
        t, e = getattr(torch.nn, mode)(5, 3, **kw), getattr(ember.nn, mode)(5, 3, **kw, dtype=getattr(ember, dtype))
    else:
        nl = "tanh" if mode == "RNN_TANH" else "relu"
        t = torch.nn.RNN(5, 3, nonlinearity=nl, **kw)
        e = ember.nn.RNN(5, 3, nonlinearity=nl, **kw, dtype=getattr(ember, dtype))
    t = t.double() if dtype == "float64" else t
    e.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    return t, e


def _run(module, x, state):
    out, final = module(x, state)
    return (out,) + (tuple(final) if isinstance(final, tuple) else (final,))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("layers", [1, 2])
def test_matches_torch_float64(mode, bidirectional, bias, layers):
    t, e = _pair(bidirectional, bias, layers, mode=mode)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 2, 5))
    d = (2 if bidirectional else 1) * layers
    states = [rng.standard_normal((d, 2, 3)) for _ in range(2 if mode == "LSTM" else 1)]
    tin = [torch.tensor(a, requires_grad=True) for a in [x] + states]
    ein = [ember.tensor(a, requires_grad=True) for a in [x] + states]
    touts = _run(t, tin[0], tuple(tin[1:]) if mode == "LSTM" else tin[1])
    eouts = _run(e, ein[0], tuple(ein[1:]) if mode == "LSTM" else ein[1])
    for a, b in zip(touts, eouts):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-12, atol=1e-12)
    sum((o.sin() if k == 0 else o.pow(2) * (k + 1)).sum() for k, o in enumerate(touts)).backward()
    sum((o.sin() if k == 0 else o.pow(2) * (k + 1)).sum() for k, o in enumerate(eouts)).backward()
    for a, b in zip(tin, ein):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-10, atol=1e-12)
    for (name, a), (_, b) in zip(t.named_parameters(), e.named_parameters()):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("mode, node", [("LSTM", "LstmLayerBackward0"), ("GRU", "GruLayerBackward0"),
                                        ("RNN_TANH", "RnnLayerBackward0")])
def test_the_fused_op_runs(mode, node):
    _, e = _pair(False, True, 1, mode=mode)
    out, _ = e(ember.randn(3, 2, 5, dtype=ember.float64))
    assert out.grad_fn.name() == node


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


@pytest.mark.parametrize("mode", MODES)
def test_second_order_through_the_composite_matches_torch(mode):
    t, e = _pair(False, True, 1, mode=mode)
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

    def args(*shapes):
        return [ember.tensor(rng.standard_normal(s).astype(dtype)) for s in shapes]

    lstm = args((5, 3, 8), (3, 2), (3, 2), (8, 2), (8,))
    gru = args((5, 3, 6), (3, 2), (6, 2), (6,))
    rnn = args((5, 3, 2), (3, 2), (2, 2), (2,))
    pairs = [(fused.lstm_layer(*lstm), fused._composite(*lstm)),
             (gru_rnn_layer.gru_layer(*gru), gru_rnn_layer._gru_composite(*gru))]
    for nl in ("tanh", "relu"):
        pairs.append((gru_rnn_layer.rnn_layer(*rnn, nl), gru_rnn_layer._rnn_composite(*rnn, nl)))
    for got, want in pairs:
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy(), strict=True)


def test_weight_changed_in_place_after_forward_raises():
    _, e = _pair(False, True, 1)
    out, _ = e(ember.randn(3, 2, 5, dtype=ember.float64))
    with ember.no_grad():
        e.weight_hh_l0.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


@pytest.mark.parametrize("mode", MODES)
def test_standin_device_matches_cpu(mode):
    _, e = _pair(True, True, 1, dtype="float32", mode=mode)
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


@pytest.mark.parametrize("mode", MODES)
def test_special_inputs_match_torch(mode):
    """+-inf, NaN, +-1e30 and 0 in the input: saturated gates (sigmoid's exp overflow), inf - inf in the
    state, NaN propagation, forward and backward, as torch computes them."""
    t, e = _pair(False, True, 1, mode=mode)
    x = np.zeros((4, 3, 5))
    x[0, 0, 0], x[1, 1, 1], x[2, 2, 2], x[3, 0, 3] = np.inf, -np.inf, np.nan, 1e30
    x[1, 2, :] = -1e30
    tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    touts, eouts = _run(t, tx, None), _run(e, ex, None)
    for a, b in zip(touts, eouts):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-12, atol=1e-12, equal_nan=True)
    touts[0].sum().backward()
    eouts[0].sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12, equal_nan=True)
    for (name, a), (_, b) in zip(t.named_parameters(), e.named_parameters()):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-10, atol=1e-12, equal_nan=True, err_msg=name)
