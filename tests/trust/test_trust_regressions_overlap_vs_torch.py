"""The sixth wave's named regressions: one case per class of difference from torch 2.13, each compared by the
trust runner (values, dtypes, the inputs after the call, and errors: where torch raises, ember must raise).

Classes (docs/testing.md, "The sixth wave"): writes whose inputs overlap the written memory, ``out=`` views of
another shape, non-numbers as fill values, Python numbers converted into a dtype, index_* source shapes,
in-place matrix products that would broadcast self, lists of tensors in ``tensor()``.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from trust_diff import Case, compare  # noqa: E402

X = {"x": (np.arange(9.0).reshape(3, 3) - 2, "float32")}
F = {"x": (np.arange(36.0) - 7, "float64")}
HEAD = "b = x.clone(); f = b.view(-1)\n"

CASES = {
    # 1. in-place elementwise ops reading memory they partially overwrite (torch: TensorIterator's check)
    "add_ shifted": ("out = x[1:].add_(x[:-1])", X),
    "mul_ transposed": ("out = x.mul_(x.t())", X),
    "add_ a row of itself": ("out = x.add_(x[0])", X),
    "add_ a 0-d element of itself": ("out = x.add_(x[0, 0])", X),
    "sub_ alpha shifted": ("out = x[1:].sub_(x[:-1], alpha=2)", X),
    "copy_ transposed": ("x.t().copy_(x); out = x", X),
    "copy_ shifted": ("x[1:].copy_(x[:-1]); out = x", X),
    "addcmul_ overlapping tensor2": ("out = x.addcmul_(x[0] * 1, x[1])", X),
    "lerp_ overlapping end": ("out = x.lerp_(x.t(), 0.5)", X),
    "clamp_ overlapping bound": ("out = x.clamp_(min=x[0])", X),
    "atan2_ overlapping": ("out = x.atan2_(x.t())", X),
    "eq_ overlapping": ("out = x.eq_(x.t())", X),
    # the same memory, same layout, and non-dense pairs are fine (torch computes; so does ember)
    "add_ itself": ("out = x.add_(x)", X),
    "add_ a same-layout view": ("out = x.add_(x.view(3, 3))", X),
    "copy_ itself through a view": ("x[...] = x; out = x", X),
    # 2. gathers and scatters refuse any shared memory
    "index_copy_ itself": ("out = x.index_copy_(0, L.tensor([2, 0, 1]), x)", X),
    "index_add_ itself": ("out = x.index_add_(1, L.tensor([1, 1, 0]), x)", X),
    "scatter_ itself": ("out = x.scatter_(0, L.tensor([[1, 0, 1]]), x)", X),
    "scatter_add_ itself": ("out = x.scatter_add_(0, L.tensor([[1, 0, 1]]), x)", X),
    "index_put_ a row of itself": ("out = x.index_put_((L.tensor([1, 0]),), x[2])", X),
    "put_ a row of itself": ("out = x.put_(L.tensor([4, 0, 8]), x[0])", X),
    "setitem advanced from itself": ("x[[2, 0, 1]] = x; out = x", X),
    "setitem int and list from its row": ("x[0, [0, 1]] = x[0, 1:]; out = x", X),
    # 3. setitem with basic indices: copy_'s partial check; a broadcast value is expanded first (not checked)
    "setitem shifted rows": ("x[:2] = x[1:]; out = x", X),
    "setitem broadcast row": ("x[...] = x[0]; out = x", X),
    # 4. out= overlapping an input
    "exp out transposed": ("out = L.exp(x, out=x.t())", X),
    "neg out shifted": ("out = L.neg(x[1:], out=x[:2])", X),
    "maximum out overlapping": ("out = L.maximum(x, x.t(), out=x)", X),
    "where out transposed": ("out = L.where(x > 0, x, x.t(), out=x)", X),
    "cumsum out transposed": ("out = L.cumsum(x, 1, out=x.t())", X),
    "index_select out of itself": ("out = L.index_select(x, 0, L.tensor([2, 0]), out=x[:2])", X),
    "cat out of itself": ("out = L.cat([x[:1], x[1:]], out=x)", X),
    "max dim out overlapping": ("out = L.max(x, 1, out=(x[0], L.empty(3, dtype=L.int64)))", X),
    "exp out itself": ("out = L.exp(x, out=x)", X),
    # checked after the resize: the resized out no longer meets the input
    "cumsum out resized off the input": (HEAD + "r = f[7:10].view(3, 1); w = f[0:9].view(3, 3)\n"
                                         "L.cumsum(r, 0, out=w); out = b", F),
    "cat out resized off the input": (HEAD + "r = f[7:10].view(3, 1); w = f[0:9].view(3, 3)\n"
                                      "L.cat([r, r], out=w); out = b", F),
    # 5. out= a view of another shape: resized within the memory it views
    "exp out view shrinks": (HEAD + "w = f[27:36].view(3, 3)\nL.exp(L.zeros(3, dtype=L.float64), out=w)\n"
                             "out = (b, w, w.stride(), w.storage_offset())", F),
    "add out non-contiguous view restrided": (HEAD + "w = b.view(6, 6)[1:4, 1:4]\n"
                                              "L.add(L.zeros(9, dtype=L.float64), 1, out=w)\nw.mul_(3)\n"
                                              "out = (b, w, w.stride())", F),
    # 6. non-numbers as fill values
    "setitem None": ("x[0] = None; out = x", X),
    "setitem mask None": ("x[x > 0] = None; out = x", X),
    "setitem list holding None": ("x[0] = [1, None, 2]; out = x", X),
    "fill_ None": ("out = x.fill_(None)", X),
    "masked_fill_ None": ("out = x.masked_fill_(x > 0, None)", X),
    "index_fill_ None": ("out = x.index_fill_(0, L.tensor([0]), None)", X),
    "full None": ("out = L.full((2,), None)", {}),
    "where None": ("out = L.where(x > 0, x, None)", X),
    # 7. Python numbers into a dtype
    "full 1e10 int8": ("out = L.full((2,), 1e10, dtype=L.int8)", {}),
    "full nan int64": ("out = L.full((2,), float('nan'), dtype=L.int64)", {}),
    "full -1 uint8": ("out = L.full((2,), -1, dtype=L.uint8)", {}),
    "fill_ -129 uint8": ("out = L.zeros(2, dtype=L.uint8).fill_(-129)", {}),
    "fill_ inf int32": ("out = L.zeros(2, dtype=L.int32).fill_(float('inf'))", {}),
    "fill_ complex with zero imaginary": ("out = L.zeros(2, dtype=L.int16).fill_(3 + 0j)", {}),
    "setitem -1 uint8": ("out = L.zeros(2, dtype=L.uint8); out[0] = -1", {}),
    "setitem 1e10 int16": ("out = L.zeros(2, dtype=L.int16); out[0] = 1e10", {}),
    "tensor -1 uint8": ("out = L.tensor([-1, 3], dtype=L.uint8)", {}),
    "tensor 255.9 uint8": ("out = L.tensor([255.9], dtype=L.uint8)", {}),
    "tensor -0.9 uint8": ("out = L.tensor([-0.9], dtype=L.uint8)", {}),
    "tensor 2**63 bfloat16": ("out = L.tensor([2**63, 1], dtype=L.bfloat16)", {}),
    "tensor 2**63 int64": ("out = L.tensor([2**63, 1], dtype=L.int64)", {}),
    "tensor complex float": ("out = L.tensor([1 + 0j], dtype=L.float32)", {}),
    "full 1e10 float16 raises": ("out = L.full((2,), 1e10, dtype=L.float16)", {}),
    "full 1e10 float16 one element is inf": ("out = L.full((1,), 1e10, dtype=L.float16)", {}),
    # 8. index_* sources must be shaped as the input
    "index_add_ a row": ("out = x.index_add_(0, L.tensor([0]), L.ones(3))", X),
    "index_add_ dim past the source": ("out = x.index_add_(1, L.tensor([0, 1, 2]), L.ones(3))", X),
    "index_add_ a scalar": ("out = x.index_add_(0, L.tensor([0]), L.tensor(1.))", X),
    "index_copy_ a scalar": ("out = x.index_copy_(0, L.tensor([0, 1]), L.tensor(1.))", X),
    "index_copy_ a row": ("out = x.index_copy_(0, L.tensor([0]), L.ones(3))", X),
    "index_reduce_ slice shape": ("out = x.index_reduce_(0, L.tensor([0]), L.ones(1, 2), 'prod')", X),
    "put_ numel": ("out = x.put_(L.tensor([0, 1]), L.ones(3))", X),
    "take_along_dim ranks": ("out = L.take_along_dim(x, L.tensor([0]), 0)", X),
    # 9. in-place products that would broadcast self
    "addmm_ broadcast": ("out = x.addmm_(x, x[:, :1])", X),
    "addmv_ broadcast": ("out = x.addmv_(x, x[0])", X),
    "addr_ broadcast": ("out = x.addr_(x[0], x[0, :1])", X),
    "baddbmm_ broadcast": ("out = x[None].baddbmm_(x[None], x[None, :, :1])", X),
    "addbmm_ broadcast": ("out = x.addbmm_(x[None], x[None, :, :1])", X),
    # 10. tensors inside a list are read as single numbers
    "tensor of vectors": ("out = L.tensor([L.tensor([1, 2]), L.tensor([3, 4])])", {}),
    "tensor of one-element tensors": ("out = L.tensor([L.tensor([1.5]), L.tensor(2.0, dtype=L.float64)])", {}),
    # 11. searchsorted/bucketize follow torch's probes where NaN is involved or the sequence is unsorted
    "searchsorted NaN value": ("out = L.searchsorted(s, v)", {"s": (np.array([0.0, 1.0, 2.0]), "float32"),
                                                           "v": (np.array([np.nan, 1.0]), "float32")}),
    "searchsorted NaN in the sequence": ("out = L.searchsorted(s, v, right=True)",
                                         {"s": (np.array([[0.0, np.nan], [1.0, 2.0]]), "float64"),
                                          "v": (np.array([[0.0, 5.0], [np.nan, 1.5]]), "float64")}),
    "searchsorted unsorted": ("out = L.searchsorted(s, v)", {"s": (np.array([3, 1, 2, 0]), "int64"),
                                                              "v": (np.array([0, 1, 2, 3, 4]), "int64")}),
    "bucketize NaN boundary": ("out = L.bucketize(v, s)", {"s": (np.array([-1.0, np.nan, 1.0]), "float32"),
                                                            "v": (np.array([-2.0, 0.0, 2.0, np.nan]), "float32")}),
    # 12. integer arange with float arguments
    "arange int64 fractional step": ("out = L.arange(0, 5, 1.5, dtype=L.int64)", {}),
    "arange int64 step truncating to 0": ("out = L.arange(0, 1, 0.3, dtype=L.int64)", {}),
    "arange int32 fractional step": ("out = L.arange(0, 5, 0.3, dtype=L.int32)", {}),
    "arange int8 fractional start": ("out = L.arange(-3.5, 3, 1.5, dtype=L.int8)", {}),
    # 13. detach()/.data/view(dtype) of a view share its storage: storage_offset and as_strided see it
    "detach of a row: storage_offset, as_strided": (
        "v = x[1].detach(); out = (v.storage_offset(), v.as_strided((2,), (1,), 0))", X),
    "as_strided fill through a detached row": ("v = x[1].detach(); v.as_strided((2,), (1,), 0).fill_(7); out = x", X),
    ".data of a row": ("v = x[1].data; out = (v.storage_offset(), v.as_strided((2,), (1,), 1))", X),
    "view of a detached view": ("v = x[1:].detach()[1]; out = (v.storage_offset(), v.as_strided((2,), (1,), 0))", X),
    "view(dtype) of an offset view": ("v = x[:, 1:].view(L.int32); out = (v.storage_offset(), v.stride())", X),
    "view(dtype) to a wider dtype at an odd offset": ("v = x[:, 1:3].view(L.float64); out = v", X),
    "view(dtype) to a wider dtype with an odd row stride": ("v = x[:, :2].view(L.complex64); out = v",
                                                             {"x": (np.arange(6.0).reshape(2, 3), "float32")}),
    # 14. clamp keeps x where it equals the bound (signed zeros), and promotes before clamping with tensor bounds
    "clamp min 0 keeps -0": ("out = L.clamp(x, 0)", {"x": (np.array([-0.0, 0.0, -1.0, 1.0]), "float32")}),
    "clamp max 0 keeps -0": ("out = x.clamp_(max=0.0)", {"x": (np.array([-0.0, 0.0, -1.0, 1.0]), "float64")}),
    "clamp scalar and tensor bounds keep -0": ("out = L.clamp(x, 0, L.tensor(1.0))",
                                               {"x": (np.array([-0.0, 0.0, -1.0, 2.0]), "float32")}),
    "clamp uint8 with an int and a float tensor bound": ("out = L.clamp(x, -1, L.tensor(1.0))",
                                                         {"x": (np.array([253, 0, 1, 7]), "uint8")}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_sixth_wave_regression(name: str) -> None:
    code, inputs = CASES[name]
    problem = compare(Case(code, dict(inputs)))
    assert problem is None, f"{name}: {problem}"
