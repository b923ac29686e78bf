"""nn.utils: prune, parametrize, weight_norm / spectral_norm (hooks and parametrizations), BN fusion,
clip_grads_with_norm_, skip_init; checked against torch (same weights in, same outputs, gradients and keys)."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
import torch.nn.utils.prune  # noqa: E402,F401  (torch does not import it with torch.nn.utils)


def _pair(kind: str = "linear"):
    e = ember.nn.Linear(6, 4).double() if kind == "linear" else ember.nn.Conv2d(3, 4, 3).double()
    t = torch.nn.Linear(6, 4).double() if kind == "linear" else torch.nn.Conv2d(3, 4, 3).double()
    t.load_state_dict({k: torch.tensor(v.numpy()) for k, v in e.state_dict().items()})
    return e, t


def _same(e_mod, t_mod, x_shape, check_grads=True):
    x = np.random.default_rng(0).standard_normal(x_shape)
    ye, yt = e_mod(ember.tensor(x)), t_mod(torch.tensor(x))
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert sorted(e_mod.state_dict()) == sorted(t_mod.state_dict())
    for k, v in t_mod.state_dict().items():
        np.testing.assert_allclose(e_mod.state_dict()[k].numpy(), v.numpy(), rtol=1e-10, atol=1e-12, err_msg=k)
    if check_grads:
        ye.pow(2).sum().backward()
        yt.pow(2).sum().backward()
        te = dict(e_mod.named_parameters())
        for name, p in t_mod.named_parameters():
            np.testing.assert_allclose(te[name].grad.numpy(), p.grad.numpy(), rtol=1e-9, atol=1e-11, err_msg=name)


PRUNINGS = [
    ("l1_unstructured", {"amount": 0.3}), ("l1_unstructured", {"amount": 5}), ("identity", {}),
    ("ln_structured", {"amount": 0.5, "n": 2, "dim": 0}), ("ln_structured", {"amount": 1, "n": 1, "dim": 1}),
]


@pytest.mark.parametrize("method,kwargs", PRUNINGS)
@pytest.mark.parametrize("kind,shape", [("linear", (3, 6)), ("conv", (2, 3, 5, 5))])
def test_prune_matches_torch(method: str, kwargs: dict, kind: str, shape: tuple) -> None:
    e, t = _pair(kind)
    getattr(ember.nn.utils.prune, method)(e, "weight", **kwargs)
    getattr(torch.nn.utils.prune, method)(t, "weight", **kwargs)
    _same(e, t, shape)
    assert ember.nn.utils.prune.is_pruned(e)


def test_iterative_pruning_combines_masks_and_remove_like_torch() -> None:
    e, t = _pair()
    for lib, m in ((ember, e), (torch, t)):
        lib.nn.utils.prune.l1_unstructured(m, "weight", amount=0.25)
        lib.nn.utils.prune.l1_unstructured(m, "weight", amount=0.5)
        lib.nn.utils.prune.ln_structured(m, "weight", amount=1, n=2, dim=0)
    _same(e, t, (3, 6))
    ember.nn.utils.prune.remove(e, "weight")
    torch.nn.utils.prune.remove(t, "weight")
    _same(e, t, (3, 6), check_grads=False)
    assert not ember.nn.utils.prune.is_pruned(e)


def test_custom_mask_and_global_pruning_like_torch() -> None:
    mask = (np.random.default_rng(4).random((4, 6)) > 0.5).astype(np.float64)
    (e1, t1), (e2, t2) = _pair(), _pair()
    ember.nn.utils.prune.custom_from_mask(e1, "weight", ember.tensor(mask))
    torch.nn.utils.prune.custom_from_mask(t1, "weight", torch.tensor(mask))
    _same(e1, t1, (3, 6))
    ember.nn.utils.prune.global_unstructured([(e1, "weight"), (e2, "weight")],
                                             ember.nn.utils.prune.L1Unstructured, amount=0.4)
    torch.nn.utils.prune.global_unstructured([(t1, "weight"), (t2, "weight")],
                                             torch.nn.utils.prune.L1Unstructured, amount=0.4)
    _same(e1, t1, (3, 6))
    _same(e2, t2, (3, 6))


@pytest.mark.parametrize("amount,error", [(-1, ValueError), (1.5, ValueError), ("a", TypeError), (100, ValueError)])
def test_prune_amount_errors_like_torch(amount, error) -> None:
    for lib in (torch, ember):
        with pytest.raises(error):
            lib.nn.utils.prune.l1_unstructured(lib.nn.Linear(3, 2), "weight", amount=amount)


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_hook_and_parametrization_like_torch(dim) -> None:
    e, t = _pair()
    ember.nn.utils.weight_norm(e, dim=dim)
    torch.nn.utils.weight_norm(t, dim=dim)
    _same(e, t, (3, 6))
    e2, t2 = _pair()
    ember.nn.utils.parametrizations.weight_norm(e2, dim=0 if dim is None else dim)
    torch.nn.utils.parametrizations.weight_norm(t2, dim=0 if dim is None else dim)
    _same(e2, t2, (3, 6))
    ember.nn.utils.remove_weight_norm(e)
    torch.nn.utils.remove_weight_norm(t)
    _same(e, t, (3, 6), check_grads=False)


def test_spectral_norm_hook_and_parametrization_like_torch() -> None:
    e, t = _pair()
    ember.nn.utils.spectral_norm(e)
    torch.nn.utils.spectral_norm(t)
    with torch.no_grad():  # the power iteration starts from random vectors: start both from torch's
        e.weight_u.copy_(ember.tensor(t.weight_u.numpy()))
        e.weight_v.copy_(ember.tensor(t.weight_v.numpy()))
    _same(e, t, (3, 6))
    e2, t2 = _pair()
    ember.nn.utils.parametrizations.spectral_norm(e2)
    torch.nn.utils.parametrizations.spectral_norm(t2)
    with torch.no_grad():
        e2.parametrizations.weight[0]._u.copy_(ember.tensor(t2.parametrizations.weight[0]._u.numpy()))
        e2.parametrizations.weight[0]._v.copy_(ember.tensor(t2.parametrizations.weight[0]._v.numpy()))
    _same(e2, t2, (3, 6))
    for _ in range(30):  # more power iterations: the largest singular value of the result approaches 1
        e2(ember.ones(1, 6, dtype=ember.float64))
    np.testing.assert_allclose(np.linalg.svd(e2.weight.detach().numpy(), compute_uv=False)[0], 1.0, rtol=1e-6)


def test_register_parametrization_like_torch() -> None:
    class Symmetric:
        def __init__(self, lib):
            self.lib = lib

        def module(self):
            class M(self.lib.nn.Module):
                def forward(self, X):
                    return X.triu() + X.triu(1).transpose(0, 1)

                def right_inverse(self, A):
                    return A.triu()
            return M()

    e, t = ember.nn.Linear(4, 4).double(), torch.nn.Linear(4, 4).double()
    t.load_state_dict({k: torch.tensor(v.numpy()) for k, v in e.state_dict().items()})
    ember.nn.utils.parametrize.register_parametrization(e, "weight", Symmetric(ember).module())
    torch.nn.utils.parametrize.register_parametrization(t, "weight", Symmetric(torch).module())
    _same(e, t, (2, 4))
    assert ember.nn.utils.parametrize.is_parametrized(e, "weight")
    assert ember.nn.utils.parametrize.type_before_parametrizations(e) is ember.nn.Linear
    with ember.nn.utils.parametrize.cached():
        assert e.weight is e.weight
    new = np.random.default_rng(1).standard_normal((4, 4))
    new = new + new.T
    with ember.no_grad():
        e.weight = ember.tensor(new)
    with torch.no_grad():
        t.weight = torch.tensor(new)
    _same(e, t, (2, 4))
    ember.nn.utils.parametrize.remove_parametrizations(e, "weight")
    torch.nn.utils.parametrize.remove_parametrizations(t, "weight")
    assert type(e) is ember.nn.Linear
    _same(e, t, (2, 4), check_grads=False)
    with pytest.raises(ValueError):
        ember.nn.utils.parametrize.register_parametrization(ember.nn.Linear(2, 2), "nope", Symmetric(ember).module())


def test_fuse_conv_bn_and_linear_bn_like_torch() -> None:
    ec, tc = _pair("conv")
    eb, tb = ember.nn.BatchNorm2d(4).double(), torch.nn.BatchNorm2d(4).double()
    rng = np.random.default_rng(2)
    state = {"weight": rng.random(4) + 0.5, "bias": rng.standard_normal(4), "running_mean": rng.standard_normal(4),
             "running_var": rng.random(4) + 0.5, "num_batches_tracked": np.array(3)}
    eb.load_state_dict({k: ember.tensor(v) for k, v in state.items()})
    tb.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    ef = ember.nn.utils.fuse_conv_bn_eval(ec.eval(), eb.eval())
    tf = torch.nn.utils.fuse_conv_bn_eval(tc.eval(), tb.eval())
    _same(ef, tf, (2, 3, 5, 5), check_grads=False)
    el, tl = _pair()
    eb1, tb1 = ember.nn.BatchNorm1d(4).double(), torch.nn.BatchNorm1d(4).double()
    eb1.load_state_dict({k: ember.tensor(v) for k, v in state.items()})
    tb1.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    _same(ember.nn.utils.fuse_linear_bn_eval(el.eval(), eb1.eval()),
          torch.nn.utils.fuse_linear_bn_eval(tl.eval(), tb1.eval()), (3, 6), check_grads=False)
    with pytest.raises(AssertionError):
        ember.nn.utils.fuse_conv_bn_eval(ec.train(), eb)


def test_clip_grads_with_norm_and_skip_init_like_torch() -> None:
    grads = [np.array([3.0, 4.0]), np.array([[1.0, -2.0]])]
    results = []
    for lib in (torch, ember):
        ps = [lib.zeros(g.shape, dtype=lib.float64, requires_grad=True) for g in grads]
        for p, g in zip(ps, grads):
            p.grad = lib.tensor(g)
        total = lib.nn.utils.get_total_norm([p.grad for p in ps])
        lib.nn.utils.clip_grads_with_norm_(ps, 2.0, total)
        results.append([p.grad.numpy() for p in ps])
    for a, b in zip(*results):
        np.testing.assert_allclose(b, a, rtol=1e-12)
    m = ember.nn.utils.skip_init(ember.nn.Linear, 3, 2)
    assert tuple(m.weight.shape) == (2, 3)
