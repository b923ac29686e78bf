"""Gaps closed in the thirteenth session (trust19), each against torch 2.13 on the CPU.

relu keeps -0.0 (torch's ``x < 0 ? 0 : x``), an empty batch through batch_norm in training, ``torch.gradient``
with coordinate tensors (ATen's formulas, bit for bit), and the in-place samplers filling permuted, transposed
and step-sliced tensors in torch's memory order (the same numbers for the same seed).
"""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _np(t):
    return t.detach().numpy()


@pytest.mark.parametrize("n", [7, 5000, 300000])  # small NumPy path, native kernel, threaded split
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_relu_keeps_negative_zero_as_torch(n, dtype):
    x = np.resize(np.array([-0.0, 0.0, -1.0, np.nan, 2.0, -np.inf, np.inf, 1e-45], dtype), n)
    want = torch.relu(torch.from_numpy(x)).numpy()
    for got in (ember.relu(ember.tensor(x)), ember.nn.functional.relu(ember.tensor(x)),
                ember.nn.ReLU()(ember.tensor(x)), ember.tensor(x).relu_()):
        got = _np(got)
        assert np.array_equal(got, want, equal_nan=True)
        assert np.array_equal(np.signbit(got), np.signbit(want))


def test_relu_gradient_at_signed_zeros_as_torch():
    x = np.array([-0.0, 0.0, -1.0, 2.0, np.nan], np.float64)
    grads = []
    for lib in (torch, ember):
        t = lib.tensor(x, requires_grad=True)
        lib.relu(t).backward(lib.tensor([-1.0, -2.0, 3.0, 4.0, 5.0], dtype=lib.float64))
        grads.append(_np(t.grad))
    assert np.array_equal(grads[0], grads[1], equal_nan=True)
    assert np.array_equal(np.signbit(grads[0]), np.signbit(grads[1]))


@pytest.mark.parametrize("shape", [(0, 3), (0, 3, 4), (2, 3, 0)])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_empty_batch_as_torch(shape, training):
    seen = []
    for lib in (torch, ember):
        bn = lib.nn.BatchNorm1d(3)
        bn.train(training)
        with lib.no_grad():
            bn.running_mean.fill_(1.0)
            bn.running_var.fill_(2.0)
        x = lib.zeros(shape, requires_grad=True)
        y = bn(x)
        y.sum().backward()
        seen.append((tuple(y.shape), _np(bn.running_mean).tolist(), _np(bn.running_var).tolist(),
                     int(bn.num_batches_tracked), tuple(x.grad.shape), _np(bn.weight.grad).tolist(),
                     _np(bn.bias.grad).tolist()))
    assert seen[0] == seen[1]


def test_batch_norm_one_value_per_channel_still_refused():
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        ember.nn.BatchNorm1d(3)(ember.zeros(1, 3))


def _gradient_cases():
    rng = np.random.default_rng(19)
    for trial in range(40):
        nd = int(rng.integers(1, 4))
        shape = tuple(int(s) for s in rng.integers(3, 6, nd))
        dims = sorted(set(int(d) for d in rng.integers(0, nd, int(rng.integers(1, nd + 1)))))
        dtype = ["float32", "float64", "int64"][trial % 3]
        coords = [np.cumsum(rng.uniform(0.1, 2.0, shape[d])).astype("float64" if dtype == "int64" else dtype)
                  for d in dims]
        yield pytest.param((rng.standard_normal(shape) * 5).astype(dtype), dims, coords, 1 + trial % 2,
                           id=f"{trial}-{dtype}-{shape}-{dims}")


@pytest.mark.parametrize("x, dims, coords, edge_order", list(_gradient_cases()))
def test_gradient_coordinate_spacing_bitwise_as_torch(x, dims, coords, edge_order):
    got = ember.gradient(ember.tensor(x), spacing=tuple(ember.tensor(c) for c in coords), dim=dims,
                         edge_order=edge_order)
    want = torch.gradient(torch.tensor(x), spacing=tuple(torch.tensor(c) for c in coords), dim=dims,
                          edge_order=edge_order)
    for g, w in zip(got, want):
        assert str(g.dtype) == str(w.dtype).replace("torch", "ember")
        assert np.array_equal(_np(g), w.numpy(), equal_nan=True)


def test_gradient_spacing_forms_and_errors_as_torch():
    x = np.array([[1.0, 4.0, 9.0, 16.0], [2.0, 3.0, 5.0, 8.0]])
    c = [0.0, 1.0, 1.5, 3.5]
    for kw in (dict(spacing=[2, 3]), dict(spacing=2.5, dim=1, edge_order=2), dict(spacing=(c,), dim=1),
               dict(spacing=(c[:3],), dim=1)):
        kw_t = {k: (tuple(torch.tensor(v) for v in val) if k == "spacing" and isinstance(val, tuple) else val)
                for k, val in kw.items()}
        kw_e = {k: (tuple(ember.tensor(v) for v in val) if k == "spacing" and isinstance(val, tuple) else val)
                for k, val in kw.items()}
        for g, w in zip(ember.gradient(ember.tensor(x), **kw_e), torch.gradient(torch.tensor(x), **kw_t)):
            assert np.array_equal(_np(g), w.numpy())
    with pytest.raises(RuntimeError):  # torch: "The size of tensor a (2) must match the size of tensor b (0)"
        ember.gradient(ember.tensor(x), spacing=(ember.tensor(c), ember.tensor([0.0, 2.0])))
    with pytest.raises(RuntimeError, match="one dimension"):
        ember.gradient(ember.tensor(x), spacing=(ember.tensor(c).reshape(2, 2),), dim=1)
    with pytest.raises(RuntimeError, match="uint8"):
        ember.gradient(ember.tensor([1, 2, 3], dtype=ember.uint8))
    with pytest.raises(RuntimeError, match="edge_order"):
        ember.gradient(ember.tensor(x), edge_order=3)


def _layouts():
    # (description, maker(lib, dtype)): every one is written in place by the samplers
    return [
        ("transposed", lambda m, d: m.zeros(7, 5, dtype=d).t()),
        ("small-transposed", lambda m, d: m.zeros(3, 2, dtype=d).t()),
        ("permuted-3d", lambda m, d: m.zeros(6, 4, 5, dtype=d).permute(1, 2, 0)),
        ("step-then-transposed", lambda m, d: m.zeros(8, 6, dtype=d)[::2].t()),
        ("column-step", lambda m, d: m.zeros(6, 8, dtype=d)[:, ::2]),
        ("1d-step", lambda m, d: m.zeros(40, dtype=d)[::2]),
        ("size-1-dims", lambda m, d: m.zeros(5, 1, 3, dtype=d).permute(2, 1, 0)),
    ]


_FILLS = {
    "uniform_": lambda t: t.uniform_(-2, 3), "normal_": lambda t: t.normal_(2, 3), "bernoulli_": lambda t: t.bernoulli_(0.3),
    "exponential_": lambda t: t.exponential_(), "random_": lambda t: t.random_(0, 1000), "cauchy_": lambda t: t.cauchy_(),
    "log_normal_": lambda t: t.log_normal_(), "geometric_": lambda t: t.geometric_(0.3),
}


@pytest.mark.parametrize("layout", _layouts(), ids=lambda c: c[0])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_in_place_samplers_fill_memory_order_as_torch(layout, dtype):
    _, make = layout
    for name, fill in _FILLS.items():
        drawn = []
        for lib in (torch, ember):
            lib.manual_seed(19)
            t = make(lib, getattr(lib, dtype))
            fill(t)
            drawn.append(_np(t))
        assert np.array_equal(drawn[0], drawn[1]), name


@pytest.mark.parametrize("layout", _layouts(), ids=lambda c: c[0])
def test_bernoulli_tensor_probabilities_and_like_factories_as_torch(layout):
    _, make = layout
    outs = []
    for lib in (torch, ember):
        got = []
        lib.manual_seed(5)
        t = make(lib, lib.float32)
        p = lib.tensor(np.linspace(0.05, 0.95, t.numel(), dtype=np.float32).reshape(tuple(t.shape)))
        got.append(_np(t.bernoulli_(p)))
        for like in (lambda x: lib.rand_like(x), lambda x: lib.randn_like(x), lambda x: lib.randint_like(x, 0, 50)):
            r = like(make(lib, lib.float32))
            got.append((_np(r), r.stride()))
        outs.append(got)
    assert np.array_equal(outs[0][0], outs[1][0])
    for (a, sa), (b, sb) in zip(outs[0][1:], outs[1][1:]):
        assert np.array_equal(a, b) and tuple(sa) == tuple(sb)


def test_in_place_sampler_on_expanded_tensor_refused():
    with pytest.raises(RuntimeError, match="single memory location|overlap"):
        ember.zeros(3, 1).expand(3, 4).uniform_()


def _uint8_cases():
    rng = np.random.default_rng(8)
    for trial in range(24):
        c = int(rng.integers(1, 5))
        h, w = (int(v) for v in rng.integers(2, 14, 2))
        mode = ("bilinear", "bicubic")[trial % 2]
        align, antialias = bool(trial % 4 >= 2), bool(trial % 8 >= 4)
        kw = ({"size": tuple(int(v) for v in rng.integers(2, 20, 2))} if trial % 3 else
              {"scale_factor": float(rng.choice([0.5, 0.7, 1.5, 2.0, 3.3]))})
        x = rng.integers(0, 256, (int(rng.integers(1, 3)), c, h, w)).astype(np.uint8)
        yield pytest.param(x, mode, align, antialias, kw, id=f"{trial}-{mode}-{x.shape}-ac{align}-aa{antialias}")


@pytest.mark.parametrize("x, mode, align_corners, antialias, kw", list(_uint8_cases()))
def test_uint8_bilinear_bicubic_interpolate_bitwise_as_torch(x, mode, align_corners, antialias, kw):
    """torch's fixed-point resampler: int16 weights, width pass then height pass, each rounded and saturated."""
    want = torch.nn.functional.interpolate(torch.tensor(x), mode=mode, align_corners=align_corners,
                                           antialias=antialias, **kw)
    got = ember.nn.functional.interpolate(ember.tensor(x), mode=mode, align_corners=align_corners,
                                          antialias=antialias, **kw)
    assert got.dtype == ember.uint8
    assert np.array_equal(_np(got), want.numpy())


def test_uint8_interpolate_channels_last_layout_as_torch():
    x = np.random.default_rng(2).integers(0, 256, (2, 3, 9, 7)).astype(np.uint8)
    want = torch.nn.functional.interpolate(torch.tensor(x).contiguous(memory_format=torch.channels_last),
                                           size=(5, 11), mode="bicubic")
    got = ember.nn.functional.interpolate(ember.tensor(x).contiguous(memory_format=ember.channels_last),
                                          size=(5, 11), mode="bicubic")
    assert np.array_equal(_np(got), want.numpy()) and got.stride() == want.stride()


def test_uint8_interpolate_one_column_with_five_channels_is_not_torchs_bug():
    """torch 2.13 (C > 4, output width 1) writes the first output row into every row: a torch bug, not copied;
    ember gives the values of the float computation rounded as the fixed-point kernel rounds them."""
    x = np.array([[[[10], [200], [30]]] * 5], dtype=np.uint8)
    got = _np(ember.nn.functional.interpolate(ember.tensor(x), size=(5, 1), mode="bilinear"))
    c3 = _np(ember.nn.functional.interpolate(ember.tensor(x[:, :3]), size=(5, 1), mode="bilinear"))
    assert np.array_equal(got[:, :3], c3)
    assert np.array_equal(c3, torch.nn.functional.interpolate(torch.tensor(x[:, :3]), size=(5, 1),
                                                              mode="bilinear").numpy())


@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_transposed_convolution_values_and_gradients_as_torch(dims, dtype):
    """conv_transpose2d ran its float kernels on complex data: right values, gradients without the conjugate
    (wrong by O(1)); now torch's three real convolutions, as conv_transpose1d/3d and every conv."""
    rng = np.random.default_rng(dims)

    def c(shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)

    x, w, b = c((2, 4) + (5,) * dims), c((4, 3) + (3,) * dims), c((6,))
    g = None
    seen = []
    for lib in (torch, ember):
        X, W, B = (lib.tensor(v, requires_grad=True) for v in (x, w, b))
        y = getattr(lib.nn.functional, f"conv_transpose{dims}d")(X, W, B, stride=2, padding=1, output_padding=1,
                                                                groups=2)
        g = c(tuple(y.shape)) if g is None else g
        y.backward(lib.tensor(g))
        seen.append([_np(y), _np(X.grad), _np(W.grad), _np(B.grad)])
    tol = 1e-5 if dtype == "complex64" else 1e-12
    for want, got in zip(*seen):
        assert np.allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("n", [10, 300000])  # where() below 2048 elements, the large masked path above
@pytest.mark.parametrize("op", ["clamp", "clamp_max", "hardtanh", "relu_transposed"])
def test_masked_gradients_are_positive_zero_as_torch(n, op):
    """A large masked-off gradient was ``g * mask``: -0.0 for a negative upstream, torch's where() gives +0.0."""
    rng = np.random.default_rng(n)
    x = np.concatenate([np.full(n // 2, 2.0), rng.standard_normal(n - n // 2)]).astype(np.float32)
    up = -np.abs(rng.standard_normal(n)).astype(np.float32)
    up[:4] = [-np.inf, np.nan, -0.0, -1.0]
    grads = []
    for lib in (torch, ember):
        fns = {"clamp": lambda t: lib.clamp(t, -0.5, 0.5), "clamp_max": lambda t: lib.clamp(t, max=0.5),
               "hardtanh": lambda t: lib.nn.functional.hardtanh(t, -0.5, 0.5),
               "relu_transposed": lambda t: lib.relu(t.reshape(2, -1).t())}
        t = lib.tensor(-x if op == "relu_transposed" else x, requires_grad=True)
        y = fns[op](t)
        y.backward(lib.tensor(up.reshape(2, -1).T.copy() if op == "relu_transposed" else up))
        grads.append(_np(t.grad))
    assert np.array_equal(grads[0], grads[1], equal_nan=True)
    assert np.array_equal(np.signbit(grads[0]), np.signbit(grads[1]))


def test_compiled_relu_keeps_negative_zero_in_numba_fused_loops():
    """A big elementwise group runs as one numba loop; numba's np.maximum keeps its first operand on ties, so
    relu's maximum(0, x) gave +0.0 for -0.0 there (eager: -0.0, as torch). The fuser now spells NumPy's rule."""
    pytest.importorskip("numba")
    a = np.resize(np.array([-0.0, 0.0, -1.0, np.nan, 2.0, -3.0], np.float32), 600000)  # past the big-group size
    want = (torch.relu(torch.from_numpy(a) * 2) * 3).numpy()
    f = ember.compile(lambda x: ember.relu(x * 2) * 3)
    for _ in range(2):
        got = _np(f(ember.tensor(a)))
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))


def test_complex_conv_transpose2d_gradient_by_float64_finite_differences():
    """Independent of torch: for L = Re(sum(conj(G) * y)), torch's convention (the one ember follows) makes
    x.grad = dL/dRe(x) + i dL/dIm(x); central differences in complex128 give both parts."""
    rng = np.random.default_rng(3)

    def c(shape):
        return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)

    x, w = c((1, 2, 3, 3)), c((2, 2, 2, 2))
    X, W = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
    y = ember.nn.functional.conv_transpose2d(X, W, stride=2, padding=1)
    g = c(tuple(y.shape))
    y.backward(ember.tensor(g))

    def loss(xv, wv):
        out = _np(ember.nn.functional.conv_transpose2d(ember.tensor(xv), ember.tensor(wv), stride=2, padding=1))
        return float(np.real(np.sum(np.conj(g) * out)))

    h = 1e-6
    for value, grad, which in ((x, _np(X.grad), 0), (w, _np(W.grad), 1)):
        fd = np.zeros_like(value)
        for idx in np.ndindex(value.shape):
            for unit in (1.0, 1j):
                plus, minus = value.copy(), value.copy()
                plus[idx] += h * unit
                minus[idx] -= h * unit
                args_p = (plus, w) if which == 0 else (x, plus)
                args_m = (minus, w) if which == 0 else (x, minus)
                fd[idx] += unit * (loss(*args_p) - loss(*args_m)) / (2 * h)
        assert np.allclose(grad, fd, rtol=1e-6, atol=1e-6)
