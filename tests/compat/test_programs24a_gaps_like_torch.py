"""Gaps found running geoopt's and einops' test suites under ember (programs24a), each compared with torch.

* a Tensor / Parameter subclass whose ``__new__`` takes its own keywords (geoopt's ``ManifoldTensor(x,
  manifold=m)``): Python then calls ``__init__`` with them too, which torch's (object's) ignores;
* ``x.real = v`` / ``x.imag = v`` write that part in place (torch's property setters), gradients included;
* a user's Tensor subclass prints under its own name (``MyTensor([1., 2.])``);
* ``torch.jit.trace`` / ``trace_module`` / ``script`` / ``save`` / ``load`` warn torch 2.13's DeprecationWarning.
"""
from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
LIBS = pytest.mark.parametrize("lib", [ember, torch], ids=["ember", "torch"])


def _subclasses(lib):
    class Tagged(lib.Tensor):
        def __new__(cls, data, tag="none", requires_grad=False):
            out = lib.Tensor._make_subclass(cls, data, requires_grad)
            out.tag = tag
            return out

    class TaggedParameter(Tagged, lib.nn.Parameter):
        def __new__(cls, data, tag="p", requires_grad=True):
            return Tagged.__new__(cls, data, tag=tag, requires_grad=requires_grad)

    return Tagged, TaggedParameter


@LIBS
def test_subclass_new_with_own_keywords(lib):
    tagged, tagged_parameter = _subclasses(lib)
    t = tagged(lib.ones(2), tag="sphere")
    assert type(t) is tagged and t.tag == "sphere" and t.tolist() == [1.0, 1.0]
    p = tagged_parameter(lib.zeros(3), tag="ball")
    assert isinstance(p, lib.nn.Parameter) and p.requires_grad and p.tag == "ball"
    assert p.shape == (3,)
    module = lib.nn.Module()
    module.w = p
    assert [name for name, _ in module.named_parameters()] == ["w"]


@LIBS
def test_plain_tensor_constructor_still_refuses_unknown_keywords(lib):
    with pytest.raises(TypeError):
        lib.Tensor(2, 3, manifold=None)


@LIBS
def test_subclass_printout_names_the_class(lib):
    class Sphere(lib.Tensor):
        pass

    x = lib.tensor([1.0, 2.0]).as_subclass(Sphere)
    assert repr(x) == "Sphere([1., 2.])"
    assert str(x * 2) == "Sphere([2., 4.])"
    assert repr(lib.tensor([1.0])) == "tensor([1.])"
    assert repr(lib.nn.Parameter(lib.zeros(1))) == "Parameter containing:\ntensor([0.], requires_grad=True)"


def _set_parts(lib, z, re, im):
    z.real = re
    z.imag = im
    return z


@LIBS
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_real_imag_setters_write_in_place(lib, dtype):
    z = lib.zeros(2, 3, dtype=getattr(lib, dtype))
    before = z.data_ptr()
    _set_parts(lib, z, lib.tensor([1.0, -2.0, float("inf")]), 0.5)  # broadcast row; a number
    assert z.data_ptr() == before and z.dtype == getattr(lib, dtype)
    expected = np.array([[1 + 0.5j, -2 + 0.5j, complex(np.inf, 0.5)]] * 2)
    np.testing.assert_array_equal(z.numpy(), expected)  # inf stays inf + 0.5j (no inf * 0 NaN)
    z.imag = lib.tensor([[3], [4]], dtype=lib.int64)  # an integer column: cast, broadcast
    np.testing.assert_array_equal(z.imag.numpy(), [[3.0] * 3, [4.0] * 3])
    np.testing.assert_array_equal(z.real.numpy(), [[1.0, -2.0, np.inf]] * 2)


@LIBS
def test_real_setter_of_real_tensor_and_imag_refused(lib):
    x = lib.zeros(3)
    x.real = lib.tensor([1.0, 2.0, 3.0])
    assert x.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes"):
        x.imag = lib.ones(3)


@LIBS
def test_part_setters_record_gradients(lib):
    w = lib.tensor([1 + 2j, -3 + 0.5j], dtype=lib.complex128, requires_grad=True)
    v = lib.tensor([0.25, -4.0], dtype=lib.float64, requires_grad=True)
    z = w * 2
    z.imag = v * 3  # z = 2 Re(w) + 3 i v
    loss = (z * z.conj()).real.sum()  # |z|^2
    loss.backward()
    # d/dRe(w) = 2 * 2 Re(z) * 1 ; d/dIm(w) = 0 (overwritten) ; d/dv = 2 Im(z) * 3
    np.testing.assert_allclose(w.grad.numpy(), [8.0 + 0j, -24.0 + 0j])
    np.testing.assert_allclose(v.grad.numpy(), [4.5, -72.0])


def _deprecations(fn):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = fn()
    return out, sorted({str(w.message) for w in seen if w.category is DeprecationWarning})


def _words(name, replacement="`torch.compile` or `torch.export`"):
    return f"`torch.jit.{name}` is deprecated. Please switch to {replacement}."


@LIBS
def test_jit_entry_points_warn_deprecation_as_torch(lib):
    lib.manual_seed(0)
    model, x = lib.nn.Linear(2, 2), lib.randn(1, 2)
    traced, seen = _deprecations(lambda: lib.jit.trace(model, x))
    assert seen == sorted([_words("trace"), _words("trace_method")])
    assert _deprecations(lambda: lib.jit.trace(lambda a: a * 2, x))[1] == [_words("trace")]
    assert _deprecations(lambda: lib.jit.trace_module(model, {"forward": x}))[1] == [_words("trace_method")]
    assert _deprecations(lambda: lib.jit.script(model))[1] == [_words("script")]
    buffer = io.BytesIO()
    assert _deprecations(lambda: lib.jit.save(traced, buffer))[1] == [_words("save", "`torch.export`")]
    buffer.seek(0)
    loaded, seen = _deprecations(lambda: lib.jit.load(buffer))
    assert seen == [_words("load", "`torch.export`")]
    np.testing.assert_allclose(loaded(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-6)


def test_export_round_trip_warns_no_jit_deprecation():
    """ember.export's archives use the jit internally; torch.export.save/load warn nothing of the kind."""
    class Double(ember.nn.Module):
        def forward(self, x):
            return x * 2

    x = ember.ones(2)
    ep = ember.export.export(Double(), (x,))
    buffer = io.BytesIO()
    _, seen = _deprecations(lambda: ember.export.save(ep, buffer))
    buffer.seek(0)
    loaded, seen_load = _deprecations(lambda: ember.export.load(buffer))
    assert seen == seen_load == []
    assert loaded.module()(x).tolist() == [2.0, 2.0]


@pytest.mark.parametrize("fn", [lambda x, k: 1 + k * x.pow(2).sum(-1), lambda x, k: k * x.norm(dim=-1),
                                lambda x, k: 2 / (1 + k * x.pow(2).sum(-1)).clamp_min(1e-15)],
                         ids=["add", "mul_norm", "rdiv_clamp"])
def test_compiled_zero_dim_result_is_an_array(fn):
    """A 0-d result of scalar arithmetic in a compiled graph (ember.compile, jit.script: geoopt's scripted
    manifold math) is a 0-d tensor NumPy can read, as eager's and torch's (NumPy's 0-d arithmetic gives a scalar)."""
    x64 = np.array([0.1, 0.2, 0.3])
    compiled = ember.compile(fn)
    args = ember.tensor(x64), ember.tensor(-1.0, dtype=ember.float64)
    for _ in range(2):  # the first call traces, the next runs the graph
        out = compiled(*args)
        assert out.shape == () and np.asarray(out).shape == ()
    expected = fn(torch.tensor(x64), torch.tensor(-1.0, dtype=torch.float64))
    np.testing.assert_allclose(np.asarray(out), expected.numpy(), rtol=1e-12)
    np.testing.assert_allclose(out.detach(), fn(*args).detach(), rtol=0)
