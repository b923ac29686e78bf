"""One case per class of difference the trust fuzzer's nn areas (functional, optim) found, kept by name.

Each case runs on ember and torch through the fuzzer's comparison (values, dtypes, shapes, the inputs after
the call, gradients, errors): torch's result is the expected one.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from trust_diff import Case, compare  # noqa: E402

F = "L.nn.functional"
NAN = float("nan")
X4 = (np.array([0.5, NAN, 7.0, -1.0]), "float64")

CASES = {
    # in-place activations wrote elu (not selu/celu) into the input and returned a new tensor
    "selu_inplace_writes_selu": Case(f"r = {F}.selu(x, inplace=True)\nout = (r, r is x)", {"x": X4}),
    "celu_inplace_writes_celu": Case(f"r = {F}.celu(x, 0.5, inplace=True)\nout = (r, r is x)", {"x": X4}),
    # gradients at NaN inputs: hardtanh/relu6 and elu pass the upstream, hardsigmoid gives 0
    "relu6_gradient_at_nan": Case(f"out = {F}.relu6(x_g)", {"x_g": X4}, grad=True),
    "elu_gradient_at_nan": Case(f"out = ({F}.elu(x_g), {F}.celu(x_g), {F}.selu(x_g))", {"x_g": X4}, grad=True),
    "hardsigmoid_gradient_at_nan": Case(f"out = {F}.hardsigmoid(x_g * 6)", {"x_g": X4}, grad=True),
    # piecewise-constant ops: zero gradient also for an infinite upstream (was NaN = inf * 0)
    "sign_floor_gradient_with_infinite_upstream": Case(
        "out = (x_g.sign() * float('inf'), x_g.floor() * float('inf'), x_g.round() * float('-inf'))",
        {"x_g": (np.array([0.0, 1.5, -2.0]), "float64")}, grad=True),
    "lp_pool_gradient_at_zero_window": Case(f"out = {F}.lp_pool1d(x_g, 2, 1)",
                                            {"x_g": (np.array([[[0.0, 1.0, 2.0]]]), "float64")}, grad=True),
    # instance_norm ignored its running statistics (use_input_stats=False, and their update in training)
    "instance_norm_eval_uses_running_stats": Case(
        f"out = {F}.instance_norm(x_g, rm, rv, use_input_stats=False)",
        {"x_g": (np.arange(12.0).reshape(2, 2, 3), "float64"), "rm": (np.array([1.0, -2.0]), "float64"),
         "rv": (np.array([4.0, 0.5]), "float64")}, grad=True),
    "instance_norm_updates_running_stats": Case(
        f"out = {F}.instance_norm(x, rm, rv, momentum=0.3)",
        {"x": (np.array([[[1.0, 2.0, 4.0]], [[0.0, -1.0, 5.0]]]), "float64"), "rm": (np.array([0.5]), "float64"),
         "rv": (np.array([2.0]), "float64")}),
    "instance_norm_one_spatial_element_raises": Case(f"out = {F}.instance_norm(x)", {"x": (np.ones((2, 3)), "float32")}),
    "group_norm_one_value_raises": Case(f"out = {F}.group_norm(x, 1)", {"x": (np.ones((1, 1)), "float32")}),
    # attention: a fully masked query attends to nothing (0, gradient 0), PyTorch's _safe_softmax
    "sdpa_fully_masked_row_is_zero": Case(
        f"out = {F}.scaled_dot_product_attention(q_g, k_g, v_g, attn_mask=m)",
        {"q_g": (np.array([[[0.5, -1.0], [1.0, 2.0]]]), "float64"), "k_g": (np.array([[[1.0, 0.0], [0.0, 1.0]]]), "float64"),
         "v_g": (np.array([[[1.0, 2.0], [3.0, -4.0]]]), "float64"),
         "m": (np.array([[True, False], [False, False]]), "bool")}, grad=True),
    "sdpa_one_dim_mask_raises": Case(f"out = {F}.scaled_dot_product_attention(q, q, q, attn_mask=m)",
                                     {"q": (np.ones((1, 1, 2, 2)), "float32"), "m": (np.array([True, False]), "bool")}),
    # ctc_loss: an empty target crashed; an impossible alignment's gradient is NaN over the valid steps
    "ctc_empty_target_and_impossible_alignment": Case(
        f"out = {F}.ctc_loss(x_g.log_softmax(2), t, [3, 4], [0, 3], reduction='sum')",
        {"x_g": (np.linspace(-1, 1, 24).reshape(4, 2, 3), "float64"), "t": (np.array([[2, 1, 2], [1, 1, 1]]), "int64")},
        grad=True, floor=1.0),
    # embedding's scale_grad_by_freq was ignored
    "embedding_scale_grad_by_freq": Case(f"out = {F}.embedding(i, w_g, scale_grad_by_freq=True)",
                                         {"i": (np.array([[0, 0, 1], [0, 2, 0]]), "int64"),
                                          "w_g": (np.arange(6.0).reshape(3, 2), "float64")}, grad=True),
    "embedding_bag_max_of_padding_only_bag_is_zero": Case(
        f"out = {F}.embedding_bag(i, w, o, mode='max', padding_idx=0)",
        {"i": (np.array([0, 1, 0, 0]), "int64"), "w": (np.array([[3.0, -1.0], [-2.0, 0.5]]), "float64"),
         "o": (np.array([0, 2]), "int64")}),
    # pooling: windows past a too-small input with ceil_mode, integer inputs, unpool's gradient and size check
    "pool_ceil_mode_input_smaller_than_kernel": Case(
        f"out = ({F}.avg_pool1d(x_g, 3, 3, ceil_mode=True), {F}.max_pool1d(x_g, 3, 2, ceil_mode=True))",
        {"x_g": (np.array([[[1.0, -2.0]]]), "float64")}, grad=True),
    "avg_pool_integer_truncates": Case(f"out = {F}.avg_pool1d(x, 2, 2)", {"x": (np.array([[[3, 4, -3, -4]]]), "int64")}),
    "max_pool_integer_with_padding": Case(f"out = {F}.max_pool2d(x, (1, 3), 1, padding=(0, 1))",
                                          {"x": (np.array([[[[-5, -7, 2]]]]), "int64")}),
    "avg_pool3d_smaller_than_kernel_raises": Case(f"out = {F}.avg_pool3d(x, 2, padding=1)",
                                                  {"x": (np.ones((1, 2, 1, 4)), "float32")}),
    "max_unpool_gradient_reaches_every_window": Case(
        f"v, i = {F}.max_pool1d(x_g, 2, 1, return_indices=True)\nout = {F}.max_unpool1d(v, i, 2, 1)",
        {"x_g": (np.array([[[0.0, 5.0, 1.0]]]), "float64")}, grad=True),
    "max_unpool_output_size_checked": Case(
        f"v, i = {F}.max_pool2d(x, 2, return_indices=True)\nout = {F}.max_unpool2d(v, i, 2, output_size=(1, 4))",
        {"x": (np.arange(16.0).reshape(1, 1, 4, 4), "float32")}),
    # losses: ignored targets and the target's own margin term are never read (NaN/inf there stayed in the loss)
    "nll_loss_ignored_row_holding_nan": Case(f"out = {F}.nll_loss(x, t, reduction='none')",
                                             {"x": (np.array([[NAN, 1.0], [0.5, -0.5]]), "float32"),
                                              "t": (np.array([-100, 1]), "int64")}),
    "cross_entropy_ignored_row_holding_inf": Case(
        f"out = ({F}.cross_entropy(x, t, ignore_index=0), {F}.cross_entropy(x, t, ignore_index=0, label_smoothing=0.2))",
        {"x": (np.array([[np.inf, 1.0], [0.5, -0.5]]), "float64"), "t": (np.array([0, 1]), "int64")}),
    "multi_margin_loss_infinite_target_score": Case(f"out = {F}.multi_margin_loss(x, t, reduction='none')",
                                                    {"x": (np.array([[2.1, -np.inf, 0.6]]), "float32"),
                                                     "t": (np.array([1]), "int64")}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixed_nn_difference_stays_fixed(name: str) -> None:
    problem = compare(CASES[name])
    assert problem is None, f"{name}: {problem}"


# ---- the second wave: reductions with arguments, out=, dtype pairs (tests/trust/trust_cases_more.py) --------------
MORE_CASES = {
    # out= was accepted and ignored by ~50 linalg functions and F.normalize; refused by sum, cumsum, max, sort, ...
    "linalg_inv_writes_out": Case("o = L.empty(0)\nr = L.linalg.inv(x, out=o)\nout = (r, o, r is o)",
                                  {"x": (np.array([[2.0, 1.0], [0.0, 4.0]]), "float32")}),
    "linalg_out_dtype_must_match": Case("out = L.linalg.inv(x, out=L.empty(0, dtype=L.float64))",
                                        {"x": (np.eye(2), "float32")}),
    "normalize_writes_out": Case(f"o = L.empty(0)\nr = {F}.normalize(x, dim=0, out=o)\nout = (r, o)",
                                 {"x": (np.array([3.0, 4.0]), "float32")}),
    "sum_out_accumulates_in_out_dtype": Case(
        "o = L.empty(0, dtype=L.int8)\nc = L.empty(2, dtype=L.int8)\nr = L.sum(x, 0, out=o)\n"
        "s = L.cumsum(x, 0, out=c)\nout = (r, o, s, c, r is o)", {"x": (np.array([100, 100, 100]), "int64")}),
    "max_sort_out_tuples": Case("v, i = L.empty(0), L.empty(0, dtype=L.int64)\nr = L.max(x, 0, out=(v, i))\n"
                                "w, j = L.empty(0), L.empty(0, dtype=L.int64)\ns = L.sort(x, 1, out=(w, j))\n"
                                "out = (r, v, i, s, w, j)", {"x": (np.array([[1.0, 5.0], [3.0, -2.0]]), "float32")}),
    "add_out_cannot_cast_float_to_int": Case("out = L.add(x, x, out=L.empty(0, dtype=L.int64))",
                                             {"x": (np.array([1.5]), "float32")}),
    "std_out_computes_in_out_dtype": Case("o = L.empty(0, dtype=L.float64)\nL.std(x, 0, out=o)\nout = o",
                                          {"x": (np.array([[-0.7, 0.1], [0.3, 0.2], [0.4, 1.6]]), "bfloat16")}),
    "out_refuses_autograd": Case("out = L.sum(x_g, 0, out=L.empty(0, dtype=L.float64))",
                                 {"x_g": (np.array([1.0, 2.0]), "float64")}),
    # bfloat16 sorted NaN first (sort, nanmedian, unique, kthvalue and topk read the wrong elements)
    "bfloat16_sort_puts_nan_last": Case("out = (x.sort(), x.sort(descending=True), x.nanmedian(0), L.unique(x), "
                                        "x.kthvalue(4), x.topk(2))",
                                        {"x": (np.array([np.nan, 1.0, np.inf, -1.0, -np.inf]), "bfloat16")}),
    "median_index_of_first_nan": Case("out = x.median(0)", {"x": (np.array([[np.inf, np.nan], [2.5, np.nan],
                                                                             [0.0, 2.5]]), "float64")}),
    "var_correction_at_least_n": Case("out = (x.std(0, correction=2), x.var(correction=5))",
                                      {"x": (np.array([[-7.0, 1.0], [-1e-30, 1.0]]), "float64")}),
    "all_any_over_no_dims": Case("out = (L.all(x, ()), L.any(x, ()), L.sum(x, ()))",
                                 {"x": (np.array([[1.0, 0.0], [2.0, 3.0]]), "float32")}),
    "nansum_dtype_casts_first": Case("out = L.nansum(x, 0, dtype=L.int32)",
                                     {"x": (np.array([2.5, 2.5, np.nan, np.inf]), "float64")}),
    # dtype pairs: the imaginary part was dropped, promotion or the overflow rule differed
    "float_power_complex": Case("out = (L.float_power(x, 2), L.float_power(y, x))",
                                {"x": (np.array([1 - 2j, 0.5j]), "complex64"), "y": (np.array([2.0, 3.0]), "float32")}),
    "logaddexp_complex": Case("out = L.logaddexp(x, y)", {"x": (np.array(-2.9), "float32"),
                                                          "y": (np.array(2.6 - 3.1j), "complex128")}),
    "ldexp_promotes_like_mul_pow": Case("out = (L.ldexp(x, y), L.ldexp(y, z), L.ldexp(b, h))",
                                        {"x": (np.array([-0.35, 3.1]), "bfloat16"), "y": (np.array([-2.6]), "float32"),
                                         "z": (np.array([2, -1]), "int16"), "b": (np.array(True), "bool"),
                                         "h": (np.array(4.8), "float16")}),
    "lcm_abs_after_wrap": Case("out = L.lcm(x, y)", {"x": (np.array([4, 2147483647]), "int32"),
                                                     "y": (np.array([9223372036854775807, -9]), "int64")}),
    "heaviside_refuses_two_dtypes": Case("out = L.heaviside(x, y)", {"x": (np.array([0.0, 1.0]), "float32"),
                                                                     "y": (np.array([0.5]), "float64")}),
    # found by the slow sweep: float16 gelu(tanh) in half math, triplet loss's order of rounding, gcd's promotion
    "gelu_tanh_half_in_float32": Case(f"out = {F}.gelu(x, approximate='tanh')",
                                      {"x": (np.array([2.69, -0.15, -0.165, -3.0]), "float16")}),
    "triplet_distance_loss_margin_first": Case(
        f"out = {F}.triplet_margin_with_distance_loss(x, y, z, reduction='none')",
        {"x": (np.array([[1e30, 1.0]]), "float64"), "y": (np.array([[0.0, 1.0]]), "float64"),
         "z": (np.array([[-1.0, 1.0]]), "float64")}),
    "gcd_zero_dim_operand_keeps_dtype": Case("out = L.gcd(a, b)", {"a": (np.array([4, 6]), "int16"),
                                                                 "b": (np.array(8), "int32")}),
    # writes into views of expanded tensors: refused unless the written tensor overlaps itself (fills: always)
    "write_through_nonoverlapping_views_of_expand": Case(
        "e = x.expand(4, 3)\ne[0].add_(1)\ne.diagonal().exp_()\ne[:, 2:].neg_()\ne[1][...] = 7\nout = (x, e)",
        {"x": (np.array([1.0, 2.0, 3.0]), "float64")}),
    "fill_of_expanded_tensor": Case("e = x.expand(2, 3)\ne.zero_()\nf = x.expand(3, 3)[1:]\nf.fill_(2.5)\nout = (x, e)",
                                    {"x": (np.array([1.0, 2.0, 3.0]), "float32")}),
    "overlapping_expanded_write_refused": Case("e = x.expand(2, 3)\nout = e.mul_(2)",
                                               {"x": (np.array([1.0, 2.0, 3.0]), "float32")}),
    "empty_expanded_write": Case("e = x[:0].expand(2, 0)\nout = (e.abs_(), x)", {"x": (np.array([1.0, -2.0]), "float64")}),
}


@pytest.mark.parametrize("name", sorted(MORE_CASES))
def test_fixed_reduction_and_dtype_difference_stays_fixed(name: str) -> None:
    problem = compare(MORE_CASES[name])
    assert problem is None, f"{name}: {problem}"
