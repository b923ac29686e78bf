"""Tensor printouts as PyTorch's, character for character: a suffix (``dtype=...``, ``requires_grad=True``,
``device=...``) that would end past the line width starts a new line under ``tensor(`` (pytorch/tutorials'
pruning tutorial prints such tensors), and under ``ember run`` dtypes and sizes are named ``torch.``."""
import os
import subprocess
import sys

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

CASES = [
    (np.array([0.2235, -0.1963, 0.0621, -0.2584, -0.2310, -0.1722]), "float32", True),
    (np.array([0.2235, -0.1963, 0.0621, -0.2584, -0.2310]), "float32", True),
    (np.linspace(-1, 1, 7), "float64", True),
    (np.linspace(-1, 1, 8), "float64", False),
    (np.linspace(-1, 1, 6), "float16", True),
    (np.linspace(-3, 3, 12).reshape(3, 4), "float64", True),
    (np.linspace(-3, 3, 40).reshape(5, 8), "float32", True),
    (np.arange(20), "int32", False),
    (np.arange(13), "int16", False),
    (np.array([0.5]), "float64", True),
    (np.array(1.25), "float64", True),
]


def _pair(values, dtype, grad):
    e = ember.tensor(values, dtype=getattr(ember, dtype), requires_grad=grad)
    t = torch.tensor(values, dtype=getattr(torch, dtype), requires_grad=grad)
    return e, t


@pytest.mark.parametrize("case", range(len(CASES)))
def test_repr_wraps_suffixes_like_torch(case):
    e, t = _pair(*CASES[case])
    assert repr(e) == repr(t).replace("torch.", "ember.")


def test_parameter_and_narrow_linewidth_like_torch():
    values = np.linspace(-1, 1, 6)
    pe, pt = ember.nn.Parameter(ember.tensor(values)), torch.nn.Parameter(torch.tensor(values))
    assert repr(pe) == repr(pt).replace("torch.", "ember.")
    try:
        ember.set_printoptions(linewidth=40)
        torch.set_printoptions(linewidth=40)
        for values, dtype, grad in CASES[:4]:
            e, t = _pair(values, dtype, grad)
            assert repr(e) == repr(t).replace("torch.", "ember.")
    finally:
        ember.set_printoptions(linewidth=80)
        torch.set_printoptions(profile="default")


def test_names_are_torch_under_ember_run(tmp_path):
    script = tmp_path / "show.py"
    script.write_text("import torch\n"
                      "x = torch.ones(2, 3, dtype=torch.float64)\n"
                      "print(x.dtype, x.shape, repr(x))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", "import sys; from ember.cli import main; sys.exit(main())", "run",
                          str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    t = torch.ones(2, 3, dtype=torch.float64)
    assert out.stdout.strip() == f"{t.dtype} {t.shape} {t!r}"
    assert repr(ember.float64) == "ember.float64" and repr(ember.ones(2).shape) == "ember.Size([2])"


SHAPES = [(0,), (3, 0), (1,), (17,), (2, 9), (3, 2, 11), (2, 2, 2, 5), (1100,), (40, 30), (7, 300), (3, 4, 100),
          (2, 3, 4, 5, 6)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kind", ["float", "wide", "int", "bool", "special"])
def test_body_layout_like_torch(shape, kind):
    rng = np.random.default_rng(hash((shape, kind)) % 2 ** 32)
    a = rng.standard_normal(shape)
    if kind == "wide":
        a = a * 10.0 ** rng.integers(-6, 6, size=shape)
    elif kind == "int":
        a = (a * 1000).astype(np.int64)
    elif kind == "bool":
        a = a > 0
    elif kind == "special" and a.size:
        flat = a.reshape(-1)
        flat[:: max(1, a.size // 4)] = np.array([np.nan, np.inf, -np.inf, -0.0])[
            np.arange(len(flat[:: max(1, a.size // 4)])) % 4]
    e = ember.tensor(a.astype(np.float32) if a.dtype == np.float64 else a)
    t = torch.tensor(a.astype(np.float32) if a.dtype == np.float64 else a)
    assert repr(e) == repr(t).replace("torch.", "ember.")
