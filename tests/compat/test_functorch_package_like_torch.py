"""The deprecated ``functorch`` package (``ember run`` maps ``import functorch`` to ember.func.functorch):
make_functional, make_functional_with_buffers, combine_state_for_ensemble against torch 2.13's functorch.
Found by pytorch/tutorials' forward_ad_usage.py (``ft.make_functional_with_buffers`` + ``ft.jvp``)."""
import warnings

import numpy as np
import pytest

import ember
from ember.func import functorch as eft
from ember.run.alias import ember_name

torch = pytest.importorskip("torch")
tft = pytest.importorskip("functorch")


def _same_weights(n_in=4, n_out=3, bn=False):
    tm = torch.nn.Sequential(torch.nn.Linear(n_in, n_out), *( [torch.nn.BatchNorm1d(n_out)] if bn else []))
    em = ember.nn.Sequential(ember.nn.Linear(n_in, n_out), *( [ember.nn.BatchNorm1d(n_out)] if bn else []))
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return tm, em


def test_import_functorch_maps_to_ember():
    assert ember_name("functorch") == "ember.func.functorch"
    assert eft.vmap is ember.func.vmap and eft.jvp is ember.func.jvp


def test_make_functional_with_buffers_jvp_as_torch():
    tm, em = _same_weights(bn=True)
    tm.eval(), em.eval()
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        tf, tp, tb = tft.make_functional_with_buffers(tm)
        tang_t = tuple(torch.ones_like(p) * 0.5 for p in tp)
        out_t, jv_t = tft.jvp(lambda p: tf(p, tb, torch.tensor(x)), (tp,), (tang_t,))
    ef, ep, eb = eft.make_functional_with_buffers(em)
    assert [tuple(p.shape) for p in ep] == [tuple(p.shape) for p in tp]
    assert [tuple(b.shape) for b in eb] == [tuple(b.shape) for b in tb]
    assert all(p.requires_grad for p in ep) and ep[0] is not em[0].weight  # the copy's parameters, as functorch
    tang_e = tuple(ember.ones_like(p) * 0.5 for p in ep)
    out_e, jv_e = ember.func.jvp(lambda p: ef(p, eb, ember.tensor(x)), (ep,), (tang_e,))
    np.testing.assert_allclose(out_e.detach().numpy(), out_t.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jv_e.detach().numpy(), jv_t.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_make_functional_grad_and_refusals():
    tm, em = _same_weights()
    x = np.random.default_rng(1).standard_normal((6, 4)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        tf, tp = tft.make_functional(tm, disable_autograd_tracking=True)
        gt = tft.grad(lambda p: tf(p, torch.tensor(x)).square().sum())(tp)
    ef, ep = eft.make_functional(em, disable_autograd_tracking=True)
    assert not any(p.requires_grad for p in ep)
    ge = ember.func.grad(lambda p: ef(p, ember.tensor(x)).square().sum())(ep)
    for a, b in zip(ge, gt):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="has buffers"):
        eft.make_functional(ember.nn.BatchNorm1d(3))
    with pytest.raises(ValueError, match="expected 2 parameters"):
        ef(ep[:1], ember.tensor(x))


def test_combine_state_for_ensemble_with_vmap_as_torch():
    pairs = [_same_weights() for _ in range(3)]
    x = np.random.default_rng(2).standard_normal((3, 5, 4)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        tf, tp, tb = tft.combine_state_for_ensemble([t for t, _ in pairs])
        out_t = tft.vmap(tf)(tp, tb, torch.tensor(x))
    ef, ep, eb = eft.combine_state_for_ensemble([e for _, e in pairs])
    assert [tuple(p.shape) for p in ep] == [tuple(p.shape) for p in tp]
    assert not any(p.requires_grad for p in ep)  # detached, as functorch
    out_e = ember.func.vmap(ef)(ep, eb, ember.tensor(x))
    np.testing.assert_allclose(out_e.numpy(), out_t.detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="same class"):
        eft.combine_state_for_ensemble([ember.nn.Linear(2, 2), ember.nn.Sequential(ember.nn.Linear(2, 2))])
    with pytest.raises(RuntimeError, match="at least one"):
        eft.combine_state_for_ensemble([])
