"""The transforms added for full coverage (Cat, Stack, Reshape, CumulativeDistribution, CorrCholesky,
LowerCholesky, PositiveDefinite), ``biject_to``/``transform_to`` and MixtureSameFamilyConstraint, against
torch: forward values, inverse round trips, log|det J| (also against a float64 finite-difference Jacobian),
shapes, domains and codomains."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.distributions as ED
from ember.distributions import constraints as EC, transforms as ET

torch = pytest.importorskip("torch")
TD = torch.distributions
TC, TT = TD.constraints, TD.transforms

RNG = np.random.default_rng(3)


def _np(x):
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)


def _close(ours, theirs, rtol=1e-10, atol=1e-12):
    ours, theirs = _np(ours), _np(theirs)
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol, equal_nan=True)


def _both(array):
    return ember.tensor(array, dtype=ember.float64), torch.tensor(array, dtype=torch.float64)


# name -> (build(T) -> transform, input array)
CASES = {
    "Cat_dim0": (lambda T: T.CatTransform([T.ExpTransform(), T.AffineTransform(1.0, 3.0), T.SigmoidTransform()],
                                          dim=0, lengths=[2, 1, 3]), RNG.normal(size=(6, 4))),
    "Cat_event": (lambda T: T.CatTransform([T.IndependentTransform(T.ExpTransform(), 1),
                                            T.IndependentTransform(T.SigmoidTransform(), 1)], dim=-1, lengths=[2, 3]),
                  RNG.normal(size=(4, 5))),
    "Stack_dim1": (lambda T: T.StackTransform([T.ExpTransform(), T.TanhTransform(), T.SoftplusTransform()], dim=1),
                   RNG.normal(size=(4, 3))),
    "Reshape": (lambda T: T.ReshapeTransform((6,), (2, 3)), RNG.normal(size=(4, 6))),
    "CDF_Normal": (lambda T: T.CumulativeDistributionTransform(
        (ED if T is ET else TD).Normal(_both(np.array([0.5, -1.0]))[0 if T is ET else 1],
                                       _both(np.array([1.5, 0.7]))[0 if T is ET else 1])), RNG.normal(size=(3, 2))),
    "CorrCholesky_3": (lambda T: T.CorrCholeskyTransform(), RNG.normal(size=(4, 3))),
    "CorrCholesky_5": (lambda T: T.CorrCholeskyTransform(), RNG.normal(size=(2, 10)) * 2),
    "LowerCholesky": (lambda T: T.LowerCholeskyTransform(), RNG.normal(size=(2, 3, 3))),
    "PositiveDefinite": (lambda T: T.PositiveDefiniteTransform(), RNG.normal(size=(2, 3, 3))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_inverse_logdet_vs_torch(name):
    build, x = CASES[name]
    ours, theirs = build(ET), build(TT)
    xo, xt = _both(x)
    yo, yt = ours(xo), theirs(xt)
    _close(yo, yt)
    _close(ours.inv(yo), theirs.inv(yt), rtol=1e-8, atol=1e-10)
    if name not in ("LowerCholesky", "PositiveDefinite"):  # not bijective: no log-det in torch either
        _close(ours.log_abs_det_jacobian(xo, yo), theirs.log_abs_det_jacobian(xt, yt), rtol=1e-9)
    assert ours.bijective == theirs.bijective
    assert ours.domain.event_dim == theirs.domain.event_dim
    assert ours.codomain.event_dim == theirs.codomain.event_dim
    assert tuple(ours.forward_shape(x.shape)) == tuple(theirs.forward_shape(x.shape))
    assert tuple(ours.inverse_shape(tuple(yt.shape))) == tuple(theirs.inverse_shape(tuple(yt.shape)))
    assert type(ours.domain).__name__.lstrip("_") == type(theirs.domain).__name__.lstrip("_")
    assert type(ours.codomain).__name__.lstrip("_") == type(theirs.codomain).__name__.lstrip("_")
    assert bool(ours.codomain.check(yo).all())


@pytest.mark.parametrize("name", ["CorrCholesky_3", "Stack_dim1", "Cat_dim0", "CDF_Normal"])
def test_inverse_round_trip(name):
    build, x = CASES[name]
    t = build(ET)
    xo = ember.tensor(x, dtype=ember.float64)
    _close(t.inv(t(xo)), x, rtol=1e-9, atol=1e-10)


def test_corr_cholesky_logdet_against_finite_differences():
    # log|det J| of the map from the D(D-1)/2 inputs to the strictly-lower entries of L (the free coordinates)
    t = ET.CorrCholeskyTransform()
    x = RNG.normal(size=6) * 0.8
    rows, cols = np.tril_indices(4, -1)

    def f(v):
        return t(ember.tensor(v, dtype=ember.float64)).numpy()[rows, cols]

    h = 1e-6
    jac = np.stack([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(6)], axis=1)
    xo = ember.tensor(x, dtype=ember.float64)
    assert abs(t.log_abs_det_jacobian(xo, t(xo)).item() - np.linalg.slogdet(jac)[1]) < 1e-6


def test_cat_and_stack_shape_errors():
    t = ET.CatTransform([ET.ExpTransform(), ET.ExpTransform()], dim=0, lengths=[1, 2])
    with pytest.raises(ValueError, match="sum\\(lengths\\)"):
        t(ember.zeros(4))
    with pytest.raises(ValueError, match="one slice per transform"):
        ET.StackTransform([ET.ExpTransform()], dim=0)(ember.zeros(3))
    with pytest.raises(ValueError, match="different numbers of elements"):
        ET.ReshapeTransform((4,), (3,))
    with pytest.raises(ValueError, match="lower-diagonal"):
        ET.CorrCholeskyTransform().forward_shape((4,))


def test_with_cache():
    t = ET.ExpTransform().with_cache(1)
    x = ember.tensor([0.3])
    assert t(x) is t(x)
    assert ET.CatTransform([ET.ExpTransform()], lengths=[1]).with_cache(1)._cache_size == 1
    with pytest.raises(NotImplementedError):
        ET.AffineTransform(0.0, 1.0).with_cache(1)


# ---- biject_to / transform_to -----------------------------------------------------------------------
CONSTRAINTS = [
    lambda C: C.real, lambda C: C.positive, lambda C: C.nonnegative, lambda C: C.greater_than(1.5),
    lambda C: C.greater_than_eq(-2.0), lambda C: C.less_than(3.0), lambda C: C.unit_interval,
    lambda C: C.interval(-1.0, 4.0), lambda C: C.half_open_interval(0.0, 2.0), lambda C: C.simplex,
    lambda C: C.real_vector, lambda C: C.independent(C.positive, 1), lambda C: C.corr_cholesky,
    lambda C: C.lower_cholesky, lambda C: C.positive_definite,
    lambda C: C.cat([C.positive, C.real, C.unit_interval], dim=-1, lengths=[1, 2, 1]),
    lambda C: C.stack([C.positive, C.interval(0.0, 2.0)], dim=-1),
]
UNCONSTRAINED_SHAPES = {"simplex": (3, 4), "corr_cholesky": (3, 6), "lower_cholesky": (2, 3, 3),
                        "positive_definite": (2, 3, 3), "cat": (3, 4), "stack": (3, 2)}


@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
@pytest.mark.parametrize("index", range(len(CONSTRAINTS)))
def test_constraint_registry_vs_torch(registry, index):
    make = CONSTRAINTS[index]
    ours_c, theirs_c = make(EC), make(TC)
    try:
        theirs_t = getattr(TD, registry)(theirs_c)
    except NotImplementedError:
        with pytest.raises(NotImplementedError, match="Cannot transform"):
            getattr(ED, registry)(ours_c)
        return
    ours_t = getattr(ED, registry)(ours_c)
    assert type(ours_t).__name__ == type(theirs_t).__name__
    key = type(theirs_c).__name__.lstrip("_").lower()
    shape = next((v for k, v in UNCONSTRAINED_SHAPES.items() if key.replace("_", "").startswith(k.replace("_", ""))),
                 (3, 4))
    x = RNG.normal(size=shape)
    xo, xt = _both(x)
    yo, yt = ours_t(xo), theirs_t(xt)
    _close(yo, yt, rtol=1e-9)
    assert bool(ours_c.check(yo).all())
    if ours_t.bijective:
        _close(ours_t.log_abs_det_jacobian(xo, yo), theirs_t.log_abs_det_jacobian(xt, yt), rtol=1e-9)
        _close(ours_t.inv(yo), x, rtol=1e-7, atol=1e-8)


def test_registry_register_and_errors():
    registry = ED.constraint_registry.ConstraintRegistry()
    with pytest.raises(NotImplementedError, match="Cannot transform _Real"):
        registry(EC.real)

    @registry.register(EC.real)
    def _factory(constraint):
        return ET.ExpTransform()

    assert isinstance(registry(EC.real), ET.ExpTransform)
    with pytest.raises(TypeError, match="Constraint subclass or instance"):
        registry.register(int, _factory)
    with pytest.raises(NotImplementedError):
        ED.biject_to(EC.boolean)


def test_mixture_same_family_constraint():
    mix = ED.MixtureSameFamily(ED.Categorical(probs=ember.tensor([0.3, 0.7])),
                               ED.Uniform(ember.tensor([0.0, 1.0]), ember.tensor([2.0, 3.0])))
    tmix = TD.MixtureSameFamily(TD.Categorical(probs=torch.tensor([0.3, 0.7])),
                                TD.Uniform(torch.tensor([0.0, 1.0]), torch.tensor([2.0, 3.0])))
    assert isinstance(mix.support, EC.MixtureSameFamilyConstraint)
    values = np.array([-0.5, 0.5, 1.5, 2.5, 3.5])
    _close(mix.support.check(ember.tensor(values)), tmix.support.check(torch.tensor(values)))
    vec = EC.MixtureSameFamilyConstraint(EC.independent(EC.positive, 1))
    tvec = TC.MixtureSameFamilyConstraint(TC.independent(TC.positive, 1))
    v = RNG.normal(size=(4, 3))
    _close(vec.check(ember.tensor(v)), tvec.check(torch.tensor(v)))
    assert vec.event_dim == 1 and not vec.is_discrete
    with pytest.raises(TypeError):
        EC.MixtureSameFamilyConstraint(3)
