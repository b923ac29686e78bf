"""Memory formats as PyTorch: ``x.contiguous(memory_format=torch.channels_last)``, ``x.to(memory_format=...)``,
``clone`` preserving the layout, ``is_contiguous(memory_format=...)`` and ``Module.to(memory_format=...)`` give the
same strides and answers as torch (they raised or were ignored)."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

SHAPES = [(2, 3, 4, 5), (1, 3, 1, 1), (2, 1, 4, 5), (2, 3, 1, 5), (0, 3, 2, 2), (2, 3, 2, 2, 2)]
FORMATS = ["contiguous_format", "channels_last", "channels_last_3d"]
MAKERS = {
    "plain": lambda t, x, f: x,
    "contiguous_in": lambda t, x, f: x.contiguous(memory_format=getattr(t, f)),
    "to_format": lambda t, x, f: x.to(memory_format=getattr(t, f)),
    "clone_format": lambda t, x, f: x.clone(memory_format=getattr(t, f)),
    "clone_of_format": lambda t, x, f: x.contiguous(memory_format=getattr(t, f)).clone(),
    "relu_of_format": lambda t, x, f: t.relu(x.contiguous(memory_format=getattr(t, f))),
    "back_to_default": lambda t, x, f: x.contiguous(memory_format=getattr(t, f)).contiguous(),
    "permuted_view": lambda t, x, f: x.transpose(1, -1),
}


def _fits(shape, fmt):
    if 0 in shape and fmt != "contiguous_format":
        return False  # an empty tensor's strides are a convention (NumPy's differ from PyTorch's): nothing to lay out
    return fmt == "contiguous_format" or (fmt == "channels_last") == (len(shape) == 4)


@pytest.mark.parametrize("maker", sorted(MAKERS))
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_strides_and_is_contiguous_like_torch(shape, fmt, maker):
    if not _fits(shape, fmt) and maker not in ("plain", "permuted_view"):
        return
    data = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    ours = MAKERS[maker](ember, ember.tensor(data), fmt)
    theirs = MAKERS[maker](torch, torch.tensor(data), fmt)
    assert np.array_equal(ours.numpy(), theirs.numpy())
    if 0 not in shape:  # the layout: strides of the dimensions longer than 1 (a size-1 dimension's stride is free)
        assert [s for s, n in zip(ours.stride(), shape) if n > 1] == \
            [s for s, n in zip(theirs.stride(), shape) if n > 1]
    for f in FORMATS if 0 not in shape else ["contiguous_format"]:
        assert ours.is_contiguous(memory_format=getattr(ember, f)) == \
            theirs.is_contiguous(memory_format=getattr(torch, f)), f
    assert ours.is_contiguous() == theirs.is_contiguous()


def test_gradients_flow_through_a_layout_change():
    x = ember.arange(24.0).reshape(1, 2, 3, 4).requires_grad_(True)
    y = x.contiguous(memory_format=ember.channels_last)
    (y * ember.arange(24.0).reshape(1, 2, 3, 4)).sum().backward()
    assert np.array_equal(x.grad.numpy(), np.arange(24.0).reshape(1, 2, 3, 4))


def test_module_to_channels_last_like_torch():
    def strides(lib):
        lib.manual_seed(0)
        m = lib.nn.Sequential(lib.nn.Conv2d(3, 4, 3), lib.nn.BatchNorm2d(4), lib.nn.Linear(2, 2))
        m = m.to(memory_format=lib.channels_last)
        x = lib.ones(2, 3, 5, 5).to(memory_format=lib.channels_last)
        return [tuple(p.stride()) for p in m.parameters()], tuple(m[0](x).shape)

    assert strides(ember) == strides(torch)


def test_errors_like_torch():
    for lib in (ember, torch):
        with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
            lib.ones(2, 3, 4).contiguous(memory_format=lib.channels_last)
        with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
            lib.ones(2, 3, 4).to(memory_format=lib.channels_last)
        assert lib.ones(2, 3).contiguous(memory_format=lib.preserve_format).is_contiguous()
