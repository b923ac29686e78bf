"""The added families, transforms and KL pairs run on the stand-in CUDA device (which refuses silent host
conversion) and give the CPU's values there; samples stay on the parameters' device."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.distributions as ED
from ember.distributions import transforms as ET

BUILDERS = {
    "ContinuousBernoulli": lambda f: ED.ContinuousBernoulli(probs=f(0.2, 0.4999)),
    "Kumaraswamy": lambda f: ED.Kumaraswamy(f(2.0, 3.0), f(1.0, 2.0)),
    "LogisticNormal": lambda f: ED.LogisticNormal(f(0.0, 1.0), f(1.0, 2.0)),
    "FisherSnedecor": lambda f: ED.FisherSnedecor(f(3.0, 4.0), f(5.0, 6.0)),
    "GeneralizedPareto": lambda f: ED.GeneralizedPareto(f(0.0, 1.0), f(1.0, 2.0), f(0.1, 0.0)),
    "VonMises": lambda f: ED.VonMises(f(0.0, 1.0), f(1.0, 2.0)),
    "LowRankMultivariateNormal": lambda f: ED.LowRankMultivariateNormal(f(0.0, 1.0), f([1.0], [0.5]), f(1.0, 2.0)),
    "LKJCholesky": lambda f: ED.LKJCholesky(3, f(1.5)),
    "Wishart": lambda f: ED.Wishart(f(4.0), covariance_matrix=f([1.0, 0.2], [0.2, 2.0])),
}


def _maker(device):
    return lambda *values: ember.tensor(np.array(values), dtype=ember.float64, device=device)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_family_on_standin_device_matches_cpu(name):
    cpu = BUILDERS[name](_maker("cpu"))
    value = cpu.sample((4,))
    with ember.testing.standin_cuda():
        dev = BUILDERS[name](_maker("cuda"))
        sample = dev.sample((3,))
        assert sample.device.type == "cuda" and tuple(sample.shape) == tuple(cpu.sample((3,)).shape)
        got = dev.log_prob(value.to("cuda")).cpu().numpy()
        np.testing.assert_allclose(got, cpu.log_prob(value).numpy(), rtol=1e-12)
        for attr in ("mean", "variance"):
            try:
                expected = getattr(cpu, attr).detach().numpy()
            except NotImplementedError:
                continue
            np.testing.assert_allclose(getattr(dev, attr).detach().cpu().numpy(), expected, rtol=1e-12)
        try:
            expected = cpu.entropy().detach().numpy()
        except NotImplementedError:
            return
        np.testing.assert_allclose(dev.entropy().detach().cpu().numpy(), expected, rtol=1e-12)


def test_kl_and_transforms_on_standin_device():
    pairs = [("Gamma", "Gumbel"), ("LowRankMultivariateNormal", "LowRankMultivariateNormal"),
             ("ContinuousBernoulli", "Normal"), ("Wishart", "Wishart")]
    extra = {"Gamma": lambda f: ED.Gamma(f(2.0, 3.0), f(1.0, 0.5)), "Gumbel": lambda f: ED.Gumbel(f(0.0, 1.0), f(1.0, 2.0)),
             "Normal": lambda f: ED.Normal(f(0.3, 0.1), f(1.0, 2.0))}
    build = {**BUILDERS, **extra}
    x = np.random.default_rng(0).normal(size=(2, 6))
    transforms = [ET.CorrCholeskyTransform(), ET.CatTransform([ET.ExpTransform(), ET.TanhTransform()], -1, [2, 4]),
                  ET.StackTransform([ET.ExpTransform(), ET.SigmoidTransform()], 0)]
    with ember.testing.standin_cuda():
        for p, q in pairs:
            cpu = ED.kl_divergence(build[p](_maker("cpu")), build[q](_maker("cpu"))).detach().numpy()
            dev = ED.kl_divergence(build[p](_maker("cuda")), build[q](_maker("cuda")))
            assert dev.device.type == "cuda"
            np.testing.assert_allclose(dev.detach().cpu().numpy(), cpu, rtol=1e-10)
        for t in transforms:
            xc, xd = ember.tensor(x), ember.tensor(x, device="cuda")
            yc, yd = t(xc), t(xd)
            np.testing.assert_allclose(yd.cpu().numpy(), yc.numpy(), rtol=1e-12)
            np.testing.assert_allclose(t.log_abs_det_jacobian(xd, yd).cpu().numpy(),
                                       t.log_abs_det_jacobian(xc, yc).numpy(), rtol=1e-12)
            np.testing.assert_allclose(t.inv(yd).cpu().numpy(), x, rtol=1e-9, atol=1e-12)
