"""NumPy's argument names (``axis``, ``keepdims``, ``x``/``a``, ``x2``) where PyTorch's argument parser takes them.

d2l's book code writes ``X.sum(axis=0)``, ``d2l.argmax(y_hat, axis=1)``, ``torch.cat(ts, axis=1)``; every
function and Tensor method torch writes in C++ accepts these names. Results are compared with torch 2.13.
"""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

METHOD_CALLS = [
    "sum(axis=0)", "sum(axis=1, keepdims=True)", "sum(0, keepdims=True)", "sum(axis=(0, 1))", "sum(axis=[0, 1])",
    "mean(axis=1)", "mean(axis=0, keepdims=True)", "prod(axis=0)", "amax(axis=0)", "amin(axis=1, keepdims=True)",
    "max(axis=0)", "min(axis=1, keepdims=True)", "max(1, keepdims=True)", "argmax(axis=1)",
    "argmin(axis=0, keepdims=True)", "all(axis=0)", "any(axis=1)", "std(axis=0)", "var(axis=1, keepdims=True)",
    "cumsum(axis=0)", "cumprod(axis=1)", "cummax(axis=0)", "cummin(axis=1)", "logsumexp(axis=1)",
    "count_nonzero(axis=0)", "sort(axis=0)", "argsort(axis=1)", "topk(1, axis=0)", "kthvalue(1, axis=0, keepdims=True)",
    "squeeze(axis=0)", "unsqueeze(axis=1)", "chunk(2, axis=1)", "unbind(axis=1)",
    "median(axis=0)", "nansum(axis=1)", "nanmean(axis=0, keepdims=True)", "mode(axis=1)", "logcumsumexp(axis=0)",
    "diff(axis=0)", "aminmax(axis=0)",
]

FUNCTION_CALLS = [
    "sum(V, axis=0)", "mean(V, axis=1, keepdims=True)", "cat([V, V], axis=1)", "concat([V, V], axis=0)",
    "concatenate([V, V], axis=1)", "stack([V, V], axis=2)", "argmax(V, axis=0)", "max(V, axis=1)",
    "squeeze(V, axis=0)", "unsqueeze(V, axis=0)", "cumsum(V, axis=1)", "gather(V, axis=1, index=I)",
    "index_select(V, axis=0, index=J)", "take_along_dim(V, I, axis=1)", "var_mean(V, axis=0)",
    "std_mean(V, axis=1, keepdims=True)", "softmax(V, axis=0)", "logsumexp(V, axis=0, keepdims=True)",
    "quantile(V, 0.5, axis=0)", "narrow(V, axis=1, start=1, length=2)", "select(V, axis=1, index=0)",
    "sum(a=V)", "mean(x=V)", "add(V, x2=V)", "linalg.norm(V, axis=0)",
]


def _plain(result):
    if isinstance(result, (tuple, list)):
        return [_plain(r) for r in result]
    return np.asarray(result.detach().numpy())


def _both(expr, method):
    out = []
    for lib in (torch, ember):
        v = lib.tensor([[0.5, -1.0, 2.0], [3.0, 0.0, -2.5]])
        I, J = lib.tensor([[0, 2], [1, 1]]), lib.tensor([1, 0])
        out.append(_plain(eval(("v." if method else "lib.") + expr.replace("V", "v"))))
    return out


def _assert_same(a, b):
    if isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
        return
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("expr", METHOD_CALLS)
def test_tensor_methods_take_numpy_names_like_torch(expr):
    expected, got = _both(expr, method=True)
    _assert_same(expected, got)


@pytest.mark.parametrize("expr", FUNCTION_CALLS)
def test_functions_take_numpy_names_like_torch(expr):
    expected, got = _both(expr, method=False)
    _assert_same(expected, got)


def test_softmax_methods_take_axis():
    x = ember.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    np.testing.assert_array_equal(x.softmax(axis=1).numpy(), x.softmax(1).numpy())
    np.testing.assert_array_equal(x.log_softmax(axis=0).numpy(), x.log_softmax(0).numpy())


@pytest.mark.parametrize("call", [lambda x: x.sum(0, axis=1), lambda x: ember.sum(x, dim=0, axis=1),
                                  lambda x: x.cumsum(0, axis=0), lambda x: x.sum(0, True, keepdims=True),
                                  lambda x: x.unsqueeze(), lambda x: x.cumsum()])
def test_both_names_or_neither_is_an_error(call):
    # torch: "received an invalid combination of arguments" / missing dim; a TypeError in both
    with pytest.raises(TypeError):
        call(ember.ones(2, 3))


def test_gradients_flow_through_the_numpy_names():
    x = ember.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    xt = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    (x.max(axis=1).values.sum() + x.mean(axis=0, keepdims=True).sum()).backward()
    (xt.max(axis=1).values.sum() + xt.mean(axis=0, keepdims=True).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy())


def test_a_genuine_type_error_is_not_swallowed():
    with pytest.raises(TypeError, match="axes"):
        ember.cat([ember.ones(2)], axes=0)  # not a name torch knows either
    with pytest.raises(TypeError):
        ember.ones(2, 2).sum(axis=0, dim=1)
