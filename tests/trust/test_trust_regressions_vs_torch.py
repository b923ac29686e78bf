"""One case per class of silent difference the trust fuzzer found (and that is now fixed), kept by name.

Each case runs on ember and torch through the fuzzer's comparison (values, dtypes, shapes, inputs after
in-place writes, errors): torch's result is the expected one. The fuzzer's seeds move when its generators
change; these stay.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from trust_diff import Case, compare  # noqa: E402

I8 = (np.array([-128, -3, 0, 5, 127]), "int8")
U8 = (np.array([0, 1, 7, 200, 255]), "uint8")
I64 = (np.array([-7, -3, 0, 5, 9]), "int64")
F32 = (np.array([-2.5, -0.0, 0.0, 1.5, 4.0]), "float32")
B = (np.array([True, False, True, True, False]), "bool")

CASES = {
    # 1. NumPy bools are floats to PyTorch
    "np_bool_operand_is_float": Case("out = x + np.bool_(True)", {"x": U8}),
    "np_bool_inplace_cannot_cast": Case("out = x.add_(np.bool_(True))", {"x": I64}),
    # 2. integer scalars wrap into the tensor's dtype (arithmetic, comparisons, in-place)
    "int_scalar_wraps_add": Case("out = x + 300", {"x": U8}),
    "int_scalar_wraps_negative": Case("out = x + -129", {"x": U8}),
    "int_scalar_wraps_compare": Case("out = (x < -129, x >= -2)", {"x": I8}),
    "int_scalar_wraps_inplace": Case("out = x.sub_(300)", {"x": I8}),
    "np_int_scalar_wraps": Case("out = x - np.uint8(200)", {"x": I8}),
    # 3. bool subtraction raises
    "bool_sub_scalar": Case("out = x - True", {"x": F32}),
    "bool_tensor_sub_int": Case("out = x - 1", {"x": B}),
    "bool_sub_alpha": Case("out = L.sub(x, True, alpha=-1)", {"x": F32}),
    "bool_sub_inplace": Case("out = x.sub_(False)", {"x": F32}),
    # 4. bitwise ops promote; floats refuse
    "bool_and_int64": Case("out = (x & y, x | 3)", {"x": B, "y": I64}),
    "bool_or_float_raises": Case("out = x | 2.5", {"x": B}),
    "bitwise_bfloat16_raises": Case("out = x ^ y", {"x": B, "y": (np.array(1.5), "bfloat16")}),
    # 5. in-place dunders write in place (through views too)
    "ifloordiv_through_view": Case("v = x[1:]\nv //= 2\nout = v", {"x": I64}),
    "imod_ipow_iand": Case("v = x[:3]\nv %= 4\nv **= 2\nv &= 6\nout = v", {"x": I64}),
    "ishift_through_view": Case("v = x[::2]\nv <<= 1\nv >>= 3\nout = v", {"x": I64}),
    "rmod": Case("out = (7 % x, 2.5 % y)", {"x": (np.array([2, 3, -4]), "int64"), "y": F32}),
    # 6. in-place casting rule
    "int_div_inplace_same_dtype_raises": Case("out = x.div_(y)", {"x": I64, "y": (np.array(2), "int64")}),
    "uint8_mul_int32_inplace_wraps": Case("out = x.mul_(y)", {"x": U8, "y": (np.array([3, 1, 2, 2, 2]), "int32")}),
    "float_sub_complex_inplace_raises": Case("out = x.sub_(1.5j)", {"x": (np.array([1.0, 2.0]), "bfloat16")}),
    # 7. true division of mixed integer dtypes goes straight to float
    "int8_over_uint8": Case("out = L.true_divide(y, x)", {"x": (np.array([3, 6]), "uint8"), "y": (np.array(-1), "int8")}),
    # 8. trunc division: the promoted dtype, exact for integers
    "trunc_div_float_operand": Case("out = L.div(x, y, rounding_mode='trunc')",
                                    {"x": (np.array(7), "int64"), "y": (np.array(-2.5), "float64")}),
    "trunc_div_int": Case("out = L.div(x, -2, rounding_mode='trunc')", {"x": I64}),
    "trunc_div_uint8_wrap": Case("out = L.div(x, -129, rounding_mode='trunc')", {"x": U8}),
    # 9. explicit integer dtype= of sums and products
    "sum_dtype_int8": Case("out = (x.sum(dtype=L.int8), x.prod(dtype=L.int8), x.cumsum(0, dtype=L.int8), "
                           "x.cumprod(0, dtype=L.int16), x.sum(dtype=L.bool))",
                           {"x": (np.array([100, 100, 100]), "int64")}),
    "cumsum_dtype_bool_raises": Case("out = x.cumsum(0, dtype=L.bool)", {"x": F32}),
    # 10. complex -> bool is "nonzero"
    "complex_to_bool": Case("out = x.bool()", {"x": (np.array([1.5j, 0j, 2 + 0j]), "complex64")}),
    # 11. shifts keep the tensor's dtype; out-of-range counts
    "shift_scalar_dtype": Case("out = (x << 300, 300 >> y)", {"x": U8, "y": (np.array([1, 2]), "int16")}),
    "shift_out_of_range": Case("out = (x << 9, x >> 9, x >> -1)", {"x": I8}),
    # 12. shapes PyTorch refuses
    "masked_fill_tensor_value_raises": Case("out = x.masked_fill(x > 0, y)", {"x": F32, "y": (np.ones((1, 5)), "float32")}),
    "copy_from_larger_rank_raises": Case("out = x.copy_(y)", {"x": F32, "y": (np.ones((1, 5)), "float32")}),
    # 13. complex arguments real-only ops refuse
    "copysign_complex_raises": Case("out = L.copysign(x, -1.0)", {"x": (np.array([1 + 2j]), "complex64")}),
    "copysign_np_scalar_dtype": Case("out = L.copysign(x, np.float64(-2.5))", {"x": (np.array([1, -2]), "int32")}),
    # 14. signed zeros
    "remainder_zero_sign": Case("out = L.remainder(x, y)", {"x": (np.array([-0.0, 0.0, -4.0, 4.0]), "float32"),
                                                          "y": (np.array([3.0, -3.0, 2.0, -2.0]), "float32")}),
    "xlogy_zero": Case("out = L.xlogy(x, 0.5)", {"x": (np.array([0.0, 1.0]), "float32")}),
    # 15. negative-p norms with a zero element (was: the zero ignored)
    "norm_negative_p_zero": Case("out = x_g.norm(-1)", {"x_g": (np.array([0.0, 1.0, 2.0]), "float64")}, grad=True),
    "norm_negative_p_empty_raises": Case("out = x.norm(-1)", {"x": (np.zeros(0), "float64")}),
    # 16.-18. empty and 0-d inputs, integer pow
    "logsumexp_empty_and_int": Case("out = (x.logsumexp(1), y.logsumexp(0))",
                                    {"x": (np.zeros((2, 0)), "float32"), "y": I64}),
    "mode_0d": Case("out = x.mode()", {"x": (np.array(2.5), "float64")}),
    "softmax_empty_half": Case("out = x.softmax(0)", {"x": (np.zeros(0), "float16")}),
    "sign_bool": Case("out = x.sign()", {"x": B}),
    "int_scalar_pow_negative_exponents": Case("out = (L.pow(1, x), L.pow(-1, x))", {"x": I64}),
    # 19.-21. clamp, where, fmod
    "clamp_bool_int_bound": Case("out = (L.clamp(x, min=0), L.clamp(y, min=-2))", {"x": B, "y": U8}),
    "clamp_bool_bool_raises": Case("out = L.clamp(x, min=False)", {"x": B}),
    "where_scalar_overflow_raises": Case("out = L.where(x != 0, np.uint8(200), x)", {"x": I8}),
    "fmod_bool_raises": Case("out = L.fmod(x, True)", {"x": B}),
    # 22. bfloat16 is a float for the zero-divisor check
    "floor_divide_bfloat16_zero": Case("out = x // y", {"x": I64, "y": (np.array(0.0), "bfloat16")}),
    # 23. unfold is a view: writes go both ways
    "unfold_is_a_view": Case("v = x.unfold(1, 2, 2)\nv.mul_(-1)\nw = x.unfold(1, 2, 1)\nx.add_(10)\nout = (v, w)",
                             {"x": (np.arange(8.0).reshape(2, 4), "float32")}),
    "unfold_gradient": Case("out = x_g.unfold(0, 3, 1)", {"x_g": (np.arange(5.0), "float64")}, grad=True),
    # 24. ints apply before index tensors
    "int_then_advanced_index": Case("out = (x[0, :, [1, 2]], x[None, 0, :, [1, 2]])",
                                    {"x": (np.arange(24.0).reshape(2, 3, 4), "float32")}),
    "int_then_advanced_setitem": Case("x[0, :, [1, 2]] = y\nout = x", {"x": (np.zeros((2, 3, 4)), "float32"),
                                                                      "y": (np.arange(6.0).reshape(3, 2), "float32")}),
    # 25. reductions at special points
    "median_gradient_shared_by_ties": Case("out = x_g.median()", {"x_g": (np.array([1.0, 1.0, 1.0, 2.0]), "float64")},
                                           grad=True),
    "quantile_next_to_infinities": Case("out = x.quantile(0.3, 1)", {"x": (np.array(
        [[-np.inf, -np.inf, 1.0, 2.0], [-np.inf, 0.0, 1.0, 2.0]]), "float64")}),
    "histc_bin_edges": Case("out = L.histc(x, bins=4, min=-3, max=3)",
                            {"x": (np.array([1.0, -1e-30, -1e-30, 3.0, -3.0]), "float32")}),
    "norm_of_one_element": Case("out = x.norm(dim=1)", {"x": (np.array([[1e30], [2.0]]), "float32")}),
    "unique_keeps_each_nan": Case("out = L.unique(x)", {"x": (np.array([np.nan, 1.0, np.nan]), "float64")}),
    "reductions_of_0d_with_dim": Case("out = (x.mean(0), x.std(-1), x.amax(0), x.max(0), x.flip(0), x.argmax(0, True))",
                                      {"x": (np.array(2.5), "float64")}),
    "cumsum_starts_at_plus_zero": Case("out = (x.cumsum(0), x.logcumsumexp(0))", {"x": (np.array([-0.0, 1.0]), "float64")}),
    "full_negative_zero": Case("out = L.full((2,), -0.0)"),
    "isclose_complex": Case("out = L.isclose(x, y)", {"x": (np.array([1e4 - 0.5j, 1 + 1j]), "complex128"),
                                                      "y": (np.array([-np.inf - 0.2j, 1 + 2j]), "complex128")}),
    "scatter_keeps_integer_dtype": Case("out = x.scatter(0, L.tensor([1, 0]), y)",
                                        {"x": (np.array([5, 6, 7]), "int64"), "y": (np.array([1, 2]), "int64")}),
    "softmax_half_in_float32": Case("out = x.log_softmax(0)", {"x": (np.array([0.1, 1.7, -2.3, 0.6]), "float16")}),
    "pow_zero_base_gradient": Case("out = L.pow(0.0, y_g)", {"y_g": (np.array([-1.0, 0.0, 2.0]), "float64")}, grad=True),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixed_difference_stays_fixed(name: str) -> None:
    problem = compare(CASES[name])
    assert problem is None, f"{name}: {problem}"
