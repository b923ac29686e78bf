"""ember's call signatures against torch 2.13's, name by name, for every public callable both have in 27
namespaces (torch, Tensor methods, nn modules' constructors, nn.functional, optim, lr_scheduler, utils.data, init,
nn.utils, distributions, linalg, fft, special, autograd, testing, ...): parameter names, keyword-only-ness,
positional order and defaults. torch's C builtins are read from their ATen schemas (the names Python binds).
Every difference left is listed with its reason in signature_allowlist.py; a new one fails here, and so does an
entry that no longer differs."""
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

from signature_allowlist import ALLOWED  # noqa: E402
from signature_sweep import compare_signatures, sweep_namespace  # noqa: E402

NAMESPACES = ["", "Tensor", "nn", "nn.functional", "optim", "optim.lr_scheduler", "optim.swa_utils", "utils.data",
              "nn.init", "nn.utils", "nn.utils.rnn", "nn.utils.parametrize", "nn.utils.parametrizations",
              "distributions", "distributions.transforms", "distributions.constraints", "linalg", "fft", "special",
              "func", "autograd", "autograd.functional", "autograd.forward_ad", "autograd.graph", "testing",
              "utils.checkpoint", "amp", "random"]


def _resolve(root, dotted):
    import importlib

    if dotted and dotted != "Tensor":
        importlib.import_module(f"{root.__name__}.{dotted}")
    for part in filter(None, dotted.split(".")):
        root = getattr(root, part)
    return root


@pytest.fixture(scope="module")
def differences() -> dict:
    found = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for ns in NAMESPACES:
            found.update(sweep_namespace(_resolve(torch, ns), _resolve(ember, ns), ns, torch))
    return found


def test_every_signature_difference_is_reviewed(differences) -> None:
    unreviewed = {name: diffs for name, diffs in differences.items() if ALLOWED.get(name, (None,))[0] != diffs}
    assert unreviewed == {}, "new or changed differences (fix them, or list them with a reason in " \
                             "signature_allowlist.py)"


def test_no_stale_allowlist_entries(differences) -> None:
    assert sorted(set(ALLOWED) - set(differences)) == []


def test_the_sweep_finds_a_difference() -> None:
    # the checker itself: a changed default, a renamed parameter and a keyword-only one are each reported
    import inspect

    def theirs(input, dim=-1, keepdim=False):  # noqa: ANN001, ANN202
        pass

    def ours(x, dim=None, *, keepdim=False):  # noqa: ANN001, ANN202
        pass


    assert compare_signatures(inspect.signature(theirs), inspect.signature(ours)) == [
        "missing input", "dim=-1 vs None", "keepdim kw-only", "requires extra ['x']"]


def test_aten_reduction_default_is_none_as_torchs_binding() -> None:
    # why the reduction=1 entries are allowed: torch's binding gives the unreduced loss by default
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.random((3, 4))
    t = torch.kl_div(torch.tensor(a), torch.tensor(b))
    e = ember.kl_div(ember.tensor(a), ember.tensor(b))
    assert tuple(t.shape) == tuple(e.shape) == (3, 4)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-12)


@pytest.mark.parametrize("call", [
    lambda L, x: L.swapaxes(x, axis0=0, axis1=1),
    lambda L, x: x.swapaxes(axis0=1, axis1=0),
    lambda L, x: L.broadcast_to(x, size=(2, 2, 3)),
    lambda L, x: x.broadcast_to(size=(2, 2, 3)),
    lambda L, x: L.dot(x[0], tensor=x[1]),
    lambda L, x: x[0].dot(tensor=x[1]),
    lambda L, x: L.gather(x, 1, L.tensor([[0], [2]]), sparse_grad=False),
    lambda L, x: x.gather(1, L.tensor([[0], [2]]), sparse_grad=False),
    lambda L, x: L.tensor_split(x, sections=2, dim=1),
    lambda L, x: L.tensor_split(x, indices=[1], dim=1),
    lambda L, x: L.hsplit(x, indices=[1]),
    lambda L, x: x.split(split_size=2, dim=1),
    lambda L, x: L.dropout(x, 0.5, train=False),
    lambda L, x: L.nn.functional.one_hot(input=L.tensor([1, 0]), num_classes=3),
    lambda L, x: L.special.i0(input=x),
    lambda L, x: L.special.zeta(input=x + 2, other=x + 1),
    lambda L, x: L.special.xlog1py(input=x, other=x),
    lambda L, x: L.special.airy_ai(x=x),
    lambda L, x: L.special.chebyshev_polynomial_t(x=x, n=2),
    lambda L, x: L.special.softmax(x, 1, L.float64),
    lambda L, x: L.linalg.vector_norm(input=x),
    lambda L, x: L.linalg.norm(input=x),
    lambda L, x: L.linalg.matrix_norm(input=x),
    lambda L, x: L.linalg.pinv(input=x),
    lambda L, x: L.polygamma(1, input=x + 1),
    lambda L, x: L.histogramdd(x.reshape(3, 2), [2, 2], None, None, True).hist,
])
def test_torchs_keywords_work(call) -> None:
    values = np.arange(6.0).reshape(2, 3) / 7
    t, e = call(torch, torch.tensor(values)), call(ember, ember.tensor(values))
    t, e = (t, e) if isinstance(t, tuple) else ((t,), (e,))
    for a, b in zip(t, e):
        # (torch's float64 zeta(2, 1) is 5e-10 from pi^2/6; ember's is the correctly rounded value)
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-8, atol=1e-15)


def test_histogramdd_bin_counts_use_torchs_edges() -> None:
    # values on the edges: NumPy's linspace put an edge 1 ulp from torch's, and such a value in another bin
    rng = np.random.default_rng(0)
    for i, dt in enumerate(["float64", "float32"] * 10):
        v = (rng.integers(0, 8, (20, 2)) / 7).astype(dt)
        bins = [2, 3] if i % 2 else 3
        t = torch.histogramdd(torch.tensor(v), bins, density=i % 3 == 0)
        e = ember.histogramdd(ember.tensor(v), bins, density=i % 3 == 0)
        np.testing.assert_allclose(e.hist.numpy(), t.hist.numpy(), rtol=1e-6)
        for a, b in zip(e.bin_edges, t.bin_edges):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_rrelu_generator_draws_torchs_slopes() -> None:
    x = np.arange(-6.0, 6.0).reshape(3, 4)
    t = torch.rrelu(torch.tensor(x), training=True, generator=torch.Generator().manual_seed(3))
    e = ember.rrelu(ember.tensor(x), training=True, generator=ember.Generator().manual_seed(3))
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-7)


def test_constructors_with_torchs_defaults() -> None:
    with pytest.raises(TypeError, match="value"):
        ember.nn.ConstantPad2d(1)  # value has no default in torch
    assert ember.nn.TransformerEncoderLayer(8, 2).activation is ember.nn.functional.relu
    for L in (torch, ember):
        m = L.nn.LazyConv2d(4, 3, 1, 1, 1, 1, False)  # positional: stride, padding, dilation, groups, bias
        assert m.bias is None and tuple(m(L.ones(1, 2, 5, 5)).shape) == (1, 4, 5, 5)
    values, indices = ember.nn.functional.max_pool2d_with_indices(ember.ones(1, 1, 2, 2), 2)
    assert tuple(indices.shape) == (1, 1, 1, 1)
