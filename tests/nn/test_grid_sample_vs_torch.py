"""``F.grid_sample`` (and ``torch.grid_sampler*``) against torch 2.13: values, gradients of input and grid, second
order, every mode x padding x align_corners in 2-D and 3-D, at random points and at the special ones (pixel centers,
edges, reflection folds, far outside, inf/NaN), plus the spatial transformer pipeline (affine_grid -> grid_sample),
compile, the stand-in device and the errors. PyTorch's spatial_transformer_tutorial is what needed it."""
from __future__ import annotations

import contextlib
import itertools
import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as EF

torch = pytest.importorskip("torch")
TF = torch.nn.functional

MODES_2D = list(itertools.product(("bilinear", "nearest", "bicubic"), ("zeros", "border", "reflection"), (False, True)))
MODES_3D = list(itertools.product(("bilinear", "nearest"), ("zeros", "border", "reflection"), (False, True)))
# Exact grid points: pixel centers, edges and half-pixel ties of the sizes used with them (2 and 4, so that every
# such point is a multiple of 1/8 and both libraries compute it exactly: at a pixel center the grid's gradient
# jumps, and a rounding difference of one ulp would pick the other side), reflection folds, far outside.
SPECIAL = np.arange(-24, 25) / 8.0


def _grid(dims: int, special: bool, rng: np.random.Generator) -> np.ndarray:
    if special:
        values = SPECIAL if dims == 2 else SPECIAL[::3]
        mesh = np.stack(np.meshgrid(*([values] * dims), indexing="ij"), -1)
        return mesh.reshape((1, -1, 1, dims) if dims == 2 else (1, -1, 1, 1, dims))
    return rng.uniform(-1.4, 1.4, (2, 4, 3, 2) if dims == 2 else (2, 3, 2, 4, 3))


def _run(lib, F, x, g, mode, pad, align, w, second=False):
    x = lib.tensor(x, requires_grad=True)
    g = lib.tensor(g, requires_grad=True)
    out = F.grid_sample(x, g, mode=mode, padding_mode=pad, align_corners=align)
    loss = (out * lib.tensor(w)).sum()
    gx, gg = lib.autograd.grad(loss, (x, g), create_graph=second)
    result = [out.detach().numpy(), gx.detach().numpy(), gg.detach().numpy()]
    if second:  # a Hessian-vector product: d/d(x, g) of <grad, v>
        vx, vg = np.cos(np.arange(gx.numel())).reshape(gx.shape), np.sin(np.arange(gg.numel())).reshape(gg.shape)
        inner = (gx * lib.tensor(vx)).sum() + (gg * lib.tensor(vg)).sum()
        # nearest's first derivatives do not depend on x or grid: ember records no graph for them, torch does
        hx, hg = lib.autograd.grad(inner, (x, g), allow_unused=True) if inner.requires_grad else (None, None)
        result += [np.zeros(x.shape) if hx is None else hx.numpy(), np.zeros(g.shape) if hg is None else hg.numpy()]
    return result


def _compare(dims, mode, pad, align, special, dtype, second=False):
    rng = np.random.default_rng(abs(hash((dims, mode, pad, align, special))) % 2**32)
    x = rng.standard_normal((1, 2, 4, 2) if special and dims == 2 else (1, 2, 2, 4, 2) if special else
                            (2, 3, 5, 6) if dims == 2 else (2, 2, 4, 5, 3)).astype(dtype)
    g = _grid(dims, special, rng).astype(dtype)
    if not special:
        g.reshape(-1)[:6] = [-1, 1, 0, -1.5, 1.5, 5.0]
    shape = (x.shape[0], x.shape[1]) + g.shape[1:-1]
    w = rng.standard_normal(shape).astype(dtype)
    ours = _run(ember, EF, x, g, mode, pad, align, w, second)
    theirs = _run(torch, TF, x, g, mode, pad, align, w, second)
    tol = dict(rtol=1e-9, atol=1e-9) if dtype == np.float64 else dict(rtol=2e-4, atol=2e-4)
    for name, a, b in zip(("out", "grad_input", "grad_grid", "hvp_input", "hvp_grid"), ours, theirs):
        np.testing.assert_allclose(a, b, err_msg=name, **tol)
        assert a.dtype == b.dtype, name


@pytest.mark.parametrize("mode, pad, align", MODES_2D)
@pytest.mark.parametrize("special", [False, True], ids=["random", "special"])
def test_2d_values_and_gradients_vs_torch(mode, pad, align, special):
    _compare(2, mode, pad, align, special, np.float64)


@pytest.mark.parametrize("mode, pad, align", MODES_3D)
@pytest.mark.parametrize("special", [False, True], ids=["random", "special"])
def test_3d_values_and_gradients_vs_torch(mode, pad, align, special):
    _compare(3, mode, pad, align, special, np.float64)


@pytest.mark.parametrize("mode, pad, align", MODES_2D)
def test_2d_float32_at_special_points_vs_torch(mode, pad, align):
    _compare(2, mode, pad, align, True, np.float32)


@pytest.mark.parametrize("mode, pad", [("bilinear", "zeros"), ("bilinear", "reflection"), ("bicubic", "border"),
                                       ("nearest", "zeros")])
def test_second_order_vs_torch(mode, pad):
    _compare(2, mode, pad, False, False, np.float64, second=True)


def test_3d_second_order_vs_torch():
    _compare(3, "bilinear", "border", True, False, np.float64, second=True)


@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_non_finite_and_far_coordinates_forward_vs_torch(dims, dtype):
    """inf, NaN and far-away coordinates (forward only: torch 2.13's backward crashes on non-finite grids).
    PyTorch's 2-D kernel gives NaN for a NaN/inf point with zeros padding and clips NaN to 0; its 3-D kernel skips
    such points (0) and clips NaN to the far edge: each is followed. Beyond ~1e9 (float64) / ~1e4 (float32) no
    float can say which reflection fold a coordinate lies in, so far points stop there."""
    far = 3e9 if dtype == np.float64 else 1e4
    values = np.array([np.inf, -np.inf, np.nan, far, -far, 0.25, 0.0])
    x = (np.arange(24.0).reshape((1, 2, 3, 4) if dims == 2 else (1, 1, 2, 3, 4)) + 1).astype(dtype)
    g = np.stack(np.meshgrid(*([values] * dims), indexing="ij"), -1)
    g = g.reshape((1, -1, 1, dims) if dims == 2 else (1, -1, 1, 1, dims)).astype(dtype)
    modes = MODES_2D if dims == 2 else MODES_3D
    for mode, pad, align in modes:
        a = EF.grid_sample(ember.tensor(x), ember.tensor(g), mode, pad, align).numpy()
        b = TF.grid_sample(torch.tensor(x), torch.tensor(g), mode, pad, align).numpy()
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, equal_nan=True, err_msg=f"{mode} {pad} {align}")


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_size_one_axes_and_odd_shapes_vs_torch(mode, align):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 2, 1, 5))
    g = rng.uniform(-1.2, 1.2, (3, 1, 7, 2))
    for pad in ("zeros", "border", "reflection"):
        ours = _run(ember, EF, x, g, mode, pad, align, np.ones((3, 2, 1, 7)))
        theirs = _run(torch, TF, x, g, mode, pad, align, np.ones((3, 2, 1, 7)))
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9, err_msg=pad)


def test_spatial_transformer_pipeline_vs_torch():
    """affine_grid -> grid_sample, gradients reaching theta (what the STN tutorial trains)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 1, 28, 28)).astype(np.float32)
    theta = (np.array([[1, 0, 0], [0, 1, 0]]) + 0.2 * rng.standard_normal((4, 2, 3))).astype(np.float32)

    def run(lib, F):
        t = lib.tensor(theta, requires_grad=True)
        image = lib.tensor(x, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            grid = F.affine_grid(t, image.size())
            out = F.grid_sample(image, grid)
        (out.square().mean()).backward()
        return out.detach().numpy(), t.grad.numpy(), image.grad.numpy()

    for a, b in zip(run(ember, EF), run(torch, TF)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_warns_without_align_corners_as_torch():
    x, g = ember.zeros(1, 1, 2, 2), ember.zeros(1, 1, 1, 2)
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        EF.grid_sample(x, g)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        EF.grid_sample(x, g, align_corners=False)


def test_grid_sampler_integer_codes_vs_torch():
    rng = np.random.default_rng(5)
    x, g = rng.standard_normal((1, 2, 4, 4)), rng.uniform(-1, 1, (1, 3, 3, 2))
    x3, g3 = rng.standard_normal((1, 1, 3, 3, 3)), rng.uniform(-1, 1, (1, 2, 2, 2, 3))
    for interp, pad, align in itertools.product(range(3), range(3), (False, True)):
        a = ember.grid_sampler(ember.tensor(x), ember.tensor(g), interp, pad, align).numpy()
        b = torch.grid_sampler(torch.tensor(x), torch.tensor(g), interp, pad, align).numpy()
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
        a2 = ember.grid_sampler_2d(ember.tensor(x), ember.tensor(g), interp, pad, align).numpy()
        np.testing.assert_allclose(a2, b, rtol=1e-9, atol=1e-12)
    a = ember.grid_sampler_3d(ember.tensor(x3), ember.tensor(g3), 0, 1, True).numpy()
    b = torch.grid_sampler_3d(torch.tensor(x3), torch.tensor(g3), 0, 1, True).numpy()
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_compiled_equals_eager():
    rng = np.random.default_rng(6)
    x = ember.tensor(rng.standard_normal((2, 3, 6, 6)), requires_grad=True)
    g = ember.tensor(rng.uniform(-1.1, 1.1, (2, 4, 4, 2)), requires_grad=True)

    def step(x, g):
        return EF.grid_sample(x, g, mode="bilinear", padding_mode="reflection", align_corners=False).square().sum()

    eager = step(x, g)
    ex, eg = ember.autograd.grad(eager, (x, g))
    compiled = ember.compile(step, fallback="raise")
    for _ in range(2):  # the first call of a signature runs eagerly, the second traces
        out = compiled(x, g)
    cx, cg = ember.autograd.grad(out, (x, g))
    np.testing.assert_allclose(out.item(), eager.item(), rtol=1e-12)
    np.testing.assert_allclose(cx.numpy(), ex.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(cg.numpy(), eg.numpy(), rtol=1e-10, atol=1e-12)


def test_runs_on_the_cuda_device_like_cpu():
    rng = np.random.default_rng(7)
    x, g = rng.standard_normal((1, 2, 5, 4)), rng.uniform(-1.2, 1.2, (1, 3, 2, 2))
    cpu = EF.grid_sample(ember.tensor(x), ember.tensor(g), "bicubic", "reflection", False).numpy()
    context = contextlib.nullcontext() if ember.cuda.is_available() else ember.testing.standin_cuda()
    with context:
        xd = ember.tensor(x, device="cuda", requires_grad=True)
        gd = ember.tensor(g, device="cuda", requires_grad=True)
        out = EF.grid_sample(xd, gd, "bicubic", "reflection", False)
        out.sum().backward()
        assert out.device.type == "cuda" and gd.grad.device.type == "cuda"
        np.testing.assert_allclose(out.detach().cpu().numpy(), cpu, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("call, error, match", [
    (lambda: EF.grid_sample(ember.zeros(1, 1, 2, 2), ember.zeros(1, 1, 1, 2), mode="area", align_corners=False),
     ValueError, "expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: 'area'"),
    (lambda: EF.grid_sample(ember.zeros(1, 1, 2, 2), ember.zeros(1, 1, 1, 2), padding_mode="wrap",
                            align_corners=False), ValueError, "expected padding_mode to be"),
    (lambda: EF.grid_sample(ember.zeros(1, 1, 2), ember.zeros(1, 1, 2), align_corners=False), RuntimeError,
     "expected 4D or 5D input and grid with same number of dimensions"),
    (lambda: EF.grid_sample(ember.zeros(2, 1, 2, 2), ember.zeros(1, 1, 1, 2), align_corners=False), RuntimeError,
     "same batch size"),
    (lambda: EF.grid_sample(ember.zeros(1, 1, 2, 2), ember.zeros(1, 1, 1, 3), align_corners=False), RuntimeError,
     "size 2 in last dimension"),
    (lambda: EF.grid_sample(ember.zeros(1, 1, 2, 2), ember.zeros(1, 1, 1, 2, dtype=ember.float64),
                            align_corners=False), RuntimeError, "same dtype.*convert one with .to"),
    (lambda: EF.grid_sample(ember.zeros(1, 1, 0, 2), ember.zeros(1, 1, 1, 2), align_corners=False), RuntimeError,
     "non-empty spatial dimensions"),
    (lambda: EF.grid_sample(ember.zeros(1, 1, 2, 2, 2), ember.zeros(1, 1, 1, 1, 3), mode="bicubic",
                            align_corners=False), RuntimeError, "bicubic interpolation only supports 4D input"),
    (lambda: EF.grid_sample(ember.zeros(1, 1, 2, 2, dtype=ember.int64), ember.zeros(1, 1, 1, 2, dtype=ember.int64),
                            align_corners=False), RuntimeError, "floating-point"),
])
def test_errors_name_the_problem(call, error, match):
    with pytest.raises(error, match=match):
        call()
