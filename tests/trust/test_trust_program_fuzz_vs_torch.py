"""The program fuzzer (tools/fuzz_vs_torch.py): seeded random programs of 3-8 statements run by ember and torch.

Every statement's live tensors are compared (dtype, shape, requires_grad, values, NaN/inf positions, zero signs,
view-or-copy); a mismatch of a silent kind must be a triaged class of tools/fuzz_known.py, whose entries give
their reasons. Reproduce a failure with ``python tools/fuzz_vs_torch.py 1 --start SEED`` (it prints a minimal
script). The default run covers a fixed block of seeds in a few seconds; ``-m slow`` sweeps 3,000 more.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ember  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
from fuzz_known import SILENT, known  # noqa: E402
from fuzz_program_gen import Program, generate  # noqa: E402
from fuzz_vs_torch import classify  # noqa: E402


def _unexplained(seeds: range) -> list:
    bad = []
    for seed in seeds:
        prog = generate(np.random.default_rng(seed), torch)
        for m in classify(prog, torch, ember):
            if m.kind in SILENT and known(m, prog) is None:
                bad.append(f"seed {seed}: {m.key}: {m.detail}\n{prog.source()}")
    return bad


def test_fuzzed_programs_agree_with_torch():
    bad = _unexplained(range(0, 30))  # ~3 s (the first programs also pay kernel loads)
    assert not bad, "\n\n".join(bad[:3])


@pytest.mark.slow
@pytest.mark.parametrize("start", range(10_000, 13_000, 500))
def test_fuzzed_programs_agree_with_torch_slow(start):
    bad = _unexplained(range(start, start + 500))
    assert not bad, "\n\n".join(bad[:3])


def test_the_fuzzer_sees_a_wrong_value_and_a_copy_for_a_view(monkeypatch):
    """The comparison can fail: a planted wrong neg and a transpose that copies are both reported."""
    prog = Program([("a0", np.array([[1.0, -2.0], [0.0, 3.0]]), "float32", False)],
                   [("x0 = a0", "layout.none"), ("v0 = L.neg(x0)", "unary.neg"), ("v1 = x0.t()", "view.t"),
                    ("v1.mul_(2)", "inplace.mul_")])
    assert classify(prog, torch, ember) == []
    monkeypatch.setattr(ember, "neg", lambda x: x * 1)
    monkeypatch.setattr(ember.Tensor, "t", lambda self: self.transpose(0, 1).clone())
    kinds = {m.kind: m.tag for m in classify(prog, torch, ember)}
    assert kinds.get("values") == "unary.neg" and kinds.get("aliasing") == "view.t", kinds


def test_a_program_prints_as_a_runnable_script():
    prog = generate(np.random.default_rng(3), torch)
    source = prog.source()
    compile(source, "<reproducer>", "exec")
    assert "for L in (torch, ember,):" in source and len(prog.lines) >= 3
