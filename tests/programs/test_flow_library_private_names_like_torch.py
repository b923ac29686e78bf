"""torch's private names that flow and Bayesian libraries import (zuko: ``torch.distributions.utils._sum_rightmost``,
``torch._standard_gamma``, ``torch.nn.utils.stateless._reparametrize_module``): ember lacked them, and zuko
stopped at ``import zuko``. Compared with torch 2.13: values, shapes, dtypes, gradients and errors (gamma draws
come from another sampler, so their distribution and their implicit gradient are compared, not the draws)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.distributions import utils as e_utils
from ember.nn.utils import stateless as e_stateless


def test_distribution_utils_private_names_like_torch():
    from torch.distributions import utils as t_utils

    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for dim in (0, 1, 2, 3):
        np.testing.assert_array_equal(e_utils._sum_rightmost(ember.tensor(x), dim).numpy(),
                                      t_utils._sum_rightmost(torch.tensor(x), dim).numpy())
    assert e_utils.euler_constant == t_utils.euler_constant
    ember.manual_seed(3)
    torch.manual_seed(3)
    got = e_utils._standard_normal((2, 3), dtype=ember.float64, device=None)
    want = t_utils._standard_normal((2, 3), dtype=torch.float64, device=None)
    assert got.dtype == ember.float64
    np.testing.assert_array_equal(got.numpy(), want.numpy())  # ember's normal draws are torch's
    for lib, utils in ((ember, e_utils), (torch, t_utils)):
        assert utils.is_tensor_like(lib.ones(1)) and not utils.is_tensor_like(3.0) and not utils.is_tensor_like(None)


def test_standard_gamma_gradient_is_torchs_implicit_gradient():
    alpha = [0.3, 1.0, 2.5, 7.0]
    a = ember.tensor(alpha, dtype=ember.float64, requires_grad=True)
    x = ember._standard_gamma(a)
    assert x.shape == a.shape and x.dtype == ember.float64 and bool((x > 0).all())
    x.sum().backward()
    # dx/dalpha = -(dP(a, x)/da) / pdf(x; a): SciPy's regularized gamma differenced in float64
    from scipy import special, stats

    xs, al, h = x.detach().numpy(), np.array(alpha), 1e-6
    exact = -(special.gammainc(al + h, xs) - special.gammainc(al - h, xs)) / (2 * h) / stats.gamma.pdf(xs, al)
    np.testing.assert_allclose(a.grad.numpy(), exact, rtol=1e-6)
    np.testing.assert_allclose(ember._standard_gamma_grad(a.detach(), x.detach()).numpy(), exact, rtol=1e-6)
    # torch's kernel approximates it (series / asymptotic expansions, ~3e-5 relative here)
    want = torch._standard_gamma_grad(torch.tensor(alpha, dtype=torch.float64), torch.tensor(xs))
    np.testing.assert_allclose(a.grad.numpy(), want.numpy(), rtol=1e-3)


def test_standard_gamma_draws_have_the_gamma_mean_and_variance():
    a = ember.full((20000,), 2.5)
    x = ember._standard_gamma(a, generator=ember.Generator().manual_seed(0))
    assert x.dtype == ember.float32
    assert abs(float(x.mean()) - 2.5) < 0.06 and abs(float(x.var()) - 2.5) < 0.15


def test_sample_dirichlet_and_dtype_errors_like_torch():
    d = ember._sample_dirichlet(ember.tensor([[1.0, 2.0, 3.0]] * 4, dtype=ember.float64))
    assert d.shape == (4, 3) and d.dtype == ember.float64
    np.testing.assert_allclose(d.sum(-1).numpy(), np.ones(4), rtol=1e-12)
    for lib in (torch, ember):
        with pytest.raises(NotImplementedError, match='"gamma_cpu" not implemented for \'Long\''):
            lib._standard_gamma(lib.tensor([1, 2]))


def _net(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(3, 2), lib.nn.BatchNorm1d(2))


@pytest.mark.parametrize("tie_weights", [False, True])
def test_reparametrize_module_like_torch(tie_weights):
    from torch.nn.utils import stateless as t_stateless

    results = []
    for lib, stateless in ((torch, t_stateless), (ember, e_stateless)):
        net = _net(lib)
        original = net[0].weight
        given = {"0.weight": lib.ones(2, 3), "1.running_mean": lib.zeros(2)}
        with stateless._reparametrize_module(net, given, tie_weights=tie_weights):
            inside = net[0].weight
            out = net(lib.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]]))
        # the module is back; the dict holds what the module held at the end (the updated running mean)
        assert net[0].weight is original and inside is not original
        results.append((out.detach().numpy(), given["1.running_mean"].numpy(), given["0.weight"].numpy()))
    for got, want in zip(results[1], results[0]):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_reparametrize_module_strict_and_restore_on_error_like_torch():
    from torch.nn.utils import stateless as t_stateless

    messages = []
    for lib, stateless in ((torch, t_stateless), (ember, e_stateless)):
        net = _net(lib)
        with pytest.raises(RuntimeError) as info:
            with stateless._reparametrize_module(net, {"0.weight": lib.ones(2, 3), "x": lib.ones(1)}, strict=True):
                pass
        messages.append(str(info.value))
        bias = net[0].bias
        with pytest.raises(ValueError):
            with stateless._reparametrize_module(net, {"0.bias": lib.zeros(2)}):
                raise ValueError("inside")
        assert net[0].bias is bias
    assert messages[0] == messages[1]
