"""Cases for the generated PyTorch-surface tests: (name, inputs, kwargs, differentiable).

Inputs are NumPy arrays (become tensors on both sides; float64 ones get gradients when differentiable),
Python values, or tuples/lists of those. ``SPECIAL`` holds 0, +-inf, NaN, +-large and negative values.
"""
from __future__ import annotations

import numpy as np

R = np.random.default_rng(17)
SPECIAL = np.array([0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 1e30, -1e30, 3.0])


def f(*shape):
    return R.standard_normal(shape)


def i(high, *shape, low=0):
    return R.integers(low, high, shape).astype(np.int64)


M = f(4, 5)
SQ = f(3, 3)
POS = np.abs(f(3, 4)) + 0.1

# name, args, kwargs, differentiable
CASES = [
    ("absolute", (f(3, 4),), {}, True), ("absolute", (SPECIAL,), {}, False),
    ("negative", (f(3),), {}, True), ("positive", (f(3),), {}, True),
    ("atleast_1d", (np.float64(2.0),), {}, False), ("atleast_2d", (f(3),), {}, True),
    ("atleast_3d", (f(2, 3),), {}, True), ("atleast_3d", (f(3),), {}, True),
    ("block_diag", (f(2, 2), f(1, 3), f(2)), {}, True),
    ("broadcast_tensors", (f(3, 1), f(1, 4)), {}, True),
    ("cartesian_prod", (f(3), f(2)), {}, True),
    ("cdist", (f(4, 3), f(5, 3)), {}, True), ("cdist", (f(2, 4, 3), f(2, 5, 3)), {"p": 1.0}, True),
    ("column_stack", ([f(3), f(3, 2)],), {}, True), ("row_stack", ([f(3), f(3)],), {}, True),
    ("dstack", ([f(2, 3), f(2, 3)],), {}, True),
    ("tensor_split", (f(7, 2), 3), {}, True), ("tensor_split", (f(7, 2), [1, 5]), {}, True),
    ("tensor_split", (f(2, 7), 4), {"dim": 1}, True), ("tensor_split", (f(3), 5), {}, True),
    ("hsplit", (f(2, 6), 3), {}, True), ("vsplit", (f(4, 2), [1]), {}, True), ("dsplit", (f(1, 2, 4), 2), {}, True),
    ("cov", (f(3, 6),), {}, True), ("cov", (f(3, 6),), {"correction": 0}, True),
    ("cov", (f(2, 5),), {"fweights": i(4, 5, low=1), "aweights": np.abs(f(5)) + 0.1}, True),
    ("corrcoef", (f(3, 6),), {}, True),
    ("cross", (f(4, 3), f(4, 3)), {"dim": 1}, True), ("cross", (f(3, 2), f(3, 2)), {"dim": 0}, True),
    ("diff", (f(3, 5),), {}, True), ("diff", (f(3, 5),), {"n": 2, "dim": 0}, True),
    ("diff", (f(4),), {"prepend": f(2), "append": f(1)}, True),
    ("diagflat", (f(3),), {}, True), ("diagflat", (f(2, 2),), {"offset": 1}, True),
    ("dist", (f(3, 4), f(3, 4)), {}, True), ("dist", (f(3, 4), f(3, 4)), {"p": 3}, True),
    ("fliplr", (f(3, 4),), {}, True), ("flipud", (f(3, 4),), {}, True),
    ("float_power", (POS, 2.5), {}, True), ("float_power", (i(5, 4), 2), {}, False),
    ("fmax", (SPECIAL, SPECIAL[::-1].copy()), {}, False), ("fmin", (SPECIAL, SPECIAL[::-1].copy()), {}, False),
    ("fmax", (f(5), f(5)), {}, True),
    ("heaviside", (np.array([-1.0, 0.0, 2.0]), np.array([0.5])), {}, False),
    ("inner", (f(3, 4), f(2, 4)), {}, True), ("vdot", (f(4), f(4)), {}, True),
    ("kron", (f(2, 3), f(3, 2)), {}, True), ("kron", (f(2), f(3)), {}, True),
    ("ldexp", (f(4), i(4, 4)), {}, True),
    ("logcumsumexp", (f(3, 5), 1), {}, True), ("logcumsumexp", (np.array([-np.inf, 0.0, 1000.0, 1.0]), 0), {}, False),
    ("nansum", (np.array([1.0, np.nan, 2.0]),), {}, True), ("nanmean", (np.array([[1.0, np.nan], [3, 4]]),), {"dim": 1}, False),
    ("ravel", (f(2, 3),), {}, True),
    ("repeat_interleave", (f(3), 2), {}, True), ("repeat_interleave", (f(2, 3), np.array([1, 0, 2])), {"dim": 1}, True),
    ("repeat_interleave", (np.array([2, 0, 1]),), {}, False),
    ("rot90", (f(2, 3),), {}, True), ("rot90", (f(2, 3), 2), {}, True), ("rot90", (f(2, 3, 4), -1, (1, 2)), {}, True),
    ("rsub", (f(3), f(3)), {"alpha": 2}, True),
    ("sinc", (np.array([0.0, 0.5, -1.25, 3.0]),), {}, True), ("sinc", (SPECIAL,), {}, False),
    ("std_mean", (f(3, 4),), {"dim": 1}, True),
    ("take", (f(3, 4), np.array([[0, 5], [11, -1]])), {}, True),
    ("take_along_dim", (f(3, 4), i(4, 3, 2)), {"dim": 1}, True), ("take_along_dim", (f(3, 4), i(12, 5)), {}, True),
    ("tile", (f(2, 3), (2, 1, 2)), {}, True), ("tile", (f(3), (2,)), {}, True),
    ("trapezoid", (f(3, 5),), {}, True), ("trapezoid", (f(5), np.sort(f(5))), {}, True),
    ("trapz", (f(4, 3),), {"dim": 0}, True), ("cumulative_trapezoid", (f(3, 5),), {"dx": 0.5}, True),
    # vander: torch's own backward raises (an in-place op in its implementation), so values only
    ("vander", (f(4),), {}, False), ("vander", (f(3),), {"N": 4, "increasing": True}, False),
    ("quantile", (f(3, 7), 0.3), {"dim": 1}, True), ("quantile", (f(9), np.array([0.0, 0.25, 1.0])), {}, True),
    ("quantile", (f(6), 0.5), {"interpolation": "midpoint"}, True),
    ("quantile", (f(6), 0.4), {"interpolation": "nearest"}, False),
    ("quantile", (f(2, 6), 0.4), {"dim": 1, "keepdim": True, "interpolation": "lower"}, True),
    ("quantile", (np.array([1.0, np.nan, 3.0]), 0.5), {}, False),
    ("nanquantile", (np.array([[1.0, np.nan, 3.0, 4.0], [np.nan] * 4]), 0.5), {"dim": 1}, False),
    ("median", (f(7),), {}, True), ("median", (f(3, 4),), {"dim": 1}, True),
    ("median", (np.array([[1.0, np.nan, 0.0], [2.0, 1.0, 3.0]]),), {"dim": 1}, False),
    ("nanmedian", (np.array([[1.0, np.nan, 0.0, 5.0], [2.0, 1.0, 3.0, 0.0]]),), {"dim": 1}, False),
    ("msort", (f(4, 3),), {}, True), ("aminmax", (f(3, 4),), {"dim": 0}, False), ("aminmax", (f(5),), {}, False),
    ("renorm", (f(3, 4), 2, 0, 1.0), {}, True),
    ("index_add", (f(4, 3), 0, np.array([0, 2, 0]), f(3, 3)), {"alpha": 2.0}, True),
    ("index_copy", (f(4, 3), 0, np.array([3, 1]), f(2, 3)), {}, True),
    ("index_fill", (f(4, 3), 1, np.array([0, 2]), -1.5), {}, True),
    ("select_scatter", (f(3, 4), f(4), 0, 1), {}, True),
    ("slice_scatter", (f(6, 3), f(2, 3)), {"start": 1, "end": 5, "step": 2}, True),
    ("diagonal_scatter", (f(3, 4), f(3)), {"offset": 1}, True),
    ("masked_scatter", (f(3, 4), R.random((3, 4)) > 0.5, f(12)), {}, True),
    ("scatter_reduce", (f(3, 4), 1, i(4, 3, 2), f(3, 2), "sum"), {}, True),
    ("scatter_reduce", (f(3, 4), 1, i(4, 3, 5), f(3, 5), "mean"), {"include_self": False}, True),
    ("scatter_reduce", (f(3, 4), 1, i(4, 3, 5), f(3, 5), "amax"), {}, False),
    ("scatter_reduce", (f(3, 4), 0, i(3, 4, 4), f(4, 4), "prod"), {"include_self": False}, False),
    ("copysign", (f(5), SPECIAL[:5].copy()), {}, True), ("signbit", (SPECIAL,), {}, False),
    ("isneginf", (SPECIAL,), {}, False), ("isposinf", (SPECIAL,), {}, False), ("isreal", (f(3),), {}, False),
    ("isin", (i(6, 8), np.array([1, 3, 9])), {}, False), ("isin", (i(6, 8), np.array([1, 3])), {"invert": True}, False),
    ("argwhere", (R.random((3, 4)) > 0.5,), {}, False), ("nonzero", (i(2, 5),), {}, False),
    ("bincount", (i(5, 9),), {}, False), ("bincount", (i(5, 9),), {"weights": f(9), "minlength": 7}, False),
    ("histc", (f(50),), {"bins": 7, "min": -1, "max": 1}, False), ("histc", (f(20),), {"bins": 4}, False),
    ("histogram", (f(30),), {"bins": 5}, False),
    ("gcd", (i(30, 6), i(30, 6)), {}, False), ("lcm", (i(12, 6), i(12, 6)), {}, False),
    ("nextafter", (f(4), f(4)), {}, False), ("frexp", (SPECIAL[:4].copy(),), {}, False),
    ("unique_consecutive", (np.array([1, 1, 2, 2, 3, 1, 1, 2]),), {"return_inverse": True, "return_counts": True},
     False),
    ("mode", (np.array([[1, 2, 2, 3], [4, 4, 1, 1]]),), {}, False),
    ("combinations", (f(4),), {}, True), ("combinations", (f(3),), {"r": 2, "with_replacement": True}, True),
    ("matrix_power", (SQ, 3), {}, True), ("matrix_power", (SQ, 0), {}, False),
    ("chain_matmul", (f(2, 3), f(3, 4), f(4, 2)), {}, True),
    ("erfc", (np.array([-1.0, 0.0, 0.5, 2.0]),), {}, True),
    ("lgamma", (np.abs(f(5)) + 0.1,), {}, True), ("lgamma", (np.array([-2.5, -0.5, 0.0, 1.0, 1e10]),), {}, False),
    ("digamma", (np.abs(f(5)) + 0.1,), {}, True), ("polygamma", (2, np.abs(f(4)) + 0.2), {}, True),
    ("mvlgamma", (np.abs(f(4)) + 2.0, 3), {}, True), ("i0", (f(5) * 3,), {}, True),
    ("igamma", (np.abs(f(4)) + 0.5, np.abs(f(4)) + 0.1), {}, False),
    ("igammac", (np.abs(f(4)) + 0.5, np.abs(f(4)) + 0.1), {}, False),
    ("inverse", (SQ + 3 * np.eye(3),), {}, True), ("inverse", (f(2, 3, 3) + 3 * np.eye(3),), {}, True),
    ("det", (SQ,), {}, True), ("slogdet", (SQ,), {}, True), ("logdet", (SQ @ SQ.T + np.eye(3),), {}, True),
    ("cholesky", (SQ @ SQ.T + np.eye(3),), {}, True), ("cholesky", (SQ @ SQ.T + np.eye(3),), {"upper": True}, True),
    ("cholesky_solve", (f(3, 2), np.linalg.cholesky(SQ @ SQ.T + np.eye(3))), {}, True),
    ("cholesky_inverse", (np.linalg.cholesky(SQ @ SQ.T + np.eye(3)),), {}, True),
    ("triangular_solve", (f(3, 2), np.triu(SQ) + 3 * np.eye(3)), {}, True),
    ("triangular_solve", (f(3, 2), np.tril(SQ) + 3 * np.eye(3)), {"upper": False, "transpose": True}, True),
    ("matrix_exp", (SQ * 0.5,), {}, True), ("matrix_exp", (f(2, 2, 2) * 2,), {}, True),
    ("bitwise_left_shift", (i(8, 5), i(3, 5)), {}, False), ("bitwise_right_shift", (i(100, 5), i(3, 5)), {}, False),
    ("gradient", (f(5),), {}, True), ("gradient", (f(4, 5),), {"spacing": 0.5, "dim": 1}, True),
    ("gradient", (f(4, 5),), {"edge_order": 2}, True), ("gradient", (f(3, 4),), {"spacing": [2.0, 0.5]}, True),
    ("nonzero_static", (np.array([0, 3, 0, 2]),), {"size": 4}, False),
    ("nonzero_static", (np.array([[1, 0], [2, 3]]),), {"size": 2, "fill_value": -7}, False),
    ("index_put", (f(4, 3), (np.array([0, 2]),), f(2, 3)), {}, True),
    ("index_put", (f(4), (np.array([1, 1, 3]),), f(3)), {"accumulate": True}, True),
    ("put", (f(3, 4), np.array([0, 5, 11]), f(3)), {}, True),
    ("put", (f(3, 4), np.array([1, 1]), f(2)), {"accumulate": True}, True),
    ("index_reduce", (f(4, 3), 0, np.array([0, 2, 0]), f(3, 3), "prod"), {}, False),
    ("index_reduce", (f(4, 3), 1, np.array([2, 0]), f(4, 2), "amax"), {"include_self": False}, False),
    ("constant_pad_nd", (f(2, 3), (1, 2)), {"value": 0.5}, True),
    ("convolution", (f(1, 2, 5), f(3, 2, 3), f(3), (1,), (1,), (1,), False, (0,), 1), {}, True),
    ("convolution", (f(1, 2, 4, 4), f(2, 3, 3, 3), None, (2, 2), (1, 1), (1, 1), True, (1, 1), 1), {}, True),
    ("real", (f(3),), {}, True), ("sgn", (SPECIAL,), {}, False), ("frobenius_norm", (f(3, 4), (0, 1)), {}, True),
    ("norm_except_dim", (f(3, 4), 2, 0), {}, True), ("unsafe_split_with_sizes", (f(5, 2), [3, 2]), {}, True),
    ("square", (f(4),), {}, True), ("split_with_sizes", (f(5, 2), [2, 3]), {}, True),
    ("unsafe_chunk", (f(5, 2), 2), {}, True), ("unsafe_split", (f(5, 2), 2), {}, True),
]

# Functions of no tensor inputs, compared value for value.
FACTORIES = [
    ("range", (1.0, 4.0), {}), ("range", (0, 1, 0.25), {}),
    ("unravel_index", (np.array([13, -1, 5]), (3, 4)), {}),
    ("tril_indices", (4, 3), {}), ("tril_indices", (3, 5, 1), {}), ("triu_indices", (4, 4, -1), {}),
    ("hann_window", (8,), {}), ("hann_window", (7,), {"periodic": False}), ("hamming_window", (6,), {}),
    ("blackman_window", (9,), {}), ("bartlett_window", (5,), {}), ("kaiser_window", (6,), {}),
    ("kaiser_window", (6,), {"periodic": False, "beta": 5.0}), ("hann_window", (1,), {}),
    ("scalar_tensor", (3,), {}), ("broadcast_shapes", ((2, 1), (1, 3)), {}),
]

# (name, args, kwargs): both libraries raise.
ERRORS = [
    ("cross", (f(4, 2), f(4, 2)), {"dim": 1}), ("tensor_split", (f(3), 0), {}), ("vsplit", (f(3),), {"sections": 1}),
    ("hsplit", (f(2, 5), 2), {}), ("take", (f(2, 2), np.array([4])), {}), ("bincount", (np.array([-1, 2]),), {}),
    ("quantile", (f(5), 1.5), {}), ("quantile", (i(5, 5), 0.5), {}), ("repeat_interleave", (f(3), np.array([1, 2])), {}),
    ("broadcast_tensors", (f(2, 3), f(4, 3)), {}), ("unravel_index", (np.array([1.5]), (3, 4)), {}),
    ("nanmean", (i(3, 4),), {}), ("positive", (np.array([True, False]),), {}),
    ("inverse", (np.zeros((2, 2)),), {}), ("cholesky", (-np.eye(2),), {}), ("det", (f(2, 3),), {}),
    ("polygamma", (-1, f(2)), {}), ("bitwise_left_shift", (f(2), f(2)), {}),
    ("imag", (f(2),), {}), ("gradient", (f(1),), {}),
]

SPD = SQ @ SQ.T + np.eye(3)

# (namespace, name, args, kwargs, differentiable): torch.<namespace>.<name> vs ember.<namespace>.<name>
NAMESPACED = [
    ("linalg", "inv", (SPD,), {}, True), ("linalg", "det", (SQ,), {}, True), ("linalg", "slogdet", (SQ,), {}, True),
    ("linalg", "solve", (SPD, f(3, 2)), {}, True), ("linalg", "solve", (SPD, f(3)), {}, True),
    ("linalg", "solve", (SPD, f(2, 3)), {"left": False}, True), ("linalg", "cholesky", (SPD,), {}, True),
    ("linalg", "matrix_exp", (SQ * 0.3,), {}, True), ("linalg", "matrix_power", (SQ, 2), {}, True),
    ("linalg", "vector_norm", (f(3, 4),), {}, True), ("linalg", "vector_norm", (f(3, 4), 1, 1), {}, True),
    ("linalg", "vector_norm", (f(3, 4), 0), {}, False), ("linalg", "matrix_norm", (f(3, 4),), {}, True),
    ("linalg", "matrix_norm", (f(3, 4), 1), {}, True), ("linalg", "matrix_norm", (f(2, 3, 4), float("inf")), {}, True),
    ("linalg", "norm", (f(3, 4),), {}, True), ("linalg", "norm", (f(4),), {"ord": 3}, True),
    ("linalg", "cross", (f(2, 3), f(2, 3)), {}, True), ("linalg", "multi_dot", ([f(3), f(3, 4), f(4)],), {}, True),
    ("linalg", "vecdot", (f(2, 3), f(2, 3)), {}, True), ("linalg", "diagonal", (f(3, 4),), {"offset": 1}, True),
    ("special", "expit", (f(4),), {}, True), ("special", "logit", (np.array([0.1, 0.5, 0.9]),), {}, True),
    ("special", "erfc", (f(4),), {}, True), ("special", "gammaln", (np.abs(f(4)) + 0.2,), {}, True),
    ("special", "psi", (np.abs(f(4)) + 0.2,), {}, True), ("special", "multigammaln", (np.abs(f(3)) + 2, 2), {}, True),
    ("special", "xlog1py", (np.array([0.0, 1.0, 2.0]), np.array([-1.0, 0.5, 3.0])), {}, False),
    ("special", "entr", (np.array([-1.0, 0.0, 0.3, 2.0]),), {}, False), ("special", "entr", (np.abs(f(4)) + 0.1,), {}, True),
    ("special", "ndtr", (f(4),), {}, True), ("special", "log_ndtr", (f(4),), {}, True),
    ("special", "log_softmax", (f(2, 3), 1), {}, True), ("special", "i0", (f(4),), {}, True),
]

# (method, tensor input, args, kwargs, differentiable): Tensor methods written directly
METHODS = [
    ("unfold", f(7), (0, 3, 2), {}, True), ("unfold", f(2, 6, 3), (1, 2, 1), {}, True),
    ("unfold", f(4, 5), (-1, 5, 1), {}, True), ("hardshrink", f(6), (0.3,), {}, True),
    ("prelu", f(2, 3, 4), (np.array([0.1, 0.2, 0.3]),), {}, True), ("new", f(2), ((2, 3),), {}, False),
    ("new", f(2), ([1, 2],), {}, False),
]
