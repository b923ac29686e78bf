"""Scalar chains on NumPy scalars (ember/graph/passes/scalar_eval.py): a compiled Adam step's bias corrections run as
Python operators on NumPy scalars once their first run matched the kernels bit for bit; the same bits as the kernels at
special step counts (0, huge, inf, nan, -0.0), other optimizers' chains, and the kernels kept where a chain has an op
the scalar form does not translate or where the first comparison fails."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.graph.ir import Graph
from ember.graph.executor import _node_callable
from ember.graph.passes import scalar_chains
from ember.graph.passes.scalar_chains import ScalarChainKernel, merge_scalar_chains, run_per_distinct_inputs
from ember.graph.passes.share_scalar import node_key
from ember.ops.registry import OPS
from train_steps import classification_step


def _train(make_opt, fast: bool, monkeypatch, steps: int = 5) -> tuple:
    if not fast:
        monkeypatch.setattr(scalar_chains, "_fast_form", lambda *a: None)
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(8, 16), ember.nn.ReLU(), ember.nn.Linear(16, 3))
    opt = make_opt(model.parameters())
    x, t = ember.randn(5, 8), ember.tensor(np.arange(5) % 3)

    step = classification_step(model, opt)

    fn = ember.compile(step, fallback="raise", measure=False)
    losses = [float(fn(x, t)) for _ in range(steps)]
    monkeypatch.undo()
    return losses, [p.detach().numpy().copy() for p in model.parameters()], fn


def _chains(fn) -> list:
    return [n.op.impl for n in fn.last.executable.nodes if isinstance(n.op.impl, ScalarChainKernel)]


OPTIMIZERS = {
    "adam": lambda ps: ember.optim.Adam(ps, 1e-2),
    "adam-amsgrad-wd": lambda ps: ember.optim.Adam(ps, 1e-2, betas=(0.8, 0.95), weight_decay=0.1, amsgrad=True),
    "adamw": lambda ps: ember.optim.AdamW(ps, 3e-3),
    "adamax": lambda ps: ember.optim.Adamax(ps, 1e-2),
    "adagrad": lambda ps: ember.optim.Adagrad(ps, 1e-2, lr_decay=0.01),
    "rmsprop": lambda ps: ember.optim.RMSprop(ps, 1e-2),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_chains_on_scalars_give_the_kernels_bits(name, monkeypatch) -> None:
    losses, params, fn = _train(OPTIMIZERS[name], True, monkeypatch)
    ref_losses, ref_params, _ = _train(OPTIMIZERS[name], False, monkeypatch)
    assert losses == ref_losses
    for p, q in zip(params, ref_params):
        assert p.tobytes() == q.tobytes()
    chains = _chains(fn)
    assert chains
    # every op of these chains is translatable: the scalar form runs (Adamax too since optim24 replays torch's
    # single-tensor op sequence; its bias correction had been NumPy's power, which kept the kernels)
    assert all(k.fast is not None and k.checked for k in chains)


def test_adam_compiled_with_scalar_chain_follows_eager(monkeypatch) -> None:
    losses, params, _ = _train(OPTIMIZERS["adam"], True, monkeypatch, steps=6)
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(8, 16), ember.nn.ReLU(), ember.nn.Linear(16, 3))
    opt = ember.optim.Adam(model.parameters(), 1e-2)
    x, t = ember.randn(5, 8), ember.tensor(np.arange(5) % 3)
    eager = []
    for _ in range(6):
        loss = ember.nn.functional.cross_entropy(model(x), t)
        opt.zero_grad()
        loss.backward()
        opt.step()
        eager.append(float(loss))
    np.testing.assert_allclose(losses, eager, rtol=1e-6)
    for p, q in zip(params, model.parameters()):
        np.testing.assert_allclose(p, q.detach().numpy(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("counts", [
    [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 2.0, 1.0], [16777216.0, 3.0e38, 7.0, -0.0],
    [np.inf, -np.inf, np.nan, 0.0], [-1.0, -2.0, 1e-45, 0.5],
], ids=["zeros", "mixed", "huge", "inf-nan", "negative-tiny"])
def test_adam_chain_special_step_counts(counts, monkeypatch) -> None:
    _, _, fn = _train(OPTIMIZERS["adam-amsgrad-wd"], True, monkeypatch, steps=3)
    (kernel,) = _chains(fn)
    assert kernel.members == 4 and kernel.n_inputs == 1
    arrays = [np.asarray(c, np.float32) for c in counts]
    with np.errstate(all="ignore"):
        slow = run_per_distinct_inputs(arrays, kernel.n_inputs, kernel.members, kernel.run)
        fast = kernel._run_fast(arrays)
    assert len(slow) == len(fast)
    for a, b in zip(slow, fast):
        assert type(a) is type(b) and a.dtype == b.dtype and a.tobytes() == b.tobytes(), (a, b)
    owners = [b for b in fast if isinstance(b, np.ndarray)]
    assert len({id(b) for b in owners}) == len(owners)  # no two members share a writable 0-d array


def _two_chains(op_name: str) -> tuple:
    g = Graph()
    a, b = g.add_input((), ember.float64), g.add_input((), ember.float64)
    outs = [g.add_node(OPS[op_name], (g.add_node(OPS["add"], (s, 1.0), {})[0],), {})[0] for s in (a, b)]
    nodes = merge_scalar_chains(g.nodes, lambda n: _node_callable(n, np)[0], {o.id for o in outs}, node_key)
    (node,) = nodes
    return node.op.impl, [np.asarray(2.0), np.asarray(3.0)]


def test_untranslatable_chain_keeps_its_kernels() -> None:
    kernel, arrays = _two_chains("exp")
    assert kernel.fast is None
    assert [float(v) for v in kernel(np, *arrays)] == [float(np.exp(3.0)), float(np.exp(4.0))]


def test_scalar_form_dropped_when_its_first_run_differs() -> None:
    kernel, arrays = _two_chains("neg")
    assert kernel.fast is not None
    kernel.fast = lambda ins: [np.float64(0.5)]  # a wrong scalar form: the first comparison must catch it
    first = kernel(np, *arrays)
    assert kernel.fast is None and not kernel.checked
    assert [float(v) for v in first] == [-3.0, -4.0]
    assert [float(v) for v in kernel(np, *arrays)] == [-3.0, -4.0]
