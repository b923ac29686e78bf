"""The fifth wave: random programs run eagerly and through ``ember.compile``, compared (trust_compile_diff.py).

Areas (trust_cases_compile.py): ``compile_values`` (any dtype, special values, non-contiguous inputs, in-place
writes into arguments and views, no autograd), ``compile_grad`` (float inputs that require grad: the compiled call
is one autograd node; gradients compared) and ``compile_train`` (a whole training step with an optimizer, compiled
vs an identical eager model: loss, parameters, buffers, gradients and optimizer state after each step) and
``onnx_values`` (programs exported to ONNX and run in onnxruntime vs eager). ``compile_values`` also saves each
traced graph, loads it (``ember.graph.load``) and runs it.
Reproduce one case with ``python tests/trust/trust_fuzz_cli.py compile_values --seed N``.
"""
from __future__ import annotations

import numpy as np
import pytest

from trust_cases_compile import GENERATORS
from trust_compile_diff import compare, compare_train

DEFAULT = {"compile_values": 150, "compile_grad": 100, "compile_train": 30, "onnx_values": 100}
CHUNK = 50
SLOW_FACTOR = 12


def _compare(area: str, prog: object) -> str | None:
    if area == "compile_train":
        return compare_train(prog)
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
