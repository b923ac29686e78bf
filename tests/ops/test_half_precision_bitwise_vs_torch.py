"""float16/bfloat16 results bit for bit equal to torch 2.13's CPU kernels, on random and special inputs.

PyTorch's CPU kernels for half inputs mostly compute in float32 and round once, but some round an intermediate
to the half dtype on the way (batch norm's statistics, the last-dim log_softmax's log-sum, the linear and cubic
interpolation weights), and ``prod`` accumulates in the half dtype itself (``prod([300, 300, 0.001])`` is inf in
float16). Each case here is compared element for element (NaN at the same places) with torch on the same
inputs. docs/special-points.md, "Half precision", lists what is matched and what is not.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

HALF = ("float16", "bfloat16")
SHAPES = ((2, 4, 16), (2, 4, 7), (1, 4, 1000), (3, 4, 33))


def _inputs(seed: int, shape: tuple, special: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32) * np.float32(rng.choice([0.1, 1.0, 3.0, 10.0]))
    if special:  # zeros, a huge value, infinities and NaN in a few slices (torch and ember must place them alike)
        flat = x.reshape(-1)
        for value in (0.0, -0.0, 6e4, np.inf, -np.inf, np.nan):
            flat[rng.integers(flat.size)] = value
    return x


def _same(fn, x: np.ndarray, dtype: str, *extra: np.ndarray) -> None:
    got = fn(ember, *[ember.tensor(a).to(getattr(ember, dtype)) for a in (x,) + extra])
    want = fn(torch, *[torch.tensor(a).to(getattr(torch, dtype)) for a in (x,) + extra])
    g = got.float().detach().numpy()
    w = want.float().detach().numpy()
    assert got.dtype.__str__().split(".")[-1] == str(want.dtype).split(".")[-1]
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    assert same.all(), f"{int((~same).sum())} of {g.size} elements differ: ember {g[~same][:5]}, torch {w[~same][:5]}"


F = "nn.functional"
CASES = {
    "batch_norm_train_float16": (lambda L, x: L.nn.functional.batch_norm(x, None, None, training=True), ("float16",)),
    "batch_norm_train_affine_float16": (lambda L, x: L.nn.functional.batch_norm(
        x, None, None, L.linspace(-1, 2, x.shape[1]).to(x.dtype), L.linspace(0.5, -1, x.shape[1]).to(x.dtype),
        training=True), ("float16",)),
    "batch_norm_eval": (lambda L, x: L.nn.functional.batch_norm(
        x, L.linspace(-1, 1, x.shape[1]).to(x.dtype), L.linspace(0.5, 2, x.shape[1]).to(x.dtype),
        L.linspace(-1, 2, x.shape[1]).to(x.dtype), L.linspace(0.5, -1, x.shape[1]).to(x.dtype)), HALF),
    "instance_norm_float16": (lambda L, x: L.nn.functional.instance_norm(
        x, weight=L.linspace(-1, 2, x.shape[1]).to(x.dtype), bias=L.linspace(0.5, -1, x.shape[1]).to(x.dtype)),
        ("float16",)),
    "log_softmax_last_dim": (lambda L, x: x.log_softmax(-1), HALF),
    "log_softmax_dim0": (lambda L, x: x.log_softmax(0), ("float16",)),
    "prod_last_dim": (lambda L, x: (x * 0.05 + 1).prod(-1), HALF),
    "prod_middle_dim": (lambda L, x: (x * 0.05 + 1).prod(1), HALF),
    "prod_all": (lambda L, x: (x * 0.02 + 1).prod(), HALF),
    "norm_2": (lambda L, x: x.norm(dim=-1), HALF),
    "norm_3": (lambda L, x: L.linalg.vector_norm(x, 3, -1), HALF),
    "normalize": (lambda L, x: L.nn.functional.normalize(x, dim=-1), HALF),
    "cosine_similarity": (lambda L, x: L.nn.functional.cosine_similarity(x, x.flip(-1), dim=-1), HALF),
    "interpolate_linear": (lambda L, x: L.nn.functional.interpolate(x, scale_factor=1.7, mode="linear"), HALF),
    "interpolate_linear_align_corners": (lambda L, x: L.nn.functional.interpolate(
        x, size=2 * x.shape[-1] + 3, mode="linear", align_corners=True), HALF),
    "interpolate_trilinear": (lambda L, x: L.nn.functional.interpolate(
        x.reshape(1, x.shape[0], x.shape[1], -1, 1)[:, :, :, :9], scale_factor=1.7, mode="trilinear"), HALF),
    "interpolate_bicubic_bfloat16": (lambda L, x: L.nn.functional.interpolate(
        x.reshape(x.shape[0], x.shape[1], -1, 1)[:, :, :9], size=(7, 5), mode="bicubic"), ("bfloat16",)),
}
SDPA = (lambda L, x: L.nn.functional.scaled_dot_product_attention(x, x.flip(-1), x * 0.5), HALF)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_half_results_bitwise_equal_torch(name: str, shape: tuple) -> None:
    fn, dtypes = CASES[name]
    for dtype in dtypes:
        for seed in range(3):
            _same(fn, _inputs(seed, shape, special=False), dtype)


SPECIAL = ("log_softmax_last_dim", "prod_last_dim", "prod_all", "norm_2", "interpolate_linear", "batch_norm_eval",
           "normalize")


@pytest.mark.parametrize("name", SPECIAL)
def test_half_results_at_special_points_equal_torch(name: str) -> None:
    fn, dtypes = CASES[name]
    for dtype in dtypes:
        for seed in range(4):
            _same(fn, _inputs(seed, (2, 4, 16), special=True), dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_half_attention_math_path_within_an_ulp_of_torch(shape: tuple) -> None:
    """3-d attention (torch's math path upcasts to float32): float32 math rounded once. The float32 products'
    summation order (BLAS) still moves a rare element by one half ulp: at most 1% of them, never by more."""
    fn, dtypes = SDPA
    for dtype in dtypes:
        x = _inputs(0, shape, special=False)
        got = fn(ember, ember.tensor(x).to(getattr(ember, dtype))).float().numpy()
        want = fn(torch, torch.tensor(x).to(getattr(torch, dtype))).float().numpy()
        ulp = np.spacing(np.abs(want).astype(np.float16 if dtype == "float16" else np.float32)).astype(np.float64)
        if dtype == "bfloat16":
            ulp = ulp * 2.0 ** 16
        assert np.all(np.abs(got - want) <= ulp)
        assert np.mean(got != want) <= 0.01


def test_float16_prod_overflows_as_torch() -> None:
    """torch multiplies float16 in float16: 300 * 300 is inf before 0.001 can bring it back (not 90)."""
    x = np.array([300.0, 300.0, 0.001], dtype=np.float32)
    assert ember.tensor(x).to(ember.float16).prod().item() == float("inf")
    assert ember.tensor(x).to(ember.bfloat16).prod().item() == torch.tensor(x).to(torch.bfloat16).prod().item()
    _same(lambda L, t: t.prod(0), x, "float16")


def test_half_prod_gradient_keeps_dtype() -> None:
    x = ember.tensor([1.5, 2.0, 0.5, 3.0]).to(ember.float16).requires_grad_()
    x.prod().backward()
    assert x.grad.dtype is ember.float16
    assert x.grad.float().tolist() == [3.0, 2.25, 9.0, 1.5]


def test_cdist_of_half_refused_as_torch() -> None:
    x = ember.ones(2, 3).to(ember.float16)
    with pytest.raises(RuntimeError, match="cdist.*Half"):
        ember.cdist(x, x)
    with pytest.raises(RuntimeError):
        torch.cdist(torch.ones(2, 3).half(), torch.ones(2, 3).half())
