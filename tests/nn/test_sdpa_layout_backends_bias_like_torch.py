"""scaled_dot_product_attention as PyTorch's CPU dispatcher runs it, against torch 2.13: the flash kernel's
output follows the query's dimension order (pytorch/tutorials' scaled_dot_product_attention_tutorial calls
``sdpa(q, k, v).transpose(1, 2).view(B, L, H * D)`` on a chunked query), the math path's is contiguous,
``sdpa_kernel`` with no CPU backend allowed raises; and ``torch.nn.attention.bias`` (CausalBias masks)."""
import numpy as np
import pytest

import ember
import ember.nn.functional as EF
from ember.nn.attention import SDPBackend as ESDP, sdpa_kernel as e_kernel
from ember.nn.attention.bias import CausalBias, causal_lower_right, causal_upper_left

torch = pytest.importorskip("torch")
TF = torch.nn.functional
from torch.nn.attention import SDPBackend as TSDP, sdpa_kernel as t_kernel  # noqa: E402
from torch.nn.attention import bias as tbias  # noqa: E402

B, H, L, S, D = 2, 3, 5, 7, 4
RNG = np.random.default_rng(0)


def _query(kind):
    """The same query values laid out as ``kind`` says, as (ember, torch)."""
    if kind == "plain":
        a = RNG.standard_normal((B, H, L, D)).astype(np.float32)
        return ember.tensor(a), torch.tensor(a)
    if kind == "chunk":  # the tutorial's: a third of a projection, viewed to heads, transposed
        a = RNG.standard_normal((B, L, 3 * H * D)).astype(np.float32)
        return tuple(lib.tensor(a).chunk(3, -1)[0].view(B, L, H, D).transpose(1, 2) for lib in (ember, torch))
    if kind == "blhd":
        a = RNG.standard_normal((B, L, H, D)).astype(np.float32)
        return tuple(lib.tensor(a).transpose(1, 2) for lib in (ember, torch))
    if kind == "hbld":
        a = RNG.standard_normal((H, B, L, D)).astype(np.float32)
        return tuple(lib.tensor(a).transpose(0, 1) for lib in (ember, torch))
    if kind == "padded":
        a = RNG.standard_normal((B, H, L, D + 2)).astype(np.float32)
        return tuple(lib.tensor(a)[..., :D] for lib in (ember, torch))
    raise ValueError(kind)


def _kv(dv=D):
    k = RNG.standard_normal((B, H, S, D)).astype(np.float32)
    v = RNG.standard_normal((B, H, S, dv)).astype(np.float32)
    return (ember.tensor(k), ember.tensor(v)), (torch.tensor(k), torch.tensor(v))


@pytest.mark.parametrize("kind", ["plain", "chunk", "blhd", "hbld", "padded"])
@pytest.mark.parametrize("extra", [{}, {"is_causal": True}, {"mask": True}, {"dv": 6}, {"math": True}])
def test_output_layout_and_values_like_torch(kind, extra):
    qe, qt = _query(kind)
    (ke, ve), (kt, vt) = _kv(extra.get("dv", D))
    kw_e, kw_t = {}, {}
    if extra.get("is_causal"):
        kw_e["is_causal"] = kw_t["is_causal"] = True
    if extra.get("mask"):
        m = RNG.standard_normal((L, S)).astype(np.float32)
        kw_e["attn_mask"], kw_t["attn_mask"] = ember.tensor(m), torch.tensor(m)
    if extra.get("math"):
        with e_kernel(ESDP.MATH):
            oe = EF.scaled_dot_product_attention(qe, ke, ve, **kw_e)
        with t_kernel(TSDP.MATH):
            ot = TF.scaled_dot_product_attention(qt, kt, vt, **kw_t)
    else:
        oe = EF.scaled_dot_product_attention(qe, ke, ve, **kw_e)
        ot = TF.scaled_dot_product_attention(qt, kt, vt, **kw_t)
    assert oe.stride() == ot.stride()
    np.testing.assert_allclose(oe.numpy(), ot.numpy(), rtol=1e-5, atol=1e-6)


def test_the_tutorials_transpose_view_and_its_gradient():
    qe, qt = _query("chunk")
    (ke, ve), (kt, vt) = _kv()
    for q in (qe, qt):
        q.requires_grad_(True)
    ye = EF.scaled_dot_product_attention(qe, ke, ve).transpose(1, 2).view(B, L, H * D)
    yt = TF.scaled_dot_product_attention(qt, kt, vt).transpose(1, 2).view(B, L, H * D)
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    w = RNG.standard_normal((B, L, H * D)).astype(np.float32)
    (ye * ember.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(qe.grad.numpy(), qt.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_no_cpu_backend_allowed_raises_like_torch():
    qe, qt = _query("plain")
    (ke, ve), (kt, vt) = _kv()
    cases = [([ESDP.EFFICIENT_ATTENTION], [TSDP.EFFICIENT_ATTENTION], {}, lambda q: q),
             ([ESDP.FLASH_ATTENTION], [TSDP.FLASH_ATTENTION], {"dropout_p": 0.5}, lambda q: q),
             ([ESDP.FLASH_ATTENTION], [TSDP.FLASH_ATTENTION], {}, lambda q: q[0])]  # 3-D: no flash kernel
    for eb, tb, kw, shape in cases:
        with pytest.raises(RuntimeError), t_kernel(tb):
            TF.scaled_dot_product_attention(shape(qt), shape(kt), shape(vt), **kw)
        with pytest.raises(RuntimeError, match="No available kernel"), e_kernel(eb):
            EF.scaled_dot_product_attention(shape(qe), shape(ke), shape(ve), **kw)
    with e_kernel(ESDP.FLASH_ATTENTION):  # flash alone serves a 4-D query
        assert EF.scaled_dot_product_attention(qe, ke, ve).shape == (B, H, L, D)


@pytest.mark.parametrize("maker", ["causal_upper_left", "causal_lower_right"])
def test_causal_bias_like_torch(maker):
    eb, tb = globals()[maker](3, 6), getattr(tbias, maker)(3, 6)
    assert type(eb) is CausalBias and isinstance(eb, ember.Tensor)
    assert type(eb) is type(causal_upper_left(2, 2))
    assert repr(eb) == repr(tb) and str(eb) == str(tb)
    assert eb.tolist() == tb._materialize().tolist()
    assert (eb.seq_len_q, eb.seq_len_kv, eb.variant.name, int(eb.variant)) == \
        (tb.seq_len_q, tb.seq_len_kv, tb.variant.name, int(tb.variant))
    a = RNG.standard_normal((3, B, H, 6, D)).astype(np.float32)
    qe, ke, ve = (ember.tensor(x[..., :3, :] if i == 0 else x) for i, x in enumerate(a))
    qt, kt, vt = (torch.tensor(x[..., :3, :] if i == 0 else x) for i, x in enumerate(a))
    oe = EF.scaled_dot_product_attention(qe, ke, ve, eb)
    ot = TF.scaled_dot_product_attention(qt, kt, vt, tb)
    np.testing.assert_allclose(oe.numpy(), ot.numpy(), rtol=1e-5, atol=1e-6)
    if maker == "causal_upper_left":
        # the mask runs the composite, is_causal the native kernel (float32 roundings apart, as torch's two paths)
        np.testing.assert_allclose(oe.numpy(), EF.scaled_dot_product_attention(qe, ke, ve, is_causal=True).numpy(),
                                   rtol=1e-6, atol=1e-7)


def test_causal_bias_refuses_other_sizes():
    with pytest.raises(AssertionError, match="2D"):
        causal_lower_right(2, 3, 4)
