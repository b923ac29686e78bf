"""ember.autograd.forward_ad (dual tensors by double vjp) and ember.func.linearize against PyTorch's."""
import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as tfw

import ember
import ember.autograd.forward_ad as efw
from ember.func import linearize

RNG = np.random.default_rng(16)


def _arr(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _mlp(lib):
    def f(x, w1, b1, w2):
        return lib.tanh(x @ w1 + b1) @ w2

    return f


# (name, function of (lib, *inputs), input shapes); every input gets a tangent unless noted
CASES = [
    ("elementwise", lambda L, x: L.sin(x) * L.exp(x) + x ** 3 / (1 + x * x), [(3, 4)]),
    ("matmul", lambda L, a, b: a @ b, [(3, 4), (4, 2)]),
    ("reductions", lambda L, x: (x.sum(0), x.mean(), x.amax(1), (x * x).sum(1).sqrt()), [(3, 5)]),
    ("mlp", lambda L, x, w1, b1, w2: _mlp(L)(x, w1, b1, w2), [(5, 3), (3, 8), (8,), (8, 2)]),
    ("nested", lambda L, x, y: L.log(1 + L.exp(L.softmax(x @ y.T, 1) * 3)).cumsum(1), [(3, 4), (2, 4)]),
    ("views", lambda L, x: x.reshape(2, 6).T[1:].flip(0) * x.sum(), [(3, 4)]),
    ("relu_at_kink", lambda L, x: L.relu(x) + L.abs(x - 1), [(6,)]),
]


def _run(lib, fw, fn, arrays, tangents, dtype):
    mk = (lambda a: torch.tensor(a)) if lib is torch else (lambda a: ember.tensor(a))
    with fw.dual_level():
        duals = [fw.make_dual(mk(a), mk(t)) if t is not None else mk(a) for a, t in zip(arrays, tangents)]
        out = fn(lib, *duals)
        outs = out if isinstance(out, tuple) else (out,)
        return [(np.asarray(fw.unpack_dual(o).primal.detach().numpy()),
                 None if fw.unpack_dual(o).tangent is None else np.asarray(fw.unpack_dual(o).tangent.detach().numpy()))
                for o in outs]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,fn,shapes", CASES, ids=[c[0] for c in CASES])
def test_tangents_match_torch(name, fn, shapes, dtype):
    arrays = [_arr(*s, dtype=dtype) for s in shapes]
    if name == "relu_at_kink":  # special points: the kinks of relu and abs, zero, large values
        arrays = [np.array([0.0, 1.0, -1e6, 1e6, 0.5, -0.5], dtype=dtype)]
    tangents = [_arr(*s, dtype=dtype) for s in shapes]
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    got = _run(ember, efw, fn, arrays, tangents, dtype)
    want = _run(torch, tfw, fn, arrays, tangents, dtype)
    for (gp, gt), (wp, wt) in zip(got, want):
        np.testing.assert_allclose(gp, wp, **tol)
        np.testing.assert_allclose(gt, wt, **tol)
        assert gt.dtype == wt.dtype


def test_non_dual_inputs_and_unconnected_outputs():
    a, b, t = _arr(3), _arr(3), _arr(3)
    for lib, fw in ((ember, efw), (torch, tfw)):
        with fw.dual_level():
            x = fw.make_dual(lib.tensor(a), lib.tensor(t))
            y = lib.tensor(b)
            mixed = fw.unpack_dual(x * y + y.exp())
            assert fw.unpack_dual(y).tangent is None  # a plain tensor
            assert fw.unpack_dual(y * 2).tangent is None  # computed without a dual
            assert fw.unpack_dual(x.detach()).tangent is None
            assert fw.unpack_dual(x.argmax()).tangent is None  # integer result
            zero = fw.unpack_dual(x * 0 + y).tangent  # connected, derivative zero: zeros, not None
            np.testing.assert_array_equal(zero.numpy(), np.zeros(3, np.float32))
            np.testing.assert_allclose(mixed.tangent.numpy(), t * b, rtol=1e-6)
            own = fw.unpack_dual(x)
            assert own.tangent is not None and np.array_equal(own.tangent.numpy(), t)
            np.testing.assert_array_equal(own.primal.numpy(), a)
        assert fw.unpack_dual(x * y).tangent is None  # tangents are dropped when the level exits


@pytest.mark.parametrize("requires_grad", [False, True])
def test_chained_duals_restart_from_unpacked_primal(requires_grad):
    """A primal from unpack_dual carries no tangent: a new dual made from it starts a new chain (also when
    the primal keeps reverse-mode history to a leaf that requires grad)."""
    a, t1, t2 = _arr(4), _arr(4), _arr(4)
    results = []
    for lib, fw in ((ember, efw), (torch, tfw)):
        with fw.dual_level():
            x = fw.make_dual(lib.tensor(a, requires_grad=requires_grad), lib.tensor(t1))
            p, tan1 = fw.unpack_dual(x.sin() * 2)
            assert fw.unpack_dual(p * 3).tangent is None
            z = fw.make_dual(p, lib.tensor(t2))
            w = (z * x).exp()  # both duals reach w
            results.append((tan1.detach().numpy().copy(), fw.unpack_dual(w).tangent.detach().numpy().copy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-5, atol=1e-6)


def test_reverse_mode_through_duals_of_leaves_that_require_grad():
    a, t = _arr(3).astype(np.float64), _arr(3).astype(np.float64)
    got = []
    for lib, fw in ((ember, efw), (torch, tfw)):
        xr = lib.tensor(a, requires_grad=True)
        with fw.dual_level():
            d = fw.make_dual(xr, lib.tensor(t))
            p, tan = fw.unpack_dual((d * d * d).sum())
            p.backward(retain_graph=True)  # ember: the tangent's graph reuses the primal's nodes
            (dtan,) = (lib.autograd.grad(tan, xr) if tan.requires_grad else (None,))
        got.append((xr.grad.numpy().copy(), tan.item(), None if dtan is None else dtan.numpy().copy()))
    np.testing.assert_allclose(got[0][0], 3 * a * a, rtol=1e-12)
    np.testing.assert_allclose(got[0][0], got[1][0], rtol=1e-12)
    np.testing.assert_allclose(got[0][1], got[1][1], rtol=1e-12)
    np.testing.assert_allclose(got[0][2], got[1][2], rtol=1e-12)  # d(tangent)/dx = 6 x t


def test_tangent_is_cached_and_finite_difference_checked():
    a, t = _arr(5).astype(np.float64), _arr(5).astype(np.float64)
    f = lambda v: (v.tanh() * v).cumsum(0)  # noqa: E731
    with efw.dual_level():
        y = f(efw.make_dual(ember.tensor(a), ember.tensor(t)))
        first = efw.unpack_dual(y).tangent
        assert efw.unpack_dual(y).tangent is first
    eps = 1e-6
    fd = (f(ember.tensor(a + eps * t)).numpy() - f(ember.tensor(a - eps * t)).numpy()) / (2 * eps)
    np.testing.assert_allclose(first.numpy(), fd, rtol=1e-7, atol=1e-8)


def test_levels_and_errors_match_torch():
    x = ember.ones(3)
    with pytest.raises(RuntimeError, match="no level exists, make sure to enter_dual_level"):
        efw.make_dual(x, ember.ones(3))
    assert efw.unpack_dual(x) == (x, None)
    with pytest.raises(RuntimeError, match="Dual level must be a positive number"):
        efw.exit_dual_level()
    with efw.dual_level() as level:
        assert level == 0
        with pytest.raises(RuntimeError, match=r"Tensor is of size \[3\] while the given forward gradient is of "
                                               r"size \[4\]"):
            efw.make_dual(x, ember.ones(4))
        with pytest.raises(ValueError, match="Expected primal to be floating point or complex"):
            efw.make_dual(ember.arange(3), ember.ones(3))
        with pytest.raises(ValueError, match="Expected tangent to be floating point or complex"):
            efw.make_dual(x, ember.arange(3))
        with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported"):
            efw.enter_dual_level()
        d = efw.make_dual(x, ember.ones(3))
        for made in (d, d * 2):
            with pytest.raises(RuntimeError, match="already has a forward gradient at the same level 0"):
                efw.make_dual(made, ember.ones(3))
        with pytest.raises(RuntimeError, match="Invalid level given to _make_dual"):
            efw.make_dual(x, ember.ones(3), level=1)
        with pytest.raises(RuntimeError, match="Invalid level given to _fw_primal"):
            efw.unpack_dual(d, level=1)
        with pytest.raises(RuntimeError, match="not the last one that was created"):
            efw.exit_dual_level(level=1)
    assert efw.enter_dual_level() == 0  # levels are reusable after exit
    efw.exit_dual_level()


def test_decorator_and_namedtuple():
    @efw.dual_level()
    def tangent_of_square(a, t):
        return efw.unpack_dual(efw.make_dual(a, t) ** 2).tangent

    out = tangent_of_square(ember.tensor([3.0]), ember.tensor([1.0]))
    assert out.tolist() == [6.0]
    assert efw.UnpackedDualTensor._fields == tfw.UnpackedDualTensor._fields
    assert sorted(efw.__all__) == sorted(tfw.__all__)


def test_no_grad_warns_instead_of_silently_dropping():
    with efw.dual_level():
        d = efw.make_dual(ember.ones(2), ember.ones(2))
        with ember.no_grad():
            with pytest.warns(UserWarning, match="no_grad"):
                assert efw.unpack_dual(d * 3).tangent is None


# ---- ember.func.linearize -------------------------------------------------------------------------------
@pytest.mark.parametrize("name,fn,shapes", [c for c in CASES if c[0] != "relu_at_kink"],
                         ids=[c[0] for c in CASES if c[0] != "relu_at_kink"])
def test_linearize_matches_torch(name, fn, shapes):
    arrays = [_arr(*s, dtype=np.float64) for s in shapes]
    e_out, e_fn = linearize(lambda *xs: fn(ember, *xs), *[ember.tensor(a) for a in arrays])
    t_out, t_fn = torch.func.linearize(lambda *xs: fn(torch, *xs), *[torch.tensor(a) for a in arrays])
    e_flat = e_out if isinstance(e_out, tuple) else (e_out,)
    t_flat = t_out if isinstance(t_out, tuple) else (t_out,)
    for g, w in zip(e_flat, t_flat):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12, atol=1e-12)
    for _ in range(2):  # jvp_fn is reusable with new tangents
        tangents = [_arr(*s, dtype=np.float64) for s in shapes]
        g = e_fn(*[ember.tensor(t) for t in tangents])
        w = t_fn(*[torch.tensor(t) for t in tangents])
        g, w = (g if isinstance(g, tuple) else (g,)), (w if isinstance(w, tuple) else (w,))
        for a, b in zip(g, w):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-10)


def test_linearize_errors_match_torch():
    _, e_fn = linearize(lambda x, y: x * y, ember.ones(3), ember.ones(3))
    _, t_fn = torch.func.linearize(lambda x, y: x * y, torch.ones(3), torch.ones(3))
    for bad_e, bad_t, pattern in (
            ((ember.ones(4), ember.ones(3)), (torch.ones(4), torch.ones(3)), "tangent:0 with shape"),
            ((ember.ones(3), ember.ones(3, dtype=ember.float64)), (torch.ones(3), torch.ones(3, dtype=torch.float64)),
             "tangent:1 with dtype"),
            ((ember.ones(3),), (torch.ones(3),), "to have the same argspec as the primals")):
        with pytest.raises(RuntimeError, match=pattern):
            t_fn(*bad_t)
        with pytest.raises(RuntimeError, match=pattern):
            e_fn(*bad_e)
