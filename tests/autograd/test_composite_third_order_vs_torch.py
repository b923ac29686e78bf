"""Third derivatives of random three-op chains against torch 2.13 (autograd audit, func24), layer norm's third
derivative against finite differences and torch's composite layer norm (torch's native one disagrees with both),
and ``autograd.functional``'s strict mode for hessian/hvp/vhp as torch words it."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _op(lib, name: str, x):
    F = lib.nn.functional
    table = {
        "sin": lambda: x.sin(), "tanh": lambda: x.tanh(), "sigmoid": lambda: x.sigmoid(), "gelu": lambda: F.gelu(x),
        "silu": lambda: F.silu(x), "softplus": lambda: F.softplus(x), "mish": lambda: F.mish(x),
        "logsigmoid": lambda: F.logsigmoid(x), "erf": lambda: lib.erf(x), "atan": lambda: x.atan(),
        "exp": lambda: (x * 0.3).exp(), "square": lambda: x * x, "cumsum": lambda: x.cumsum(-1),
        "softmax": lambda: x.softmax(-1), "log_softmax": lambda: x.log_softmax(-1),
        "normalize": lambda: x / (x.norm(dim=-1, keepdim=True) + 1), "std": lambda: x / (x.std(-1, keepdim=True) + 1),
        "prod": lambda: x * x.prod(-1, keepdim=True), "digamma": lambda: (x * x + 1).digamma(),
        "lgamma": lambda: (x * x + 1).lgamma(), "matmul": lambda: x @ x.transpose(-1, -2) @ x * 0.1,
        "logsumexp": lambda: x - x.logsumexp(-1, keepdim=True), "cummax": lambda: x.cummax(-1)[0] * x,
        "atan2": lambda: lib.atan2(x, x * x + 1), "hypot": lambda: lib.hypot(x, x.cos() + 2),
        "sinc": lambda: lib.sinc(x), "lerp": lambda: lib.lerp(x, x.cos(), x.sigmoid()),
        "where": lambda: lib.where(x > 0, x.sin(), x * x), "xlogy": lambda: lib.xlogy(x, x * x + 1),
        "rsqrt": lambda: (x * x + 1).rsqrt(), "conv1d": lambda: F.conv1d(
            x.unsqueeze(1), (lib.arange(3, dtype=x.dtype) * 0.3 - 0.2).reshape(1, 1, 3), padding=1).squeeze(1) * x,
    }
    return table[name]()


NAMES = ("sin", "tanh", "sigmoid", "gelu", "silu", "softplus", "mish", "logsigmoid", "erf", "atan", "exp", "square",
         "cumsum", "softmax", "log_softmax", "normalize", "std", "prod", "digamma", "lgamma", "matmul", "logsumexp",
         "cummax", "atan2", "hypot", "sinc", "lerp", "where", "xlogy", "rsqrt", "conv1d")


def _derivatives(lib, names, x0: np.ndarray, seeds: list, fn=None) -> list:
    x = lib.tensor(x0, requires_grad=True)
    y = x
    for name in names:
        y = _op(lib, name, y)
    if fn is not None:
        y = fn(lib, x)
    (g1,) = lib.autograd.grad((y * lib.tensor(seeds[0])).sum(), x, create_graph=True)
    (g2,) = lib.autograd.grad((g1 * lib.tensor(seeds[1])).sum(), x, create_graph=True)
    (g3,) = lib.autograd.grad((g2 * lib.tensor(seeds[2])).sum(), x, allow_unused=True)
    return [t.detach().numpy() if t is not None else np.zeros_like(x0) for t in (y, g1, g2, g3)]


def _chains(seed: int, count: int) -> list:
    rng = np.random.default_rng(seed)
    return [(tuple(rng.choice(NAMES, size=3, replace=False)), rng.standard_normal((2, 4)),
             [rng.standard_normal((2, 4)) for _ in range(3)]) for _ in range(count)]


def _compare(chains: list) -> None:
    for names, x0, seeds in chains:
        for order, (a, b) in enumerate(zip(_derivatives(torch, names, x0, seeds), _derivatives(ember, names, x0, seeds))):
            np.testing.assert_allclose(b, a, rtol=1e-7, atol=1e-9, err_msg=f"{names}: derivative of order {order}")


@pytest.mark.parametrize("chain", range(3))
def test_chains_to_third_order_sample(chain: int) -> None:
    _compare(_chains(11, 3)[chain:chain + 1])


@pytest.mark.slow
def test_chains_to_third_order_sweep() -> None:
    _compare(_chains(1, 200))


def _layer_norm(lib, x):
    return lib.nn.functional.layer_norm(x, x.shape[-1:])


def _composite_layer_norm(lib, x):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / (var + 1e-5).sqrt()


def test_layer_norm_third_derivative_against_differences_and_torch_composite() -> None:
    rng = np.random.default_rng(5)
    x0, seeds = rng.standard_normal((2, 4)), [rng.standard_normal((2, 4)) for _ in range(3)]
    got = _derivatives(ember, (), x0, seeds, _layer_norm)
    composite = _derivatives(torch, (), x0, seeds, _composite_layer_norm)
    for a, b in zip(composite, got):
        np.testing.assert_allclose(b, a, rtol=1e-8, atol=1e-10)
    eps, numeric = 1e-5, np.zeros_like(x0)
    for k in range(x0.size):  # d/dx of <second derivative, seed 2> from ember's own second order
        plus, minus = x0.copy(), x0.copy()
        plus.flat[k] += eps
        minus.flat[k] -= eps
        numeric.flat[k] = ((_derivatives(ember, (), plus, seeds, _layer_norm)[2] -
                            _derivatives(ember, (), minus, seeds, _layer_norm)[2]) * seeds[2]).sum() / (2 * eps)
    np.testing.assert_allclose(got[3], numeric, rtol=1e-6, atol=1e-7)


def _hvp_linear(lib):
    lib.autograd.functional.hvp(lambda x: (x * 2).sum(), lib.ones(3, dtype=lib.float64), lib.ones(3, dtype=lib.float64),
                                strict=True)


def _vhp_linear(lib):
    lib.autograd.functional.vhp(lambda x: (x * 2).sum(), lib.ones(3, dtype=lib.float64), lib.ones(3, dtype=lib.float64),
                                strict=True)


def _hessian_linear(lib):
    lib.autograd.functional.hessian(lambda x: (x * 2).sum(), lib.ones(3, dtype=lib.float64), strict=True)


@pytest.mark.parametrize("case", [_hvp_linear, _vhp_linear, _hessian_linear])
def test_strict_second_order_refuses_a_linear_function_as_torch(case) -> None:
    message = "While computing the hessian, found that the jacobian of the user-provided function with respect to input 0"
    with pytest.raises(RuntimeError, match=message):
        case(torch)
    with pytest.raises(RuntimeError, match=message):
        case(ember)
