"""``torch.nested``: nested tensors (strided and jagged layouts) side by side with torch 2.13 (CPU).

Each case builds the same components in both libraries, runs the op torch supports for that layout, and compares the
components (or the padded result) and the gradients reaching the original tensors.
"""
from __future__ import annotations

import gc
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import ember
import ember.nn.functional as EF
from ember import _torch_function

warnings.filterwarnings("ignore", message=".*nested tensors is in prototype stage.*")

_RNG = np.random.default_rng(0)
_PARTS = [_RNG.standard_normal((2, 4)).astype(np.float32), _RNG.standard_normal((3, 4)).astype(np.float32),
          _RNG.standard_normal((1, 4)).astype(np.float32)]
_W = _RNG.standard_normal((5, 4)).astype(np.float32)
_B = _RNG.standard_normal(5).astype(np.float32)


def _both(layout: str, requires_grad: bool = False) -> dict:
    out = {}
    for lib in (torch, ember):
        leaves = [lib.tensor(p, requires_grad=requires_grad) for p in _PARTS]
        nt = lib.nested.as_nested_tensor(leaves, layout=getattr(lib, layout))
        out[lib.__name__] = (lib, leaves, nt)
    return out


def _components(nt: object) -> list:
    return [c.detach().numpy() for c in nt.unbind()]


def _same(e: object, t: object, tol: float = 1e-6) -> None:
    if getattr(t, "is_nested", False):
        assert e.is_nested
        for a, b in zip(_components(e), _components(t), strict=True):
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    else:
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("layout", ["strided", "jagged"])
def test_construction_sizes_and_unbind(layout: str) -> None:
    runs = _both(layout)
    (_, _, t), (_, _, e) = runs["torch"], runs["ember"]
    assert e.is_nested and e.dim() == t.dim() == 3 and e.size(0) == t.size(0) == 3
    assert e.size(2) == t.size(2) == e.size(-1) == 4 and e.layout is getattr(ember, layout)
    if layout == "jagged":
        assert str(e.shape[1]).startswith("j") and str(t.shape[1]).startswith("j")
        assert (e.shape[0], e.shape[2]) == (t.shape[0], t.shape[2])
        np.testing.assert_array_equal(e.offsets().numpy(), t.offsets().numpy())
        np.testing.assert_array_equal(e.values().numpy(), t.values().numpy())
    else:
        for nt in (e, t):
            with pytest.raises(RuntimeError, match="irregular"):
                nt.size(1)
            with pytest.raises(RuntimeError):
                nt.size()
    _same(e, t)
    copy = ember.nested.nested_tensor([ember.tensor(p) for p in _PARTS], layout=getattr(ember, layout),
                                      requires_grad=True)
    assert copy.requires_grad and all(c.is_leaf for c in copy.unbind())


@pytest.mark.parametrize("layout", ["strided", "jagged"])
@pytest.mark.parametrize("padding", [0.0, -1.5])
def test_to_padded_tensor(layout: str, padding: float) -> None:
    runs = _both(layout)
    t = torch.nested.to_padded_tensor(runs["torch"][2], padding)
    e = ember.nested.to_padded_tensor(runs["ember"][2], padding)
    _same(e, t)
    if layout == "strided":  # (torch's jagged to_padded_tensor pads only the ragged dim to output_size)
        np.testing.assert_array_equal(runs["ember"][2].to_padded_tensor(padding, (3, 5, 6)).numpy(),
                                      torch.nested.to_padded_tensor(runs["torch"][2], padding, (3, 5, 6)).numpy())


_ELEMENTWISE = [
    ("add", lambda L, F, nt: nt + nt),
    ("mul scalar", lambda L, F, nt: nt * 2.5),
    ("relu", lambda L, F, nt: F.relu(nt)),
    ("sin", lambda L, F, nt: nt.sin()),
    ("gelu", lambda L, F, nt: F.gelu(nt)),
    ("chain", lambda L, F, nt: (nt.exp() - nt).tanh() / 3),  # (jagged only: torch's strided has no exp)
    ("softmax last", lambda L, F, nt: F.softmax(nt, -1)),
    ("linear", lambda L, F, nt: F.linear(nt, L.tensor(_W), L.tensor(_B))),
    ("transpose", lambda L, F, nt: nt.transpose(1, 2).contiguous()),  # (strided only in torch)
]
_TORCH_LACKS = {("chain", "strided"), ("transpose", "jagged")}


@pytest.mark.parametrize("layout", ["strided", "jagged"])
@pytest.mark.parametrize("name,fn", _ELEMENTWISE, ids=[c[0] for c in _ELEMENTWISE])
def test_ops_and_gradients_as_torch(layout: str, name: str, fn) -> None:
    if (name, layout) in _TORCH_LACKS:
        pytest.skip("torch 2.13 has no kernel for this op on this layout")
    runs = _both(layout, requires_grad=True)
    results = {}
    for key, (lib, leaves, nt) in runs.items():
        F = TF if lib is torch else EF
        out = fn(lib, F, nt)
        padded = lib.nested.to_padded_tensor(out, 0.0)
        weights = lib.tensor(np.arange(padded.numel(), dtype=np.float32).reshape(padded.shape) / 10)
        (padded * weights).sum().backward()
        results[key] = (out, [leaf.grad.numpy().copy() for leaf in leaves])
    _same(results["ember"][0], results["torch"][0], 1e-5)
    for a, b in zip(results["ember"][1], results["torch"][1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_jagged_ragged_dim_ops_as_torch() -> None:
    """Jagged: softmax over the ragged dim, a sum over it (a dense result), matmul with a dense matrix, a mean (values
    against torch's nested ops); gradients through the softmax and the product against torch on the dense
    components: torch 2.13's own nested gradient of softmax over the ragged dim (dim=1) differs from the dense one
    on CPU (0.62 off on these inputs; dim=-1 agrees), so the dense computation is the reference here."""
    runs = _both("jagged", requires_grad=True)
    outs = {}
    for key, (lib, leaves, nt) in runs.items():
        F = TF if lib is torch else EF
        with lib.no_grad():
            outs[key] = (F.softmax(nt, dim=1), nt.sum(1), nt @ lib.tensor(_W.T), nt.mean(-1, keepdim=True))
    assert not outs["ember"][1].is_nested and tuple(outs["ember"][1].shape) == (3, 4)
    for e, t in zip(outs["ember"], outs["torch"]):
        _same(e, t, 1e-5)
    _, leaves, nt = runs["ember"]
    soft, product = EF.softmax(nt, dim=1), nt @ ember.tensor(_W.T)
    (ember.nested.to_padded_tensor(soft, 0.0) * ember.nested.to_padded_tensor(product, 0.0)[..., :4]).sum().backward()
    dense = [torch.tensor(p, requires_grad=True) for p in _PARTS]
    sum((torch.softmax(x, 0) * (x @ torch.tensor(_W.T))[:, :4]).sum() for x in dense).backward()
    for leaf, ref in zip(leaves, dense):
        np.testing.assert_allclose(leaf.grad.numpy(), ref.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_strided_bmm_as_torch() -> None:
    runs = _both("strided", requires_grad=True)
    outs = {}
    for key, (lib, leaves, nt) in runs.items():
        out = lib.bmm(nt, nt.transpose(1, 2))
        lib.nested.to_padded_tensor(out, 0.0).sum().backward()
        outs[key] = (out, [leaf.grad.numpy().copy() for leaf in leaves])
    _same(outs["ember"][0], outs["torch"][0], 1e-5)
    for a, b in zip(outs["ember"][1], outs["torch"][1]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_jagged_attention_as_torch() -> None:
    """Multi-head self-attention over sequences of different lengths: jagged (B, j, H*D) -> (B, H, j, D) -> sdpa."""
    heads, dim = 2, 2
    outs = {}
    for lib, F in ((torch, TF), (ember, EF)):
        leaves = [lib.tensor(p, requires_grad=True) for p in _PARTS]
        nt = lib.nested.as_nested_tensor(leaves, layout=lib.jagged)
        q = nt.unflatten(-1, [heads, dim]).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, q, q).transpose(1, 2).flatten(-2)
        lib.nested.to_padded_tensor(out, 0.0).pow(2).sum().backward()
        outs[lib.__name__] = (out, [leaf.grad.numpy().copy() for leaf in leaves])
    _same(outs["ember"][0], outs["torch"][0], 1e-5)
    for a, b in zip(outs["ember"][1], outs["torch"][1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_from_jagged_values_get_gradients() -> None:
    outs = {}
    for lib in (torch, ember):
        values = lib.tensor(np.concatenate(_PARTS), requires_grad=True)
        nt = lib.nested.nested_tensor_from_jagged(values, lib.tensor([0, 2, 5, 6]))
        lib.nested.to_padded_tensor(nt * 3, 0.0).sum().backward()
        outs[lib.__name__] = ([c.detach().numpy() for c in nt.unbind()], values.grad.numpy())
    for a, b in zip(outs["ember"][0], outs["torch"][0]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(outs["ember"][1], outs["torch"][1])


def test_bad_input_errors() -> None:
    with pytest.raises(RuntimeError, match="same dimension"):
        ember.nested.nested_tensor([ember.ones(2, 3), ember.ones(3)])
    with pytest.raises(RuntimeError, match="one ragged dim"):
        ember.nested.nested_tensor([ember.ones(2, 3), ember.ones(3, 4)], layout=ember.jagged)
    nt = ember.nested.nested_tensor([ember.ones(2, 3), ember.ones(3, 3)])
    with pytest.raises(RuntimeError, match="batch dimension"):
        nt.sum(0)


def test_public_functions_pay_nothing_once_nested_tensors_are_gone() -> None:
    gc.collect()
    assert not _torch_function.SWITCH.on
    nt = ember.nested.nested_tensor([ember.ones(2), ember.ones(3)])
    assert _torch_function.SWITCH.on
    del nt
    gc.collect()
    assert not _torch_function.SWITCH.on
