"""nn.MultiheadAttention against torch's, output and every gradient (inputs and parameters): self-attention
(``mha(x, x, x)``: one packed input projection, q/k/v as column views), cross-attention (three projections), with
batch_first either way, unbatched input, masks and need_weights."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _pair(embed=32, heads=4, batch_first=True):
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(embed, heads, batch_first=batch_first).double()
    ours = ember.nn.MultiheadAttention(embed, heads, batch_first=batch_first, dtype=ember.float64)
    ours.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("kwargs", [{"need_weights": False}, {"need_weights": True},
                                    {"need_weights": False, "causal": True}, {"need_weights": False, "padding": True}])
@pytest.mark.parametrize("self_attention", [True, False])
def test_mha_vs_torch(batch_first, kwargs, self_attention):
    ours, theirs = _pair(batch_first=batch_first)
    rng = np.random.default_rng(1)
    n, length = 3, 7
    shape = (n, length, 32) if batch_first else (length, n, 32)
    arrays = [rng.standard_normal(shape) for _ in range(1 if self_attention else 3)]
    e_in = [ember.tensor(a, requires_grad=True) for a in arrays]
    t_in = [torch.tensor(a, requires_grad=True) for a in arrays]
    extra_e, extra_t = {"need_weights": kwargs["need_weights"]}, {"need_weights": kwargs["need_weights"]}
    if kwargs.get("causal"):
        mask = np.triu(np.ones((length, length), bool), 1)
        extra_e["attn_mask"], extra_t["attn_mask"] = ember.tensor(mask), torch.tensor(mask)
    if kwargs.get("padding"):
        pad = np.zeros((n, length), bool)
        pad[1, 5:] = True
        extra_e["key_padding_mask"], extra_t["key_padding_mask"] = ember.tensor(pad), torch.tensor(pad)
    args_e = (e_in * 3) if self_attention else e_in
    args_t = (t_in * 3) if self_attention else t_in
    out_e, w_e = ours(*args_e, **extra_e)
    out_t, w_t = theirs(*args_t, **extra_t)
    np.testing.assert_allclose(out_e.detach().numpy(), out_t.detach().numpy(), rtol=1e-10, atol=1e-12)
    if kwargs["need_weights"]:
        np.testing.assert_allclose(w_e.detach().numpy(), w_t.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = rng.standard_normal(tuple(out_e.shape))
    out_e.backward(ember.tensor(g))
    out_t.backward(torch.tensor(g))
    for a, b in zip(e_in, t_in):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-11)
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-9, atol=1e-11, err_msg=name)


def test_self_attention_float32_kernel_path_and_unbatched():
    """float32 self-attention (the native attention kernels where present), batched and unbatched."""
    ours, theirs = _pair()
    ours, theirs = ours.float(), theirs.float()
    x = np.random.default_rng(2).standard_normal((2, 40, 32)).astype(np.float32)
    for data in (x, x[0]):
        xe, xt = ember.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
        oe = ours(xe, xe, xe, need_weights=False)[0]
        ot = theirs(xt, xt, xt, need_weights=False)[0]
        np.testing.assert_allclose(oe.detach().numpy(), ot.detach().numpy(), rtol=1e-5, atol=1e-5)
        oe.sum().backward()
        ot.sum().backward()
        np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(ours.in_proj_weight.grad.numpy(), theirs.in_proj_weight.grad.numpy(), rtol=1e-4,
                                   atol=1e-4)
        ours.zero_grad()
        theirs.zero_grad()
