"""One case per class of difference the fourth wave (autograd through views, ternary promotion with out=,
reductions at edges, advanced indexing gradients) found, kept by name and compared with torch 2.13 by the
fuzzer's runner (values, dtypes, shapes, inputs after the call, gradients, errors)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from trust_diff import Case, compare  # noqa: E402

X34 = np.round(np.random.default_rng(0).standard_normal((3, 4)), 2)
X44 = np.round(np.random.default_rng(1).standard_normal((4, 4)), 2)

CASES = {
    # fill_ with a 0-d tensor that requires grad: the value was read with .item(), so it got no gradient
    "fill_with_tensor_value_gets_gradient": Case(
        "b = x_g * 1\nv = b[1:]\nv.fill_(y_g.sum())\nout = (b, v)",
        {"x_g": (X34, "float64"), "y_g": (np.array([0.5, -1.25]), "float64")}, grad=True),
    "fill_with_advanced_index_copy": Case(
        "b = x_g + 0\nv = b[[-2]]\nv.fill_(y_g.sum())\nout = (b, v)",
        {"x_g": (X44, "float64"), "y_g": (np.array(1.5), "float64")}, grad=True),
    "fill_with_one_dim_tensor_raises": Case("x.fill_(y)\nout = x", {"x": (X34, "float64"),
                                                                     "y": (np.array([2.0]), "float64")}),
    # an in-place op through as_strided of a view writes memory outside that view: the written values'
    # gradients were dropped (the view's own history ends at its input)
    "as_strided_of_view_inplace_gradient": Case(
        "b = x_g + 0\nv0 = b.narrow(1, 3, 1)\nv2 = v0.as_strided((2, 2), (2, 1), 0)\nv2.pow_(2)\nout = (b, v0, v2)",
        {"x_g": (X44, "float64")}, grad=True),
    "as_strided_of_view_mul_by_leaf": Case(
        "b = x_g * 1\nv0 = b.narrow(1, 1, 2)\nv1 = v0.as_strided((2, 1), (1, 1), 4)\nv1 *= y_g\nout = (b, v0, v1)",
        {"x_g": (X34, "float64"), "y_g": (np.array([[2.0], [-3.0]]), "float64")}, grad=True),
    # addcmul/addcdiv computed tensor1 * tensor2 in their own dtype: an int8 * uint8 product wrapped inside a
    # float64/complex addcmul; a bfloat16 quotient inside a float64 addcdiv lost digits
    "addcmul_promotes_all_three": Case("out = L.addcmul(a, b, c, value=300)",
                                       {"a": (np.array([1.5, -2.0, 0.25]), "float64"),
                                        "b": (np.array([200]), "uint8"), "c": (np.array([100, -7, 3]), "int16")}),
    "addcmul_inplace_complex_with_int8": Case("r = a.addcmul_(b, c)\nout = (r, r is a)",
                                              {"a": (np.array([1 + 1j, 2, 3j]), "complex128"),
                                               "b": (np.array([100, -128, 127]), "int8"),
                                               "c": (np.array(200), "uint8")}),
    "addcdiv_promotes_all_three": Case("out = L.addcdiv(a, b, c, value=300)",
                                       {"a": (np.array(1.0), "float64"), "b": (np.array(-7), "int64"),
                                        "c": (np.array(3.1), "bfloat16")}),
    "addcdiv_of_integers_raises": Case("out = L.addcdiv(a, b, c)", {"a": (np.array([1.0]), "float32"),
                                                                    "b": (np.array([1]), "int64"),
                                                                    "c": (np.array([3]), "int8")}),
    "addcmul_value_truncated_for_integers": Case("out = L.addcmul(a, b, c, value=2.5)",
                                                 {"a": (np.array([1, 2]), "int64"), "b": (np.array([1, 2]), "int64"),
                                                  "c": (np.array([3, 4]), "int64")}),
    "addcmul_complex_value_for_floats_raises": Case("out = L.addcmul(a, b, c, value=0.5j)",
                                                    {"a": (np.array([1.0]), "float32"),
                                                     "b": (np.array([1.0]), "float32"),
                                                     "c": (np.array([3.0]), "float32")}),
    # add/sub's alpha: torch's checks (bool alpha, float alpha for integers, complex alpha for reals, overflow)
    "add_bool_alpha_for_int_raises": Case("out = L.add(a, 2.5, alpha=True)", {"a": (np.array([1]), "int8")}),
    "sub_float_alpha_for_int_raises": Case("out = L.sub(a, b, alpha=-0.0)", {"a": (np.array(3), "int32"),
                                                                             "b": (np.array(5), "uint8")}),
    "add_alpha_overflow_raises": Case("out = L.add(a, b, alpha=300)", {"a": (np.array([1, 2]), "int8"),
                                                                       "b": (np.array([1, 1]), "int8")}),
    "add_complex_alpha_for_real_raises": Case("out = L.add(a, False, alpha=(1+2j))",
                                              {"a": (np.array([1.5]), "bfloat16")}),
    # where with two Python numbers: the default dtypes (float32, complex64), not float64 / complex128
    "where_two_numbers_default_float": Case("out = L.where(a > 0, False, 2.5)", {"a": (np.array([1.0, -1.0]),
                                                                                      "bfloat16")}),
    "where_two_numbers_default_complex": Case("out = L.where(a > 0, 2, 0.5j)", {"a": (np.array([1, -1]), "int16")}),
    # out= dtype rules: where and clamp with number bounds need out's dtype to be the result's
    "where_out_exact_dtype": Case("r = L.where(a > 0, b, c, out=o)\nout = (r, o)",
                                  {"a": (np.array([1, -1, 2]), "int32"), "b": (np.array([1, 2, 3]), "int16"),
                                   "c": (np.array([0.5, 1.5, 2.5]), "bfloat16"), "o": (np.zeros(3), "float64")}),
    "clamp_number_bounds_out_exact_dtype": Case("r = L.clamp(a, -3, 2, out=o)\nout = (r, o)",
                                                {"a": (X34, "float64"), "o": (np.zeros((3, 4)), "float32")}),
    "clamp_tensor_bounds_out_casts": Case("r = L.clamp(a, b, c, out=o)\nout = (r, o)",
                                          {"a": (np.array([1, 5, -3]), "int64"), "b": (np.array(0), "int64"),
                                           "c": (np.array([2, 2, 2]), "int64"), "o": (np.zeros(3), "float64")}),
    # lerp: end and an n-d weight must have input's dtype (checked before half inputs are widened)
    "lerp_end_dtype_checked_for_bfloat16": Case("out = L.lerp(a, b, 300)", {"a": (np.array([1.0, 2.0]), "bfloat16"),
                                                                            "b": (np.array(3.0), "float32")}),
    "lerp_weight_dtype_checked": Case("out = L.lerp(a, b, c)", {"a": (np.array([1.0, 2.0]), "float32"),
                                                                "b": (np.array([3.0, 4.0]), "float32"),
                                                                "c": (np.array([0.5]), "float64")}),
    "lerp_zero_dim_weight_of_other_dtype": Case("out = L.lerp(a, b, c)", {"a": (np.array([1.0, 2.0]), "float32"),
                                                                          "b": (np.array([3.0, 4.0]), "float32"),
                                                                          "c": (np.array(0.3), "float64")}),
    # ldexp: a bfloat16/float16 input with integer exponents stays in its dtype
    "ldexp_bfloat16_int_exponent": Case("out = L.ldexp(a, b)", {"a": (np.array([1.5, -3.0]), "bfloat16"),
                                                                "b": (np.array([[2, -3]]), "int64")}),
    # median of equal infinities with autograd: inf - inf made the value NaN
    "median_of_infinities_with_grad": Case("out = L.median(x_g)", {"x_g": (np.array([[np.inf], [np.inf]]),
                                                                          "float64")}, grad=True),
    "median_of_ties_gradient_split": Case("out = L.median(x_g)", {"x_g": (np.array([2.0, -np.inf, 2.0, 5.0]),
                                                                         "float64")}, grad=True),
    "median_of_empty_keeps_gradient": Case("out = L.median(x_g)", {"x_g": (np.zeros((0, 3)), "float64")}, grad=True),
    # reductions with an integer dtype= of a tensor that requires grad: torch refuses
    "sum_int_dtype_with_grad_raises": Case("out = L.sum(x_g, -1, dtype=L.int32)", {"x_g": (X34, "float64")},
                                           grad=True),
    "cumsum_int_dtype_with_grad_raises": Case("out = L.cumsum(x_g, 0, dtype=L.int64)", {"x_g": (X34, "float64")},
                                              grad=True),
    "prod_bool_dtype_with_grad_raises": Case("out = L.prod(x_g, 0, dtype=L.bool)", {"x_g": (X34, "float64")},
                                             grad=True),
    # trapezoid / cumulative_trapezoid: empty dims, bool inputs, integer sums that wrapped in uint8
    "trapezoid_empty_dim_dtype": Case("out = L.trapezoid(x, dim=0)", {"x": (np.zeros((0, 3)), "int32")}),
    "trapezoid_empty_no_gradient": Case("out = L.trapezoid(x_g, dim=-1)", {"x_g": (np.zeros(0), "float64")},
                                        grad=True),
    "cumulative_trapezoid_empty_dim": Case("out = L.cumulative_trapezoid(x, dim=1)",
                                           {"x": (np.zeros((3, 0)), "bfloat16")}),
    "trapezoid_of_bool_raises": Case("out = L.trapezoid(x)", {"x": (np.array([True, False, True]), "bool")}),
    "cumulative_trapezoid_of_int8": Case("out = L.cumulative_trapezoid(x)",
                                         {"x": (np.array([100, 20, -128]), "int16")}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_regression_agrees_with_torch(name: str) -> None:
    problem = compare(CASES[name])
    assert problem is None, f"{name}: {problem}"


def test_trapezoid_of_uint8_is_the_trapezoid_rule() -> None:
    """torch wraps uint8 ends (allow-listed); ember's value is checked against NumPy's trapezoid in float64."""
    import ember

    y = np.array([1, 0, 255, 7], dtype=np.uint8)
    got = ember.trapezoid(ember.tensor(y)).item()
    assert got == pytest.approx(np.trapezoid(y.astype(np.float64)))
    running = ember.cumulative_trapezoid(ember.tensor(np.array([200, 100, 255], dtype=np.uint8))).tolist()
    assert running == pytest.approx([150.0, 327.5])  # torch's wrapped ends give [22, 71.5]
