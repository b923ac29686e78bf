"""``torch.nn.attention.flex_attention`` against torch 2.13 (its eager path) in float64.

Outputs and log-sum-exp are compared with torch's flex_attention; the block-sparse layout of ``create_block_mask``
field by field; gradients (torch's flex_attention has no CPU backward) with torch's scaled_dot_product_attention
under the same dense mask.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
from ember.nn.attention import flex_attention as EF

torch = pytest.importorskip("torch")
TF = pytest.importorskip("torch.nn.attention.flex_attention")

LAYOUT = ["kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks", "q_indices",
          "full_q_num_blocks", "full_q_indices"]


def causal(b, h, q, kv):
    return q >= kv


def sliding(b, h, q, kv):
    return (q >= kv) & (q - kv <= 3)


def per_head(b, h, q, kv):  # depends on the batch and head indices too
    return (kv <= q + h) | (b == 1)


@pytest.fixture
def qkv():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in ((2, 4, 10, 8), (2, 2, 10, 8), (2, 2, 10, 8))]
    return arrays, [torch.tensor(a) for a in arrays], [ember.tensor(a) for a in arrays]


def _torch_flex(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "flex_attention called without torch.compile()"
        return TF.flex_attention(*args, **kwargs)


@pytest.mark.parametrize("mask_mod,B,H", [(causal, 2, None), (sliding, None, None), (per_head, 2, 4)])
@pytest.mark.parametrize("block", [4, (2, 4), 128])
def test_block_mask_layout_like_torch(mask_mod, B, H, block):
    t = TF.create_block_mask(mask_mod, B, H, 10, 10, device="cpu", BLOCK_SIZE=block)
    e = EF.create_block_mask(mask_mod, B, H, 10, 10, device="cpu", BLOCK_SIZE=block)
    for field in LAYOUT:
        np.testing.assert_array_equal(getattr(e, field).numpy(), getattr(t, field).numpy(), err_msg=field)
        assert getattr(e, field).dtype == ember.int32
    assert e.shape == tuple(t.shape) and e.BLOCK_SIZE == tuple(t.BLOCK_SIZE)
    assert e.sparsity() == pytest.approx(t.sparsity(), abs=1e-9)
    np.testing.assert_array_equal(e.to_dense().numpy(), t.to_dense().numpy())
    np.testing.assert_array_equal(EF.create_mask(mask_mod, B, H, 10, 10).numpy(),
                                  TF.create_mask(mask_mod, B, H, 10, 10, device="cpu").numpy())


@pytest.mark.parametrize("mask_mod", [None, causal, sliding, per_head])
@pytest.mark.parametrize("score", ["none", "distance", "bias"])
def test_flex_attention_forward_like_torch(qkv, mask_mod, score):
    _, (tq, tk, tv), (eq, ek, ev) = qkv
    bias = np.random.default_rng(1).standard_normal((10, 10))
    tb, eb = torch.tensor(bias), ember.tensor(bias)
    mods = {"none": (None, None),
            "distance": (lambda s, b, h, q, kv: s + (q - kv) * 0.1, lambda s, b, h, q, kv: s + (q - kv) * 0.1),
            "bias": (lambda s, b, h, q, kv: s + tb[q, kv], lambda s, b, h, q, kv: s + eb[q, kv])}[score]
    tm = TF.create_block_mask(mask_mod, 2, 4, 10, 10, device="cpu", BLOCK_SIZE=4) if mask_mod else None
    em = EF.create_block_mask(mask_mod, 2, 4, 10, 10, device="cpu", BLOCK_SIZE=4) if mask_mod else None
    to, taux = _torch_flex(tq, tk, tv, score_mod=mods[0], block_mask=tm, enable_gqa=True,
                           return_aux=TF.AuxRequest(lse=True))
    eo, eaux = EF.flex_attention(eq, ek, ev, score_mod=mods[1], block_mask=em, enable_gqa=True,
                                 return_aux=EF.AuxRequest(lse=True))
    np.testing.assert_allclose(eo.numpy(), to.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(eaux.lse.numpy(), taux.lse.numpy(), rtol=1e-12, atol=1e-12)
    assert eaux.max_scores is None


def test_fully_masked_rows_and_scale_like_torch(qkv):
    _, (tq, tk, tv), (eq, ek, ev) = qkv
    nothing_for_row0 = lambda b, h, q, kv: q > 0  # noqa: E731 - a mask_mod
    tm = TF.create_block_mask(nothing_for_row0, None, None, 10, 10, device="cpu", BLOCK_SIZE=4)
    em = EF.create_block_mask(nothing_for_row0, None, None, 10, 10, device="cpu", BLOCK_SIZE=4)
    to, tl = _torch_flex(tq, tk, tv, block_mask=tm, scale=0.3, enable_gqa=True, return_lse=True)
    eo, el = EF.flex_attention(eq, ek, ev, block_mask=em, scale=0.3, enable_gqa=True, return_lse=True)
    np.testing.assert_allclose(eo.numpy(), to.numpy(), rtol=1e-12, atol=1e-12)
    assert np.all(eo.numpy()[:, :, 0] == 0) and np.all(np.isneginf(el.numpy()[:, :, 0]))
    np.testing.assert_array_equal(np.isneginf(el.numpy()), np.isneginf(tl.numpy()))


@pytest.mark.parametrize("mask_mod", [causal, sliding])
def test_flex_attention_gradients_match_sdpa_with_the_dense_mask(qkv, mask_mod):
    arrays, _, _ = qkv
    tq, tk, tv = [torch.tensor(a, requires_grad=True) for a in arrays]
    eq, ek, ev = [ember.tensor(a, requires_grad=True) for a in arrays]
    dense = TF.create_mask(mask_mod, 2, 1, 10, 10, device="cpu")
    to = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=dense, enable_gqa=True)
    em = EF.create_block_mask(mask_mod, 2, None, 10, 10, BLOCK_SIZE=4)
    eo = EF.flex_attention(eq, ek, ev, block_mask=em, enable_gqa=True)
    g = np.random.default_rng(2).standard_normal(to.shape)
    tg = torch.autograd.grad(to, (tq, tk, tv), torch.tensor(g))
    eg = ember.autograd.grad(eo, (eq, ek, ev), ember.tensor(g))
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), rtol=1e-12, atol=1e-12)
    for a, b in zip(eg, tg):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)


def test_mask_combinators_and_bad_input_like_torch(qkv):
    _, (tq, tk, tv), (eq, ek, ev) = qkv
    for lib, mod in ((TF, TF), (EF, EF)):
        both = mod.and_masks(causal, sliding)
        either = mod.or_masks(causal, per_head)
        assert callable(both) and callable(either)
    np.testing.assert_array_equal(
        EF.create_mask(EF.and_masks(causal, sliding), 2, 4, 6, 6).numpy(),
        TF.create_mask(TF.and_masks(causal, sliding), 2, 4, 6, 6, device="cpu").numpy())
    np.testing.assert_array_equal(
        EF.create_mask(EF.or_masks(causal, per_head), 2, 4, 6, 6).numpy(),
        TF.create_mask(TF.or_masks(causal, per_head), 2, 4, 6, 6, device="cpu").numpy())
    np.testing.assert_array_equal(EF.create_mask(EF.noop_mask, 1, 1, 3, 4).numpy(),
                                  TF.create_mask(TF.noop_mask, 1, 1, 3, 4, device="cpu").numpy())
    with pytest.raises(ValueError, match="enable_gqa=True"):
        _torch_flex(tq, tk, tv)
    with pytest.raises(ValueError, match="enable_gqa=True"):
        EF.flex_attention(eq, ek, ev)
    with pytest.raises(RuntimeError, match="callable"):
        EF.and_masks(causal, 3)
    with pytest.raises(ValueError, match="return_lse"):
        EF.flex_attention(eq, ek, ev, enable_gqa=True, return_lse=True, return_aux=EF.AuxRequest(lse=True))


def test_module_path_and_defaults():
    import ember.nn.attention.flex_attention as path

    assert path._DEFAULT_SPARSE_BLOCK_SIZE == TF._DEFAULT_SPARSE_BLOCK_SIZE == 128
    assert EF.AuxRequest()._asdict() == {"lse": False, "max_scores": False}
    mask = EF.create_block_mask(causal, None, None, 256, 256)
    assert mask.BLOCK_SIZE == (128, 128) and mask.shape == (1, 1, 256, 256)
    assert "sparsity=25.00%" in repr(mask)
