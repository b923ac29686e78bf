"""torch.library / torch.ops in ember: custom_op with autograd, fake, kernels per device, mutation and aliasing
rules, the Library define/impl API, opcheck, infer_schema, and torch.ops.aten calls -- each compared with what
torch 2.13 does for the same program."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
LIBS = [pytest.param(torch, id="torch"), pytest.param(ember, id="ember")]


def _numpy_sin(lib, ns: str):
    @lib.library.custom_op(f"{ns}::numpy_sin", mutates_args=())
    def numpy_sin(x: lib.Tensor) -> lib.Tensor:
        return lib.from_numpy(np.sin(x.detach().numpy()))

    return numpy_sin


@pytest.mark.parametrize("lib", LIBS)
def test_custom_op_autograd_fake_and_opcheck(lib) -> None:
    ns = f"ember_t1_{lib.__name__}"
    op = _numpy_sin(lib, ns)
    x = lib.randn(3, requires_grad=True)
    y = op(x)
    assert y.requires_grad  # attached to a node that refuses to differentiate until a formula is registered
    with pytest.raises(RuntimeError, match="no autograd formula was registered. Please use register_autograd"):
        y.sum().backward()
    seen = []

    def backward(ctx, grad):
        seen.append(tuple(ctx.needs_input_grad))
        (saved,) = ctx.saved_tensors
        return grad * saved.cos()

    op.register_autograd(backward, setup_context=lambda ctx, inputs, output: ctx.save_for_backward(inputs[0]))
    x = lib.tensor([0.0, 1.0, -2.0], dtype=lib.float64, requires_grad=True)
    getattr(lib.ops, ns).numpy_sin(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.cos([0.0, 1.0, -2.0]), rtol=1e-15)
    assert seen == [(True,)]
    op.register_fake(lambda t: lib.empty_like(t))
    assert tuple(getattr(lib.ops, ns).numpy_sin.default(lib.empty(4, 2, device="meta")).shape) == (4, 2)
    assert lib.library.opcheck(op, (lib.randn(3),)) == {
        "test_schema": "SUCCESS", "test_autograd_registration": "SUCCESS", "test_faketensor": "SUCCESS",
        "test_aot_dispatch_dynamic": "SUCCESS"}
    assert str(getattr(lib.ops, ns).numpy_sin.default) == f"{ns}.numpy_sin.default"
    assert repr(getattr(lib.ops, ns).numpy_sin.default) == f"<OpOverload(op='{ns}.numpy_sin', overload='default')>"
    assert repr(getattr(lib.ops, ns).numpy_sin) == f"<OpOverloadPacket(op='{ns}.numpy_sin')>"


@pytest.mark.parametrize("lib", LIBS)
def test_mutation_is_seen_by_autograd_and_aliasing_is_refused(lib) -> None:
    ns = f"ember_t2_{lib.__name__}"

    @lib.library.custom_op(f"{ns}::add_into", mutates_args={"out"})
    def add_into(x: lib.Tensor, out: lib.Tensor) -> None:
        out.copy_(out + x)

    w = lib.ones(2, requires_grad=True)
    buffer = lib.ones(2)
    y = w * buffer  # saves buffer for backward
    add_into(lib.ones(2), buffer)
    np.testing.assert_array_equal(buffer.numpy(), [2.0, 2.0])
    with pytest.raises(RuntimeError, match="modified by an inplace operation|version"):
        y.sum().backward()

    @lib.library.custom_op(f"{ns}::same", mutates_args=())
    def same(x: lib.Tensor) -> lib.Tensor:
        return x

    with pytest.raises(RuntimeError, match="(?i)alias|must not"):
        same(lib.ones(2))


@pytest.mark.parametrize("lib", LIBS)
def test_library_define_impl_and_device_kernels(lib) -> None:
    ns = f"ember_t3_{lib.__name__}"
    library = lib.library.Library(ns, "DEF")
    library.define("mul2(Tensor x, float s=2.0) -> Tensor")
    library.impl("mul2", lambda x, s=2.0: x * s, "CompositeImplicitAutograd")
    x = lib.ones(2, requires_grad=True)
    getattr(lib.ops, ns).mul2(x, 3.0).sum().backward()  # a composite is recorded like any Python code
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
    lib.library.define(f"{ns}::cube", "(Tensor x) -> Tensor", lib=library)

    @lib.library.impl(f"{ns}::cube", "cpu", lib=library)
    def cube(t):
        return t ** 3

    np.testing.assert_array_equal(getattr(lib.ops, ns).cube(lib.tensor([2.0])).numpy(), [8.0])
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        getattr(lib.ops, ns).nope


def test_missing_kernel_and_builtin_namespace_are_refused_clearly() -> None:
    ember.library.define("ember_t4::only_cuda", "(Tensor x) -> Tensor")
    ember.library.register_kernel("ember_t4::only_cuda", "cuda", lambda x: x.clone())
    with pytest.raises(NotImplementedError, match="no kernel for device type 'cpu'"):
        ember.ops.ember_t4.only_cuda(ember.ones(1))
    with pytest.raises(RuntimeError, match="built-in operators cannot be redefined"):
        ember.library.Library("aten", "IMPL")
    with pytest.raises(OSError, match="cannot load compiled PyTorch extensions"):
        ember.ops.load_library("libfoo.so")


def test_infer_schema_equals_torch() -> None:
    from typing import Optional, Sequence, Union

    def build(lib):
        def f(x: lib.Tensor, y: Optional[lib.Tensor], z: list[lib.Tensor], n: int, m: Optional[int] = None,
              s: Sequence[int] = None, b: bool = False, st: str = "hi", *, dt: lib.dtype = None,
              fl: float = 0.5, sc: Union[int, float, bool] = 3) -> tuple[lib.Tensor, lib.Tensor]:
            ...

        def g(x: lib.Tensor, out: lib.Tensor) -> None:
            ...

        return f, g

    (tf, tg), (ef, eg) = build(torch), build(ember)
    assert ember.library.infer_schema(ef, mutates_args=()) == torch.library.infer_schema(tf, mutates_args=())
    for mutates in ({"out"}, "unknown"):
        assert (ember.library.infer_schema(eg, mutates_args=mutates)
                == torch.library.infer_schema(tg, mutates_args=mutates))


def test_aten_namespace_calls_equal_torch() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)
    img, w = rng.standard_normal((1, 2, 5, 5)).astype(np.float32), rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    calls = [
        lambda L, t: L.ops.aten.add.Tensor(t(a), t(a), alpha=3),
        lambda L, t: L.ops.aten.mm.default(t(a), t(b)),
        lambda L, t: L.ops.aten._softmax(t(a), 1, False),
        lambda L, t: L.ops.aten._log_softmax.default(t(a), 0, False),
        lambda L, t: L.ops.aten.convolution(t(img), t(w), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
        lambda L, t: L.ops.aten.embedding(t(b), L.tensor([3, 0, 1])),
        lambda L, t: L.ops.aten.sum.dim_IntList(t(a), [1]),
        lambda L, t: L.ops.aten.view(t(a), [4, 3]),
        lambda L, t: L.ops.aten.relu(t(a)),
        lambda L, t: L.ops.aten.t(t(a)),
        lambda L, t: L.ops.aten.addmm(t(b[0]), t(a), t(b)),
    ]
    for call in calls:
        expected = call(torch, torch.tensor).numpy()
        np.testing.assert_allclose(call(ember, ember.tensor).numpy(), expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(AttributeError, match="no ATen operator aten::not_an_op"):
        ember.ops.aten.not_an_op
