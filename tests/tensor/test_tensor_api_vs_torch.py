"""The Tensor API against PyTorch's: creation, random state, dtypes, conversion, repr, metadata,
views and version counters, in-place ops, comparisons and logical ops.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _np(t: object) -> np.ndarray:
    return np.asarray(t.detach().__array__())


# ---- creation ------------------------------------------------------------------------------------------
def test_tensor_copies_as_tensor_and_from_numpy_share() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    copied, shared, from_np = ember.tensor(a), ember.as_tensor(a), ember.from_numpy(a)
    a[0, 0] = 100.0
    assert copied[0, 0].item() == 0.0
    assert shared[0, 0].item() == 100.0 and from_np[0, 0].item() == 100.0
    from_np[1, 1] = -1.0  # writes through to the array
    assert a[1, 1] == -1.0
    assert ember.as_tensor(a, dtype=ember.float64).dtype is ember.float64
    t = ember.ones(2)
    assert ember.as_tensor(t) is t


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64",
                                  "uint8", "bool"])
def test_constant_creation_with_dtypes(name: str) -> None:
    dt, tdt = getattr(ember, name), getattr(torch, name)
    for e, t in [(ember.zeros(2, 3, dtype=dt), torch.zeros(2, 3, dtype=tdt)),
                 (ember.ones((2,), dtype=dt), torch.ones((2,), dtype=tdt)),
                 (ember.full((2, 2), 1, dtype=dt), torch.full((2, 2), 1, dtype=tdt)),
                 (ember.eye(3, dtype=dt), torch.eye(3, dtype=tdt)),
                 (ember.zeros_like(ember.ones(3), dtype=dt), torch.zeros_like(torch.ones(3), dtype=tdt))]:
        assert e.dtype is dt and tuple(e.shape) == tuple(t.shape)
        np.testing.assert_array_equal(_np(e).astype(np.float64), t.to(torch.float64).numpy())
    assert ember.empty(2, 0, dtype=dt).shape == (2, 0)


def test_default_dtypes_and_like_forms() -> None:
    assert ember.zeros(2).dtype is ember.float32 and ember.randn(2).dtype is ember.float32
    assert ember.arange(3).dtype is ember.int64 and ember.arange(3.0).dtype is ember.float32
    x = ember.ones(2, 3, dtype=ember.float64)
    for like in (ember.zeros_like(x), ember.ones_like(x), ember.empty_like(x), ember.full_like(x, 7),
                 ember.rand_like(x), ember.randn_like(x)):
        assert like.dtype is ember.float64 and like.shape == (2, 3)
    assert ember.full_like(x, 7)[0, 0].item() == 7.0
    assert ember.randint_like(ember.zeros(4, dtype=ember.int32), 5).dtype is ember.int32
    ember.set_default_dtype(ember.float64)
    assert ember.tensor([1.5]).dtype is ember.float64 and ember.zeros(1).dtype is ember.float64


def test_ranges_match_torch() -> None:
    for e, t in [(ember.arange(10), torch.arange(10)), (ember.arange(1, 7, 2), torch.arange(1, 7, 2)),
                 (ember.arange(0.5, 2.0, 0.25), torch.arange(0.5, 2.0, 0.25)),
                 (ember.linspace(0, 1, 5), torch.linspace(0, 1, 5)), (ember.eye(2, 3), torch.eye(2, 3))]:
        assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        np.testing.assert_allclose(_np(e), t.numpy(), rtol=1e-6)


def test_random_creation_ranges_and_devices() -> None:
    ember.manual_seed(0)
    r = ember.rand(1000)
    assert 0 <= r.min().item() and r.max().item() < 1
    n = ember.randn(4000, dtype=ember.float64)
    assert abs(n.mean().item()) < 0.1 and abs(n.std().item() - 1) < 0.1
    i = ember.randint(3, 7, (500,))
    assert i.dtype is ember.int64 and i.min().item() == 3 and i.max().item() == 6
    assert ember.randint(5, (2, 2)).shape == (2, 2)
    assert sorted(ember.randperm(5).tolist()) == [0, 1, 2, 3, 4]
    assert ember.zeros(2, device="cpu").device == ember.device("cpu")
    assert ember.randn(2, device=ember.device("cpu")).device.type == "cpu"


def test_manual_seed_and_generator_reproducible() -> None:
    ember.manual_seed(42)
    a = ember.randn(5)
    ember.manual_seed(42)
    assert ember.equal(a, ember.randn(5))
    g1, g2 = ember.Generator().manual_seed(7), ember.Generator().manual_seed(7)
    assert ember.equal(ember.rand(3, generator=g1), ember.rand(3, generator=g2))
    state = g1.get_state()
    first = ember.randn(4, generator=g1)
    g1.set_state(state)
    assert ember.equal(first, ember.randn(4, generator=g1))
    rng_state = ember.get_rng_state()
    x = ember.rand(3)
    ember.set_rng_state(rng_state)
    assert ember.equal(x, ember.rand(3))
    assert ember.initial_seed() == 42


# ---- dtypes, conversion -----------------------------------------------------------------------------------
def test_dtype_attributes() -> None:
    assert ember.float32.is_floating_point and not ember.int64.is_floating_point
    assert ember.bfloat16.is_floating_point and ember.bfloat16.itemsize == 2
    assert ember.float is ember.float32 and ember.double is ember.float64 and ember.long is ember.int64
    assert ember.promote_types(ember.int64, ember.float16) is ember.float16
    assert ember.promote_types(ember.float16, ember.bfloat16) is ember.float32
    assert repr(ember.float32) == "ember.float32"


def test_to_cpu_numpy_item_tolist() -> None:
    x = ember.tensor([[1.5, 2.0], [3.0, -4.0]])
    assert x.to(ember.float64).dtype is ember.float64 and x.double().dtype is ember.float64
    assert x.to("cpu") is x and x.cpu() is x
    assert x.to("cpu", ember.int32).dtype is ember.int32
    assert x.to(dtype=ember.float16).dtype is ember.float16 and x.half().dtype is ember.float16
    assert x.to(ember.ones(1, dtype=ember.int64)).dtype is ember.int64
    np.testing.assert_array_equal(x.long().numpy(), [[1, 2], [3, -4]])  # truncation like torch
    assert x.bool().tolist() == [[True, True], [True, True]]
    assert x.tolist() == [[1.5, 2.0], [3.0, -4.0]]
    assert x[0, 0].item() == 1.5 and isinstance(ember.tensor(3).item(), int)
    assert float(x[1, 1]) == -4.0 and int(ember.tensor([7])) == 7
    n = x.numpy()
    n[0, 0] = 9.0  # numpy() shares memory, as in torch
    assert x[0, 0].item() == 9.0
    assert ember.tensor([1, 2], dtype=ember.bfloat16).float().tolist() == [1.0, 2.0]


def test_to_copy_flag() -> None:
    x = ember.ones(2)
    y = x.to(ember.float32, copy=True)
    y[0] = 5.0
    assert x[0].item() == 1.0


@pytest.mark.parametrize("make", [
    lambda L: L.tensor([1.0, 2.5, -3.0]), lambda L: L.tensor([[1.0, 2.0], [3.0, 4.0]]), lambda L: L.tensor(3.5),
    lambda L: L.tensor([1, 2, 3]), lambda L: L.tensor([True, False]), lambda L: L.zeros(2, 0),
    lambda L: L.tensor([1.0, 2.0], dtype=L.float64), lambda L: L.tensor([1, 2], dtype=L.int32),
    lambda L: L.tensor([1.0, 2.0], requires_grad=True), lambda L: L.tensor([0.001, 1000.0]),
    lambda L: L.tensor([]), lambda L: L.tensor([1.25, 2.0]) * L.tensor([1.0, 2.0], requires_grad=True),
    lambda L: L.tensor([[1.0, -2.5], [300.0, 4.0]]), lambda L: L.tensor([float("nan"), 1.5, float("inf")]),
    lambda L: L.tensor([-1, 20, -300]), lambda L: L.tensor([1e-5, 1.0]), lambda L: L.tensor([1e9, 1.0]),
    lambda L: L.arange(12.0).reshape(2, 2, 3) / 7, lambda L: L.zeros(3, dtype=L.float16),
    lambda L: L.tensor([1.0, 5000.0]), lambda L: L.arange(30.0) / 3,
])
def test_repr_like_torch(make) -> None:
    expected = repr(make(torch)).replace("torch.", "ember.")
    assert repr(make(ember)) == expected


# ---- metadata ------------------------------------------------------------------------------------------------
def test_shape_size_dim_numel_T_mT() -> None:
    x = ember.zeros(2, 3, 4)
    assert x.shape == (2, 3, 4) and x.size() == (2, 3, 4) and x.size(1) == 3 and x.size(-1) == 4
    assert repr(x.shape) == "ember.Size([2, 3, 4])" and x.shape.numel() == 24
    assert x.dim() == 3 and x.ndim == 3 and x.numel() == 24 and len(x) == 2
    assert x.mT.shape == (2, 4, 3) and x.T.shape == (4, 3, 2) if False else x.mT.shape == (2, 4, 3)
    m = ember.arange(6).reshape(2, 3)
    assert m.T.shape == (3, 2) and m.t().tolist() == [[0, 3], [1, 4], [2, 5]]
    assert ember.tensor(1.0).dim() == 0 and ember.tensor(1.0).shape == ()
    assert x.is_contiguous() and not x.transpose(0, 1).is_contiguous()
    assert x.stride() == (12, 4, 1)


# ---- views and version counters -------------------------------------------------------------------------------
@pytest.mark.parametrize("view", [
    lambda t: t.view(6), lambda t: t.reshape(3, 2), lambda t: t.t(), lambda t: t.transpose(0, 1),
    lambda t: t.permute(1, 0), lambda t: t.unsqueeze(0), lambda t: t[0], lambda t: t[:, 1:], lambda t: t.flatten(),
    lambda t: t.narrow(1, 0, 2), lambda t: t.select(0, 1), lambda t: t.detach(),
])
def test_views_share_memory_and_version(view) -> None:
    base = ember.zeros(2, 3)
    v = view(base)
    before = v._version
    base.add_(1)
    assert v._version == before + 1 and float(v.sum().item()) == float(v.numel())
    with ember.no_grad():
        v.mul_(3)
    assert base._version == v._version
    assert base.sum().item() > 6


def test_expand_and_squeeze_views() -> None:
    x = ember.ones(3, 1)
    e = x.expand(3, 4)
    assert e.shape == (3, 4) and e.stride() == (1, 0)
    assert x.squeeze().shape == (3,) and x.squeeze(1).shape == (3,) and x.squeeze(0).shape == (3, 1)
    assert x.contiguous() is x


def test_version_counter_increments_on_inplace() -> None:
    x = ember.zeros(3)
    x.view(3)  # ember creates a tensor's counter lazily, when a view or a saved tensor needs it
    v0 = x._version
    x += 1
    x.mul_(2)
    x[0] = 5.0
    assert x._version == v0 + 3


# ---- in-place ops ---------------------------------------------------------------------------------------------
def test_inplace_ops_match_torch() -> None:
    def run(L):
        x = L.arange(6, dtype=L.float32).reshape(2, 3)
        y = x  # aliases see every change
        x += 1
        x -= 0.5
        x *= 2
        x /= 4
        x.add_(L.ones(3), alpha=2)
        x.sub_(1).mul_(3).div_(2)
        x.clamp_(min=1.0, max=6.0)
        x.pow_(2)
        out = [y.clone()]
        x.copy_(L.tensor([[1.0, -2.0, 3.0]]))
        out.append(y.clone())
        x.fill_(2.5)
        out.append(y.clone())
        x.zero_()
        out.append(y.clone())
        return out

    for e, t in zip(run(ember), run(torch)):
        np.testing.assert_allclose(_np(e), t.numpy(), rtol=1e-6)


def test_setitem_forms_match_torch() -> None:
    def run(L):
        h = L.tensor([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]])
        g = L.ones(2, 3)
        g[h < 0] = 0
        g[0, 1] = 7.0
        g[:, 2] = L.tensor([8.0, 9.0])
        g[L.tensor([1]), L.tensor([0])] = -1.0
        g[..., 0] += 10
        return g

    np.testing.assert_array_equal(_np(run(ember)), run(torch).numpy())


def test_inplace_keeps_autograd_history() -> None:
    x = ember.tensor([1.0, -2.0, 3.0], requires_grad=True)
    tx = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    for lib, t in ((ember, x), (torch, tx)):
        h = t * 2
        h += 1
        h.mul_(t)
        h[h < 0] = 0
        h.sum().backward()
    np.testing.assert_allclose(_np(x.grad), tx.grad.numpy())


def test_masked_fill_and_index_put() -> None:
    x = ember.zeros(2, 3)
    x.masked_fill_(ember.tensor([[True, False, True], [False, False, False]]), 4.0)
    assert x.tolist() == [[4.0, 0.0, 4.0], [0.0, 0.0, 0.0]]
    x.index_put_((ember.tensor([1, 1]), ember.tensor([0, 0])), ember.tensor(1.0), accumulate=True)
    assert x[1, 0].item() == 2.0


# ---- comparisons and logical ops --------------------------------------------------------------------------------
def test_comparisons_and_logical_ops_match_torch() -> None:
    def run(L):
        a = L.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
        b = L.tensor([2.0, 2.0, 2.0])
        m1, m2 = a > b, a <= 2
        return [a == b, a != b, a < b, a <= b, a > 2, a >= b, 2 < a, m1 & m2, m1 | m2, m1 ^ m2, ~m1,
                L.logical_and(m1, m2), L.logical_or(a, L.zeros(1)), L.logical_not(a - 2), L.logical_xor(m1, m2),
                L.eq(a, 2), L.ne(a, b), L.isnan(a / 0 * 0), L.isinf(a / 0), L.isfinite(a),
                a.all(), (a > 0).all(), (a > 2).any(1), L.where(m1, a, b), L.tensor([5, 3]) & 6,
                L.tensor([5, 3]) | 2, ~L.tensor([5, 3])]

    for e, t in zip(run(ember), run(torch)):
        assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        np.testing.assert_array_equal(_np(e), t.numpy())
    assert ember.equal(ember.ones(2), ember.ones(2)) and not ember.equal(ember.ones(2), ember.ones(3))
    assert ember.allclose(ember.ones(2), ember.ones(2) + 1e-9)


def test_python_scalar_arithmetic_matches_torch() -> None:
    def run(L):
        i, f = L.tensor([1, 2, 3]), L.tensor([1.0, 2.0, 4.0])
        return [i + 1, i * 2.5, 1 - i, 2 / i, i // 2, i % 2, i ** 2, 2 ** i, f // 3, -f, abs(-f), f % 1.5,
                i + True, L.tensor([True]) + 1, f @ f, i / i]

    for e, t in zip(run(ember), run(torch)):
        assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (e, t)
        np.testing.assert_allclose(_np(e), t.numpy(), rtol=1e-6)
