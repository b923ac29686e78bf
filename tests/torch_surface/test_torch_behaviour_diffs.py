"""Behaviours issue 17 found different from PyTorch, each checked against torch."""
from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

import ember
from ember import dtypes

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("call", ["randint(10, size=(2000,))", "randint(3, 7, (2000,))", "randint(5, (2000,))",
                                  "randint(low=2, high=4, size=(2000,))", "randint(10, size=(2000,), dtype=int32)"])
def test_randint_signatures_read_low_and_high_as_torch(call: str) -> None:
    e = eval("ember." + call.replace("int32", "ember.int32"))
    t = eval("torch." + call.replace("int32", "torch.int32"))
    assert tuple(e.shape) == tuple(t.shape) and str(e.dtype)[6:] == str(t.dtype)[6:]
    assert set(e.tolist()) == set(t.tolist())  # 2000 draws cover every value of the small range


def test_randint_without_size_raises_like_torch() -> None:
    with pytest.raises(TypeError):
        ember.randint(10)
    with pytest.raises(TypeError):
        torch.randint(10)


@pytest.mark.parametrize("fn", ["empty", "zeros", "ones", "rand", "randn"])
def test_size_keyword(fn: str) -> None:
    e = getattr(ember, fn)(size=(2, 3))
    t = getattr(torch, fn)(size=(2, 3))
    assert tuple(e.shape) == tuple(t.shape) == (2, 3) and e.dtype is ember.float32
    if fn in ("zeros", "ones"):
        np.testing.assert_array_equal(e.numpy(), t.numpy())
    with pytest.raises(TypeError):
        getattr(ember, fn)(2, size=(2, 3))


@pytest.mark.parametrize("key", [range(1, 4), range(0), range(4, 0, -2), (slice(None), range(2)),
                                 (range(2), range(1, 3)), (0, range(3))])
def test_range_indices_match_torch_values_and_gradients(key) -> None:
    data = np.arange(20.0).reshape(5, 4)
    e, t = ember.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    ye, yt = e[key], t[key]
    np.testing.assert_array_equal(ye.detach().numpy(), yt.detach().numpy())
    (ye * ye).sum().backward()
    (yt * yt).sum().backward()
    np.testing.assert_array_equal(e.grad.numpy(), t.grad.numpy())
    e2, t2 = ember.tensor(data), torch.tensor(data)
    e2[key] = -1.0
    t2[key] = -1.0
    np.testing.assert_array_equal(e2.numpy(), t2.numpy())


def test_random_sampler_with_replacement_draws_lazily() -> None:
    sampler = ember.data.RandomSampler(range(7), replacement=True, num_samples=10**12)
    start = time.perf_counter()
    first = list(itertools.islice(iter(sampler), 100))
    assert time.perf_counter() - start < 1.0 and len(sampler) == 10**12
    assert all(0 <= i < 7 for i in first) and len(set(first)) > 1


@pytest.mark.parametrize("replacement,n,num_samples", [(True, 5, 70), (False, 5, 12), (False, 6, None)])
def test_random_sampler_counts_and_ranges_match_torch(replacement: bool, n: int, num_samples) -> None:
    ours = list(ember.data.RandomSampler(range(n), replacement=replacement, num_samples=num_samples))
    theirs = list(torch.utils.data.RandomSampler(range(n), replacement=replacement, num_samples=num_samples))
    assert len(ours) == len(theirs) and all(0 <= i < n for i in ours)
    if not replacement:  # each full pass is a permutation
        for k in range(len(ours) // n):
            assert sorted(ours[k * n:(k + 1) * n]) == list(range(n))


def test_bfloat16_without_ml_dtypes_raises_instead_of_float64(monkeypatch) -> None:
    monkeypatch.setattr(dtypes.bfloat16, "np", None)
    with pytest.raises(TypeError, match="ml_dtypes"):
        ember.zeros(2, dtype=ember.bfloat16)
    with pytest.raises(TypeError, match="ml_dtypes"):
        ember.ones(2).to(ember.bfloat16)


def test_bfloat16_autocast_computes_in_bfloat16_like_torch() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal((16, 4)).astype(np.float32)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        y = ember.tensor(a) @ ember.tensor(b)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        yt = torch.tensor(a) @ torch.tensor(b)
    assert y.dtype is ember.bfloat16 and yt.dtype is torch.bfloat16
    np.testing.assert_array_equal(y.float().numpy(), yt.float().numpy())


def test_cuda_autocast_without_cuda_is_disabled_as_in_torch() -> None:
    with pytest.warns(UserWarning, match="CUDA is not available"):
        region = ember.autocast("cuda")
    with region:
        assert ember.is_autocast_enabled("cuda") is False
    with pytest.warns(UserWarning):
        with torch.autocast("cuda"):
            assert torch.is_autocast_enabled("cuda") is False


@pytest.mark.parametrize("kernel,stride,padding", [(3, 2, 1), (2, 1, 0), (3, 1, 1)])
def test_max_pool_with_nans_picks_the_nan_like_torch(kernel: int, stride: int, padding: int) -> None:
    x = np.random.default_rng(1).standard_normal((1, 2, 6, 6)).astype(np.float32)
    x[0, 0, 1, 1] = x[0, 1, 4, 2] = x[0, 1, 4, 3] = np.nan
    x[0, 0, :3, :3] = np.nan  # a whole window of NaNs next to the padding
    e, t = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ye = ember.nn.functional.max_pool2d(e, kernel, stride, padding)
    yt = torch.nn.functional.max_pool2d(t, kernel, stride, padding)
    np.testing.assert_array_equal(ye.detach().numpy(), yt.detach().numpy())
    ye.sum().backward()
    yt.sum().backward()
    np.testing.assert_array_equal(e.grad.numpy(), t.grad.numpy())


def test_stack_dataset_like_torch() -> None:
    a, b = [1, 2, 3], ["x", "y", "z"]
    for lib in (torch, ember):
        ds = lib.utils.data.StackDataset(a, b)
        assert ds[2] == (3, "z") and len(ds) == 3
        assert lib.utils.data.StackDataset(n=a, s=b)[0] == {"n": 1, "s": "x"}
        with pytest.raises(ValueError):
            lib.utils.data.StackDataset(a, [1])


def test_jit_fork_wait_and_small_flags() -> None:
    fut = ember.jit.fork(lambda x: x * 2, ember.ones(2))
    assert ember.jit.wait(fut).tolist() == [2.0, 2.0]
    assert ember.cuda.amp.amp_definitely_not_available() is torch.cuda.amp.amp_definitely_not_available()
    with ember.autograd.set_multithreading_enabled(False):
        x = ember.ones(2, requires_grad=True)
        (x * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]
