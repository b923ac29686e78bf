"""torch's limited-support unsigned dtypes uint16/uint32/uint64: every call below runs in torch 2.13 and in ember;
where torch computes, ember gives the same values and dtype; where torch refuses (NotImplementedError for an op
without an unsigned kernel, RuntimeError for promotion with another integer dtype), ember raises the same type."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

UNSIGNED = ["uint16", "uint32", "uint64"]


def _t(L, values, d):
    return L.tensor(values, dtype=getattr(L, d))


CALLS = {
    # creation and copies
    "tensor": lambda L, d: _t(L, [1, 2, 3], d),
    "zeros": lambda L, d: L.zeros(3, dtype=getattr(L, d)),
    "ones": lambda L, d: L.ones(2, 2, dtype=getattr(L, d)),
    "full": lambda L, d: L.full((3,), 7, dtype=getattr(L, d)),
    "empty_shape": lambda L, d: L.empty(2, 3, dtype=getattr(L, d)).shape,
    "arange": lambda L, d: L.arange(5, dtype=getattr(L, d)),
    "zeros_like": lambda L, d: L.zeros_like(_t(L, [1, 2], d)),
    "ones_like": lambda L, d: L.ones_like(_t(L, [1, 2], d)),
    "full_like": lambda L, d: L.full_like(_t(L, [1, 2], d), 9),
    "to_from_int64": lambda L, d: L.tensor([1, 2]).to(getattr(L, d)),
    "to_float32": lambda L, d: _t(L, [1, 2], d).float(),
    "to_int64": lambda L, d: _t(L, [1, 2], d).long(),
    "to_bool": lambda L, d: _t(L, [0, 2], d).bool(),
    "from_negative_int64": lambda L, d: L.tensor([-1, -2]).to(getattr(L, d)),
    "clone": lambda L, d: _t(L, [1, 2], d).clone(),
    "contiguous_of_t": lambda L, d: _t(L, [[1, 2], [3, 4]], d).t().contiguous(),
    "item_large": lambda L, d: _t(L, [60000 if d == "uint16" else 4000000000], d).item(),
    "item_top_bit": lambda L, d: _t(L, [2 ** 63 + 5 if d == "uint64" else 2 ** 15 + 1], d).item(),
    "tolist": lambda L, d: _t(L, [1, 2], d).tolist(),
    "repr": lambda L, d: repr(_t(L, [1, 2], d)).replace("ember", "torch"),
    "type": lambda L, d: _t(L, [1], d).type(),
    "numpy": lambda L, d: str(_t(L, [1, 2], d).numpy().dtype),
    "from_numpy": lambda L, d: L.from_numpy(np.array([1, 2], dtype=d)),
    "requires_grad": lambda L, d: _t(L, [1], d).requires_grad_(),
    # dtype facts
    "is_signed": lambda L, d: getattr(L, d).is_signed,
    "is_floating_point": lambda L, d: getattr(L, d).is_floating_point,
    "itemsize": lambda L, d: getattr(L, d).itemsize,
    "iinfo": lambda L, d: (L.iinfo(getattr(L, d)).min, L.iinfo(getattr(L, d)).max, L.iinfo(getattr(L, d)).bits),
    "promote_self": lambda L, d: L.promote_types(getattr(L, d), getattr(L, d)),
    "promote_int64": lambda L, d: L.promote_types(getattr(L, d), L.int64),
    "promote_uint8": lambda L, d: L.promote_types(L.uint8, getattr(L, d)),
    "promote_bool": lambda L, d: L.promote_types(L.bool, getattr(L, d)),
    "promote_float32": lambda L, d: L.promote_types(getattr(L, d), L.float32),
    "promote_float16": lambda L, d: L.promote_types(getattr(L, d), L.float16),
    "promote_complex": lambda L, d: L.promote_types(getattr(L, d), L.complex64),
    "promote_other_unsigned": lambda L, d: L.promote_types(getattr(L, d), L.uint32 if d != "uint32" else L.uint64),
    "result_type_scalar": lambda L, d: L.result_type(_t(L, [1], d), 1),
    "result_type_0d_int64": lambda L, d: L.result_type(_t(L, [1], d), L.tensor(1)),
    "can_cast": lambda L, d: (L.can_cast(getattr(L, d), L.int64), L.can_cast(L.float32, getattr(L, d))),
    # ops torch runs
    "eq": lambda L, d: _t(L, [1, 2], d) == _t(L, [1, 3], d),
    "ne_scalar": lambda L, d: _t(L, [1, 2], d) != 1,
    "mul": lambda L, d: _t(L, [3, 2], d) * _t(L, [1, 3], d),
    "mul_wraps": lambda L, d: _t(L, [2 ** 15 if d == "uint16" else 2 ** 31], d) * _t(L, [4], d),
    "mul_scalar": lambda L, d: _t(L, [3, 2], d) * 2,
    "mul_negative_scalar": lambda L, d: _t(L, [3, 2], d) * -1,
    "div": lambda L, d: _t(L, [1, 2], d) / _t(L, [1, 3], d),
    "div_scalar": lambda L, d: _t(L, [1, 2], d) / 2,
    "mul_float_scalar": lambda L, d: _t(L, [1, 2], d) * 1.5,
    "add_float_tensor": lambda L, d: _t(L, [1, 2], d) + L.tensor([0.5, 1.0]),
    "bitwise_and": lambda L, d: _t(L, [1, 2], d) & _t(L, [1, 3], d),
    "bitwise_or": lambda L, d: _t(L, [1, 2], d) | _t(L, [1, 3], d),
    "bitwise_xor": lambda L, d: _t(L, [1, 2], d) ^ _t(L, [1, 3], d),
    "sum": lambda L, d: _t(L, [1, 2, 3], d).sum(),
    "sum_dim": lambda L, d: _t(L, [[1, 2], [3, 4]], d).sum(1),
    "prod": lambda L, d: _t(L, [2, 3], d).prod(),
    "cumsum": lambda L, d: _t(L, [1, 2, 3], d).cumsum(0),
    "sort": lambda L, d: tuple(_t(L, [3, 1, 2], d).sort()),
    "unique": lambda L, d: _t(L, [3, 1, 3], d).unique(),
    "where": lambda L, d: L.where(L.tensor([True, False]), _t(L, [1, 2], d), _t(L, [3, 4], d)),
    "cat": lambda L, d: L.cat([_t(L, [1, 2], d), _t(L, [3], d)]),
    "stack": lambda L, d: L.stack([_t(L, [1, 2], d), _t(L, [3, 4], d)]),
    "index_tensor": lambda L, d: _t(L, [1, 2, 3], d)[L.tensor([0, 2])],
    "index_slice": lambda L, d: _t(L, [1, 2, 3, 4], d)[1::2],
    "index_bool": lambda L, d: _t(L, [1, 2, 3], d)[L.tensor([True, False, True])],
    "setitem": lambda L, d: (lambda x: (x.__setitem__(0, 5), x)[1])(_t(L, [1, 2, 3], d)),
    "view_t_reshape": lambda L, d: _t(L, [1, 2, 3, 4], d).view(2, 2).t().reshape(4),
    "permute": lambda L, d: _t(L, [[1, 2], [3, 4]], d).permute(1, 0),
    "unsqueeze_squeeze": lambda L, d: _t(L, [1, 2], d).unsqueeze(0).squeeze(0),
    "expand": lambda L, d: _t(L, [1, 2], d).expand(2, 2),
    "fill_": lambda L, d: _t(L, [1, 2], d).fill_(3),
    "zero_": lambda L, d: _t(L, [1, 2], d).zero_(),
    "copy_": lambda L, d: _t(L, [1, 2], d).copy_(L.tensor([3.0, 4.0])),
    # ops torch refuses
    "add": lambda L, d: _t(L, [1, 2], d) + _t(L, [1, 3], d),
    "add_scalar": lambda L, d: _t(L, [1, 2], d) + 1,
    "sub": lambda L, d: _t(L, [2, 2], d) - _t(L, [1, 1], d),
    "add_": lambda L, d: _t(L, [1, 2], d).add_(1),
    "lt": lambda L, d: _t(L, [1, 2], d) < _t(L, [1, 3], d),
    "gt_scalar": lambda L, d: _t(L, [1, 2], d) > 1,
    "floor_divide": lambda L, d: _t(L, [1, 2], d) // _t(L, [1, 3], d),
    "remainder": lambda L, d: _t(L, [1, 2], d) % _t(L, [1, 3], d),
    "bitwise_not": lambda L, d: ~_t(L, [1, 2], d),
    "shift_left": lambda L, d: _t(L, [1, 2], d) << _t(L, [1, 3], d),
    "neg": lambda L, d: -_t(L, [1, 2], d),
    "abs": lambda L, d: _t(L, [1, 2], d).abs(),
    "max": lambda L, d: _t(L, [1, 2], d).max(),
    "min": lambda L, d: _t(L, [1, 2], d).min(),
    "amax": lambda L, d: _t(L, [1, 2], d).amax(0),
    "argmax": lambda L, d: _t(L, [1, 2], d).argmax(),
    "maximum": lambda L, d: L.maximum(_t(L, [1, 2], d), _t(L, [2, 1], d)),
    "clamp": lambda L, d: _t(L, [1, 2], d).clamp(0, 1),
    "flip": lambda L, d: _t(L, [1, 2], d).flip(0),
    "matmul": lambda L, d: L.ones(2, 2, dtype=getattr(L, d)) @ L.ones(2, 2, dtype=getattr(L, d)),
    "masked_fill": lambda L, d: _t(L, [0, 2], d).masked_fill(L.tensor([True, False]), 5),
    "gather": lambda L, d: _t(L, [0, 2], d).gather(0, L.tensor([1, 0])),
    "nonzero": lambda L, d: _t(L, [0, 2], d).nonzero(),
    "sign": lambda L, d: _t(L, [0, 2], d).sign(),
    "mean": lambda L, d: _t(L, [1, 2], d).mean(),
    "add_int64": lambda L, d: _t(L, [1, 2], d) + L.tensor([1, 2]),
    "add_uint8": lambda L, d: _t(L, [1, 2], d) + L.tensor([1, 2], dtype=L.uint8),
    "mul_bool": lambda L, d: _t(L, [1, 2], d) * L.tensor([True, False]),
}


def _outcome(L, name, d):
    try:
        value = CALLS[name](L, d)
    except (NotImplementedError, RuntimeError, TypeError) as error:
        return ("raises", type(error).__name__)
    return ("value", _plain(L, value))


def _plain(L, value):
    if isinstance(value, L.Tensor):
        return (str(value.dtype).split(".")[-1], tuple(value.shape), value.tolist())
    if isinstance(value, (tuple, list)):
        return tuple(_plain(L, v) for v in value)
    if isinstance(value, L.dtype):
        return str(value).split(".")[-1]
    return value


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("d", UNSIGNED)
def test_unsigned_like_torch(d, name):
    assert _outcome(ember, name, d) == _outcome(torch, name, d)


def test_refusal_names_the_op_and_the_fix():
    with pytest.raises(NotImplementedError, match=r"add.*UInt32.*\.long\(\)"):
        ember.tensor([1], dtype=ember.uint32) + 1
    with pytest.raises(RuntimeError, match="Promotion for uint16, uint32, uint64 types is not supported.*UInt64 and Long"):
        ember.tensor([1], dtype=ember.uint64) * ember.tensor([1])
