"""``addmm``/``addmv``/``addr``/``baddbmm``/``addbmm`` with ``beta=0`` against PyTorch.

PyTorch ignores ``input`` in the forward when beta == 0 (its NaN and inf do not reach the result),
but its gradient for ``input`` is still beta * grad = 0 * grad: zeros, NaN where grad is NaN or
inf, summed over broadcast dims. ember used to leave ``input`` out of the graph (no gradient).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

NAN, INF = float("nan"), float("inf")
# (function name, input shape, operand shapes): the broadcast inputs check the sum back to input's shape
CASES = [
    ("addmm", (2, 3), ((2, 4), (4, 3))),
    ("addmm", (3,), ((2, 4), (4, 3))),
    ("addmv", (2,), ((2, 3), (3,))),
    ("addr", (2, 3), ((2,), (3,))),
    ("baddbmm", (2, 2, 3), ((2, 2, 4), (2, 4, 3))),
    ("addbmm", (1, 3), ((2, 2, 4), (2, 4, 3))),
]


def _run(lib: Any, name: str, x: np.ndarray, mats: list, g: np.ndarray, alpha: float) -> tuple:
    xt = lib.tensor(x, requires_grad=True)
    ms = [lib.tensor(m, requires_grad=True) for m in mats]
    out = getattr(lib, name)(xt, *ms, beta=0, alpha=alpha)
    out.backward(lib.tensor(g))
    return out.detach().numpy(), xt.grad.numpy(), [m.grad.numpy() for m in ms]


@pytest.mark.parametrize("name,xshape,mshapes", CASES, ids=[f"{c[0]}{c[1]}" for c in CASES])
@pytest.mark.parametrize("special", ["finite", "input_nan_inf", "grad_nan_inf", "both"])
def test_beta0_values_and_grads_match_torch(name: str, xshape: tuple, mshapes: tuple, special: str,
                                            rng: np.random.Generator) -> None:
    x = rng.standard_normal(xshape)
    mats = [rng.standard_normal(s) for s in mshapes]
    out_shape = getattr(torch, name)(torch.tensor(x), *map(torch.tensor, mats)).shape
    g = rng.standard_normal(tuple(out_shape))
    if special in ("input_nan_inf", "both"):
        x.reshape(-1)[0], x.reshape(-1)[-1] = NAN, -INF
    if special in ("grad_nan_inf", "both"):
        g.reshape(-1)[0], g.reshape(-1)[-1] = INF, NAN
    g.reshape(-1)[len(g.reshape(-1)) // 2] = -0.0 if g.size > 2 else g.reshape(-1)[0]
    with np.errstate(all="ignore"):
        want = _run(torch, name, x, mats, g, alpha=-1.5)
        got = _run(ember, name, x, mats, g, alpha=-1.5)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-12, err_msg=f"{name}: forward")  # NaN-free
    assert got[1].shape == want[1].shape
    np.testing.assert_array_equal(got[1], want[1], err_msg=f"{name}: input's gradient")
    if tuple(xshape) == tuple(out_shape):  # (summed over broadcast dims, NumPy keeps -0.0 where torch's sum gives +0.0)
        np.testing.assert_array_equal(np.signbit(got[1]), np.signbit(want[1]), err_msg=f"{name}: zero grads' sign")
    for k, (a, b) in enumerate(zip(got[2], want[2])):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=f"{name}: operand {k}'s gradient")


def test_beta0_ignores_input_nan_without_grad() -> None:
    """No gradient wanted: the result is alpha * product alone, input's NaN/inf unread, as in torch."""
    x, a, b = np.array([[NAN, INF]]), np.array([[2.0]]), np.array([[3.0, -4.0]])
    out = ember.addmm(ember.tensor(x), ember.tensor(a), ember.tensor(b), beta=0, alpha=0.5)
    want = torch.addmm(torch.tensor(x), torch.tensor(a), torch.tensor(b), beta=0, alpha=0.5)
    np.testing.assert_array_equal(out.numpy(), want.numpy())
    np.testing.assert_array_equal(out.numpy(), [[3.0, -4.0]])
