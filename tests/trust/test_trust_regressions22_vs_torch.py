"""trust22: silent differences from torch 2.13 closed this session (docs/pytorch-compat.md "trust22").

Each test compares ember with torch on the CPU, including special points (0, -0.0, +-inf, NaN, empty tensors).
"""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

SPECIAL = np.array([-2.0, -1.0, -0.5, -0.0, 0.0, 0.25, 0.5, 1.0, 3.0, 7.0, np.inf, -np.inf, np.nan, 1e-30])
DTYPES = ["float16", "bfloat16", "float32", "float64"]


def _np(t):
    t = t.detach()
    if str(t.dtype).endswith("bfloat16"):
        t = t.float()
    return t.numpy() if hasattr(t, "numpy") else np.asarray(t)


def _same(a, b, zero_sign=True):
    a, b = _np(a), _np(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    np.testing.assert_array_equal(a, b)
    if zero_sign:
        real = ~np.isnan(a)  # the sign of a NaN is no value (torch's hardshrink(nan) gives -nan)
        np.testing.assert_array_equal(np.signbit(a)[real], np.signbit(b)[real])


# ---- (1) second derivatives of piecewise-linear functions of x alone ---------------------------------------
PIECEWISE = {
    "relu": lambda L, x: L.relu(x),
    "relu_": lambda L, x: (x * 1).relu_(),
    "F.relu": lambda L, x: L.nn.functional.relu(x),
    "hardtanh": lambda L, x: L.nn.functional.hardtanh(x, -0.5, 0.5),
    "relu6": lambda L, x: L.nn.functional.relu6(x),
    "leaky_relu": lambda L, x: L.nn.functional.leaky_relu(x, 0.1),
    "leaky_relu_": lambda L, x: L.nn.functional.leaky_relu_(x * 1, 0.2),
    "threshold": lambda L, x: L.nn.functional.threshold(x, 0.25, 2.0),
    "hardshrink": lambda L, x: L.nn.functional.hardshrink(x, 0.5),
    "softshrink": lambda L, x: L.nn.functional.softshrink(x, 0.5),
    "rrelu_eval": lambda L, x: L.nn.functional.rrelu(x, training=False),
    "LeakyReLU": lambda L, x: L.nn.LeakyReLU(0.3)(x),
    "rrelu_eval_inplace": lambda L, x: L.nn.functional.rrelu(x * 1, training=False, inplace=True),
    "hardtanh_": lambda L, x: L.nn.functional.hardtanh_(x * 1),
}


@pytest.mark.parametrize("name", sorted(PIECEWISE))
def test_piecewise_linear_second_derivative_is_zeros_as_torch(name):
    results = []
    for L in (torch, ember):
        x = L.tensor(SPECIAL, dtype=L.float64, requires_grad=True)
        y = PIECEWISE[name](L, x)
        g, = L.autograd.grad(y.sum(), x, create_graph=True)
        assert g.requires_grad
        gg, = L.autograd.grad((g * g).sum(), x, retain_graph=True)  # not "unused", not None: zeros
        gu, = L.autograd.grad(g.sum(), x, allow_unused=True)
        results.append((y, g, gg, gu))
    for t, e in zip(*results):
        if name.endswith("shrink") and e is results[1][1]:  # torch's NaN gradient depends on its vector tail
            t, e = t[~np.isnan(SPECIAL)], e[~np.isnan(SPECIAL)]
        _same(e, t, zero_sign=False)


def test_hardsigmoid_second_derivative_still_raises_as_torch():
    for L in (torch, ember):
        x = L.tensor([-1.0, 0.5, 4.0], dtype=L.float64, requires_grad=True)
        g, = L.autograd.grad(L.nn.functional.hardsigmoid(x).sum(), x, create_graph=True)
        with pytest.raises(RuntimeError):
            L.autograd.grad(g.sum(), x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["leaky_relu", "threshold", "hardshrink", "softshrink", "rrelu_eval"])
def test_piecewise_linear_values_and_gradients_bitwise_as_torch(name, dtype):
    values = np.concatenate([SPECIAL, np.random.default_rng(0).standard_normal(50) * 2])
    out = []
    for L in (torch, ember):
        x = L.tensor(values, dtype=getattr(L, dtype), requires_grad=True)
        y = PIECEWISE[name](L, x)
        up = L.tensor(np.linspace(-3, 3, values.size), dtype=getattr(L, dtype))
        up[3] = float("inf")
        g, = L.autograd.grad(y, x, up)
        out.append((y, g))
    _same(out[1][0], out[0][0])
    _same(out[1][1], out[0][1], zero_sign=False)


def test_piecewise_linear_grad_fn_names_and_empty_inputs_as_torch():
    for name, torch_name in [("leaky_relu", "LeakyReluBackward0"), ("threshold", "ThresholdBackward0"),
                             ("hardshrink", "HardshrinkBackward0"), ("softshrink", "SoftshrinkBackward0")]:
        x = ember.zeros(0, 3, requires_grad=True)
        y = PIECEWISE[name](ember, x)
        assert type(y.grad_fn).__name__ == torch_name == type(PIECEWISE[name](torch, torch.zeros(0, 3, requires_grad=True)).grad_fn).__name__
        assert tuple(y.shape) == (0, 3)
        g, = ember.autograd.grad(y.sum(), x, create_graph=True)
        assert tuple(g.shape) == (0, 3)


# ---- (2) result layouts of permuted / channels-last inputs ------------------------------------------------------
LAYOUT_OPS = {
    "flip": lambda L, y: y.flip(0), "flip_last": lambda L, y: y.flip(-1),
    "add_alpha": lambda L, y: L.add(y, y * 2, alpha=2), "sub_alpha": lambda L, y: L.sub(y, y, alpha=0.5),
    "lerp": lambda L, y: L.lerp(y, y * 2, 0.3), "lerp_far": lambda L, y: L.lerp(y, y.contiguous() * 2, 0.7),
    "lerp_tensor_w": lambda L, y: L.lerp(y, y * 2, L.full_like(y, 0.6)),
    "addcmul": lambda L, y: L.addcmul(y, y, y, value=0.5), "addcdiv": lambda L, y: L.addcdiv(y, y, y.abs() + 1),
    "cumsum0": lambda L, y: y.cumsum(0), "cumsum_last": lambda L, y: y.cumsum(-1), "cumprod": lambda L, y: y.cumprod(1),
    "cummax": lambda L, y: y.cummax(1).values, "cummin_idx": lambda L, y: y.cummin(0).indices,
    "tril": lambda L, y: y.tril(), "triu": lambda L, y: y.triu(1),
    "roll": lambda L, y: y.roll(1, 0), "roll_flat": lambda L, y: y.roll(2),
    "cat0": lambda L, y: L.cat([y, y], 0), "cat1": lambda L, y: L.cat([y, y], 1),
    "cat_mixed": lambda L, y: L.cat([y, y.contiguous()], 0),
    "stack0": lambda L, y: L.stack([y, y], 0), "stack_last": lambda L, y: L.stack([y, y], -1),
    "sum_keep": lambda L, y: y.sum(0, keepdim=True), "sum": lambda L, y: y.sum(1), "mean": lambda L, y: y.mean(-1),
    "amax_keep": lambda L, y: y.amax(1, keepdim=True), "std": lambda L, y: y.std(0), "var_keep": lambda L, y: y.var(1, keepdim=True),
    "logsumexp": lambda L, y: y.logsumexp(1, keepdim=True), "max_dim": lambda L, y: y.max(1, keepdim=True).values,
    "sort": lambda L, y: y.sort(1).values, "sort_idx": lambda L, y: y.sort(0, descending=True).indices,
    "topk": lambda L, y: y.topk(2, 1).values, "topk1": lambda L, y: y.topk(1, 0).indices,
    "pad": lambda L, y: L.nn.functional.pad(y, (1, 1)), "pad_neg": lambda L, y: L.nn.functional.pad(y, (-1, 1, 2, 0)),
    "logsigmoid": lambda L, y: L.nn.functional.logsigmoid(y),
}
LAYOUTS = {
    "t": lambda L, a: L.tensor(a[0]).t(),
    "perm": lambda L, a: L.tensor(a).permute(2, 0, 1),
    "cl": lambda L, a: L.tensor(np.concatenate([a, a[:, ::-1]], 1).reshape(2, 3, 2, 4)).contiguous(
        memory_format=L.channels_last),
    "step": lambda L, a: L.tensor(a.reshape(4, 6))[:, ::2],
    "contig": lambda L, a: L.tensor(a),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_result_strides_as_torch(layout):
    a = np.random.default_rng(1).standard_normal((2, 3, 4)).round(2)
    a[0, 0, 0], a[1, 2, 3] = -0.0, 0.0
    problems = []
    for name, op in LAYOUT_OPS.items():
        t, e = op(torch, LAYOUTS[layout](torch, a)), op(ember, LAYOUTS[layout](ember, a))
        if t.stride() != e.stride() or t.is_contiguous() != e.is_contiguous():
            problems.append(f"{name}: torch {t.stride()} ember {e.stride()}")
        else:
            np.testing.assert_allclose(_np(e), _np(t), rtol=1e-12, atol=0, err_msg=name)  # (std: 1 ulp)
    assert not problems, problems


def test_seeded_dropout_after_permuted_ops_draws_torch_mask():
    """The visible consequence of a layout: dropout draws its mask in memory order."""
    a = np.random.default_rng(2).standard_normal((2, 3, 4, 5)).astype(np.float32)
    masks = []
    for L in (torch, ember):
        y = L.tensor(a).permute(0, 2, 3, 1)
        outs = []
        for f in (lambda v: v.flip(1), lambda v: L.lerp(v, v * 2, 0.25), lambda v: v.cumsum(1), lambda v: L.cat([v, v], 2)):
            L.manual_seed(0)
            outs.append(L.nn.functional.dropout(f(y), 0.5) != 0)
        masks.append(outs)
    for t, e in zip(*masks):
        np.testing.assert_array_equal(_np(e), _np(t))


# ---- (3) bfloat16 x ** 3 and x ** -2 ---------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["op", "method", "inplace", "float_exp", "tensor_exp"])
@pytest.mark.parametrize("exponent", [3, -2, 4, 2])
def test_bfloat16_small_integer_powers_bitwise_as_torch(form, exponent):
    rng = np.random.default_rng(3)
    v = np.concatenate([rng.standard_normal(20000) * 3, [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-20, 3e38, -1e30,
                                                             1e-39, 2.0 ** -130]]).astype(np.float32)
    out = []
    for L in (torch, ember):
        x = L.tensor(v).to(L.bfloat16)
        r = {"op": lambda: x ** exponent, "method": lambda: x.pow(exponent), "inplace": lambda: x.clone().pow_(exponent),
             "float_exp": lambda: x ** float(exponent),
             "tensor_exp": lambda: x ** L.tensor(exponent)}[form]()
        out.append(r)
    _same(out[1], out[0])


# ---- (4) Tensor.set_ ----------------------------------------------------------------------------------------------
def test_set_overloads_as_torch():
    for L in (torch, ember):
        b = L.arange(8.0)
        a = L.zeros(3)
        assert a.set_(b) is a and a.shape == b.shape and a.stride() == (1,) and a.data_ptr() == b.data_ptr()
        b[0] = 9.0
        assert a[0].item() == 9.0 and a._version == 1
        c = L.zeros(1).set_(b[2:], 1, (2, 2), (2, 1))  # the offset counts from the source's own offset
        assert c.tolist() == [[3.0, 4.0], [5.0, 6.0]] and c.storage_offset() == 3 and c.stride() == (2, 1)
        c[0, 0] = -1.0
        assert b[3].item() == -1.0
        d = L.zeros(1).set_(b.untyped_storage(), 1, (3,))
        assert d.tolist() == [1.0, 2.0, -1.0] and d.storage_offset() == 1
        e = L.zeros(1).set_(b.untyped_storage())
        assert e.shape == (8,)
        f = L.ones(4).set_()
        assert f.shape == (0,) and f.dtype == L.float32 and f.numel() == 0
        g = L.zeros(0).set_(L.arange(0.0))
        assert g.shape == (0,)
        with pytest.raises(RuntimeError, match="leaf Variable"):
            L.zeros(2, requires_grad=True).set_(b)
        with L.no_grad():
            L.zeros(2, requires_grad=True).set_(b)
        with pytest.raises(RuntimeError, match="Could not set tensor of type float to a tensor of type long"):
            L.zeros(2, dtype=L.int64).set_(b)
        if L is ember:  # past the storage's end: torch grows the storage, ember refuses (docs trust22)
            with pytest.raises(RuntimeError, match="require a storage of"):
                L.zeros(1).set_(b, 6, (2, 2))
        h = L.tensor([float("nan"), -0.0, float("inf")])
        k = L.zeros(1).set_(h)
        assert np.array_equal(np.signbit(_np(k)), [False, True, False]) and np.isnan(_np(k)[0])


# ---- (5) stable sorts, ties, NaN and -0.0 ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "uint8"])
def test_stable_sort_ties_as_torch(dtype):
    rng = np.random.default_rng(4)
    v = rng.integers(0, 4, (5, 40)).astype(np.float64)
    if dtype.startswith(("float", "bfloat")):
        v[rng.random(v.shape) < 0.2] = np.nan
        v[rng.random(v.shape) < 0.2] = -0.0
        v[rng.random(v.shape) < 0.1] = np.inf
    v = np.nan_to_num(v) if dtype in ("int64", "uint8") else v
    for dim in (0, 1, -1):
        for descending in (False, True):
            out = []
            for L in (torch, ember):
                x = L.tensor(v.astype(np.float32)).to(getattr(L, dtype))
                s = x.sort(dim=dim, descending=descending, stable=True)
                a = L.argsort(x, dim=dim, descending=descending, stable=True)
                out.append((s.values, s.indices, a))
            for t, e in zip(*out):
                _same(e, t, zero_sign=False)
    for L in (torch, ember):  # empty and 0-d inputs
        assert L.sort(L.zeros(0), stable=True).indices.shape == (0,)
        assert L.sort(L.tensor(2.0), stable=True).indices.item() == 0
