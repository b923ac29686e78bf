"""Run every example script in its reduced form (--steps), as CI must.

Each example prints its loss; the test checks it exits cleanly and printed a finite loss, and for
the lecture networks that the loss went down between the first and last printed step.
"""
from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# name -> (steps, must the loss fall?)
CASES = {
    "two_layer_numpy.py": (30, True),
    "two_layer_tensors.py": (3, False),
    "two_layer_autograd.py": (3, False),
    "two_layer_custom_relu.py": (3, False),
    "gradient_tape.py": (5, True),
    "two_layer_nn_optim.py": (20, True),
    "two_layer_module.py": (5, False),
    "mnist_cnn.py": (40, False),
    "lstm_varying_length.py": (10, False),
    "char_transformer.py": (5, False),
    "tf1_define_then_run.py": (10, True),
    "compile_step.py": (5, False),
}


def _numbers(text: str) -> list[float]:
    values = []
    for line in text.splitlines():
        found = re.findall(r"[-+]?\d+\.?\d*(?:[eE][-+]?\d+)?", line)
        if found:
            values.append(float(found[-1]))
    return values


@pytest.mark.parametrize("name", sorted(CASES))
def test_example_runs(name: str) -> None:
    path = EXAMPLES / name
    if not path.exists():
        pytest.skip(f"{name} not present")
    steps, must_fall = CASES[name]
    env = dict(os.environ, PYTHONPATH=str(EXAMPLES.parent))
    result = subprocess.run([sys.executable, str(path), "--steps", str(steps)], cwd=EXAMPLES, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    values = _numbers(result.stdout)
    assert values, f"{name} printed no loss:\n{result.stdout}"
    assert all(math.isfinite(v) for v in values)
    if must_fall:
        assert values[-1] < values[0], result.stdout
