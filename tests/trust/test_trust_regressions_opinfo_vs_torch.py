"""The OpInfo sweep's classes (docs/testing.md, "The seventh wave"), one named case each, compared with torch 2.13
by the fuzzer's runner (``trust_diff.compare``: values, dtypes, shapes, the inputs after the call, gradients).

Each case is a program a user could write; the aliasing cases write through the result and read the input back,
so a copy where torch makes a view (or a view where torch copies) shows as a wrong value.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from trust_diff import Case, compare  # noqa: E402

F = "L.nn.functional"
M33 = np.arange(9.0).reshape(3, 3)
STEP2 = np.arange(20.0).reshape(4, 5)

CASES = {
    # ---- results that alias their input where torch's are new memory (a write leaked into the input) ----------
    "diag_of_matrix_is_a_copy": Case("d = L.diag(x); d += 100; out = x", {"x": (M33, "float64")}),
    "diag_method_of_matrix_is_a_copy": Case("d = x.diag(1); d.zero_(); out = x", {"x": (M33, "float32")}),
    "ravel_of_strided_is_a_copy": Case("r = x[:, ::2].ravel(); r.fill_(-1); out = x", {"x": (STEP2, "float64")}),
    "ravel_of_contiguous_is_a_view": Case("r = x.ravel(); r[0] = -1; out = x", {"x": (STEP2, "int64")}),
    "diff_n0_is_a_copy": Case("d = L.diff(x, n=0); d += 1; out = x", {"x": (np.arange(4.0), "float32")}),
    "pixel_shuffle_factor1_is_a_copy": Case(f"p = {F}.pixel_shuffle(x, 1); p.mul_(0); out = x",
                                            {"x": (np.ones((1, 4, 2, 2)), "float32")}),
    "pixel_unshuffle_1x1_plane_is_a_copy": Case(f"p = {F}.pixel_unshuffle(x, 1); p.mul_(0); out = x",
                                                {"x": (np.ones((1, 1, 3, 3)), "float64")}),
    "to_copy_positional_is_a_copy": Case("y = x.to('cpu', L.float32, False, True); y += 1; out = x",
                                         {"x": (np.arange(3.0), "float32")}),
    "to_dtype_copy_positional_is_a_copy": Case("y = x.to(L.float32, False, True); y += 1; out = (x, y)",
                                               {"x": (np.arange(3.0), "float32")}),
    "roll_by_whole_size_is_new": Case("y = x.roll(3); y += 1; out = x", {"x": (np.arange(3.0), "float64")}),
    # ---- no-op views are new tensors (torch never returns self): metadata changes stay their own ---------------
    "t_of_vector_is_a_new_view": Case("y = x.t(); y.unsqueeze_(0); out = (x.shape, y.shape, y is x)",
                                      {"x": (np.arange(3.0), "float32")}),
    "transpose_of_0d_is_a_new_view": Case("y = x.transpose(0, 0); out = (y is x, y.shape)",
                                          {"x": (np.array(2.0), "float64")}),
    "expand_same_shape_is_a_new_view": Case("y = x.expand(3); y.unsqueeze_(1); out = (x.shape, y.shape)",
                                            {"x": (np.arange(3.0), "float32")}),
    "expand_as_same_shape_has_grad_fn": Case("y = x_g.expand_as(x_g); out = (y is x_g, y.grad_fn is None, y * 2)",
                                             {"x_g": (np.arange(3.0), "float64")}, grad=True),
    "broadcast_to_same_shape_is_new": Case("y = L.broadcast_to(x, (2, 2)); out = y is x",
                                           {"x": (np.ones((2, 2)), "float32")}),
    # ---- shapes ------------------------------------------------------------------------------------------------
    "cov_of_one_variable_is_0d": Case("out = (L.cov(x), L.corrcoef(x))", {"x": (np.array([[1.0, 4.0, 2.0]]), "float64")}),
    "quantile_0d_keepdim_is_0d": Case("out = (L.quantile(x, 0.5, dim=0, keepdim=True), L.nanquantile(x, 0.2, 0, True))",
                                      {"x": (np.array(2.5), "float32")}),
    "std_mean_keepdim_all_dims": Case("out = (L.std_mean(x, dim=None, keepdim=True), L.var_mean(x, None, keepdim=True))",
                                      {"x": (np.arange(6.0).reshape(2, 3), "float64")}),
    "prelu_of_0d_is_0d": Case(f"out = {F}.prelu(x, w)", {"x": (np.array(-2.0), "float32"),
                                                         "w": (np.array([0.25]), "float32")}),
    # ---- dtypes and values -------------------------------------------------------------------------------------
    "einsum_single_operand_sum_widens": Case("out = (L.einsum('i->', x), L.einsum('ij->i', y), L.einsum('ii->', y), "
                                             "L.einsum('i,j->', x, x), L.einsum('i,i->', x, x))",
                                             {"x": (np.array([200, 100]), "uint8"),
                                              "y": (np.array([[200, 100], [7, 250]]), "uint8")}),
    "addmv_int_truncates_alpha_beta": Case("out = (L.addmv(i, m, v, beta=0.2, alpha=0.6), L.addmv(i, m, v, beta=2, "
                                           "alpha=1.9), L.addmm(a, a, a, beta=1.5, alpha=-2.5))",
                                           {"i": (np.array([3, -4]), "int8"), "m": (np.full((2, 3), 2), "int8"),
                                            "v": (np.array([1, 2, 3]), "int8"), "a": (np.array([[1, 2], [3, 4]]),
                                                                                      "int64")}),
    "addbmm_int8_keeps_int8": Case("out = (L.addbmm(i, b1, b2), L.baddbmm(j, b1, b2, beta=0.5, alpha=1.5))",
                                   {"i": (np.ones((2, 2)), "int8"), "j": (np.ones((2, 2, 2)), "int8"),
                                    "b1": (np.ones((2, 2, 3)), "int8"), "b2": (np.full((2, 3, 2), 50), "int8")}),
    "addr_bool_is_logical": Case("out = (L.addr(i, a, b, beta=3, alpha=2), L.addr(i, a, b, beta=0), "
                                 "L.addr(i, a, b, alpha=0))",
                                 {"i": (np.array([[True, False], [False, False]]), "bool"),
                                  "a": (np.array([True, False]), "bool"), "b": (np.array([False, True]), "bool")}),
    "cosine_similarity_broadcasts_before_norms": Case(f"out = {F}.cosine_similarity(a_g, b_g, dim=-2)",
                                                      {"a_g": (np.arange(1.0, 7.0).reshape(1, 2, 3), "float64"),
                                                       "b_g": (np.array([[[1.0, -2.0, 0.5]], [[3.0, 1.0, -1.0]]]),
                                                               "float64")}, grad=True),
    "hinge_embedding_other_targets": Case(f"out = {F}.hinge_embedding_loss(x, t, reduction='none')",
                                          {"x": (np.array([0.3, -0.5, 2.0, 0.1]), "float64"),
                                           "t": (np.array([0.0, 2.0, -1.0, 1.0]), "float64")}),
    "losses_promote_float_targets": Case(f"out = ({F}.l1_loss(x, t), {F}.mse_loss(x, t), {F}.smooth_l1_loss(x, t), "
                                         f"{F}.soft_margin_loss(x, s), {F}.huber_loss(x, t))",
                                         {"x": (np.array([0.3, -0.5]), "float32"), "t": (np.array([1.1, 2.0]), "float64"),
                                          "s": (np.array([1.0, -1.0]), "float64")}),
    "cov_weights_keep_their_dtype": Case("out = (L.cov(h, aweights=w), L.cov(x, fweights=f, aweights=w, correction=0))",
                                         {"h": (np.array([1.0, 3.0, 2.5]), "float16"), "w": (np.array([0.5, 1.0, 2.0]),
                                                                                              "float32"),
                                          "x": (np.array([0.1, 0.7, 0.2]), "float64"), "f": (np.array([1, 2, 1]),
                                                                                             "int32")}),
    "linspace_int_truncates_ends_first": Case("out = (L.linspace(4.3, 0, 50, dtype=L.uint8), "
                                              "L.linspace(-3.7, 9.9, 7, dtype=L.int64), L.linspace(2.9, 2.9, 1, dtype=L.int8))"),
    "avg_pool3d_int_truncates_once": Case(f"out = ({F}.avg_pool3d(x, 2), {F}.avg_pool2d(x[0], 2, divisor_override=-2))",
                                          {"x": (np.array([[[[-3, 1], [2, -7]], [[1, 1], [1, 0]]]]), "int64")}),
    "sum_to_size_of_0d_is_a_sum": Case("y = x.sum_to_size(()); y += 1; out = (x, y)", {"x": (np.array(7), "int8")}),
    # ---- gradients that were missing (the result was detached) -------------------------------------------------
    "scatter_reduce_amax_grad": Case("out = x_g.scatter_reduce(0, i, s_g, 'amax', include_self=False)",
                                     {"x_g": (np.array([1.0, 5.0, 0.0]), "float64"),
                                      "s_g": (np.array([2.0, 2.0, -1.0, 5.0]), "float64"),
                                      "i": (np.array([0, 0, 2, 1]), "int64")}, grad=True),
    "scatter_reduce_amin_ties_grad": Case("out = x_g.scatter_reduce(0, i, s_g, 'amin')",
                                          {"x_g": (np.array([1.0, 5.0, 0.0]), "float64"),
                                           "s_g": (np.array([1.0, 2.0, 0.0, 5.0]), "float64"),
                                           "i": (np.array([0, 0, 2, 1]), "int64")}, grad=True),
    "scatter_reduce_prod_zero_grad": Case("out = x_g.scatter_reduce(1, i, s_g, 'prod', include_self=True)",
                                          {"x_g": (np.array([[2.0, 0.0], [1.5, -1.0]]), "float64"),
                                           "s_g": (np.array([[0.0, 3.0, 2.0], [4.0, 0.5, 0.0]]), "float64"),
                                           "i": (np.array([[0, 0, 1], [1, 1, 0]]), "int64")}, grad=True),
    "index_fill_value_grad_counts_positions_once": Case("out = L.index_fill(x_g, -1, i, v_g)",
                                                        {"x_g": (np.arange(12.0).reshape(3, 4), "float64"),
                                                         "i": (np.array([3, 1, 1, 3, 0]), "int64"),
                                                         "v_g": (np.array(-2.5), "float64")}, grad=True),
    "mode_values_grad": Case("out = L.mode(x_g, 1).values", {"x_g": (np.array([[1.0, 2, 2, 3], [4, 4, 1, 1]]),
                                                                      "float64")}, grad=True),
    # ---- crashes on valid input ------------------------------------------------------------------------------
    "matmul_stack_with_empty_inner_dim": Case("out = (x_g @ y_g, L.matmul(x_g, y_g).sum())",
                                              {"x_g": (np.ones((2, 3, 0)), "float64"), "y_g": (np.ones((0, 4)), "float64")},
                                              grad=True),
    "masked_fill_broadcasts_input_out_of_place": Case("out = (L.masked_fill(x, m, 5.0), x.masked_scatter(m, s))",
                                                      {"x": (np.arange(3.0), "float32"),
                                                       "m": (np.array([[True, False, True], [False, False, True]]), "bool"),
                                                       "s": (np.arange(10.0), "float32")}),
    "masked_fill_inplace_keeps_shape": Case("out = x.masked_fill_(m, 5.0)",
                                            {"x": (np.arange(3.0), "float32"),
                                             "m": (np.array([[True, False, True], [False, False, True]]), "bool")}),
    "dtype_methods_take_memory_format": Case("y = x.permute(2, 0, 1); out = (y.double(memory_format=L.contiguous_format)"
                                             ".stride(), y.double(memory_format=L.preserve_format).stride(), "
                                             "y.half().stride(), y.cdouble(memory_format=L.contiguous_format).stride())",
                                             {"x": (np.ones((4, 3, 2)), "float32")}),
    "gradient_of_complex_stays_complex": Case("out = L.gradient(x, spacing=2.0)",
                                              {"x": (np.array([1 + 2j, 3 - 1j, 0.5j, 2.0]), "complex128")}),
    "div_inplace_rounding_mode": Case("x.div_(2, rounding_mode='floor'); y.div_(-2, rounding_mode='trunc'); out = (x, y)",
                                      {"x": (np.array([-7.0, 7.0, 5.0]), "float32"), "y": (np.array([-7, 7, 5]), "int64")}),
    "scatter_family_of_0d": Case("out = (x.index_select(0, i), x.scatter(0, j, s), x.scatter_add(-1, j, s), "
                                 "x.scatter_reduce(0, j, s, 'amax', include_self=False), "
                                 "x.index_reduce(0, i, s, 'mean'))",
                                 {"x": (np.array(2.0), "float64"), "i": (np.array([0]), "int64"),
                                  "j": (np.array(0), "int64"), "s": (np.array(5.0), "float64")}),
    "scatter_reduce_bfloat16_prod": Case("out = x.scatter_reduce(0, i, s, 'prod')",
                                         {"x": (np.array([1.0, 2.0, 3.0]), "bfloat16"), "i": (np.array([0, 0, 2]), "int64"),
                                          "s": (np.array([2.0, 3.0, 4.0]), "bfloat16")}),
    "view_as_complex_needs_unit_last_stride": Case("out = L.view_as_complex(x.t())", {"x": (np.ones((2, 3)), "float32")}),
    "index_add_and_copy_of_0d": Case("out = (L.index_add(x, 0, i, s, alpha=-1), L.index_copy(x, 0, i, s))",
                                     {"x": (np.array(2.0), "float64"), "i": (np.array([0]), "int64"),
                                      "s": (np.array(5.0), "float64")}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_opinfo_class_stays_fixed(name: str) -> None:
    problem = compare(CASES[name])
    assert problem is None, f"{name}: {problem}"
