"""LSTM proj_size and MultiheadAttention add_bias_kv / add_zero_attn, checked against torch 2.13 in float64
with the same weights copied in (forward outputs, states and every gradient)."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as enn

torch = pytest.importorskip("torch")


def _copy(src, dst) -> None:
    """torch module -> ember module, by state_dict name (keys must match exactly)."""
    state = {k: v.detach().numpy() for k, v in src.state_dict().items()}
    assert sorted(state) == sorted(dst.state_dict())
    dst.load_state_dict(state)


def _e(a: np.ndarray, grad: bool = True):
    return ember.tensor(a, requires_grad=grad)


def _t(a: np.ndarray, grad: bool = True):
    return torch.tensor(a, requires_grad=grad)


def _close(a, b, tol=1e-10):
    """ember tensor ``a`` against torch tensor ``b``."""
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


# ---- LSTM proj_size ----------------------------------------------------------------------------------
@pytest.mark.parametrize("layers,bidirectional,batch_first", [(1, False, False), (2, True, True), (2, False, True)])
def test_lstm_proj_size_matches_torch(layers, bidirectional, batch_first):
    rng = np.random.default_rng(0)
    tm = torch.nn.LSTM(5, 7, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first,
                       proj_size=3).double()
    em = enn.LSTM(5, 7, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first,
                  proj_size=3).double()
    assert list(em.state_dict()) == list(tm.state_dict())  # same names, same order
    assert {k: tuple(v.shape) for k, v in em.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in tm.state_dict().items()}
    _copy(tm, em)
    d = 2 if bidirectional else 1
    x = rng.standard_normal((2, 4, 5) if batch_first else (4, 2, 5))
    h0 = rng.standard_normal((layers * d, 2, 3))
    c0 = rng.standard_normal((layers * d, 2, 7))
    xe, he, ce = _e(x), _e(h0), _e(c0)
    xt, ht, ct = _t(x), _t(h0), _t(c0)
    oe, (hne, cne) = em(xe, (he, ce))
    ot, (hnt, cnt) = tm(xt, (ht, ct))
    assert tuple(oe.shape) == tuple(ot.shape) and tuple(hne.shape) == tuple(hnt.shape) == (layers * d, 2, 3)
    assert tuple(cne.shape) == (layers * d, 2, 7)
    for a, b in ((oe, ot), (hne, hnt), (cne, cnt)):
        _close(a, b)
    weights = rng.standard_normal(tuple(ot.shape))
    ((oe * _e(weights, False)).sum() + hne.sum() * 0.5 + cne.pow(2).sum()).backward()
    ((ot * _t(weights, False)).sum() + hnt.sum() * 0.5 + cnt.pow(2).sum()).backward()
    for a, b in ((xe, xt), (he, ht), (ce, ct)):
        _close(a.grad, b.grad)
    for (name, pe), (_, pt) in zip(em.named_parameters(), tm.named_parameters()):
        _close(pe.grad, pt.grad)


def test_lstm_proj_unbatched_default_state_and_repr():
    tm = torch.nn.LSTM(4, 6, proj_size=2).double()
    em = enn.LSTM(4, 6, proj_size=2).double()
    _copy(tm, em)
    x = np.random.default_rng(1).standard_normal((3, 4))
    oe, (he, ce) = em(_e(x))
    ot, (ht, ct) = tm(_t(x))
    _close(oe, ot)
    _close(he, ht)
    _close(ce, ct)
    assert "proj_size=2" in repr(em)
    assert len(em.all_weights[0]) == 5


def test_lstm_proj_errors():
    with pytest.raises(ValueError, match="smaller than hidden_size"):
        enn.LSTM(4, 6, proj_size=6)
    with pytest.raises(ValueError, match="positive integer or zero"):
        enn.LSTM(4, 6, proj_size=-1)
    with pytest.raises(ValueError, match="only supported for LSTM"):
        enn.RNNBase("GRU", 4, 6, proj_size=2)
    lstm = enn.LSTM(4, 6, proj_size=2)
    with pytest.raises(RuntimeError, match=r"hidden size \(1, 3, 2\)"):
        lstm(ember.randn(5, 3, 4), (ember.zeros(1, 3, 6), ember.zeros(1, 3, 6)))


# ---- MultiheadAttention add_bias_kv / add_zero_attn -------------------------------------------------
@pytest.mark.parametrize("bias_kv,zero_attn", [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("mask_kind", [None, "bool", "float3d", "padding"])
def test_mha_bias_kv_zero_attn_match_torch(bias_kv, zero_attn, mask_kind):
    rng = np.random.default_rng(2)
    e, heads, n, tgt, src = 8, 2, 3, 4, 5
    tm = torch.nn.MultiheadAttention(e, heads, add_bias_kv=bias_kv, add_zero_attn=zero_attn).double()
    em = enn.MultiheadAttention(e, heads, add_bias_kv=bias_kv, add_zero_attn=zero_attn).double()
    assert sorted(em.state_dict()) == sorted(tm.state_dict())
    if bias_kv:
        assert tuple(em.bias_k.shape) == (1, 1, e) and tuple(em.bias_v.shape) == (1, 1, e)
    with torch.no_grad():  # non-zero biases so their gradients are exercised
        tm.in_proj_bias.copy_(torch.tensor(rng.standard_normal(3 * e)))
        tm.out_proj.bias.copy_(torch.tensor(rng.standard_normal(e)))
    _copy(tm, em)
    q, k, v = (rng.standard_normal(s) for s in ((tgt, n, e), (src, n, e), (src, n, e)))
    kwargs_e: dict = {}
    kwargs_t: dict = {}
    if mask_kind == "bool":
        m = rng.random((tgt, src)) < 0.3
        m[:, 0] = False
        kwargs_e["attn_mask"], kwargs_t["attn_mask"] = ember.tensor(m), torch.tensor(m)
    elif mask_kind == "float3d":
        m = rng.standard_normal((n * heads, tgt, src))
        kwargs_e["attn_mask"], kwargs_t["attn_mask"] = ember.tensor(m), torch.tensor(m)
    elif mask_kind == "padding":
        m = np.zeros((n, src), dtype=bool)
        m[1, -2:] = True
        kwargs_e["key_padding_mask"], kwargs_t["key_padding_mask"] = ember.tensor(m), torch.tensor(m)
    args_e = [_e(a) for a in (q, k, v)]
    args_t = [_t(a) for a in (q, k, v)]
    oe, we = em(*args_e, **kwargs_e)
    ot, wt = tm(*args_t, **kwargs_t)
    _close(oe, ot)
    _close(we, wt)
    g = rng.standard_normal(tuple(ot.shape))
    ((oe * _e(g, False)).sum() + we.pow(2).sum()).backward()
    ((ot * _t(g, False)).sum() + wt.pow(2).sum()).backward()
    for a, b in zip(args_e, args_t):
        _close(a.grad, b.grad)
    grads_t = dict(tm.named_parameters())
    for name, pe in em.named_parameters():
        _close(pe.grad, grads_t[name].grad)


def test_mha_bias_kv_batch_first_unaveraged_weights():
    rng = np.random.default_rng(3)
    tm = torch.nn.MultiheadAttention(6, 3, add_bias_kv=True, add_zero_attn=True, batch_first=True,
                                     kdim=4, vdim=5).double()
    em = enn.MultiheadAttention(6, 3, add_bias_kv=True, add_zero_attn=True, batch_first=True, kdim=4,
                                vdim=5).double()
    _copy(tm, em)
    q, k, v = rng.standard_normal((2, 3, 6)), rng.standard_normal((2, 4, 4)), rng.standard_normal((2, 4, 5))
    oe, we = em(_e(q), _e(k), _e(v), average_attn_weights=False)
    ot, wt = tm(_t(q), _t(k), _t(v), average_attn_weights=False)
    assert tuple(we.shape) == tuple(wt.shape) == (2, 3, 3, 6)  # 4 keys + bias + zero
    _close(oe, ot)
    _close(we, wt)


def test_mha_bias_kv_init_is_random_and_finite():
    em = enn.MultiheadAttention(16, 4, add_bias_kv=True)
    assert float(em.bias_k.abs().sum()) > 0 and float(em.bias_v.abs().sum()) > 0
