"""Custom ``autograd.Function`` in PyTorch 2's forms, checked against torch 2.13: ``setup_context`` (forward
without ctx), ``vjp`` as backward's alias, a ``jvp`` rule used by forward mode (``forward_ad``, ``func.jvp``)
and ``save_for_forward``. Found by pytorch/tutorials' forward_ad_usage.py (a Function with only ``jvp``)."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _defs(lib):
    class Cube(lib.autograd.Function):  # setup_context form, two outputs (PyTorch's docs example)
        @staticmethod
        def forward(x):
            return x ** 3, 3 * x ** 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            (x,) = inputs
            ctx.save_for_backward(x, output[1])

        @staticmethod
        def backward(ctx, g, g_dx):
            x, dx = ctx.saved_tensors
            return g * dx + g_dx * 6 * x

    class ScaleVjp(lib.autograd.Function):  # vjp instead of backward, a non-tensor argument
        @staticmethod
        def forward(ctx, x, k):
            ctx.k = k
            return x * k

        @staticmethod
        def vjp(ctx, g):
            return g * ctx.k, None

    class ExpJvp(lib.autograd.Function):  # forward rule only (the tutorial's Fn)
        calls = 0

        @staticmethod
        def forward(x):
            return lib.exp(x)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_forward(output)

        @staticmethod
        def jvp(ctx, g):
            ExpJvp.calls += 1
            (result,) = ctx.saved_tensors
            return g * result

    class MulJvp(lib.autograd.Function):  # two inputs, classic form, jvp with ctx attributes
        @staticmethod
        def forward(ctx, x, y):
            ctx.x, ctx.y = x, y
            return x * y

        @staticmethod
        def jvp(ctx, gx, gy):
            out = gx * ctx.y + ctx.x * gy
            del ctx.x, ctx.y  # the tutorial frees them: jvp must run once
            return out

    return Cube, ScaleVjp, ExpJvp, MulJvp


def _pair(*shape, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape)
    return ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def test_setup_context_form_gradients_and_second_order_as_torch():
    (ECube, *_), (TCube, *_) = _defs(ember), _defs(torch)
    xe, xt = _pair(4)
    ge, = ember.autograd.grad(ECube.apply(xe)[0].sum(), xe, create_graph=True)
    gt, = torch.autograd.grad(TCube.apply(xt)[0].sum(), xt, create_graph=True)
    np.testing.assert_allclose(ge.detach().numpy(), gt.detach().numpy(), rtol=1e-12)
    he, = ember.autograd.grad(ge.sum(), xe)
    ht, = torch.autograd.grad(gt.sum(), xt)
    np.testing.assert_allclose(he.numpy(), ht.numpy(), rtol=1e-12)  # 6x: through the second output's grad
    np.testing.assert_allclose(he.numpy(), 6 * xe.detach().numpy(), rtol=1e-12)


def test_setup_context_form_under_func_transforms():
    (ECube, *_), (TCube, *_) = _defs(ember), _defs(torch)
    xe, xt = _pair(5, seed=1)
    ge = ember.func.grad(lambda x: ECube.apply(x)[0].sum())(xe.detach())
    gt = torch.func.grad(lambda x: TCube.apply(x)[0].sum())(xt.detach())
    np.testing.assert_allclose(ge.numpy(), gt.numpy(), rtol=1e-12)


def test_setup_context_refuses_keyword_inputs():
    ECube = _defs(ember)[0]
    with pytest.raises(RuntimeError, match="setup_context"):
        ECube.apply(x=ember.ones(2))


def test_vjp_is_backward_alias_and_both_is_an_error():
    _, EScale, _, _ = _defs(ember)
    _, TScale, _, _ = _defs(torch)
    xe, xt = _pair(3, seed=2)
    EScale.apply(xe, 2.5).sum().backward()
    TScale.apply(xt, 2.5).sum().backward()
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy())

    def both(lib):
        class Both(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2

            @staticmethod
            def vjp(ctx, g):
                return g * 2
        return Both

    for lib, x in ((torch, xt), (ember, xe)):
        with pytest.raises(RuntimeError, match="both 'backward' and 'vjp'"):
            both(lib).apply(x).sum().backward()


def test_jvp_rule_with_forward_ad_as_torch_and_called_once():
    _, _, EExp, EMul = _defs(ember)
    _, _, TExp, TMul = _defs(torch)
    a = np.random.default_rng(3).standard_normal((3, 4))
    t = np.random.default_rng(4).standard_normal((3, 4))
    b = np.random.default_rng(5).standard_normal((3, 4))
    results = {}
    for name, lib, Exp, Mul in (("ember", ember, EExp, EMul), ("torch", torch, TExp, TMul)):
        fw = lib.autograd.forward_ad
        with fw.dual_level():
            d = fw.make_dual(lib.tensor(a), lib.tensor(t))
            y = Exp.apply(d)
            z = Mul.apply(y, lib.tensor(b))
            t_y = fw.unpack_dual(y).tangent.numpy().copy()
            t_z = fw.unpack_dual(z).tangent.numpy().copy()
            t_w = fw.unpack_dual((z * 2).sin()).tangent.numpy().copy()  # downstream of the Function
        results[name] = (t_y, t_z, t_w, Exp.calls)
    for e, tt in zip(results["ember"][:3], results["torch"][:3]):
        np.testing.assert_allclose(e, tt, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(results["ember"][0], t * np.exp(a), rtol=1e-12)
    assert results["ember"][3] == results["torch"][3] == 1  # one jvp call per Function application


def test_jvp_rule_with_func_jvp_and_gradcheck_forward_ad():
    _, _, EExp, _ = _defs(ember)
    _, _, TExp, _ = _defs(torch)
    a = np.random.default_rng(6).standard_normal(5)
    t = np.random.default_rng(7).standard_normal(5)
    oe, je = ember.func.jvp(EExp.apply, (ember.tensor(a),), (ember.tensor(t),))
    ot, jt = torch.func.jvp(TExp.apply, (torch.tensor(a),), (torch.tensor(t),))
    np.testing.assert_allclose(oe.numpy(), ot.numpy(), rtol=1e-12)
    np.testing.assert_allclose(je.numpy(), jt.numpy(), rtol=1e-12)
    x = ember.tensor(a, requires_grad=True)
    assert ember.autograd.gradcheck(EExp.apply, (x,), check_forward_ad=True, check_backward_ad=False,
                                    check_undefined_grad=False, check_batched_grad=False)

    class WrongJvp(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return ember.exp(x)

        @staticmethod
        def jvp(ctx, g):
            return 2 * g

    with pytest.raises(RuntimeError, match="Jacobian computed with forward mode mismatch"):  # torch's words
        ember.autograd.gradcheck(WrongJvp.apply, (x,), check_forward_ad=True, check_backward_ad=False,
                                 check_undefined_grad=False, check_batched_grad=False)


def test_reverse_mode_through_a_jvp_only_function_is_its_transpose():
    # PyTorch refuses backward here ("You must implement either the backward or the vjp method"); ember's
    # forward mode needs the transpose anyway, and it is the right gradient.
    _, _, _, EMul = _defs(ember)
    xe, _ = _pair(3, seed=8)
    ye, _ = _pair(3, seed=9)
    EMul.apply(xe, ye).sum().backward()
    np.testing.assert_allclose(xe.grad.numpy(), ye.detach().numpy())
    np.testing.assert_allclose(ye.grad.numpy(), xe.detach().numpy())


def test_function_without_any_rule_names_the_fix():
    class NoRule(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    x = ember.ones(2, requires_grad=True)
    with pytest.raises(NotImplementedError, match="backward"):
        NoRule.apply(x).sum().backward()
    with ember.autograd.forward_ad.dual_level():
        d = ember.autograd.forward_ad.make_dual(ember.ones(2), ember.ones(2))
        with pytest.raises(NotImplementedError):
            ember.autograd.forward_ad.unpack_dual(NoRule.apply(d))
