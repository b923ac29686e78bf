"""What programs print, character for character as torch 2.13: every torch.nn module's ``repr`` built from its
required arguments (extra_repr fields, lazy modules before their first call, runs of equal submodules in a
ModuleList), ParameterList/ParameterDict, complex tensors, torch.testing's mismatch messages, distribution
transforms; and small behaviours found by the same sweep (``ctx.saved_variables``, ``calculate_gain``)."""
import inspect
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

# One value per required constructor parameter name (modules needing other arguments are skipped).
_ARGS = {"kernel_size": 3, "padding": 1, "normalized_shape": 4, "num_features": 4, "in_features": 4,
         "out_features": 3, "in_channels": 4, "out_channels": 2, "embed_dim": 4, "num_heads": 2, "d_model": 8,
         "nhead": 2, "input_size": 4, "hidden_size": 3, "num_embeddings": 10, "embedding_dim": 3, "output_size": 2,
         "size": 2, "upscale_factor": 2, "downscale_factor": 2, "num_groups": 2, "num_channels": 4, "dim": 1,
         "in1_features": 2, "in2_features": 3, "value": 1.5, "groups": 2, "lambd": 0.5, "block_size": 2,
         "n_classes": 10, "cutoffs": [4, 8], "unflattened_size": (2, 2), "norm_type": 2.0, "output_ratio": 0.5,
         "alpha": 1.0}
_SKIP = {"Transformer", "TransformerEncoder", "TransformerDecoder",  # big defaults; printed below at small size
         "RNNBase", "Module", "Container"}


def _module_cases() -> list:
    cases = []
    for name in sorted(dir(torch.nn)):
        cls = getattr(torch.nn, name)
        if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)) or name in _SKIP:
            continue
        try:
            params = list(inspect.signature(cls.__init__).parameters.values())[1:]
        except (TypeError, ValueError):
            continue
        required = [p.name for p in params if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL,
                                                                                       p.VAR_KEYWORD)]
        if all(r in _ARGS for r in required):
            cases.append((name, {r: _ARGS[r] for r in required}))
    return cases


def _printed(make) -> str:
    try:
        return make()
    except Exception as error:  # (FractionalMaxPool2d without a size refuses in both: the error class counts)
        return f"raises {type(error).__name__}"


def _as_torch(text: str) -> str:
    return text.replace("ember.", "torch.")


def test_every_module_prints_as_torch() -> None:
    differ = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, kwargs in _module_cases():
            theirs, ours = (_printed(lambda: repr(getattr(L.nn, name)(**kwargs))) for L in (torch, ember))
            if theirs != _as_torch(ours):
                differ[name] = (theirs, ours)
    assert len(_module_cases()) > 120 and differ == {}


def test_modulelist_runs_and_nested_containers_print_as_torch() -> None:
    def build(L):
        layer = L.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)
        return L.nn.Sequential(L.nn.TransformerEncoder(layer, 3, enable_nested_tensor=False),
                               L.nn.ModuleList([L.nn.Linear(2, 2), L.nn.Linear(2, 2), L.nn.ReLU(), L.nn.Linear(2, 2)]),
                               L.nn.ModuleList(),
                               L.nn.ParameterList([L.nn.Parameter(L.ones(2))]),
                               L.nn.ParameterDict({"a": L.nn.Parameter(L.ones(2, 3)),
                                                   "b": L.nn.Parameter(L.ones(1, dtype=L.float64))}),
                               L.nn.ParameterList([L.nn.Parameter(L.ones(2)), L.nn.Parameter(L.ones(3, 4))]))

    assert _as_torch(repr(build(ember))) == repr(build(torch))


def test_lazy_modules_print_their_target_after_the_first_call() -> None:
    for L in (torch, ember):
        m = L.nn.Sequential(L.nn.LazyConv2d(4, 3, padding=1), L.nn.LazyBatchNorm2d(), L.nn.LazyLinear(2))
        m[:2](L.ones(1, 2, 3, 3))
        m[2](L.ones(1, 5))
        if L is torch:
            theirs = repr(m)
        else:
            assert _as_torch(repr(m)) == theirs


_COMPLEX = [np.array([1 + 2j, 3 - 4.5j]), np.array([[1e-5 + 1j, 0]]), np.array(2 + 3j),
            np.array([1 + 1j, np.nan + np.inf * 1j, -0.0 - 0.0j]), np.array([1e9 + 1j]), np.zeros((2, 2), complex),
            np.random.default_rng(0).standard_normal((3, 30)) * (1 + 1j) * 100,
            np.random.default_rng(1).standard_normal(2000) * 1j + 5]


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_tensors_print_as_torch(dtype: str) -> None:
    for values in _COMPLEX:
        v = values.astype(dtype)
        assert _as_torch(str(ember.tensor(v))) == str(torch.tensor(v))


@pytest.mark.parametrize("actual, expected, kwargs", [
    ([1.0, 2.0], [1.0, 2.1], {}),
    ([[1.0, 2.0], [3.0, 4.0]], [[1.0, 2.5], [3.5, 4.0]], {}),
    ([1, 2], [1, 3], {}),
    (1.0, 1.1, {}),
    (3, 4, {}),
    ([1.0, 2.0], [1.0, 2.1], {"rtol": 0, "atol": 0}),
    ([1.0, float("nan")], [1.0, 2.0], {}),
    ([1.0, 0.0], [1.0, 1e-3], {}),
    ([0.5], [0.6], {"msg": "custom"}),
])
def test_assert_close_messages_as_torch(actual, expected, kwargs) -> None:
    texts = []
    for L in (torch, ember):
        a = L.tensor(actual) if isinstance(actual, list) else actual
        e = L.tensor(expected) if isinstance(expected, list) else expected
        with pytest.raises(AssertionError) as info:
            L.testing.assert_close(a, e, **kwargs)
        texts.append(str(info.value))
    assert texts[1] == texts[0]


def test_transforms_and_small_behaviours_as_torch() -> None:
    for L in (torch, ember):
        T = L.distributions.transforms
        texts = [repr(L.distributions.biject_to(L.distributions.constraints.positive)),
                 repr(T.ComposeTransform([T.ExpTransform(), T.AffineTransform(0.0, 2.0)])),
                 repr(T.ComposeTransform([])),
                 [L.nn.init.calculate_gain(n) for n in ("linear", "conv2d", "sigmoid", "tanh", "relu")],
                 [type(L.nn.init.calculate_gain(n)).__name__ for n in ("linear", "relu")]]
        if L is torch:
            theirs = texts
        else:
            assert texts == theirs


def test_function_ctx_saved_variables_warns_as_torch() -> None:
    seen = {}
    for L in (torch, ember):
        class Double(L.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                with pytest.warns(DeprecationWarning, match="saved_variables"):
                    (x,) = ctx.saved_variables
                seen[L.__name__] = x.detach().numpy().tolist()
                return g * 2

        x = L.tensor([1.5], requires_grad=True)
        Double.apply(x).sum().backward()
        assert x.grad.tolist() == [2.0]
    assert seen["ember"] == seen["torch"] == [1.5]


def _distributions(L) -> dict:
    t, D = L.tensor, L.distributions
    C, T = D.constraints, D.transforms
    return {
        "Normal": lambda: D.Normal(t([0.0, 1.0]), t([1.0, 2.0])),
        "Bernoulli": lambda: D.Bernoulli(probs=t([0.3])),
        "Bernoulli_logits": lambda: D.Bernoulli(logits=t([0.3])),
        "Beta": lambda: D.Beta(t(2.0), t(3.0)),
        "Binomial": lambda: D.Binomial(10, t([0.5])),
        "Categorical": lambda: D.Categorical(logits=t([0.1, 0.2])),
        "Cauchy": lambda: D.Cauchy(t(0.0), t(1.0)),
        "Chi2": lambda: D.Chi2(t(3.0)),
        "Dirichlet": lambda: D.Dirichlet(t([1.0, 2.0])),
        "Exponential": lambda: D.Exponential(t(2.0)),
        "Gamma": lambda: D.Gamma(t(2.0), t(1.0)),
        "Geometric": lambda: D.Geometric(t(0.3)),
        "Gumbel": lambda: D.Gumbel(t(0.0), t(1.0)),
        "HalfNormal": lambda: D.HalfNormal(t(1.0)),
        "Laplace": lambda: D.Laplace(t(0.0), t(1.0)),
        "LogNormal": lambda: D.LogNormal(t(0.0), t(1.0)),
        "Multinomial": lambda: D.Multinomial(5, t([0.2, 0.8])),
        "MVN": lambda: D.MultivariateNormal(t([0.0, 0.0]), L.eye(2)),
        "OneHotCategorical": lambda: D.OneHotCategorical(t([0.2, 0.8])),
        "Poisson": lambda: D.Poisson(t(3.0)),
        "StudentT": lambda: D.StudentT(t(3.0)),
        "Uniform": lambda: D.Uniform(t(0.0), t(2.0)),
        "VonMises": lambda: D.VonMises(t(0.0), t(1.0)),
        "Weibull": lambda: D.Weibull(t(1.0), t(2.0)),
        "Independent": lambda: D.Independent(D.Normal(t([0.0, 1.0]), t([1.0, 1.0])), 1),
        "MixtureSameFamily": lambda: D.MixtureSameFamily(D.Categorical(t([0.5, 0.5])),
                                                         D.Normal(t([0.0, 1.0]), t([1.0, 1.0]))),
        "Transformed": lambda: D.TransformedDistribution(D.Normal(t(0.0), t(1.0)), [T.ExpTransform()]),
        "RelaxedBernoulli": lambda: D.RelaxedBernoulli(t(0.5), probs=t([0.3])),
        "LowRankMVN": lambda: D.LowRankMultivariateNormal(t([0.0, 0.0]), t([[1.0], [0.0]]), t([1.0, 1.0])),
        "constraints": lambda: [str(c) for c in (
            C.real, C.positive, C.unit_interval, C.simplex, C.integer_interval(0, 3), C.greater_than(1.0),
            C.boolean, C.lower_cholesky, C.positive_definite, C.independent(C.real, 1), C.nonnegative_integer)],
        "transforms": lambda: [repr(x) for x in (
            T.SigmoidTransform(), T.TanhTransform(), T.SoftmaxTransform(), T.StickBreakingTransform(),
            T.PowerTransform(t(2.0)), T.AbsTransform(), T.LowerCholeskyTransform(), T.ExpTransform().inv,
            T.AffineTransform(1.0, 2.0).inv)],
        "biject_to": lambda: [repr(D.biject_to(c)) for c in (
            C.unit_interval, C.simplex, C.interval(0.0, 2.0), C.greater_than(1.0))],
    }


def test_distributions_constraints_and_transforms_print_as_torch() -> None:
    # repr, shapes, support and argument constraints of 29 distributions; constraint and transform printouts
    def shown(make):
        d = make()
        text = d if isinstance(d, (str, list)) else str(d)
        if hasattr(d, "batch_shape"):
            text += f" {tuple(d.batch_shape)} {tuple(d.event_shape)} {d.support} "
            text += str({n: str(c) for n, c in d.arg_constraints.items()})
        return _as_torch(str(text))

    theirs, ours = _distributions(torch), _distributions(ember)
    differ = {k: (shown(theirs[k]), shown(ours[k])) for k in theirs if shown(theirs[k]) != shown(ours[k])}
    assert differ == {}
