"""One named case per class of silent wrong result the fifth wave found (compiled vs eager; torch where it has
the semantics). Each failed on main before its fix; see docs/testing.md, "The fifth wave"."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F

torch = pytest.importorskip("torch")


def _compiled(fn, **kw):
    return ember.compile(fn, measure=False, **kw)


def _calls(cf, make, n=3):
    """Call ``cf`` n times on fresh arguments from ``make()``; return the last (result, arguments)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(n):
            args = make()
            out = cf(*args)
    return out, args


# ---- in-place writes into arguments ---------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
def test_inplace_write_into_an_argument_reaches_the_callers_tensor(layout):
    """Was: the graph rebound its own copy of the argument; the caller's tensor kept its old values."""
    def f(a):
        a.mul_(2)
        a[0] += 1
        return a.sum()

    def make():
        base = ember.arange(12.0).reshape(3, 4)
        return ({"contiguous": base[:, :3].contiguous(), "transposed": ember.arange(9.0).reshape(3, 3).t(),
                 "strided": base[:, ::2][:, :3] if False else ember.arange(18.0).reshape(3, 6)[:, ::2]}[layout],)

    out, (x,) = _calls(_compiled(f), make)
    (want,) = make()
    want_out = f(want)
    assert out.item() == want_out.item()
    np.testing.assert_array_equal(x.numpy(), want.numpy())
    t = torch.tensor(make()[0].numpy())
    f(t)
    np.testing.assert_array_equal(x.numpy(), t.numpy())


def test_write_through_a_view_of_an_argument_and_setitem_reach_the_caller():
    def f(a, b):
        a[1:].mul_(b)
        b[0] = -1.0
        return a[1:] + b

    out, (x, y) = _calls(_compiled(f), lambda: (ember.ones(3), ember.full((2,), 3.0)))
    np.testing.assert_array_equal(x.numpy(), [1.0, 3.0, 3.0])
    np.testing.assert_array_equal(y.numpy(), [-1.0, 3.0])
    np.testing.assert_array_equal(out.numpy(), [2.0, 6.0])


def test_returning_an_argument_returns_the_callers_object():
    """Was: ``return x`` (after ``x.add_(1)``) gave a new tensor, so ``out is x`` and later writes differed."""
    def f(a):
        a.add_(1)
        return a, a * 2

    (r, r2), (x,) = _calls(_compiled(f), lambda: (ember.zeros(2),))
    assert r is x and r2.tolist() == [2.0, 2.0]

    def g(a, b):  # with autograd: the argument itself, its gradient reaching it directly
        return a, (b * 3).sum()

    (r, s), (x, w) = _calls(_compiled(g), lambda: (ember.ones(2, requires_grad=True), ember.ones(2, requires_grad=True)))
    assert r is x
    (r.sum() + s).backward()
    assert x.grad.tolist() == [1.0, 1.0] and w.grad.tolist() == [3.0, 3.0]


def test_detach_inside_a_compiled_function_shares_memory_with_its_source():
    """Was: ``t = x.detach(); t.zero_()`` zeroed only t in the graph; eagerly (and in torch) x changes too."""
    def f(a):
        t = a.detach()
        t.zero_()
        return a + 1

    out, (x,) = _calls(_compiled(f), lambda: (ember.full((3,), 5.0),))
    assert out.tolist() == [1.0, 1.0, 1.0] and x.tolist() == [0.0, 0.0, 0.0]
    t = torch.full((3,), 5.0)
    assert (f(t)).tolist() == out.tolist()


# ---- aliasing -------------------------------------------------------------------------------------------------
def test_the_same_tensor_passed_twice_with_a_write_runs_eagerly():
    """Was: a graph traced on two distinct arguments reused for ``f(x, x)``: the write into one was not seen
    through the other (4 eagerly, 2 compiled)."""
    def f(a, b):
        a.add_(1)
        return b * 2

    cf = _compiled(f)
    _calls(cf, lambda: (ember.ones(3), ember.ones(3)))
    x = ember.ones(3)
    assert cf(x, x).tolist() == [4.0, 4.0, 4.0] and x.tolist() == [2.0, 2.0, 2.0]
    base, twin = ember.ones(4), ember.ones(4)
    assert cf(base[:3], base[1:]).tolist() == f(twin[:3], twin[1:]).tolist() == [4.0, 4.0, 2.0]  # overlapping views
    t = torch.ones(3)
    assert f(t, t).tolist() == [4.0, 4.0, 4.0]


def test_an_argument_that_is_a_state_the_function_writes_runs_eagerly():
    w = ember.ones(3)

    def f(a):
        w.mul_(2)
        return a + 0

    cf = _compiled(f)
    _calls(cf, lambda: (ember.ones(3),))  # w is 8 now
    assert cf(w).tolist() == [16.0, 16.0, 16.0]  # eagerly a is w, read after the write (the graph read it before)
    assert w.tolist() == [16.0, 16.0, 16.0]


# ---- the cache key and its guards -----------------------------------------------------------------------------
def test_python_number_arguments_are_keyed_by_type_and_sign_of_zero():
    """Was: 1, 1.0 and True are equal and hash alike, so an int64 graph served a float argument (an int64
    result where eager gives float32); -0.0 reused the 0.0 graph."""
    cf = _compiled(lambda a, s: a + s)
    _calls(cf, lambda: (ember.ones(2, dtype=ember.int64), 1))
    assert cf(ember.ones(2, dtype=ember.int64), 1.0).dtype == ember.float32
    assert cf(ember.ones(2, dtype=ember.int64), True).dtype == ember.int64
    assert torch.ones(2, dtype=torch.int64).add(1.0).dtype == torch.float32
    cz = _compiled(lambda a, s: a + s)
    _calls(cz, lambda: (-ember.zeros(2), -0.0))
    assert np.signbit(cz(-ember.zeros(2), 0.0).numpy()).tolist() == [False, False]  # -0 + 0 is +0


def test_a_rebound_global_number_or_tensor_retraces():
    """Was: a global read by the function was baked in (a number) or lifted as that object (a tensor):
    rebinding it later left the compiled function computing with the old one."""
    env = {"ember": ember, "scale": 2.0, "W": ember.ones(2)}
    exec("def f(a):\n    return a * scale + W\n", env)  # noqa: S102
    cf = _compiled(env["f"])
    _calls(cf, lambda: (ember.ones(2),))
    env["scale"], env["W"] = 5.0, ember.full((2,), 3.0)
    assert cf(ember.ones(2)).tolist() == [8.0, 8.0]


def test_a_changed_closure_variable_retraces():
    def make(k):
        def f(a):
            return a * k
        return f

    f = make(2)
    cf = _compiled(f)
    _calls(cf, lambda: (ember.ones(2),))
    f.__closure__[0].cell_contents = 7
    assert cf(ember.ones(2)).tolist() == [7.0, 7.0]


def test_a_changed_module_attribute_or_replaced_parameter_retraces():
    """Was: ``act.negative_slope = 0.5`` or a new ``weight`` Parameter after tracing were not seen."""
    model = nn.Sequential(nn.Linear(2, 2), nn.LeakyReLU(0.1))
    cm = _compiled(model)
    _calls(cm, lambda: (-ember.ones(1, 2),))
    model[1].negative_slope = 0.5
    model[0].weight = nn.Parameter(ember.full((2, 2), 2.0))
    with ember.no_grad():
        model[0].bias.zero_()
    got = cm(-ember.ones(1, 2))
    assert got.tolist() == model(-ember.ones(1, 2)).tolist() == [[-2.0, -2.0]]


def test_the_default_dtype_is_part_of_the_key():
    cf = _compiled(lambda a: a + ember.ones(2))
    _calls(cf, lambda: (ember.ones(2, dtype=ember.int64),))
    previous = ember.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    try:
        assert cf(ember.ones(2, dtype=ember.int64)).dtype == ember.float64
    finally:
        ember.set_default_dtype(previous)


# ---- layout-dependent views -----------------------------------------------------------------------------------
def test_contiguous_of_a_noncontiguous_argument_is_a_copy_when_written():
    """Was: ``t = x.contiguous(); t.div_(0)`` wrote into a transposed x (the graph took contiguous() as x)."""
    def f(a):
        t = a.contiguous()
        t.mul_(10)
        return t, a

    (t, a), _ = _calls(_compiled(f), lambda: (ember.arange(6.0).reshape(2, 3).t(),))
    assert a.tolist() == ember.arange(6.0).reshape(2, 3).t().tolist()
    assert t.tolist() == (ember.arange(6.0).reshape(2, 3).t() * 10).tolist()
    (tc, ac), _ = _calls(_compiled(f), lambda: (ember.arange(6.0).reshape(3, 2),))  # contiguous: an alias
    assert ac.tolist() == tc.tolist()
    x = torch.arange(6.0).reshape(2, 3).t()
    f(x)
    assert x.tolist() == a.tolist()


def test_reshape_of_a_transposed_argument_written_in_place_is_eager_semantics():
    def f(a):
        r = a.reshape(-1)
        r.add_(1)
        return a

    out, _ = _calls(_compiled(f), lambda: (ember.zeros(2, 3).t(),))
    assert out.tolist() == [[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]
    x = torch.zeros(2, 3).t()
    assert f(x).tolist() == out.tolist()


# ---- op-level differences the fuzzer met ----------------------------------------------------------------------
def test_adding_zero_keeps_the_sign_rule_in_compiled_code():
    """Was: the simplify pass took ``x + 0.0`` and ``x - (-0.0)`` for identities: -0.0 stayed -0.0 (eager +0.0)."""
    def f(a):
        return a + 0.0, a - (-0.0), 0.0 + a, a - 0.0, a + (-0.0)

    outs, _ = _calls(_compiled(f), lambda: (-ember.zeros(2),))
    want = f(torch.zeros(2).neg())
    for o, w in zip(outs, want):
        assert np.signbit(o.numpy()).tolist() == torch.signbit(w).tolist()


def test_integer_hardtanh_keeps_its_dtype_as_torch():
    """Was: NumPy's clip with float limits gave float64 eagerly; a graph's shape rule said int8."""
    for dt in ("int8", "int32", "uint8"):
        x = ember.tensor([-3, 0, 1, 2, 7]).to(getattr(ember, dt))
        t = torch.tensor([-3, 0, 1, 2, 7]).to(getattr(torch, dt))
        got, want = F.hardtanh(x, 0.5, 2.5), torch.nn.functional.hardtanh(t, 0.5, 2.5)
        assert str(got.dtype) == str(want.dtype).replace("torch", "ember") and got.tolist() == want.tolist()
        out, _ = _calls(_compiled(lambda a: F.relu6(a)), lambda: (x,))
        assert out.tolist() == torch.nn.functional.relu6(t).tolist() and out.dtype == x.dtype
    with pytest.raises(RuntimeError, match="negative limits"):
        F.hardtanh(ember.tensor([1], dtype=ember.uint8))
    with pytest.raises(RuntimeError, match="Bool"):
        F.hardtanh(ember.tensor([True]))


def test_round_of_bool_and_triu_of_a_vector_are_refused_as_in_torch():
    """Was: round(bool) gave float16 eagerly and bool in a graph; triu/tril of a vector broadcast it to a
    square matrix eagerly while a graph kept the vector's shape (so a compiled reshape was wrong)."""
    with pytest.raises(RuntimeError):
        torch.tensor([True]).round()
    with pytest.raises(RuntimeError, match="Bool"):
        ember.tensor([True]).round()
    for name in ("triu", "tril"):
        with pytest.raises(RuntimeError):
            getattr(torch.arange(4), name)(1)
        with pytest.raises(RuntimeError, match="at least 2 dimensions"):
            getattr(ember.arange(4), name)(1)


# ---- saved graphs and ONNX ------------------------------------------------------------------------------------
def _saved_and_loaded(fn, make, tmp_path):
    cf = _compiled(fn)
    out, _ = _calls(cf, make)
    cf.save(str(tmp_path / "g"))
    return out, ember.graph.load(str(tmp_path / "g"))


def test_saved_graph_with_advanced_indexing_and_view_writes_loads(tmp_path):
    """Was: the loader refused what save wrote: getitem's index-tensor slots and copy_slices' view steps hold
    strings (op names), and a one-element constant saved as (1,) for a 0-d value."""
    def f(a):
        b = a * 1
        b[0:1].mul_(3)
        return b[ember.tensor([0, -1, 0])] + a.argmax().cos()

    out, loaded = _saved_and_loaded(f, lambda: (ember.arange(4.0),), tmp_path)
    (got,) = loaded(ember.arange(4.0))
    assert got.tolist() == out.tolist() == f(ember.arange(4.0)).tolist()


def test_loaded_graph_refuses_another_dtype_instead_of_casting(tmp_path):
    """Was: a float32 input given to a graph traced for int64 was cast silently (3.7 read as 3)."""
    _, loaded = _saved_and_loaded(lambda a: a // 2, lambda: (ember.tensor([3, 7]),), tmp_path)
    assert loaded(ember.tensor([3, 7]))[0].tolist() == [1, 3]
    with pytest.raises(TypeError, match="expects dtype int64"):
        loaded(ember.tensor([3.7, 7.0]))


def test_saving_a_graph_that_writes_into_its_arguments_is_refused(tmp_path):
    def f(a):
        a.add_(1)
        return a * 2

    cf = _compiled(f)
    _calls(cf, lambda: (ember.ones(2),))
    with pytest.raises(RuntimeError, match="writes into its arguments"):
        cf.save(str(tmp_path / "g"))


def test_onnx_argmax_argmin_and_max_dim_pick_nan_as_eager_and_torch():
    """Was: ONNX's ArgMax/ArgMin and onnxruntime's ReduceMax/ReduceMin skip NaN; ember and torch return the first
    NaN's index and NaN as the max (argmax, max(dim), amax, amin)."""
    pytest.importorskip("onnxruntime")
    import ember.onnx as eonnx

    x = ember.tensor([[1.0, float("nan"), 3.0, float("nan")], [2.0, 5.0, -1.0, 0.0], [float("nan"), 1.0, 9.0, 2.0]])

    def f(a):
        mx = a.max(-1)
        return (a.argmax(-1), a.argmin(-1), a.argmax(), mx.values, mx.indices, a.min(0).indices, a.amax(-1),
                a.amin(0), a.amax())

    got = eonnx.run(eonnx.export(f, (x,)), [x.numpy()])
    want = f(x)
    tw = f(torch.tensor(x.numpy()))
    for g, w, t in zip(got, want, tw):
        np.testing.assert_array_equal(g, w.numpy())
        np.testing.assert_array_equal(w.numpy(), t.numpy())


def test_a_leaf_that_is_a_view_refuses_in_place_writes_through_its_views_as_torch():
    """Was: ``t = r.t().requires_grad_(); t[0].copy_(...)`` ran eagerly (the check looked at r, which needs no
    grad) while a compiled call refused it; torch refuses."""
    for lib in (torch, ember):
        t = lib.ones(3, 3).t()
        t.requires_grad_()
        with pytest.raises(RuntimeError, match="view of a leaf Variable"):
            t[None, ..., 0].copy_(lib.zeros(1, 3))
