"""Under CPU autocast, products get PyTorch's result dtypes: ``inner`` of two vectors and ``mv``/``dot``/``outer``
stay float32, ``linalg.vecdot``, ``tensordot``, ``einsum`` and matrix products go to the low dtype; spectral_norm
(power iteration by ``mv`` and ``dot``) runs inside autocast (it failed on a float32 x bfloat16 dot)."""
from __future__ import annotations

import pytest

import ember

torch = pytest.importorskip("torch")

CALLS = {
    "inner_1d": lambda t, A, B, v: t.inner(v, v),
    "inner_2d": lambda t, A, B, v: t.inner(A, B),
    "inner_2d_1d": lambda t, A, B, v: t.inner(A, v),
    "vecdot": lambda t, A, B, v: t.linalg.vecdot(A, A),
    "vecdot_dim0": lambda t, A, B, v: t.linalg.vecdot(A, A, dim=0),
    "dot": lambda t, A, B, v: t.dot(v, v),
    "vdot": lambda t, A, B, v: t.vdot(v, v),
    "mv": lambda t, A, B, v: t.mv(A, v),
    "outer": lambda t, A, B, v: t.outer(v, v),
    "matmul_vec": lambda t, A, B, v: A @ v,
    "mm": lambda t, A, B, v: A @ B.T,
    "tensordot": lambda t, A, B, v: t.tensordot(A, B, dims=([1], [1])),
    "einsum": lambda t, A, B, v: t.einsum("ij,kj->ik", A, B),
    "addmv": lambda t, A, B, v: t.addmv(t.ones(3), A, v),
}


@pytest.mark.parametrize("low", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_result_dtype_like_torch(name, low):
    def run(lib):
        A, B, v = lib.ones(3, 4), lib.ones(2, 4), lib.ones(4)
        with lib.autocast("cpu", dtype=getattr(lib, low)):
            return str(CALLS[name](lib, A, B, v).dtype).split(".")[1]

    assert run(ember) == run(torch)


def test_inner_of_vectors_equals_dot_like_torch():
    for lib in (ember, torch):
        v, w = lib.tensor([1.0, 2.0, 3.0]), lib.tensor([4.0, -5.0, 6.0])
        assert lib.inner(v, w).item() == lib.dot(v, w).item() == 12.0


def test_spectral_norm_runs_under_autocast_like_torch():
    def run(lib):
        lib.manual_seed(0)
        layer = lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(4, 3))
        with lib.autocast("cpu", dtype=lib.bfloat16):
            out = layer(lib.ones(2, 4))
        return tuple(out.shape), str(out.dtype).split(".")[1], str(layer.weight.dtype).split(".")[1]

    assert run(ember) == run(torch)
