"""One test per user error: each must raise a clear error naming the op, the shapes/dtypes/devices
involved and what to do, never a bare NumPy traceback.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember


def test_shape_mismatch_names_op_and_both_shapes() -> None:
    with pytest.raises(RuntimeError) as info:
        ember.ones(2, 3) + ember.ones(4)
    message = str(info.value)
    assert "add" in message and "(2, 3)" in message and "(4,)" in message


def test_shape_mismatch_in_mul_with_grad() -> None:
    a = ember.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"mul.*\(2, 3\).*\(3, 2\)"):
        a * ember.ones(3, 2)


def test_matmul_inner_size_mismatch() -> None:
    with pytest.raises(RuntimeError) as info:
        ember.ones(2, 3) @ ember.ones(4, 5)
    message = str(info.value)
    assert "matmul" in message and "2x3" in message and "4x5" in message


def test_cat_size_mismatch() -> None:
    with pytest.raises(RuntimeError, match=r"cat.*dimension"):
        ember.cat([ember.ones(2, 3), ember.ones(2, 4)], 0)


def test_reshape_invalid() -> None:
    with pytest.raises(RuntimeError, match=r"reshape.*\[4, 2\].*6"):
        ember.ones(2, 3).reshape(4, 2)


def test_unsupported_numpy_dtype() -> None:
    # complex64/complex128 and uint16/32/64 are ember dtypes now; NumPy's extended-precision types are not
    with pytest.raises(TypeError, match=r"complex256.*supported"):
        ember.tensor(np.ones(3, dtype=np.clongdouble))
    with pytest.raises(TypeError, match=r"float128"):
        ember.from_numpy(np.ones(3, dtype=np.longdouble))
    assert ember.from_numpy(np.ones(3, dtype=np.uint16)).dtype is ember.uint16  # as torch.from_numpy


def test_object_array_rejected() -> None:
    with pytest.raises(TypeError) as info:
        ember.tensor(np.array([object(), object()]))
    assert "tensor" in str(info.value) or "dtype" in str(info.value)


def test_unknown_device_type() -> None:
    with pytest.raises(RuntimeError, match=r"unknown device type 'tpu'"):
        ember.zeros(2, device="tpu")


def test_mixed_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulate a second device with a fake backend sharing NumPy, and mix tensors from both."""
    from ember import backends
    from ember.backends.cpu import CPUBackend

    class FakeBackend(CPUBackend):
        name = "fake"

    monkeypatch.setitem(backends._BACKENDS, "fake", FakeBackend())
    other = ember.ones(3, device="fake")
    assert other.device.type == "fake"
    for fn in (lambda a, b: a + b, lambda a, b: ember.where(a > 0, a, b), lambda a, b: ember.cat([a, b])):
        with pytest.raises(RuntimeError) as info:
            fn(ember.ones(3), other)
        message = str(info.value)
        assert "same device" in message and "cpu" in message and "fake" in message


def test_backward_on_non_scalar_without_gradient() -> None:
    x = ember.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError) as info:
        (x * 2).backward()
    message = str(info.value)
    assert "scalar" in message and "(2, 3)" in message and "gradient" in message


def test_backward_gradient_shape_mismatch() -> None:
    x = ember.ones(2, 3, requires_grad=True)
    # torch 2.13's text: "Mismatch in shape: grad_output[0] has a shape of torch.Size([3]) and output[0] ..."
    with pytest.raises(RuntimeError, match=r"Mismatch in shape: grad_output\[0\].*Size\(\[3\]\).*output\[0\].*Size\(\[2, 3\]\)"):
        (x * 2).backward(ember.ones(3))


def test_backward_on_tensor_without_grad() -> None:
    with pytest.raises(RuntimeError, match="does not require grad"):
        ember.ones(2).sum().backward()


def test_backward_twice_through_freed_graph() -> None:
    x = ember.ones(3, requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(RuntimeError) as info:
        y.backward()
    assert "second time" in str(info.value) and "retain_graph=True" in str(info.value)


def test_backward_twice_with_retain_graph_is_fine() -> None:
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 8.0])


def test_inplace_on_saved_tensor_raises_at_backward() -> None:
    x = ember.ones(3, requires_grad=True)
    h = x * 2
    y = h.exp()  # exp saves its output
    z = (h * h).sum()  # mul saves h
    h.add_(1)
    with pytest.raises(RuntimeError) as info:
        z.backward()
    message = str(info.value)
    assert "modified by an inplace operation" in message and "mul" in message and "version" in message
    del y


def test_inplace_on_saved_output_raises() -> None:
    x = ember.ones(3, requires_grad=True)
    y = x.exp()
    y.mul_(2)
    with pytest.raises(RuntimeError, match=r"inplace operation.*exp"):
        y.sum().backward()


def test_inplace_through_view_of_saved_tensor() -> None:
    x = ember.ones(2, 2, requires_grad=True)
    h = x * 1
    loss = (h * h).sum()
    with ember.no_grad():
        h.view(4)[0] = 5.0  # a view shares the version counter
    with pytest.raises(RuntimeError, match="inplace"):
        loss.backward()


def test_inplace_on_leaf_requiring_grad() -> None:
    w = ember.ones(3, requires_grad=True)
    for fn, name in [(lambda t: t.add_(1), "add_"), (lambda t: t.mul_(2), "mul_"), (lambda t: t.zero_(), "zero_")]:
        with pytest.raises(RuntimeError) as info:
            fn(w)
        message = str(info.value)
        assert name in message and "leaf" in message and "no_grad" in message
    with pytest.raises(RuntimeError, match="leaf"):
        w[0] = 2.0
    with pytest.raises(RuntimeError, match="leaf"):
        w -= 1
    with ember.no_grad():  # allowed, as optimizers do
        w -= 1
    np.testing.assert_allclose(w.detach().numpy(), [0.0, 0.0, 0.0])


def test_numpy_on_tensor_requiring_grad() -> None:
    x = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError) as info:
        x.numpy()
    assert "requires grad" in str(info.value) and "detach().numpy()" in str(info.value)
    assert x.detach().numpy().shape == (2,)


def test_index_out_of_range() -> None:
    x = ember.ones(2, 3)
    with pytest.raises(IndexError) as info:
        x[5]
    message = str(info.value)
    assert "index" in message and "(2, 3)" in message
    with pytest.raises(IndexError, match=r"\(2, 3\)"):
        x[:, ember.tensor([0, 3])]
    with pytest.raises(IndexError, match=r"\(2, 3\)"):
        x[0, 7] = 1.0


def test_index_out_of_range_with_grad() -> None:
    x = ember.ones(2, 3, requires_grad=True)
    with pytest.raises(IndexError, match=r"\(2, 3\)"):
        (x * 1)[ember.tensor([2])]


def test_gather_index_out_of_range() -> None:
    with pytest.raises(RuntimeError, match=r"gather.*out of bounds.*size 3"):  # PyTorch raises RuntimeError here
        ember.gather(ember.ones(2, 3), 1, ember.tensor([[0, 3]]))


def test_float_index_tensor_rejected() -> None:
    with pytest.raises(IndexError, match=r"long, int, byte or bool tensors.*float32"):
        ember.ones(3)[ember.tensor([0.0, 1.0])]


def test_dim_out_of_range() -> None:
    with pytest.raises(IndexError, match=r"sum.*Dimension out of range.*\[-2, 1\].*got 2"):
        ember.ones(2, 3).sum(2)


def test_requires_grad_on_integer_tensor() -> None:
    with pytest.raises(RuntimeError, match=r"floating point.*int64"):
        ember.tensor([1, 2], requires_grad=True)


def test_mean_of_integer_tensor() -> None:
    with pytest.raises(RuntimeError, match=r"mean.*floating point.*int64"):
        ember.tensor([1, 2]).mean()


def test_inplace_result_cannot_grow() -> None:
    x = ember.ones(3)
    with pytest.raises(RuntimeError, match=r"add_.*\[3\].*\[2, 3\]"):
        x.add_(ember.ones(2, 3))


def test_inplace_float_into_int() -> None:
    x = ember.tensor([1, 2])
    with pytest.raises(RuntimeError, match=r"float32.*int64"):
        x.add_(ember.tensor([0.5, 0.5]))


def test_item_of_many_elements() -> None:
    with pytest.raises(RuntimeError, match=r"3 elements"):
        ember.ones(3).item()


def test_bool_of_many_elements() -> None:
    with pytest.raises(RuntimeError, match=r"ambiguous"):
        bool(ember.ones(3))


def test_autograd_grad_unused_input() -> None:
    x, y = ember.ones(2, requires_grad=True), ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"differentiated Tensor.*index 1.*allow_unused=True"):
        ember.autograd.grad((x * 2).sum(), [x, y])


def test_amax_of_empty() -> None:
    with pytest.raises(RuntimeError, match=r"amax.*empty.*\(0, 3\)"):
        ember.ones(0, 3).amax()


def test_expand_incompatible() -> None:
    with pytest.raises(RuntimeError, match=r"expand.*\(3\).*\(2\)"):
        ember.ones(2).expand(3)


def test_setitem_value_shape_mismatch() -> None:
    x = ember.zeros(2, 3)
    with pytest.raises(RuntimeError, match=r"index_put_.*\(4,\).*\(2, 3\)"):
        x[0] = ember.ones(4)
