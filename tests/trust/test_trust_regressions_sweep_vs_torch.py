"""The slow sweep's leftovers (docs/testing.md), one named case each, compared with torch 2.13 by the fuzzer's runner.

Where torch itself is wrong (its float32/bfloat16 gelu at +inf, its max_pool gradient of a window that reads only
padding) the test states the independent expectation instead and checks that torch's own consistent kernels agree.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ember  # noqa: E402
from trust_diff import Case, compare  # noqa: E402

F = "L.nn.functional"
POOL3D_X = np.array([[[[[-3.7, 0.3, -1.9], [1.7, -2.4, -1.0]]], [[[1.0, -2.4, 0.5], [-20.0, -0.7, -0.5]]]]])
INT64_MIN = np.iinfo(np.int64).min

CASES = {
    # max_pool3d: a depth window wholly in the padding (dilation 2, padding 1, depth 1) crashed the index gather
    "max_pool3d_dilated_window_in_padding": Case(
        f"out = {F}.max_pool3d(x, (2, 2, 3), padding=1, dilation=2, return_indices=True)",
        {"x": (POOL3D_X, "float64")}),
    "max_pool2d_dilated_window_in_padding": Case(
        f"out = {F}.max_pool2d(x, (2, 3), padding=1, dilation=2, return_indices=True)",
        {"x": (POOL3D_X[0, :, 0], "float64")}),
    # reflect/replicate padding that crops a dim to nothing (torch refuses; ember returned an empty tensor)
    "replicate_pad_to_empty_width_raises": Case(f"out = {F}.pad(x, [-2, -2], mode='replicate')",
                                                {"x": (np.ones((1, 4)), "float64")}),
    "reflect_pad_to_empty_width_raises": Case(f"out = {F}.pad(x, [0, -3], mode='reflect')",
                                              {"x": (np.ones((1, 2, 3)), "float32")}),
    "replicate_pad_one_dim_empty_is_fine": Case(f"out = {F}.pad(x, [-2, -2, 1, 0], mode='replicate')",
                                                {"x": (np.arange(12.0).reshape(1, 3, 4), "float32")}),
    "replicate_pad_of_empty_channel_raises": Case(f"out = {F}.pad(x, [1, 1], mode='replicate')",
                                                  {"x": (np.ones((1, 0, 3)), "float32")}),
    "replicate_pad_wrong_rank_raises": Case(f"out = {F}.pad(x, [1, 1], mode='replicate')",
                                            {"x": (np.ones((1, 2, 3, 4)), "float32")}),
    # gcd/lcm with a bool operand promote (two bools: no kernel); torch's Euclid wraps abs(INT64_MIN)
    "gcd_bool_and_int": Case("out = (L.gcd(a, b), L.lcm(a, b))", {"a": (np.array([3, 7, 0]), "int8"),
                                                                 "b": (np.array([True, False, True]), "bool")}),
    "lcm_zero_dim_bool": Case("out = L.lcm(a, b)", {"a": (np.array(9), "int64"), "b": (np.array(True), "bool")}),
    "gcd_two_bools_raises": Case("out = L.gcd(a, a)", {"a": (np.array([True, False]), "bool")}),
    "gcd_int64_min_wraps": Case("out = L.gcd(a, b)", {"a": (np.array([0, -9, INT64_MIN]), "int64"),
                                                      "b": (np.array(7), "uint8")}),
    "gcd_int8_min_wraps": Case("out = L.gcd(a, b)", {"a": (np.array([-128, -128, 6]), "int8"),
                                                     "b": (np.array([3, 0, -128]), "int8")}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_sweep_leftover_stays_fixed(name: str) -> None:
    problem = compare(CASES[name])
    assert problem is None, f"{name}: {problem}"


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_max_pool_gradient_of_window_in_padding_goes_nowhere(dims: int) -> None:
    """A window reading only padding outputs -inf from no input: its gradient reaches no element (torch writes it
    past the plane). Every other window's gradient lands on its maximum, as torch's backward puts it."""
    spatial, kernel, dilation = ((1,), (1, 3), (1, 2, 3))[dims - 1], ((2,), (2, 3), (2, 2, 3))[dims - 1], 2
    x = ember.tensor(np.random.default_rng(dims).standard_normal((2, 2) + spatial), requires_grad=True)
    pool = getattr(ember.nn.functional, f"max_pool{dims}d")
    out = pool(x, kernel, stride=1, padding=1, dilation=dilation)
    out.backward(ember.ones_like(out))
    values = out.detach().numpy()
    # the expected gradient: each finite window's maximum gets 1 per window (recomputed with NumPy)
    xs = x.detach().numpy()
    expected = np.zeros_like(xs)
    padded = np.pad(xs, [(0, 0), (0, 0)] + [(1, 1)] * dims, constant_values=-np.inf)
    for pos in np.ndindex(values.shape[2:]):
        taps = [tuple(p + j * dilation for p, j in zip(pos, tap)) for tap in np.ndindex(*kernel)]
        for n, c in np.ndindex(xs.shape[:2]):
            window = [padded[(n, c) + t] for t in taps]
            assert window[int(np.argmax(window))] == values[(n, c) + pos]
            if np.isfinite(values[(n, c) + pos]):
                where = tuple(v - 1 for v in taps[int(np.argmax(window))])
                expected[(n, c) + where] += 1
    assert np.isneginf(values).any()  # the case really has a window wholly in the padding
    np.testing.assert_array_equal(x.grad.numpy(), expected)


def test_gelu_at_infinity_is_the_limit_in_every_dtype() -> None:
    """gelu(+inf) = inf, gelu(-inf) = NaN (-inf * 0) in every dtype; torch's float64 kernel agrees (its vectorized
    erf gives NaN at +inf for float32/bfloat16 everywhere and for float16 on CPUs with AVX-512 FP16, as this
    project's Intel machines: allow-listed in trust_allow.py)."""
    values = [float("-inf"), float("inf"), 1.0]
    for name in ("float64", "float32", "float16", "bfloat16"):
        got = ember.nn.functional.gelu(ember.tensor(values).to(getattr(ember, name))).float().numpy()
        assert np.isnan(got[0]) and got[1] == np.inf and abs(got[2] - 0.8413) < 2e-2, (name, got)
    for name in ("float64",):
        ref = torch.nn.functional.gelu(torch.tensor(values).to(getattr(torch, name))).float().numpy()
        assert np.isnan(ref[0]) and ref[1] == np.inf, (name, ref)
