"""``assign`` applied directly to tensors inside ``ember.compile`` (regression).

Eagerly the ``assign`` record runs only its impl: it returns the value (cast to the target's dtype) and
writes nothing; the write is what a define-then-run graph's executor does for a Variable. A compiled
call used to record the node, and the executor then tried to write back into a traced input (which
has no state tensor) and crashed with AttributeError; on a captured tensor it would have written
where eager does not. Now the trace records what eager did.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import ember
import ember.graph  # noqa: F401  (registers assign)
from ember.ops import dispatch
from ember.ops.registry import OPS


def _assign(t: Any, v: Any) -> Any:
    return dispatch.apply(OPS["assign"], (t, v))


def test_raw_assign_on_traced_input_compiles_and_writes_nothing() -> None:
    compiled = ember.compile(_assign, fallback="raise", measure=False)
    for k in range(3):  # eager first call, then trace, then replay
        t = ember.tensor(np.arange(6.0).reshape(2, 3))
        v = ember.tensor(np.full((2, 3), 7 + k, dtype=np.int64))
        out = compiled(t, v)
        assert out.dtype is ember.float64  # the target's dtype, as eager
        np.testing.assert_array_equal(out.numpy(), np.full((2, 3), 7.0 + k))
        np.testing.assert_array_equal(t.numpy(), np.arange(6.0).reshape(2, 3))  # the input is untouched
    assert compiled.last is not None, "the replay did not run a compiled graph"


def test_raw_assign_on_captured_tensor_writes_nothing() -> None:
    captured = ember.zeros(3)
    compiled = ember.compile(lambda v: _assign(captured, v) * 2, fallback="raise", measure=False)
    for k in range(3):
        out = compiled(ember.full((3,), float(k + 1)))
        np.testing.assert_array_equal(out.numpy(), np.full(3, 2.0 * (k + 1)))
    np.testing.assert_array_equal(captured.numpy(), np.zeros(3))  # eager leaves it as it was
    assert compiled.last is not None

