"""One case per class of difference the third wave (layers, spatial, out= dtypes) found, kept by name and compared
with torch 2.13 by the fuzzer's runner (values, dtypes, shapes, inputs after the call, errors)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from trust_cases_layers import BACKWARD, REPORT, SET_PARAMS  # noqa: E402
from trust_diff import Case, compare  # noqa: E402

F = "L.nn.functional"
X = np.round(np.random.default_rng(0).standard_normal((1, 2, 4, 5)), 2)


def _module(ctor: str, forward: str, inputs: dict) -> Case:
    return Case(f"m = {ctor}.double()\n{SET_PARAMS}y = {forward}\n{BACKWARD}{REPORT}", inputs, zero_sign=False,
                rtol=1e-9)


CASES = {
    # padding='same' with a non-zero padding_mode padded nothing (the mode's edge values were replaced by the conv's zeros)
    "conv_same_padding_reflect": _module("L.nn.Conv2d(2, 2, (2, 3), padding='same', padding_mode='reflect', "
                                         "dilation=(2, 1))", "m(x_g)", {"x_g": (X, "float64")}),
    "conv_same_padding_circular_1d": _module("L.nn.Conv1d(2, 1, 2, padding='same', padding_mode='circular')",
                                             "m(x_g)", {"x_g": (X[0, :, 0], "float64")}),
    # output_padding past the stride (allowed below the dilation) crashed in the input-gradient geometry
    "conv_transpose_output_padding_past_stride": _module(
        "L.nn.ConvTranspose2d(2, 2, (2, 2), stride=(1, 2), dilation=(2, 2), padding=1, output_padding=(1, 1))",
        "m(x_g)", {"x_g": (X, "float64")}),
    "conv_transpose_output_too_small_raises": Case(
        f"out = {F}.conv_transpose2d(x, w, stride=1, padding=1)",
        {"x": (X[:, :, :1, :2], "float64"), "w": (np.ones((2, 1, 1, 3)), "float64")}),
    # unfold: unbatched (C, H, W) input read as batched; an identity-kernel convolution turned inf into NaN, -0 into 0
    "unfold_unbatched": Case(f"out = {F}.unfold(x_g, (2, 1), dilation=2, padding=1, stride=2)",
                             {"x_g": (X[0, :, :3, :3], "float64")}, grad=True),
    "unfold_copies_inf_and_negative_zero": Case(f"out = {F}.unfold(x_g, (1, 2), padding=1)",
                                                {"x_g": (np.array([[[[1.0, np.inf, -0.0], [np.nan, 4.0, -2.0]]]]),
                                                         "float64")}, grad=True),
    # InstanceNorm with momentum=None: torch passes momentum 0 (running statistics stay), ember used 0.1
    "instance_norm_momentum_none": Case(
        "m = L.nn.InstanceNorm1d(2, momentum=None, track_running_stats=True).double()\ny = m(x)\nm.eval()\n"
        "out = (y, m(x), m.running_mean, m.running_var)", {"x": (X[:, :, 0] * 3 + 1, "float64")}),
    # MultiheadAttention(need_weights=False) is SDPA in torch: a fully masked query gives 0, not NaN
    "mha_fully_masked_query_without_weights": _module(
        "L.nn.MultiheadAttention(4, 2, kdim=3)", "m(x_g, k, v, need_weights=False, key_padding_mask=kpm)",
        {"x_g": (X[0, 0, :3, :4], "float64"), "k": (X[0, 1, :2, :3], "float64"), "v": (X[0, 0, :2, :4], "float64"),
         "kpm": (np.array([True, True]), "bool")}),
    # cholesky_inverse / cholesky_solve of a complex factor: L @ L.T (no conjugate) gave a non-Hermitian, wrong A
    "cholesky_inverse_complex": Case("out = (L.cholesky_inverse(c), L.cholesky_inverse(c, upper=True))",
                                     {"c": (np.array([[2, 1 - 2j, 0.3j], [1 + 1j, 3, 0.5j], [0.2 - 1j, 0.5 + 0.5j, 4]]),
                                            "complex128")}, zero_sign=False),
    "cholesky_solve_complex": Case("out = L.cholesky_solve(b, c)",
                                   {"b": (np.array([[1 + 1j], [2], [-1j]]), "complex128"),
                                    "c": (np.array([[2, 0, 0], [1 + 1j, 3, 0], [0.2 - 1j, 0.5 + 0.5j, 4]]), "complex128")}),
    # linalg.matrix_power of an integer matrix with n >= 0 was refused
    "matrix_power_of_integers": Case("out = (L.linalg.matrix_power(a, 3), L.matrix_power(a, 0))",
                                     {"a": (np.array([[2, -1], [1, 3]]), "int64")}),
    # out= dtype rules (tests/torch_surface/test_out_dtype_rules_vs_torch.py has every function)
    "out_exact_dtype_of_rounding": Case("o = L.empty(0, dtype=L.float64)\nout = L.round(x, out=o)",
                                        {"x": (np.array([0.5, 1.5]), "float32")}),
    "out_bool_only_predicates": Case("o = L.empty(0)\nout = L.isposinf(x, out=o)", {"x": (np.array([np.inf]), "float32")}),
    "out_mean_of_complex_into_real": Case("o = L.empty(0)\nout = L.mean(x, 0, out=o)",
                                          {"x": (np.array([1 + 1j, 2]), "complex64")}),
    "out_full_mean_of_complex_into_real_raises": Case("o = L.empty(0)\nout = L.mean(x, out=o)",
                                                      {"x": (np.array([1 + 1j, 2]), "complex64")}),
    "out_sum_without_dim": Case("o = L.empty(0)\nout = L.sum(x, out=o)", {"x": (np.ones(3), "float32")}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixed_layer_difference_stays_fixed(name: str) -> None:
    problem = compare(CASES[name])
    assert problem is None, f"{name}: {problem}"
