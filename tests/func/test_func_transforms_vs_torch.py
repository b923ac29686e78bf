"""ember.func's autodiff transforms and module helpers against torch.func on the same functions: grad,
grad_and_value (argnums, has_aux), vjp, jvp, jacrev, jacfwd, hessian, their compositions with vmap and with
each other, per-sample gradients of an MLP, model ensembles, functional_call and stack_module_state."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
import ember.func as ef

torch = pytest.importorskip("torch")
tf = pytest.importorskip("torch.func")


def E(a):
    return ember.tensor(np.asarray(a))


def T(a):
    return torch.tensor(np.asarray(a))


def same(mine, theirs, rtol=1e-7, atol=1e-10):
    if isinstance(mine, dict):
        assert set(mine) == set(theirs)
        for k in mine:
            same(mine[k], theirs[k], rtol, atol)
        return
    if isinstance(mine, (tuple, list)):
        assert len(mine) == len(theirs), (len(mine), len(theirs))
        for m, t in zip(mine, theirs):
            same(m, t, rtol, atol)
        return
    m, t = mine.detach().numpy(), theirs.detach().numpy()
    assert m.shape == t.shape, (m.shape, t.shape)
    np.testing.assert_allclose(m, t, rtol=rtol, atol=atol)


@pytest.fixture(autouse=True)
def _no_loop_fallbacks():
    """These functions all have batching rules: a per-sample loop here would be a missing rule."""
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="vmap: there is no batching rule")
        yield


def f_scalar(lib):
    return lambda x: (x.sin() * x).sum() + (x ** 2).mean()


def f_vec(lib):
    return lambda x: (x ** 3).sin() * x.sum()


def test_grad_and_argnums_and_has_aux(rng):
    x, y = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
    same(ef.grad(f_scalar(ember))(E(x)), tf.grad(f_scalar(torch))(T(x)))

    def f(lib):
        return lambda a, b: ((a @ b).tanh().sum(), {"m": a.mean(), "n": (b * 2,)})

    for argnums in (0, 1, (0, 1), (1, 0), -1):
        mine = ef.grad_and_value(f(ember), argnums=argnums, has_aux=True)(E(x), E(y))
        theirs = tf.grad_and_value(f(torch), argnums=argnums, has_aux=True)(T(x), T(y))
        same(mine, theirs)
        same(ef.grad(f(ember), argnums=argnums, has_aux=True)(E(x), E(y)),
             tf.grad(f(torch), argnums=argnums, has_aux=True)(T(x), T(y)))


def test_grad_of_pytree_input(rng):
    p = {"w": rng.standard_normal((3, 2)), "b": [rng.standard_normal(2)]}

    def f(lib):
        return lambda params, x: (x @ params["w"] + params["b"][0]).relu().sum()

    x = rng.standard_normal((5, 3))
    mine = ef.grad(f(ember))({"w": E(p["w"]), "b": [E(p["b"][0])]}, E(x))
    theirs = tf.grad(f(torch))({"w": T(p["w"]), "b": [T(p["b"][0])]}, T(x))
    same(mine, theirs)


def test_grad_error_messages_match_torch(rng):
    x = rng.standard_normal(3)
    for lib, g in ((ember, ef.grad), (torch, tf.grad)):
        with pytest.raises(RuntimeError) as info:
            g(lambda a: a * 2)(E(x) if lib is ember else T(x))
        assert "Expected f(*args) to return a scalar Tensor, got tensor with 1 dims" in str(info.value)
        with pytest.raises(RuntimeError, match="output of function f should be a tuple"):
            g(lambda a: a.sum(), has_aux=True)(E(x) if lib is ember else T(x))
        with pytest.raises(RuntimeError, match="only 1 positional inputs"):
            g(lambda a: a.sum(), argnums=3)(E(x) if lib is ember else T(x))


def test_vjp_jvp(rng):
    x, v, u = rng.standard_normal((4, 3)), rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    out_e, fn_e = ef.vjp(f_vec(ember), E(x))
    out_t, fn_t = tf.vjp(f_vec(torch), T(x))
    same(out_e, out_t)
    same(fn_e(E(u)), fn_t(T(u)))
    same(ef.jvp(f_vec(ember), (E(x),), (E(v),)), tf.jvp(f_vec(torch), (T(x),), (T(v),)))

    def two(lib):
        return lambda a, b: ((a * b).exp(), a.sum() - b.norm())

    out_e = ef.jvp(two(ember), (E(x), E(v)), (E(u), E(x)))
    out_t = tf.jvp(two(torch), (T(x), T(v)), (T(u), T(x)))
    same(out_e, out_t)
    _, fe, aux_e = ef.vjp(lambda a: (a.exp(), a.mean()), E(x), has_aux=True)
    _, ft, aux_t = tf.vjp(lambda a: (a.exp(), a.mean()), T(x), has_aux=True)
    same((fe(E(u)), aux_e), (ft(T(u)), aux_t))


def test_jvp_and_vjp_errors():
    x = ember.ones(3)
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        ef.jvp(lambda a: a, x, (x,))
    with pytest.raises(RuntimeError, match="same shape"):
        ef.jvp(lambda a: a, (x,), (ember.ones(2),))
    _, fn = ef.vjp(lambda a: a * 2, x)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        fn(ember.ones(2))


@pytest.mark.parametrize("jac", ["jacrev", "jacfwd"])
def test_jacobians_with_argnums_and_pytree_outputs(rng, jac):
    x, y = rng.standard_normal(3), rng.standard_normal((2, 3))

    def f(lib):
        return lambda a, b: {"p": (b @ a).sin(), "q": (a * b.sum(0)).exp()}

    for argnums in (0, 1, (0, 1)):
        mine = getattr(ef, jac)(f(ember), argnums=argnums)(E(x), E(y))
        theirs = getattr(tf, jac)(f(torch), argnums=argnums)(T(x), T(y))
        same(mine, theirs)
    same(getattr(ef, jac)(f_vec(ember))(E(y)), getattr(tf, jac)(f_vec(torch))(T(y)))
    same(getattr(ef, jac)(lambda a: a.sum())(E(x)), getattr(tf, jac)(lambda a: a.sum())(T(x)))


def test_jacrev_chunk_size_and_has_aux(rng):
    x = rng.standard_normal(5)
    same(ef.jacrev(f_vec(ember), chunk_size=2)(E(x)), tf.jacrev(f_vec(torch), chunk_size=2)(T(x)))
    same(ef.jacrev(lambda a: (a.exp(), a.sum()), has_aux=True)(E(x)),
         tf.jacrev(lambda a: (a.exp(), a.sum()), has_aux=True)(T(x)))
    same(ef.jacfwd(lambda a: (a.exp(), a.sum()), has_aux=True)(E(x)),
         tf.jacfwd(lambda a: (a.exp(), a.sum()), has_aux=True)(T(x)))


def test_hessian_and_higher_order_compositions(rng):
    x = rng.standard_normal(4)

    def f(lib):
        return lambda a: (a.sin() * a.cos().sum()).sum() + (a ** 4).sum()

    same(ef.hessian(f(ember))(E(x)), tf.hessian(f(torch))(T(x)))
    same(ef.jacrev(ef.jacrev(f(ember)))(E(x)), tf.jacrev(tf.jacrev(f(torch)))(T(x)))
    same(ef.grad(ef.grad(lambda a: f(ember)(a.reshape(1)).sum() if False else (a ** 3).sin()))(E(1.3)),
         tf.grad(tf.grad(lambda a: (a ** 3).sin()))(T(1.3)))
    same(ef.jacfwd(ef.grad(f(ember)))(E(x)), tf.jacfwd(tf.grad(f(torch)))(T(x)))
    same(ef.hessian(lambda a, b: (a * b).prod(), argnums=(0, 1))(E(x), E(x[::-1].copy())),
         tf.hessian(lambda a, b: (a * b).prod(), argnums=(0, 1))(T(x), T(x[::-1].copy())))


def test_vmap_compositions(rng):
    xs = rng.standard_normal((5, 3))
    same(ef.vmap(ef.grad(f_scalar(ember)))(E(xs)), tf.vmap(tf.grad(f_scalar(torch)))(T(xs)))
    same(ef.grad(lambda a: ef.vmap(f_scalar(ember))(a).sum())(E(xs)),
         tf.grad(lambda a: tf.vmap(f_scalar(torch))(a).sum())(T(xs)))
    same(ef.vmap(ef.jacrev(f_vec(ember)))(E(xs)), tf.vmap(tf.jacrev(f_vec(torch)))(T(xs)))
    same(ef.vmap(ef.jacfwd(f_vec(ember)))(E(xs)), tf.vmap(tf.jacfwd(f_vec(torch)))(T(xs)))
    same(ef.vmap(ef.hessian(f_scalar(ember)))(E(xs)), tf.vmap(tf.hessian(f_scalar(torch)))(T(xs)))
    same(ef.jacrev(ef.vmap(f_vec(ember)))(E(xs)), tf.jacrev(tf.vmap(f_vec(torch)))(T(xs)))
    # a gradient penalty: the gradient of a per-sample gradient norm
    same(ef.grad(lambda a: ef.vmap(ef.grad(f_scalar(ember)))(a).norm())(E(xs)),
         tf.grad(lambda a: tf.vmap(tf.grad(f_scalar(torch)))(a).norm())(T(xs)))


def test_func_grad_is_differentiable_by_regular_autograd(rng):
    x = rng.standard_normal(3)
    xe, xt = E(x).requires_grad_(), T(x).requires_grad_()
    ef.grad(f_scalar(ember))(xe).pow(2).sum().backward()
    tf.grad(f_scalar(torch))(xt).pow(2).sum().backward()
    same(xe.grad, xt.grad)


def _mlp(lib, seed):
    lib.manual_seed(seed)
    return lib.nn.Sequential(lib.nn.Linear(6, 8), lib.nn.Tanh(), lib.nn.Linear(8, 3))


def _twins(seed):
    me, mt = _mlp(ember, seed), _mlp(torch, seed)
    with torch.no_grad():
        for (_, pe), (_, pt) in zip(me.named_parameters(), mt.named_parameters()):
            pt.copy_(torch.tensor(pe.detach().numpy()))
    return me, mt


def test_per_sample_gradients_of_an_mlp(rng):
    me, mt = _twins(0)
    x, y = rng.standard_normal((16, 6)).astype(np.float32), rng.integers(0, 3, 16)

    def per_sample(lib, func, model):
        params = {k: v.detach() for k, v in model.named_parameters()}

        def loss(p, xi, yi):
            out = func.functional_call(model, p, (xi.unsqueeze(0),))
            return lib.nn.functional.cross_entropy(out, yi.unsqueeze(0))

        return func.vmap(func.grad(loss), in_dims=(None, 0, 0))(params, lib.tensor(x), lib.tensor(y))

    mine, theirs = per_sample(ember, ef, me), per_sample(torch, tf, mt)
    same(mine, theirs, rtol=1e-5, atol=1e-6)
    for i in (0, 7):  # and against one ordinary backward per sample
        me.zero_grad()
        ember.nn.functional.cross_entropy(me(E(x[i:i + 1])), E(y[i:i + 1])).backward()
        for name, p in me.named_parameters():
            np.testing.assert_allclose(mine[name][i].numpy(), p.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert all(p.grad is None or True for p in me.parameters())


def test_model_ensemble_with_stack_module_state(rng):
    pairs = [_twins(seed) for seed in range(4)]
    x = rng.standard_normal((5, 6)).astype(np.float32)
    params_e, buffers_e = ef.stack_module_state([m for m, _ in pairs])
    params_t, buffers_t = tf.stack_module_state([m for _, m in pairs])
    assert all(p.requires_grad and p.is_leaf for p in params_e.values())
    same(params_e, params_t)
    base_e, base_t = pairs[0][0], pairs[0][1]
    mine = ef.vmap(lambda p, b, d: ef.functional_call(base_e, (p, b), (d,)), in_dims=(0, 0, None))(params_e, buffers_e,
                                                                                                   E(x))
    theirs = tf.vmap(lambda p, b, d: tf.functional_call(base_t, (p, b), (d,)), in_dims=(0, 0, None))(params_t,
                                                                                                    buffers_t, T(x))
    same(mine, theirs, rtol=1e-6, atol=1e-7)
    # the stacked parameters train: a loss over the ensemble reaches every model's slice
    mine.sum().backward()
    assert params_e["0.weight"].grad.shape == (4, 8, 6)
    theirs.sum().backward()
    same(params_e["0.weight"].grad, params_t["0.weight"].grad, rtol=1e-5, atol=1e-6)


def test_stack_module_state_errors():
    for lib, fn in ((ember, ef.stack_module_state), (torch, tf.stack_module_state)):
        with pytest.raises(RuntimeError, match="Expected at least one model, got 0"):
            fn([])
        with pytest.raises(RuntimeError, match="Expected all models to be of the same class"):
            fn([lib.nn.Linear(2, 2), lib.nn.Sequential(lib.nn.Linear(2, 2))])
        a, b = lib.nn.Linear(2, 2), lib.nn.Linear(2, 2)
        b.eval()
        with pytest.raises(RuntimeError, match="same training/eval mode"):
            fn([a, b])


class _Tied:
    @staticmethod
    def build(lib):
        class Tied(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = lib.nn.Linear(3, 3, bias=False)
                self.b = lib.nn.Linear(3, 3, bias=False)
                self.b.weight = self.a.weight
                self.register_buffer("scale", lib.ones(3))

            def forward(self, x):
                return self.b(self.a(x)) * self.scale

        return Tied()


def test_functional_call_swaps_without_mutating_and_ties_weights(rng):
    me, mt = _Tied.build(ember), _Tied.build(torch)
    w, x = rng.standard_normal((3, 3)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
    before = me.a.weight
    before_values = before.detach().numpy().copy()
    mine = ef.functional_call(me, {"a.weight": E(w)}, (E(x),))
    theirs = tf.functional_call(mt, {"a.weight": T(w)}, (T(x),))
    same(mine, theirs, rtol=1e-6)
    assert me.a.weight is before and me.b.weight is before
    np.testing.assert_array_equal(me.a.weight.detach().numpy(), before_values)
    untied_e = ef.functional_call(me, {"a.weight": E(w)}, E(x), tie_weights=False)
    untied_t = tf.functional_call(mt, {"a.weight": T(w)}, T(x), tie_weights=False)
    with torch.no_grad():
        mt.a.weight.copy_(torch.tensor(before_values))
    untied_t = tf.functional_call(mt, {"a.weight": T(w)}, T(x), tie_weights=False)
    assert untied_e.shape == tuple(untied_t.shape)
    both = ef.functional_call(me, ({"a.weight": E(w)}, {"scale": E(np.full(3, 2.0, np.float32))}), (E(x),))
    np.testing.assert_allclose(both.numpy(), 2 * mine.numpy(), rtol=1e-6)
    assert float(me.scale.sum()) == 3.0


def test_functional_call_errors_match_torch(rng):
    me, mt = _Tied.build(ember), _Tied.build(torch)
    x = np.ones((1, 3), np.float32)
    w1, w2 = np.ones((3, 3), np.float32), np.zeros((3, 3), np.float32)
    cases = [
        lambda lib, f, m, t: f(m, {"a.weight": t(w1), "b.weight": t(w2)}, (t(x),)),
        lambda lib, f, m, t: f(m, ({"a.weight": t(w1)}, {"a.weight": t(w1)}), (t(x),)),
        lambda lib, f, m, t: f(m, {"a.weight": t(w1), "extra": t(w1)}, (t(x),), strict=True),
    ]
    for case in cases:
        with pytest.raises(Exception) as mine:
            case(ember, ef.functional_call, me, E)
        with pytest.raises(Exception) as theirs:
            case(torch, tf.functional_call, mt, T)
        assert type(mine.value) is type(theirs.value)
        assert str(mine.value) == str(theirs.value)


def test_functional_call_restores_after_an_exception():
    net = ember.nn.Linear(2, 2)
    weight = net.weight
    with pytest.raises(RuntimeError):
        ef.functional_call(net, {"weight": ember.ones(3, 3)}, (ember.ones(1, 2),))
    assert net.weight is weight
