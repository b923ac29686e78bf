"""nn.LSTMCell, nn.GRUCell and nn.RNNCell run one step of the fused layer ops (ember/ops/lstm_layer.py,
gru_rnn_layer.py): checked against PyTorch over hand-written time loops (values, input/state/parameter
gradients, second derivatives, special inputs) and against the per-step composite they replace, bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.nn.modules import rnn as ember_rnn

torch = pytest.importorskip("torch")

KINDS = [("LSTMCell", {}), ("GRUCell", {}), ("RNNCell", {"nonlinearity": "tanh"}), ("RNNCell", {"nonlinearity": "relu"})]
NODES = {"LSTMCell": "LstmLayerBackward0", "GRUCell": "GruLayerBackward0", "RNNCell": "RnnLayerBackward0"}


def _pair(kind: str, kw: dict, bias: bool, dtype: str = "float64"):
    torch.manual_seed(0)
    t = getattr(torch.nn, kind)(5, 3, bias=bias, **kw)
    e = getattr(ember.nn, kind)(5, 3, bias=bias, **kw, dtype=getattr(ember, dtype))
    t = t.double() if dtype == "float64" else t
    e.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    return t, e


def _loop(lib, cell, kind: str, xs: list, state: tuple) -> list:
    """Outputs of every step (h, and c for LSTM cells) of a hand-written loop."""
    outs = []
    h, c = state
    for x in xs:
        if kind == "LSTMCell":
            h, c = cell(x, None if h is None else (h, c))
            outs += [h, c]
        else:
            h = cell(x, h)
            outs.append(h)
    return outs


def _loss(outs: list):
    return sum((o.sin() if k % 2 == 0 else o.pow(2) * (k + 1)).sum() for k, o in enumerate(outs))


@pytest.mark.parametrize("kind, kw", KINDS)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batched, zero_state", [(True, False), (True, True), (False, False)])
def test_cell_loop_matches_torch_float64(kind, kw, bias, batched, zero_state):
    t, e = _pair(kind, kw, bias)
    rng = np.random.default_rng(1)
    lead = (2,) if batched else ()
    xs = [rng.standard_normal(lead + (5,)) for _ in range(4)]
    h0 = None if zero_state else rng.standard_normal(lead + (3,))
    c0 = None if zero_state or kind != "LSTMCell" else rng.standard_normal(lead + (3,))
    arrays = xs + [a for a in (h0, c0) if a is not None]
    tin = [torch.tensor(a, requires_grad=True) for a in arrays]
    ein = [ember.tensor(a, requires_grad=True) for a in arrays]

    def state(inputs):
        extra = inputs[len(xs):]
        return (extra[0] if extra else None, extra[1] if len(extra) > 1 else None)

    touts = _loop(torch, t, kind, tin[:len(xs)], state(tin))
    eouts = _loop(ember, e, kind, ein[:len(xs)], state(ein))
    node = eouts[-1].grad_fn
    if not batched:  # the unbatched result is a squeezed view of the fused op's
        node = node.next_functions[0][0]
    assert node.name() == NODES[kind]  # the fused op ran
    for a, b in zip(touts, eouts):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-12, atol=1e-12)
    _loss(touts).backward()
    _loss(eouts).backward()
    for a, b in zip(tin, ein):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-10, atol=1e-12)
    for (name, a), (_, b) in zip(t.named_parameters(), e.named_parameters()):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("kind, kw", KINDS)
def test_fused_step_equals_the_composite_bitwise(kind, kw):
    """float32: the fused step gives the per-step composite's bits (values and parameter gradients)."""
    _, e = _pair(kind, kw, True, dtype="float32")
    rng = np.random.default_rng(2)
    x = ember.tensor(rng.standard_normal((3, 5)).astype(np.float32))
    h = ember.tensor(rng.standard_normal((3, 3)).astype(np.float32))
    c = ember.tensor(rng.standard_normal((3, 3)).astype(np.float32)) if kind == "LSTMCell" else None
    fused = e._step(x, h, c)
    ember.autograd.backward([o.sum() for o in fused if o is not None])
    want_grads = [p.grad.numpy().copy() for p in e.parameters()]
    e.zero_grad()
    mode = e.mode
    gates_x = ember_rnn._linear(x, e.weight_ih, e.bias_ih)
    composite = ember_rnn._cell_step(mode, gates_x, h, c, e.weight_hh, e.bias_hh)
    ember.autograd.backward([o.sum() for o in composite if o is not None])
    for a, b in zip(fused, composite):
        if a is not None:
            np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    for want, p in zip(want_grads, e.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("kind, kw", KINDS)
def test_second_derivatives_match_torch(kind, kw):
    t, e = _pair(kind, kw, True)
    x = np.random.default_rng(3).standard_normal((2, 5))
    tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    tout = _loop(torch, t, kind, [tx, tx * 0.5], (None, None))
    eout = _loop(ember, e, kind, [ex, ex * 0.5], (None, None))
    (tg,) = torch.autograd.grad(_loss(tout), tx, create_graph=True)
    (eg,) = ember.autograd.grad(_loss(eout), ex, create_graph=True)
    np.testing.assert_allclose(eg.detach().numpy(), tg.detach().numpy(), rtol=1e-10, atol=1e-12)
    tg.pow(2).sum().backward()
    eg.pow(2).sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
    for (name, a), (_, b) in zip(t.named_parameters(), e.named_parameters()):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("kind, kw", KINDS)
def test_special_inputs_match_torch(kind, kw):
    """+-inf, NaN, +-1e30 and 0: saturated gates, NaN propagation, forward and backward as torch."""
    t, e = _pair(kind, kw, True)
    x = np.zeros((3, 3, 5))
    x[0, 0, 0], x[1, 1, 1], x[2, 2, 2], x[0, 2, 3] = np.inf, -np.inf, np.nan, 1e30
    x[1, 0, :] = -1e30
    tx, ex = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    touts = _loop(torch, t, kind, list(tx), (None, None))
    eouts = _loop(ember, e, kind, list(ex), (None, None))
    for a, b in zip(touts, eouts):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-12, atol=1e-12, equal_nan=True)
    sum(o.sum() for o in touts).backward()
    sum(o.sum() for o in eouts).backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12, equal_nan=True)


def test_mixed_dtypes_keep_the_composite():
    """A float64 state with a float32 cell is refused by the composite as before (no fused op takes it)."""
    _, e = _pair("GRUCell", {}, True, dtype="float32")
    with pytest.raises(RuntimeError):
        e(ember.randn(2, 5), ember.randn(2, 3, dtype=ember.float64))


@pytest.mark.parametrize("kind, kw", KINDS)
def test_standin_device_matches_cpu(kind, kw):
    _, e = _pair(kind, kw, True, dtype="float32")
    x = np.random.default_rng(6).standard_normal((2, 2, 5)).astype(np.float32)
    ex = ember.tensor(x, requires_grad=True)
    want = _loop(ember, e, kind, list(ex), (None, None))
    _loss(want).backward()
    with ember.testing.standin_cuda():
        e_dev = e.to("cuda")
        xd = ember.tensor(x, device="cuda", requires_grad=True)
        got = _loop(ember, e_dev, kind, list(xd), (None, None))
        _loss(got).backward()
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.cpu().detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(xd.grad.cpu().numpy(), ex.grad.numpy(), rtol=1e-5, atol=1e-6)
