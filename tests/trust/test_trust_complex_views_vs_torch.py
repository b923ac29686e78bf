"""``view_as_real``/``view_as_complex`` share memory with their input, as torch's (they were copies: a write through
one silently missed the other). Compared with torch: values after writes both ways, shapes and strides of views of
strided inputs, gradients; torch's stride/offset refusals; ember's one refusal (a recorded in-place write through
such a view of a tensor that requires grad) is clear.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

PROGRAMS = {
    "write_real_view": "z = L.complex(L.arange(4.), L.ones(4)); r = L.view_as_real(z); r[1, 1] = -7; r[0].mul_(3); "
                       "out = z",
    "write_base_seen_by_view": "z = L.complex(L.arange(4.), -L.arange(4.)); r = L.view_as_real(z); z.mul_(2j); out = r",
    "strided_base": "z = L.complex(L.arange(12.).reshape(3, 4), L.ones(3, 4)).t()[:, ::2]; r = L.view_as_real(z); "
                    "r[..., 0].fill_(0.5); out = (z, r.shape, r.stride())",
    "zero_d": "z = L.complex(L.tensor(1.5), L.tensor(-2.)); r = L.view_as_real(z); r[1] = 9; out = (z, r.shape)",
    "write_complex_view": "x = L.arange(8.).reshape(2, 2, 2); c = L.view_as_complex(x); c[0, 1] = 5 - 1j; c.mul_(1j); "
                          "out = (x, c.stride())",
    "complex_view_of_rows": "x = L.arange(12., dtype=L.float64).reshape(3, 4)[:, 2:]; c = L.view_as_complex(x); "
                            "c += 1; out = (x, c)",
    "round_trip": "z = L.complex(L.arange(3.), L.ones(3)); w = L.view_as_complex(L.view_as_real(z)); w[0] = 4j; out = z",
}


def _run(lib, program):
    scope = {"L": lib}
    exec(program, scope)
    return scope["out"]


def _same(a, b, where):
    if isinstance(b, (tuple, list)) and not all(isinstance(v, int) for v in b):
        for x, y in zip(a, b):
            _same(x, y, where)
        return
    if hasattr(b, "numpy"):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=where)
    else:
        assert tuple(a) == tuple(b), f"{where}: {a} vs torch {b}"


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_writes_through_complex_views_equal_torch(name):
    _same(_run(ember, PROGRAMS[name]), _run(torch, PROGRAMS[name]), name)


def test_gradients_through_complex_views_equal_torch():
    rng = np.random.default_rng(18)
    z0 = rng.normal(size=(3, 2)) + 1j * rng.normal(size=(3, 2))
    x0 = rng.normal(size=(2, 3, 2))
    grads = []
    for lib in (torch, ember):
        z, x = lib.tensor(z0, requires_grad=True), lib.tensor(x0, requires_grad=True)
        loss = (lib.view_as_real(z * z) ** 2).sum() + (lib.view_as_complex(x * 2).abs() ** 3).sum()
        loss.backward()
        grads.append((z.grad.numpy(), x.grad.numpy()))
    for e, t in zip(grads[1], grads[0]):
        np.testing.assert_allclose(e, t, rtol=1e-12)


@pytest.mark.parametrize("program", [
    "L.view_as_complex(L.arange(12.).reshape(3, 4)[:, ::2].contiguous().t())",  # last stride != 1
    "L.view_as_complex(L.arange(9.)[1:].reshape(4, 2))",                          # odd storage offset
    "L.view_as_complex(L.arange(18.).reshape(3, 6)[:, 1:3])",                     # odd row stride? (6: even) offset 1
])
def test_view_as_complex_refuses_what_torch_refuses(program):
    with pytest.raises(RuntimeError):
        eval(program, {"L": torch})
    with pytest.raises(RuntimeError):
        eval(program, {"L": ember})


def test_recorded_write_through_view_is_refused_clearly():
    z = ember.complex(ember.arange(3.0), ember.ones(3)).requires_grad_()
    r = ember.view_as_real(z * 1)
    with pytest.raises(RuntimeError, match="view_as_real/view_as_complex"):
        r[0, 0] = 5.0
