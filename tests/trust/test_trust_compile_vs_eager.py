"""The fifth wave: random programs run eagerly and through ``ember.compile``, compared (trust_compile_diff.py).

Areas (trust_cases_compile.py): ``compile_values`` (any dtype, special values, non-contiguous inputs, in-place
writes into arguments and views, no autograd), ``compile_grad`` (float inputs that require grad: the compiled call
is one autograd node; gradients compared) and ``compile_train`` (a whole training step with an optimizer, compiled
vs an identical eager model: loss, parameters, buffers, gradients and optimizer state after each step) and
``onnx_values`` (programs exported to ONNX and run in onnxruntime vs eager). ``compile_values`` also saves each
traced graph, loads it (``ember.graph.load``) and runs it. ``gradcheck_f64``: eager gradients of float64 programs
(views, in-place writes, indexing) against central differences of their own forward.
Reproduce one case with ``python tests/trust/trust_fuzz_cli.py compile_values --seed N``.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember

from trust_cases_compile import GENERATORS
from trust_compile_diff import Program, compare, compare_gradcheck, compare_train

DEFAULT = {"compile_values": 100, "compile_grad": 60, "compile_train": 20, "onnx_values": 60, "gradcheck_f64": 40}
CHUNK = 20
SLOW_FACTOR = 12


def _compare(area: str, prog: object) -> str | None:
    if area == "compile_train":
        return compare_train(prog)
    if area == "gradcheck_f64":
        return compare_gradcheck(prog)
    if area == "onnx_values":
        pytest.importorskip("onnxruntime")
        from trust_onnx_diff import compare_onnx

        return compare_onnx(prog)
    return compare(prog)


def _run(area: str, seeds: range) -> list:
    failures = []
    for seed in seeds:
        prog = GENERATORS[area](np.random.default_rng(seed))
        problem = _compare(area, prog)
        if problem is not None:
            failures.append(f"seed {seed}: {prog}\n  {problem}")
    return failures


def _blocks(factor: int = 1, offset: int = 0) -> list:
    return [pytest.param(area, start, id=f"{area}-{start}") for area, count in DEFAULT.items()
            for start in range(offset, offset + count * factor, min(CHUNK, count))]


@pytest.mark.parametrize("area,start", _blocks())
def test_compiled_agrees_with_eager(area: str, start: int) -> None:
    failures = _run(area, range(start, start + min(CHUNK, DEFAULT[area])))
    assert not failures, f"{len(failures)} differences from eager:\n" + "\n".join(failures[:3])


@pytest.mark.slow
@pytest.mark.parametrize("area,start", _blocks(SLOW_FACTOR, 100_000))
def test_compiled_agrees_with_eager_sweep(area: str, start: int) -> None:
    failures = _run(area, range(start, start + min(CHUNK, DEFAULT[area])))
    assert not failures, f"{len(failures)} differences from eager:\n" + "\n".join(failures[:3])


def test_the_comparisons_catch_a_wrong_gradient_and_a_wrong_compiled_value(monkeypatch):
    """The checkers can fail: a broken ``exp`` gradient; a compiled call that drops its writes into arguments."""
    from ember.ops.registry import OPS

    prog = Program("t = x0_g[1:]\nout = t.exp() * 2", {"x0_g": (np.array([0.3, -0.7, 1.1]), "float64", "strided")},
                   grad=True)
    assert compare_gradcheck(prog) is None

    class WrongExp(ember.autograd.Function):  # exp's value, a gradient 1.5x too large
        @staticmethod
        def forward(ctx, x):
            y = OPS["exp"].impl(np, x.detach().numpy())
            ctx.save_for_backward(ember.tensor(y))
            return ember.tensor(y)

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y * 1.5

    monkeypatch.setattr(ember.Tensor, "exp", lambda self: WrongExp.apply(self))
    assert "central difference" in (compare_gradcheck(prog) or "")
    monkeypatch.undo()
    from ember.graph.compile import _Compiled

    writes = Program("x0.add_(1)\nout = x0 * 2", {"x0": (np.array([1.0, -0.0]), "float32", "transposed")})
    assert compare(writes) is None
    monkeypatch.setattr(_Compiled, "_write_arguments", lambda self, leaves, results: list(results[:self.n_results]))
    assert "after the call" in (compare(writes) or "")  # the first class this wave found, put back
