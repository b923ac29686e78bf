"""Bad input is refused where PyTorch refuses it, with an error of the same family that names the op.

Each entry is one call ``fn(lib)`` run with ``lib = torch`` and ``lib = ember`` (ember speaks PyTorch's
API). Where torch raises, ember must raise too: the same class family (IndexError, ValueError,
TypeError, RuntimeError; torch's NotImplementedError is a RuntimeError) and a message naming the op
(``op``), so the user knows which call to fix. Where torch accepts the call, ember must accept it too
(no stricter checks by accident). Deliberate differences carry their reason in the entry.

Example: ``ember.arange(5).narrow(0, 3, 4)`` (past the end) used to return 2 elements silently.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import pytest

import ember

torch = pytest.importorskip("torch")


@dataclass
class Case:
    name: str
    op: str                          # what the message must name ("" when the op is the user's own code)
    fn: Callable[[Any], Any]
    ember_raises: type | None = None  # a deliberate difference in the exception class, with ``why``
    why: str = ""


def _f(lib: Any) -> Any:
    return lib.nn.functional


def _nan(lib: Any) -> Any:
    return lib.tensor([float("nan")])


CASES = [
    # views and shapes
    Case("narrow past the end", "narrow", lambda L: L.arange(5).narrow(0, 3, 4)),
    Case("narrow negative length", "narrow", lambda L: L.arange(5).narrow(0, 1, -1)),
    Case("narrow start out of range", "narrow", lambda L: L.arange(5).narrow(0, 7, 0)),
    Case("chunk(0)", "chunk", lambda L: L.arange(5).chunk(0)),
    Case("chunk(-1)", "chunk", lambda L: L.arange(5).chunk(-1)),
    Case("split(0)", "split", lambda L: L.arange(5).split(0)),
    Case("view to a wrong size", "", lambda L: L.arange(6).view(4, -1)),
    Case("reshape to a wrong size", "", lambda L: L.arange(6).reshape(4, 2)),
    Case("expand a non-singleton", "expand", lambda L: L.ones(3).expand(2, 4)),
    Case("cat mismatched sizes", "cat", lambda L: L.cat([L.ones(2, 3), L.ones(2, 4)])),
    Case("stack mismatched sizes", "stack", lambda L: L.stack([L.ones(2), L.ones(3)])),
    Case("broadcast mismatch", "", lambda L: L.ones(2, 3) + L.ones(4)),
    Case("squeeze dim out of range", "", lambda L: L.ones(2).squeeze(3)),
    Case("unsqueeze dim out of range", "", lambda L: L.ones(2).unsqueeze(3)),
    Case("transpose dim out of range", "", lambda L: L.ones(2, 2).transpose(0, 2)),
    Case("permute duplicate dims", "permute", lambda L: L.ones(2, 2).permute(0, 0)),
    Case("sum dim out of range", "", lambda L: L.ones(2).sum(2)),
    Case("softmax dim out of range", "", lambda L: L.softmax(L.ones(2), 2)),
    Case("repeat with fewer dims", "repeat", lambda L: L.ones(2, 2).repeat(2)),
    Case("flip duplicate dims", "flip", lambda L: L.ones(2, 2).flip(0, 0)),
    Case("roll shifts and dims differ", "roll", lambda L: L.ones(2, 2).roll((1, 1), (0,))),
    Case("pad crops more than the size", "pad", lambda L: _f(L).pad(L.ones(2), (-3, 0))),
    Case("setitem value of the wrong shape", "", lambda L: L.zeros(3).__setitem__(slice(None), L.ones(2))),
    # indexing
    Case("index out of range", "", lambda L: L.arange(5)[7]),
    Case("gather index out of range", "gather", lambda L: L.arange(5.).gather(0, L.tensor([7]))),
    Case("index_select out of range", "index_select", lambda L: L.arange(5.).index_select(0, L.tensor([7]))),
    Case("scatter index out of range", "scatter", lambda L: L.zeros(3).scatter(0, L.tensor([5]), L.ones(1))),
    Case("embedding index out of range", "embedding", lambda L: _f(L).embedding(L.tensor([7]), L.ones(3, 2))),
    Case("one_hot class out of range", "one_hot", lambda L: _f(L).one_hot(L.tensor([0, 5]), 3)),
    Case("cross_entropy target out of range", "cross_entropy",
         lambda L: _f(L).cross_entropy(L.ones(2, 3), L.tensor([0, 5]))),
    Case("nll_loss negative target", "nll_loss", lambda L: _f(L).nll_loss(L.ones(2, 3), L.tensor([0, -2]))),
    Case("masked_fill with a float mask", "masked_fill", lambda L: L.ones(2).masked_fill(L.ones(2), 0.0)),
    Case("masked_fill with an int mask", "masked_fill",
         lambda L: L.ones(2).masked_fill(L.ones(2, dtype=L.int64), 0.0)),
    Case("where with a float condition", "where", lambda L: L.where(L.ones(2), L.ones(2), L.zeros(2))),
    # dtypes
    Case("matmul float32 @ float64", "matmul", lambda L: L.ones(2, 2) @ L.ones(2, 2, dtype=L.float64)),
    Case("mm float32, float64", "m", lambda L: L.mm(L.ones(2, 2), L.ones(2, 2, dtype=L.float64))),
    Case("matmul int @ float", "matmul", lambda L: L.ones(2, 2, dtype=L.int64) @ L.ones(2, 2)),
    Case("bmm float32, float64", "", lambda L: L.bmm(L.ones(1, 2, 2), L.ones(1, 2, 2, dtype=L.float64))),
    Case("einsum float32, float64", "einsum", lambda L: L.einsum("ij,jk", L.ones(2, 2), L.ones(2, 2, dtype=L.float64))),
    Case("einsum elementwise product of mixed dtypes (accepted)", "",
         lambda L: L.einsum("i,i->i", L.ones(2), L.ones(2, dtype=L.float64))),
    Case("linear float32 input, float64 weight", "linear", lambda L: _f(L).linear(L.ones(2, 2),
                                                                                  L.ones(2, 2, dtype=L.float64))),
    Case("conv2d float32 input, float64 weight", "conv2d", lambda L: _f(L).conv2d(L.ones(1, 1, 3, 3),
                                                                                  L.ones(1, 1, 2, 2, dtype=L.float64))),
    Case("mm shapes", "", lambda L: L.mm(L.ones(2, 3), L.ones(4, 2))),
    Case("linear shapes", "", lambda L: _f(L).linear(L.ones(2, 3), L.ones(4, 5))),
    Case("bitwise_and on floats", "bitwise", lambda L: L.tensor([1.0]) & L.tensor([1.0])),
    Case("bitwise_not on floats", "bitwise", lambda L: L.bitwise_not(L.tensor([1.0]))),
    Case("requires_grad on an int tensor", "", lambda L: L.tensor([1, 2]).requires_grad_()),
    Case("int tensor with requires_grad", "", lambda L: L.tensor([1, 2], requires_grad=True)),
    Case("mean of ints", "mean", lambda L: L.tensor([1, 2]).mean()),
    Case("std of ints", "std", lambda L: L.tensor([1, 2]).std()),
    Case("log_softmax of ints", "softmax", lambda L: L.log_softmax(L.tensor([1, 2]), 0)),
    Case("randn with an int dtype", "", lambda L: L.randn(2, dtype=L.int64)),
    Case("rand with an int dtype", "", lambda L: L.rand(2, dtype=L.int64)),
    Case("in-place add of float into int", "", lambda L: L.zeros(3, dtype=L.int64).add_(L.ones(3))),
    Case("in-place broadcast to a bigger shape", "", lambda L: L.zeros(3).add_(L.ones(2, 3))),
    # integer division by zero: torch raises RuntimeError("ZeroDivisionError"); float division gives inf
    Case("int // 0", "", lambda L: L.tensor([1, 2]) // 0),
    Case("int // tensor with a 0", "", lambda L: L.tensor([1, 2]) // L.tensor([0, 1])),
    Case("int % 0", "", lambda L: L.tensor([1, 2]) % 0),
    Case("int % tensor with a 0", "", lambda L: L.tensor([1, 2]) % L.tensor([0, 1])),
    Case("div(rounding_mode='floor') by int 0", "", lambda L: L.div(L.tensor([1, 2]), L.tensor([0, 1]),
                                                                     rounding_mode="floor")),
    Case("div(rounding_mode='trunc') by int 0", "div", lambda L: L.div(L.tensor([1, 2]), L.tensor([0, 1]),
                                                                        rounding_mode="trunc")),
    Case("fmod by int 0", "fmod", lambda L: L.fmod(L.tensor([1, 2]), L.tensor([0, 1]))),
    Case("remainder by int 0", "remainder", lambda L: L.remainder(L.tensor([1, 2]), 0)),
    Case("floor_divide by int 0", "floor_divide", lambda L: L.floor_divide(L.tensor([1, 2]), 0)),
    Case("int / 0 is inf (accepted)", "", lambda L: L.div(L.tensor([1, 2]), L.tensor([0, 1]))),
    Case("float // 0 is inf (accepted)", "", lambda L: L.tensor([1.0]) // 0),
    # random sampling parameters
    Case("multinomial on integer weights", "multinomial", lambda L: L.multinomial(L.tensor([1, 2, 3]), 1)),
    Case("multinomial with a negative weight", "multinomial", lambda L: L.multinomial(L.tensor([1., -2., 3.]), 1)),
    Case("multinomial with a NaN weight", "multinomial", lambda L: L.multinomial(L.tensor([1., float("nan")]), 1)),
    Case("multinomial all zero", "multinomial", lambda L: L.multinomial(L.tensor([0., 0.]), 1)),
    Case("multinomial too many without replacement", "multinomial",
         lambda L: L.multinomial(L.tensor([1., 1.]), 3)),
    Case("bernoulli p > 1", "bernoulli", lambda L: L.bernoulli(L.tensor([1.5]))),
    Case("bernoulli p < 0", "bernoulli", lambda L: L.bernoulli(L.tensor([-0.5]))),
    Case("bernoulli p NaN", "bernoulli", lambda L: L.bernoulli(_nan(L))),
    Case("bernoulli with p=1.5", "bernoulli", lambda L: L.bernoulli(L.ones(2), 1.5)),
    Case("bernoulli_(1.5)", "bernoulli", lambda L: L.zeros(3).bernoulli_(1.5)),
    Case("normal with a negative std tensor", "normal", lambda L: L.normal(L.zeros(3), L.tensor([1., -1., 1.]))),
    Case("normal with a negative std", "normal", lambda L: L.normal(0.0, -1.0, size=(3,))),
    Case("normal_ with a negative std", "normal", lambda L: L.zeros(3).normal_(0, -1)),
    Case("nn.init.normal_ with a negative std", "normal", lambda L: L.nn.init.normal_(L.zeros(3), 0, -1)),
    Case("uniform_(1, 0)", "uniform_", lambda L: L.zeros(3).uniform_(1, 0)),
    Case("nn.init.uniform_(1, 0)", "uniform_", lambda L: L.nn.init.uniform_(L.zeros(3), 1, 0)),
    Case("exponential_(-1)", "exponential_", lambda L: L.zeros(3).exponential_(-1)),
    Case("random_(5, 2)", "random_", lambda L: L.zeros(3).random_(5, 2)),
    Case("randint low >= high", "randint", lambda L: L.randint(5, 5, (3,))),
    Case("randperm(-1)", "randperm", lambda L: L.randperm(-1)),
    Case("dropout p > 1", "dropout", lambda L: _f(L).dropout(L.ones(2), 1.5)),
    # creation
    Case("arange step 0", "", lambda L: L.arange(0, 5, 0)),
    Case("arange step of the wrong sign", "arange", lambda L: L.arange(0, 5, -1)),
    Case("linspace negative steps", "linspace", lambda L: L.linspace(0, 1, -1)),
    Case("zeros negative size", "", lambda L: L.zeros(-1)),
    Case("full negative size", "", lambda L: L.full((-2,), 1.0)),
    Case("randn negative size", "", lambda L: L.randn(-1)),
    Case("eye(-1)", "eye", lambda L: L.eye(-1)),
    Case("ragged nested list", "", lambda L: L.tensor([[1, 2], [3]])),
    # reductions, sorting
    Case("topk k > n", "topk", lambda L: L.arange(3.).topk(5)),
    Case("kthvalue k > n", "kthvalue", lambda L: L.arange(3.).kthvalue(5)),
    Case("max of an empty tensor", "max", lambda L: L.ones(0).max()),
    Case("argmax of an empty tensor", "argmax", lambda L: L.ones(0).argmax()),
    Case("min over an empty dim", "min", lambda L: L.ones(0, 3).min(0)),
    Case("cumsum dim out of range", "", lambda L: L.ones(2).cumsum(1)),
    Case("sort dim out of range", "", lambda L: L.ones(2).sort(1)),
    # losses and nn
    Case("binary_cross_entropy on NaN input", "binary_cross_entropy",
         lambda L: _f(L).binary_cross_entropy(_nan(L), L.tensor([1.]))),
    Case("binary_cross_entropy input > 1", "binary_cross_entropy",
         lambda L: _f(L).binary_cross_entropy(L.tensor([1.5]), L.tensor([1.]))),
    Case("binary_cross_entropy input < 0", "binary_cross_entropy",
         lambda L: _f(L).binary_cross_entropy(L.tensor([-0.5]), L.tensor([1.]))),
    Case("cross_entropy float target of the wrong shape", "cross_entropy",
         lambda L: _f(L).cross_entropy(L.ones(2, 3), L.ones(2, 4))),
    Case("mse_loss non-broadcastable shapes", "", lambda L: _f(L).mse_loss(L.ones(2, 3), L.ones(3, 2))),
    Case("conv2d channel mismatch", "conv2d", lambda L: _f(L).conv2d(L.ones(1, 3, 5, 5), L.ones(2, 4, 3, 3))),
    Case("max_pool2d kernel bigger than the input", "", lambda L: _f(L).max_pool2d(L.ones(1, 1, 2, 2), 3)),
    Case("interpolate without size or scale", "interpolate", lambda L: _f(L).interpolate(L.ones(1, 1, 2, 2))),
    Case("batch_norm with one value per channel", "", lambda L: _f(L).batch_norm(L.ones(1, 3), None, None,
                                                                               training=True)),
    Case("layer_norm shape mismatch", "", lambda L: _f(L).layer_norm(L.ones(2, 3), (4,))),
    # conversions and autograd
    Case("item of two elements", "", lambda L: L.ones(2).item()),
    Case("bool of two elements", "", lambda L: bool(L.ones(2))),
    Case("float of two elements", "", lambda L: float(L.ones(2))),
    Case("int of NaN", "", lambda L: int(L.tensor(float("nan")))),
    Case("backward of a non-scalar", "", lambda L: L.ones(2, requires_grad=True).mul(2).backward()),
    Case("backward without grad", "", lambda L: L.ones(2).sum().backward()),
    Case("in-place on a leaf that requires grad", "", lambda L: L.ones(2, requires_grad=True).add_(1)),
    Case("clamp with min > max (accepted)", "", lambda L: L.clamp(L.ones(2), 2, 1)),
    # ---- more of each class (second pass of issue 10's audit) ----
    # creation with bad sizes
    Case("ones negative size", "", lambda L: L.ones(-1)),
    Case("empty negative size", "", lambda L: L.empty(-1)),
    Case("rand negative size", "", lambda L: L.rand(2, -2)),
    Case("randint negative size", "", lambda L: L.randint(0, 5, (-1,))),
    Case("zeros tuple negative", "", lambda L: L.zeros((2, -3))),
    Case("arange to inf", "arange", lambda L: L.arange(0, float("inf"))),
    Case("arange nan", "arange", lambda L: L.arange(0, float("nan"))),
    Case("logspace negative steps", "logspace", lambda L: L.logspace(0, 1, -1)),
    Case("eye negative m", "eye", lambda L: L.eye(2, -1)),
    Case("full float size", "", lambda L: L.full((2.5,), 1.0)),
    Case("zeros float size", "", lambda L: L.zeros(2.5)),
    Case("randperm float", "", lambda L: L.randperm(3.5)),
    Case("tril_indices negative", "tril_indices", lambda L: L.tril_indices(-1, 3)),
    Case("ones(2, -1) via size list", "", lambda L: L.ones([2, -1])),
    Case("normal size negative", "", lambda L: L.normal(0.0, 1.0, size=(-1,))),
    Case("linspace steps float", "", lambda L: L.linspace(0, 1, 2.5)),
    Case("arange huge", "", lambda L: L.arange(0, 1e20)),
    Case("full with a list size containing -1", "", lambda L: L.full([3, -1], 0.0)),
    # random with bad params
    Case("randint low > high", "randint", lambda L: L.randint(5, 2, (3,))),
    Case("randint high 0", "randint", lambda L: L.randint(0, (3,))),
    Case("normal std NaN", "normal", lambda L: L.normal(0.0, float("nan"), size=(3,))),
    Case("normal std tensor NaN", "normal", lambda L: L.normal(L.zeros(2), L.tensor([1.0, float("nan")]))),
    Case("normal_ std nan", "normal", lambda L: L.zeros(3).normal_(0, float("nan"))),
    Case("multinomial 0 samples", "multinomial", lambda L: L.multinomial(L.tensor([1.0, 1.0]), 0)),
    Case("multinomial 3-D", "multinomial", lambda L: L.multinomial(L.ones(2, 2, 2), 1)),
    Case("multinomial inf weight", "multinomial", lambda L: L.multinomial(L.tensor([1.0, float("inf")]), 1)),
    Case("bernoulli on int", "bernoulli", lambda L: L.bernoulli(L.tensor([0, 1]))),
    Case("exponential_(0)", "exponential", lambda L: L.zeros(3).exponential_(0)),
    Case("exponential_ nan", "exponential", lambda L: L.zeros(3).exponential_(float("nan"))),
    Case("uniform_ nan", "uniform", lambda L: L.zeros(3).uniform_(float("nan"), 1)),
    Case("uniform_ inf range", "uniform", lambda L: L.zeros(3).uniform_(0, float("inf"))),
    Case("random_ on float with to too big", "random", lambda L: L.zeros(3).random_(0, 2**60)),
    Case("dropout p < 0", "dropout", lambda L: _f(L).dropout(L.ones(2), -0.1)),
    Case("dropout2d p > 1", "dropout", lambda L: _f(L).dropout2d(L.ones(1, 2, 2, 2), 1.5)),
    Case("alpha_dropout p > 1", "dropout", lambda L: _f(L).alpha_dropout(L.ones(2), 1.5, True)),
    Case("dropout1d on 4-D", "dropout1d", lambda L: _f(L).dropout1d(L.ones(1, 2, 3, 4), 0.5)),
    Case("dropout2d on 1-D", "dropout", lambda L: _f(L).dropout2d(L.ones(5), 0.5)),
    Case("nn.Dropout(p=2)", "dropout", lambda L: L.nn.Dropout(2.0)),
    Case("trunc_normal a > b", "", lambda L: L.nn.init.trunc_normal_(L.zeros(3), a=2.0, b=-2.0)),
    Case("kaiming_uniform_ on 1-D", "fan", lambda L: L.nn.init.kaiming_uniform_(L.zeros(3))),
    Case("xavier_uniform_ on 1-D", "fan", lambda L: L.nn.init.xavier_uniform_(L.zeros(3))),
    Case("orthogonal_ on 1-D", "", lambda L: L.nn.init.orthogonal_(L.zeros(3))),
    Case("rand_like on int", "", lambda L: L.rand_like(L.ones(2, dtype=L.int64))),
    Case("randn_like on int", "", lambda L: L.randn_like(L.ones(2, dtype=L.int64))),
    Case("Generator manual_seed negative", "", lambda L: L.Generator().manual_seed(-1)),
    # dtype mixes
    Case("addmm mixed", "", lambda L: L.addmm(L.ones(2, 2), L.ones(2, 2), L.ones(2, 2, dtype=L.float64))),
    Case("mv mixed", "", lambda L: L.mv(L.ones(2, 2), L.ones(2, dtype=L.float64))),
    Case("dot mixed", "dot", lambda L: L.dot(L.ones(2), L.ones(2, dtype=L.float64))),
    Case("dot shapes", "", lambda L: L.dot(L.ones(2), L.ones(3))),
    Case("vdot mixed", "", lambda L: L.vdot(L.ones(2), L.ones(2, dtype=L.float64))),
    Case("baddbmm mixed", "", lambda L: L.baddbmm(L.ones(1, 2, 2), L.ones(1, 2, 2), L.ones(1, 2, 2, dtype=L.float64))),
    Case("bmm int float", "", lambda L: L.bmm(L.ones(1, 2, 2, dtype=L.int64), L.ones(1, 2, 2))),
    Case("conv2d int input", "", lambda L: _f(L).conv2d(L.ones(1, 1, 3, 3, dtype=L.int64),  # computed, as torch
                                                        L.ones(1, 1, 2, 2, dtype=L.int64))),
    Case("linear bias dtype", "", lambda L: _f(L).linear(L.ones(2, 2), L.ones(2, 2), L.ones(2, dtype=L.float64))),
    Case("gather int32 index", "gather", lambda L: L.ones(3).gather(0, L.tensor([0], dtype=L.int32))),
    Case("gather float index", "gather", lambda L: L.ones(3).gather(0, L.tensor([0.0]))),
    Case("scatter int32 index", "scatter", lambda L: L.zeros(3).scatter(0, L.tensor([0], dtype=L.int32), L.ones(1))),
    Case("scatter src dtype", "scatter", lambda L: L.zeros(3).scatter(0, L.tensor([0]), L.ones(1, dtype=L.float64))),
    Case("index_select float index", "index_select", lambda L: L.ones(3).index_select(0, L.tensor([0.0]))),
    Case("embedding float indices", "embedding", lambda L: _f(L).embedding(L.tensor([0.0]), L.ones(3, 2))),
    Case("masked_select float mask", "masked_select", lambda L: L.ones(2).masked_select(L.ones(2))),
    Case("nll_loss float target", "nll_loss", lambda L: _f(L).nll_loss(L.ones(2, 3), L.tensor([0.0, 1.0]))),
    Case("cross_entropy int32 target", "", lambda L: _f(L).cross_entropy(L.ones(2, 3), L.tensor([0, 1], dtype=L.int32))),
    Case("layer_norm float64 weight", "", lambda L: _f(L).layer_norm(L.ones(2, 3), (3,), L.ones(3, dtype=L.float64))),
    Case("index with float tensor", "", lambda L: L.ones(3)[L.tensor([0.0])]),
    Case("lerp mixed", "", lambda L: L.lerp(L.ones(2), L.ones(2, dtype=L.float64), 0.5)),
    Case("addcmul into int", "", lambda L: L.zeros(2, dtype=L.int64).addcmul_(L.ones(2), L.ones(2))),
    Case("mul_ float into bool", "", lambda L: L.zeros(2, dtype=L.bool).mul_(1.5)),
    Case("copy_ across dtypes (accepted)", "", lambda L: L.zeros(2).copy_(L.ones(2, dtype=L.float64))),
    Case("matmul bool", "", lambda L: L.ones(2, 2, dtype=L.bool) @ L.ones(2, 2, dtype=L.bool)),
    Case("kron mixed (accepted)", "", lambda L: L.kron(L.ones(2), L.ones(2, dtype=L.float64))),
    Case("tensordot mixed", "", lambda L: L.tensordot(L.ones(2, 2), L.ones(2, 2, dtype=L.float64), 1)),
    Case("inner mixed", "", lambda L: L.inner(L.ones(2), L.ones(2, dtype=L.float64))),
    Case("outer mixed (accepted)", "", lambda L: L.outer(L.ones(2), L.ones(2, dtype=L.float64))),
    Case("matmul half float", "", lambda L: L.ones(2, 2, dtype=L.float16) @ L.ones(2, 2)),
    Case("cdist mixed", "", lambda L: L.cdist(L.ones(2, 2), L.ones(2, 2, dtype=L.float64))),
    # index out of range
    Case("gather negative index", "gather", lambda L: L.arange(5.).gather(0, L.tensor([-1]))),
    Case("scatter_add out of range", "scatter_add", lambda L: L.zeros(3).scatter_add(0, L.tensor([3]), L.ones(1))),
    Case("scatter negative", "scatter", lambda L: L.zeros(3).scatter(0, L.tensor([-1]), L.ones(1))),
    Case("index_add out of range", "index_add", lambda L: L.zeros(3).index_add(0, L.tensor([5]), L.ones(1))),
    Case("index_copy out of range", "index_copy", lambda L: L.zeros(3).index_copy(0, L.tensor([5]), L.ones(1))),
    Case("index_fill out of range", "index_fill", lambda L: L.zeros(3).index_fill(0, L.tensor([5]), 1.0)),
    Case("take out of range", "take", lambda L: L.zeros(3).take(L.tensor([5]))),
    Case("put_ out of range", "put", lambda L: L.zeros(3).put_(L.tensor([5]), L.ones(1))),
    Case("embedding negative index", "embedding", lambda L: _f(L).embedding(L.tensor([-1]), L.ones(3, 2))),
    Case("index_select negative", "index_select", lambda L: L.arange(5.).index_select(0, L.tensor([-1]))),
    Case("advanced index -7", "", lambda L: L.arange(5)[L.tensor([-7])]),
    Case("advanced index 5", "", lambda L: L.arange(5)[L.tensor([5])]),
    Case("list index 5", "", lambda L: L.arange(5)[[5]]),
    Case("column index out of range", "", lambda L: L.ones(2, 3)[:, 5]),
    Case("select out of range", "select", lambda L: L.ones(2, 3).select(0, 5)),
    Case("one_hot negative", "one_hot", lambda L: _f(L).one_hot(L.tensor([-1]), 3)),
    Case("take_along_dim out of range", "", lambda L: L.take_along_dim(L.ones(3), L.tensor([5]))),
    Case("scatter_reduce out of range", "scatter_reduce", lambda L: L.zeros(3).scatter_reduce(0, L.tensor([5]), L.ones(1), "sum")),
    Case("index_put_ out of range", "index_put", lambda L: L.zeros(3).index_put_((L.tensor([5]),), L.ones(1))),
    Case("setitem out of range", "", lambda L: L.zeros(3).__setitem__(L.tensor([5]), 1.0)),
    Case("setitem int out of range", "", lambda L: L.zeros(3).__setitem__(5, 1.0)),
    Case("gather wrong ndim", "gather", lambda L: L.ones(3, 3).gather(0, L.tensor([0]))),
    Case("nll_loss target >= C", "nll_loss", lambda L: _f(L).nll_loss(L.ones(2, 3), L.tensor([0, 3]))),
    Case("cross_entropy with ignore_index ok", "", lambda L: _f(L).cross_entropy(L.ones(2, 3), L.tensor([0, -100]))),
    Case("embedding padding_idx out of range", "padding_idx",
         lambda L: _f(L).embedding(L.tensor([0]), L.ones(3, 2), padding_idx=5), ValueError,
         "torch asserts (AssertionError, stripped under python -O); ember raises ValueError naming the bound"),
    Case("nn.Embedding padding_idx out of range", "padding_idx", lambda L: L.nn.Embedding(3, 2, padding_idx=5)),
    Case("bincount negative", "bincount", lambda L: L.bincount(L.tensor([-1, 2]))),
    Case("unravel out of range", "", lambda L: L.unravel_index(L.tensor([7]), (2, 3))),
    Case("diagonal dims equal", "", lambda L: L.ones(2, 2).diagonal(0, 0, 0)),
    Case("index_select on 2-D index", "index_select", lambda L: L.ones(3).index_select(0, L.tensor([[0]]))),
    Case("masked_fill mask shape", "", lambda L: L.ones(2, 3).masked_fill(L.ones(3, 2, dtype=L.bool), 0.0)),
    Case("repeat_interleave negative", "", lambda L: L.ones(3).repeat_interleave(L.tensor([1, -1, 1]))),
    Case("split sizes not summing", "split", lambda L: L.ones(5).split([2, 2])),
    Case("unflatten wrong sizes", "unflatten", lambda L: L.ones(6).unflatten(0, (4, 2))),
    Case("movedim duplicate", "movedim", lambda L: L.ones(2, 3).movedim((0, 0), (0, 1))),
    Case("tile negative", "", lambda L: L.ones(2).tile((-1,))),
    Case("expand negative", "expand", lambda L: L.ones(2).expand(-2)),
    Case("view -1 twice", "", lambda L: L.ones(6).view(-1, -1)),
    Case("narrow on 0-d", "narrow", lambda L: L.tensor(1.0).narrow(0, 0, 1)),
    Case("unfold step 0", "", lambda L: L.ones(5).unfold(0, 2, 0)),
    Case("unfold size too big", "", lambda L: L.ones(5).unfold(0, 7, 1)),
    Case("cumsum on empty dim ok", "", lambda L: L.ones(0).cumsum(0)),
    Case("topk negative k", "topk", lambda L: L.arange(3.).topk(-1)),
    Case("kthvalue 0", "kthvalue", lambda L: L.arange(3.).kthvalue(0)),
    Case("quantile q > 1", "quantile", lambda L: L.arange(3.).quantile(1.5)),
    Case("histc min > max", "histc", lambda L: L.arange(3.).histc(bins=3, min=2, max=1)),
    Case("histc bins 0", "histc", lambda L: L.arange(3.).histc(bins=0)),
    Case("pow int negative exponent", "", lambda L: L.tensor([2, 3]) ** -1),
    Case("pow int tensor negative exponent", "", lambda L: L.pow(L.tensor([2, 3]), L.tensor([-1, 1]))),
    Case("sqrt of int (accepted)", "", lambda L: L.sqrt(L.tensor([4]))),
    Case("gcd of floats", "gcd", lambda L: L.gcd(L.tensor([4.0]), L.tensor([2.0]))),
    Case("bitwise shift floats", "", lambda L: L.tensor([1.0]) << 1),
    Case("logical ops on floats (accepted)", "", lambda L: L.logical_and(L.tensor([1.0]), L.tensor([0.0]))),
    Case("lerp weight out of [0,1] (accepted)", "", lambda L: L.lerp(L.ones(2), L.zeros(2), 2.0)),
    Case("clamp with no bounds", "clamp", lambda L: L.clamp(L.ones(2))),
    Case("softmax of ints", "softmax", lambda L: L.softmax(L.tensor([1, 2]), 0)),
    Case("cumprod int", "", lambda L: L.tensor([1, 2]).cumprod(0)),
    Case("var correction > n (accepted)", "", lambda L: L.ones(2).var(correction=5)),
    Case("std_mean int", "std", lambda L: L.std_mean(L.tensor([1, 2]))),
    Case("norm int", "norm", lambda L: L.tensor([1, 2]).norm()),
    Case("cross_entropy label_smoothing > 1", "label_smoothing", lambda L: _f(L).cross_entropy(L.ones(2, 3), L.tensor([0, 1]), label_smoothing=1.5)),
    Case("kl_div bad reduction", "reduction", lambda L: _f(L).kl_div(L.ones(2), L.ones(2), reduction="avg")),
    Case("mse_loss bad reduction", "", lambda L: _f(L).mse_loss(L.ones(2), L.ones(2), reduction="avg")),
    Case("nll_loss 3-D input 1-D target", "", lambda L: _f(L).nll_loss(L.ones(2, 3, 4), L.tensor([0, 1]))),
    Case("max_pool2d stride 0", "", lambda L: _f(L).max_pool2d(L.ones(1, 1, 4, 4), 2, stride=0)),
    Case("avg_pool2d pad > half kernel", "", lambda L: _f(L).avg_pool2d(L.ones(1, 1, 4, 4), 2, padding=2)),
    Case("conv2d stride 0", "", lambda L: _f(L).conv2d(L.ones(1, 1, 4, 4), L.ones(1, 1, 2, 2), stride=0)),
    Case("conv2d negative padding", "", lambda L: _f(L).conv2d(L.ones(1, 1, 4, 4), L.ones(1, 1, 2, 2), padding=-1)),
    Case("conv2d groups mismatch", "", lambda L: _f(L).conv2d(L.ones(1, 3, 4, 4), L.ones(2, 1, 2, 2), groups=2)),
    Case("conv1d 2-D weight", "", lambda L: _f(L).conv1d(L.ones(1, 1, 4), L.ones(1, 2))),
    Case("Linear negative features", "", lambda L: L.nn.Linear(-1, 2)),
    Case("Conv2d zero channels", "", lambda L: L.nn.Conv2d(0, 2, 3)),
    Case("Conv2d groups not dividing", "", lambda L: L.nn.Conv2d(3, 2, 3, groups=2)),
    Case("BatchNorm2d on 2-D", "", lambda L: L.nn.BatchNorm2d(3)(L.ones(2, 3))),
    Case("interpolate scale 0", "", lambda L: _f(L).interpolate(L.ones(1, 1, 2, 2), scale_factor=0.0)),
    Case("interpolate bad mode", "", lambda L: _f(L).interpolate(L.ones(1, 1, 2, 2), size=3, mode="cubic")),
    Case("pad reflect too big", "", lambda L: _f(L).pad(L.ones(1, 1, 3), (3, 3), mode="reflect")),
    Case("embedding weight 1-D", "", lambda L: _f(L).embedding(L.tensor([0]), L.ones(3))),
    Case("optim lr negative", "", lambda L: L.optim.SGD([L.ones(1, requires_grad=True)], lr=-1)),
    Case("Adam betas > 1", "", lambda L: L.optim.Adam([L.ones(1, requires_grad=True)], betas=(1.5, 0.9))),
    Case("Adam eps negative", "", lambda L: L.optim.Adam([L.ones(1, requires_grad=True)], eps=-1e-8)),
    Case("SGD momentum negative", "", lambda L: L.optim.SGD([L.ones(1, requires_grad=True)], lr=0.1, momentum=-1)),
    Case("SGD nesterov without momentum", "", lambda L: L.optim.SGD([L.ones(1, requires_grad=True)], lr=0.1, nesterov=True)),
    Case("weight_decay negative", "", lambda L: L.optim.AdamW([L.ones(1, requires_grad=True)], weight_decay=-1)),
    Case("optimizer with a non-leaf", "", lambda L: L.optim.SGD([L.ones(1, requires_grad=True) * 2], lr=0.1)),
    Case("optimizer empty params", "", lambda L: L.optim.SGD([], lr=0.1)),
    Case("StepLR step_size 0?", "", lambda L: L.optim.lr_scheduler.StepLR(L.optim.SGD([L.ones(1, requires_grad=True)], lr=0.1), 0)),
    Case("DataLoader batch_size 0", "", lambda L: L.utils.data.DataLoader([1, 2], batch_size=0)),
    Case("DataLoader negative workers", "", lambda L: L.utils.data.DataLoader([1, 2], num_workers=-1)),
    Case("random_split lengths", "", lambda L: L.utils.data.random_split([1, 2, 3], [2, 2])),
    Case("clip_grad_norm_ negative max (accepted)", "", lambda L: L.nn.utils.clip_grad_norm_([L.ones(1, requires_grad=True)], -1.0)),
    # devices: torch's own message is an AssertionError ("Torch not compiled with CUDA enabled")
    Case(".to('cuda') without a GPU", "CUDA", lambda L: L.ones(2).to("cuda"), RuntimeError,
         "ember says RuntimeError 'no CUDA device is available' with the fix; torch asserts"),
    Case(".cuda() without a GPU", "CUDA", lambda L: L.ones(2).cuda(), RuntimeError,
         "as .to('cuda')"),
    Case("zeros(device='cuda') without a GPU", "CUDA", lambda L: L.zeros(2, device="cuda"), RuntimeError,
         "as .to('cuda')"),
]


def _family(exc: BaseException) -> type:
    for cls in (IndexError, ValueError, TypeError, RuntimeError):
        if isinstance(exc, cls):
            return cls
    return type(exc)


def _outcome(lib: Any, case: Case) -> BaseException | None:
    try:
        case.fn(lib)
    except Exception as exc:  # noqa: BLE001 - the point is to see what each library raises
        return exc
    return None


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_bad_input_is_refused_like_torch(case: Case) -> None:
    want = _outcome(torch, case)
    got = _outcome(ember, case)
    if want is None and case.ember_raises is None:
        assert got is None, f"{case.name}: torch accepts this call but ember raised {type(got).__name__}: {got}"
        return
    assert got is not None, f"{case.name}: torch raises {type(want).__name__}: {want}; ember returned silently"
    expected = case.ember_raises or _family(want)
    assert isinstance(got, expected), (f"{case.name}: torch raises {type(want).__name__} ({want}); ember raised "
                                       f"{type(got).__name__} ({got}), expected a {expected.__name__}")
    if case.op:
        assert case.op.lower() in str(got).lower(), f"{case.name}: the message does not name {case.op!r}: {got}"


def test_cuda_message_says_no_device_and_the_fix() -> None:
    with pytest.raises(RuntimeError, match="no CUDA device is available") as info:
        ember.ones(2).to("cuda")
    assert "device='cpu'" in str(info.value) and "cuda.is_available()" in str(info.value)


def test_custom_function_with_the_wrong_number_of_gradients() -> None:
    for lib in (torch, ember):
        class Mul(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, x: Any, y: Any, k: float) -> Any:
                return x * y * k

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                return (g,)  # one gradient for three inputs

        x = lib.ones(2, requires_grad=True)
        with pytest.raises(RuntimeError, match=r"MulBackward returned an incorrect number of gradients \(expected 3, got 1\)"):
            Mul.apply(x, x * 1, 2.0).sum().backward()


def test_custom_function_extra_trailing_none_is_accepted() -> None:
    class Scale(ember.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, k: float) -> Any:
            return x * k

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g * 2.0, None, None  # PyTorch allows extra trailing Nones

    x = ember.ones(2, requires_grad=True)
    Scale.apply(x, 2.0).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_custom_function_gradient_of_the_wrong_shape() -> None:
    class Bad(ember.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 2

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return ember.ones(3)

    with pytest.raises(RuntimeError, match=r"BadBackward returned an invalid gradient at index 0 - got \[3\] but "
                                           r"expected shape compatible with \[2\]"):
        Bad.apply(ember.ones(2, requires_grad=True)).sum().backward()
