"""as_strided and storage_offset against torch 2.13: storage semantics on views of views, offsets, gradients
(overlapping reads sum), writes through non-overlapping views, and the errors."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
LIBS = (torch, ember)


def _views(lib):
    """(name, tensor) pairs whose storage is a 3x4 arange: the root, slices, a transpose."""
    root = lib.arange(12.0).reshape(3, 4)
    return {"root": root, "flat_tail": root.reshape(-1)[3:], "column_slice": root[:, 1:], "row": root[1],
            "transposed": root.t()}


@pytest.mark.parametrize("view", ["root", "flat_tail", "column_slice", "row", "transposed"])
@pytest.mark.parametrize("geometry", [((2, 2), (4, 1), None), ((3, 3), (2, 1), 0), ((2, 3), (1, 2), 2),
                                      ((4,), (3,), None), ((2, 2), (0, 1), 5), ((0, 3), (1, 1), None), ((), (), 7)])
def test_values_and_storage_offset_match_torch(view, geometry):
    size, stride, offset = geometry
    results = []
    for lib in LIBS:
        x = _views(lib)[view]
        try:
            out = x.as_strided(size, stride) if offset is None else lib.as_strided(x, size, stride, offset)
            results.append((x.storage_offset(), np.asarray(out.tolist()), tuple(out.shape)))
        except RuntimeError:
            results.append("error")
    if results[0] == "error":
        assert results[1] == "error"
        return
    (t_off, t_vals, t_shape), (e_off, e_vals, e_shape) = results
    assert (e_off, e_shape) == (t_off, t_shape)
    np.testing.assert_array_equal(e_vals, t_vals)


@pytest.mark.parametrize("view", ["root", "flat_tail", "column_slice", "transposed"])
def test_gradients_match_torch_including_overlaps(view):
    grads = []
    for lib in LIBS:
        leaf = lib.arange(12.0, dtype=lib.float64).reshape(3, 4).requires_grad_()
        x = {"root": leaf, "flat_tail": leaf.reshape(-1)[3:], "column_slice": leaf[:, 1:],
             "transposed": leaf.t()}[view]
        y = x.as_strided((3, 3), (2, 1), 1)  # overlapping windows: shared elements collect several grads
        weights = lib.linspace(-1.0, 2.0, 9, dtype=lib.float64).reshape(3, 3)
        (y * weights).sum().backward()
        grads.append(np.asarray(leaf.grad.tolist()))
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)


def test_writes_through_a_non_overlapping_view_reach_the_tensor_as_in_torch():
    out = []
    for lib in LIBS:
        base = lib.zeros(3, 4)
        view = base.as_strided((2, 2), (4, 2), 1)
        view += lib.tensor([[1.0, 2.0], [3.0, 4.0]])
        view[0, 0] = 9.0
        out.append(np.asarray(base.tolist()))
    np.testing.assert_array_equal(out[1], out[0])


def test_in_place_through_a_view_keeps_gradients_right():
    grads = []
    for lib in LIBS:
        leaf = lib.linspace(0.5, 2.0, 8, dtype=lib.float64).requires_grad_()
        base = leaf * 1.0
        window = base.as_strided((2, 2), (4, 1), 1)
        window.mul_(3.0)
        (base ** 2).sum().backward()
        grads.append(np.asarray(leaf.grad.tolist()))
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)


def test_errors_name_the_problem():
    x = ember.arange(12.0)
    with pytest.raises(RuntimeError, match=r"require a storage of 17 elements, but the tensor's storage has 12"):
        x.as_strided((5, 5), (3, 1))
    with pytest.raises(RuntimeError, match="mismatch in length of strides and shape"):
        x.as_strided((2, 2), (1,))
    with pytest.raises(RuntimeError, match="non-negative"):
        x.as_strided((2,), (-1,))
    overlapping = x.as_strided((3, 3), (1, 1))
    with pytest.raises((RuntimeError, ValueError)):
        overlapping.add_(1.0)  # one element through several positions: refused, not silently wrong
    np.testing.assert_array_equal(x.numpy(), np.arange(12.0))


def _strided_program(x):
    return (x.as_strided((3, 3), (2, 1), 1).exp() + x.t().as_strided((2, 2), (4, 1)).sum()
            + x[:, 1:].as_strided((2, 2), (4, 1)).sum())


def test_compiled_graphs_read_the_same_storage_as_eager():
    x = ember.randn(3, 4)
    compiled = ember.compile(_strided_program)
    for _ in range(3):  # eager first call, traced, replayed
        np.testing.assert_allclose(compiled(x).numpy(), _strided_program(x).numpy(), rtol=1e-6)
    leaf = x.clone().requires_grad_()
    compiled_loss = ember.compile(lambda t: _strided_program(t).sum())
    for _ in range(3):
        leaf.grad = None
        compiled_loss(leaf).backward()
        got = leaf.grad.numpy().copy()
        leaf.grad = None
        _strided_program(leaf).sum().backward()
        np.testing.assert_allclose(got, leaf.grad.numpy(), rtol=1e-6)


def test_onnx_export_gathers_the_views_positions(tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    import ember.onnx

    def program(x):
        return x.as_strided((3, 3), (2, 1), 1).exp() + x.as_strided((2, 2), (4, 1)).sum()

    x = ember.randn(3, 4)
    path = str(tmp_path / "strided.onnx")
    ember.onnx.export(program, (x,), path, input_names=["x"])
    assert ember.onnx.verify(program, (x,), path) < 1e-5
    with pytest.raises(RuntimeError, match="on the base with an explicit storage_offset"):
        ember.onnx.export(lambda t: t[:, 1:].as_strided((2, 2), (4, 1)), (x,), str(tmp_path / "view.onnx"))


def test_interleaved_view_without_overlap_is_writable_as_in_torch():
    """size (3, 2), stride (2, 3) reads 0 3 2 5 4 7: no position twice, though the strides alone cannot tell."""
    out = []
    for lib in LIBS:
        base = lib.zeros(8)
        view = base.as_strided((3, 2), (2, 3))
        view += lib.arange(6.0).reshape(3, 2)
        out.append(np.asarray(base.tolist()))
    np.testing.assert_array_equal(out[1], out[0])
