"""Memory planning updates a state in place only when nothing that may alias it is read later; it
trusts that ops ``ember.graph.passes.memory.returns_fresh`` accepts never return (a view of) an
input's memory. This checks that promise for every such op the spec table exercises (it found einsum's
diagonals and .real/.imag, now excluded), and that a
training step with momentum updates every weight and momentum buffer in place."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.graph.passes import memory
from ember.ops.registry import OPS
from op_harness import make_inputs
from op_specs import SPECS

_FRESH_SPECS = [s for s in SPECS if any(memory.returns_fresh(OPS[o]) for o in s.ops if o in OPS)]


@pytest.mark.parametrize("spec", _FRESH_SPECS, ids=lambda s: s.name)
def test_fresh_category_ops_return_new_memory(spec, monkeypatch) -> None:
    seen = []
    for name in spec.ops:
        op = OPS.get(name)
        if op is None or not memory.returns_fresh(op):
            continue
        original = op.impl

        def spy(xp, *args, _original=original, **kwargs):
            out = _original(xp, *args, **kwargs)
            seen.append((args, out))
            return out

        monkeypatch.setattr(op, "impl", spy)
    dtype = (*spec.float_dtypes, *spec.complex_dtypes, *spec.int_dtypes)[0]
    for case in spec.shapes:
        arrays = make_inputs(spec, case, dtype)
        spec.fn(*[ember.from_numpy(np.ascontiguousarray(a)) for a in arrays])
    for args, out in seen:
        outs = out if isinstance(out, tuple) else (out,)
        for o in outs:
            for a in args:
                if isinstance(o, np.ndarray) and isinstance(a, np.ndarray) and o.size and a.size:
                    assert not np.shares_memory(o, a), f"{spec.name}: an output shares memory with an input"


def test_momentum_step_updates_every_weight_in_place() -> None:
    model = ember.nn.Sequential(ember.nn.Linear(512, 512), ember.nn.BatchNorm1d(512), ember.nn.Linear(512, 10))
    opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)

    def step(x, y):
        loss = ember.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    compiled = ember.compile(step, measure=False)
    x, y = ember.randn(32, 512), ember.randint(0, 10, (32,))
    for _ in range(3):
        compiled(x, y)
    # Every parameter and momentum buffer is updated in place. Before "nn" ops counted as fresh,
    # linear's output was taken for a possible view of its weight, and so was everything computed from it
    # by nn ops (batch_norm, linear, log_softmax...): the first layer's weights were copied back instead.
    updated = {label for node in compiled.last.executable.nodes for label in node.attrs.get("inplace", ())}
    wanted = [p for p in model.parameters()] + [opt.state[p]["momentum_buffer"] for p in model.parameters()]
    labels = {id(v.tensor): v.label() for v in compiled.last.graph.states}
    assert len(wanted) == 12 and all(labels[id(t)] in updated for t in wanted)
