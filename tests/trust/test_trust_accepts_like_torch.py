"""Inputs torch accepts that ember refused (found by the OpInfo sweep, docs/testing.md): each program runs in both
libraries and the results (values, dtypes, shapes) must agree. Edge points: 0-d and empty tensors, size-1 dims,
negative indices, bool/int/complex dtypes.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

F = "L.nn.functional"
PROGRAMS = {
    "nonzero_0d_true": "L.nonzero(L.tensor(3.0))",
    "nonzero_0d_false": "L.nonzero(L.tensor(0.0))",
    "nonzero_0d_tuple": "L.nonzero(L.tensor(-1), as_tuple=True)",
    "argwhere_0d": "L.argwhere(L.tensor(True))",
    "take_along_dim_negative": "L.take_along_dim(L.arange(6.).reshape(2, 3), L.tensor([[-1, 0], [-3, 2]]), 1)",
    "take_along_dim_negative_dim0": "L.take_along_dim(L.arange(6.).reshape(2, 3), L.tensor([[-2, -1, 0]]), 0)",
    "logit_bool": "L.logit(L.tensor([True, False]))",
    "logit_int": "L.logit(L.tensor([0, 1, 2]), eps=0.25)",
    "multi_margin_loss_0d": f"{F}.multi_margin_loss(L.tensor(0.5), L.tensor(0))",
    "multi_margin_loss_0d_none": f"{F}.multi_margin_loss(L.tensor(-2.0), L.tensor(0), reduction='none')",
    "tensordot_size1_left": "L.tensordot(L.arange(6.).reshape(2, 1, 3), L.arange(60.).reshape(3, 4, 5), "
                            "dims=([1, 2], [1, 0]))",
    "tensordot_size1_right": "L.tensordot(L.arange(6.).reshape(2, 3), L.arange(3.).reshape(1, 3), dims=([0, 1], [0, 1]))",
    "inv_ex_empty_batch": "L.linalg.inv_ex(L.ones(2, 0, 0))",
    "cholesky_ex_empty": "L.linalg.cholesky_ex(L.ones(0, 0, dtype=L.float64))",
    "lu_solve_empty": "L.linalg.lu_solve(*L.linalg.lu_factor(L.ones(0, 0)), L.ones(0, 2))",
    "lu_factor_empty_batch": "L.linalg.lu_factor(L.ones(0, 3, 3))",
    "ldl_factor_empty": "L.linalg.ldl_factor(L.ones(0, 0))",
    "group_norm_empty_batch": f"{F}.group_norm(L.ones(0, 4, 3), 2)",
    "cosine_embedding_loss_bool": f"{F}.cosine_embedding_loss(L.tensor([[True, False], [True, True]]), "
                                  "L.tensor([[True, True], [False, True]]), L.tensor([1, -1]))",
    "cosine_embedding_loss_int_double": f"{F}.cosine_embedding_loss(L.tensor([[1., 0.]]).double(), L.tensor([[1, 1]]), "
                                        "L.tensor([1]))",
    "norm_nuc_positional": "L.norm(L.arange(9.).reshape(3, 3), 'nuc')",
    "norm_nuc_batched_dim": "L.norm(L.arange(18.).reshape(2, 3, 3), 'nuc', dim=(1, 2), keepdim=True)",
    "conv2d_int64": f"{F}.conv2d(L.arange(50).reshape(1, 2, 5, 5) - 20, L.arange(-9, 9).reshape(1, 2, 3, 3), "
                    "L.tensor([7]), padding=1)",
    "conv1d_int32_groups": f"{F}.conv1d(L.arange(20, dtype=L.int32).reshape(1, 4, 5), "
                           "L.arange(12, dtype=L.int32).reshape(2, 2, 3), groups=2)",
    "conv3d_int16": f"{F}.conv3d(L.arange(54, dtype=L.int16).reshape(1, 2, 3, 3, 3), "
                    "L.ones(1, 2, 2, 2, 2, dtype=L.int16))",
    "conv2d_complex64": f"{F}.conv2d(L.complex(L.arange(18.).reshape(1, 2, 3, 3), -L.arange(18.).reshape(1, 2, 3, 3)),"
                       " L.complex(L.ones(3, 2, 2, 2), L.arange(24.).reshape(3, 2, 2, 2) / 8), "
                       "L.complex(L.tensor([1., 2., 3.]), L.tensor([-1., 0., 0.5])), stride=1, padding=1)",
    "conv1d_complex128": f"{F}.conv1d(L.complex(L.arange(8.).double(), L.ones(8).double()).reshape(1, 1, 8), "
                         "L.complex(L.tensor([[[1., -1., 2.]]]).double(), L.tensor([[[0.5, 0., -3.]]]).double()))",
}


def _as_numpy(value):
    if isinstance(value, (tuple, list)):
        return [_as_numpy(v) for v in value]
    return value.detach().numpy() if value.dtype != getattr(type(value), "bfloat16", None) else value


def _run(lib, program):
    return _as_numpy(eval(program, {"L": lib}))


def _same(a, b, where):
    if isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for x, y in zip(a, b):
            _same(x, y, where)
        return
    assert a.shape == b.shape and a.dtype == b.dtype, f"{where}: {a.shape} {a.dtype} vs torch {b.shape} {b.dtype}"
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6, err_msg=where)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_ember_accepts_what_torch_accepts(name):
    _same(_run(ember, PROGRAMS[name]), _run(torch, PROGRAMS[name]), name)


def test_complex_conv_gradients_equal_torch():
    rng = np.random.default_rng(18)
    x = rng.normal(size=(2, 3, 5, 5)) + 1j * rng.normal(size=(2, 3, 5, 5))
    w = rng.normal(size=(4, 3, 3, 3)) + 1j * rng.normal(size=(4, 3, 3, 3))
    up = rng.normal(size=(2, 4, 3, 3)) + 1j * rng.normal(size=(2, 4, 3, 3))
    grads = []
    for lib in (torch, ember):
        xt, wt = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        lib.nn.functional.conv2d(xt, wt).backward(lib.tensor(up))
        grads.append((xt.grad.detach().numpy(), wt.grad.detach().numpy()))
    for e, t in zip(grads[1], grads[0]):
        np.testing.assert_allclose(e, t, rtol=1e-10, atol=1e-10)


def test_take_along_dim_flat_still_refuses_negative_indices():
    """torch's flat form (dim=None) gathers and refuses -1; only the per-dim form wraps."""
    with pytest.raises(RuntimeError):
        torch.take_along_dim(torch.arange(6.0), torch.tensor([-1]))
    with pytest.raises(RuntimeError, match="out of bounds"):
        ember.take_along_dim(ember.arange(6.0), ember.tensor([-1]))
