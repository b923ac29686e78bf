"""ember.backends.cpu_parallel_ufunc: large adds, products, fills and copies split over ember's threads give NumPy's
own result bit for bit (special values included), and small or unsupported operands are left to NumPy (None)."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.backends import cpu_parallel_ufunc as pu
from ember.backends import cpu_threads


@pytest.fixture
def three_threads(monkeypatch):
    monkeypatch.setattr(pu, "MIN_PER_THREAD", 64)
    monkeypatch.setattr(pu, "num_threads", lambda: 3)
    monkeypatch.setattr(cpu_threads, "num_threads", lambda: 3)


def _special(rng: np.random.Generator, shape: tuple, dtype: type) -> np.ndarray:
    x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-30, 30, shape)).astype(dtype)
    flat = x.reshape(-1)
    flat[::17], flat[5::19], flat[7::23], flat[11::29] = np.nan, np.inf, -np.inf, -0.0
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ufunc", [np.add, np.subtract, np.multiply, np.true_divide])
@pytest.mark.parametrize("y_shape", [(37, 5, 11), (5, 11), (11,), (1, 5, 11), (37, 1, 11), (1,)])
def test_binary_is_numpys_result_bit_for_bit(three_threads, dtype, ufunc, y_shape):
    rng = np.random.default_rng(len(y_shape))
    x, y = _special(rng, (37, 5, 11), dtype), _special(rng, y_shape, dtype)
    with np.errstate(all="ignore"):
        got, expected = pu.binary(ufunc, x, y), ufunc(x, y)
        swapped = pu.binary(ufunc, y, x)
    assert got is not None and got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(swapped.view(np.uint8), ufunc(y, x).view(np.uint8))
    strided = x[:, ::2]  # a view: blocks of its first axis are views too
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(pu.binary(ufunc, strided, strided).view(np.uint8),
                                      ufunc(strided, strided).view(np.uint8))


def test_the_callers_error_state_holds_in_every_thread(three_threads):
    x = np.zeros((40, 20), np.float32)
    x[35, 3] = 1.0  # 1 / 0 in the last thread's block only (0 / 0 elsewhere: "invalid", ignored)
    with np.errstate(divide="raise", invalid="ignore"), pytest.raises(FloatingPointError):
        pu.binary(np.true_divide, x, x * 0)


def test_binary_declines_what_it_does_not_split(three_threads, monkeypatch):
    x = np.ones((40, 20), np.float32)
    assert pu.binary(np.add, x[:3, :10], x[:3, :10]) is None  # small
    assert pu.binary(np.add, x, x.astype(np.float64)) is None  # mixed dtypes: NumPy's promotion
    assert pu.binary(np.add, x.astype(np.int32), x.astype(np.int32)) is None
    assert pu.binary(np.add, x, 1.0) is None and pu.binary(np.add, x.reshape(1, 800), x.reshape(1, 800)) is None
    monkeypatch.setattr(pu, "num_threads", lambda: 1)
    assert pu.binary(np.add, x, x) is None


def test_add_into_zeros_and_contiguous(three_threads):
    rng = np.random.default_rng(3)
    buffer, value = _special(rng, (50, 30), np.float32), _special(rng, (50, 30), np.float32)
    with np.errstate(invalid="ignore"):
        expected = buffer + value
        assert pu.add_into(buffer, value)
    np.testing.assert_array_equal(buffer.view(np.int32), expected.view(np.int32))
    row = _special(rng, (30,), np.float32)
    with np.errstate(invalid="ignore"):
        expected = buffer + row
        assert pu.add_into(buffer, row)
    np.testing.assert_array_equal(buffer.view(np.int32), expected.view(np.int32))
    assert not pu.add_into(buffer[:2], value[:2])  # small: the caller adds
    zeros = pu.zeros((60, 7, 3), np.float64)
    assert zeros.shape == (60, 7, 3) and zeros.dtype == np.float64 and not zeros.any() and not np.signbit(zeros).any()
    permuted = _special(rng, (20, 30, 4), np.float32).transpose(1, 0, 2)
    copy = pu.contiguous(permuted)
    assert copy.flags.c_contiguous and copy is not permuted
    np.testing.assert_array_equal(copy.view(np.int32), np.ascontiguousarray(permuted).view(np.int32))
    assert pu.contiguous(copy) is copy
    np.testing.assert_array_equal(pu.reshape(permuted, (30, 80)), permuted.reshape(30, 80))
    view = copy[:, :10]
    assert np.shares_memory(pu.reshape(view, (30, 10, 4)), copy)  # a view where NumPy makes one
    duplicate = pu.copy(copy)
    assert not np.shares_memory(duplicate, copy)
    np.testing.assert_array_equal(duplicate.view(np.int32), copy.view(np.int32))


def test_ember_ops_and_gradient_sums_split(three_threads, monkeypatch):
    """ember's add/sub/mul and the autograd's gradient sums take the split path and keep NumPy's bits."""
    splits = []
    real = pu.parallel_for
    monkeypatch.setattr(pu, "parallel_for", lambda fn, total, chunk: splits.append(total) or real(fn, total, chunk))
    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal((64, 48)).astype(np.float32) for _ in range(2))
    ta, tb = ember.tensor(a, requires_grad=True), ember.tensor(b, requires_grad=True)
    out = ta * tb + ta - tb
    np.testing.assert_array_equal(out.detach().numpy(), a * b + a - b)
    out.sum().backward()  # ta is used twice: its gradients are summed
    np.testing.assert_array_equal(ta.grad.numpy(), b + 1)
    np.testing.assert_array_equal(tb.grad.numpy(), a - 1)
    (ta * 2).sum().backward()  # into the existing .grad
    np.testing.assert_array_equal(ta.grad.numpy(), b + 1 + 2)
    (ta.reshape(8, 8, 48).permute(2, 0, 1) * tb.t().reshape(48, 8, 8)).sum().backward()  # a permuted gradient
    np.testing.assert_array_equal(ta.grad.numpy(), b + 1 + 2 + b)
    assert ember.zeros(64, 48).numpy().tolist() == np.zeros((64, 48)).tolist()
    assert len(splits) >= 8


def test_device_arrays_are_left_to_their_library(three_threads):
    """The stand-in CUDA device's arrays (as CuPy's) refuse NumPy's host calls: copy, contiguous and reshape hand
    them to their own methods instead of splitting them with np.copyto (a Mask R-CNN backward on the stand-in
    device failed there)."""
    from ember.backends import standin

    host = _special(np.random.default_rng(5), (40, 6, 5), np.float32)
    device = standin._from_host(host)
    duplicate = pu.copy(device)
    assert type(duplicate) is standin.StandinArray
    np.testing.assert_array_equal(duplicate._a.view(np.int32), host.view(np.int32))
    permuted = standin._from_host(np.ascontiguousarray(host.transpose(1, 0, 2))).transpose(1, 0, 2)
    made = pu.contiguous(permuted)
    assert type(made) is standin.StandinArray and made.flags.c_contiguous
    np.testing.assert_array_equal(made._a, host)
    reshaped = pu.reshape(permuted, (40, 30))
    assert type(reshaped) is standin.StandinArray
    np.testing.assert_array_equal(reshaped._a, host.reshape(40, 30))
