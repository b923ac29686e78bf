"""torch's deprecated positional overloads ``x.add_(alpha, other)``, ``sub``, ``addcmul_(value, t1, t2)``,
``addcdiv`` (and ``torch.add(x, alpha, y)`` ...), which older optimizers and tutorials use
(``p.data.add_(-learning_rate, p.grad.data)`` in pytorch/tutorials' char-RNN classifier): torch 2.13 still runs them,
warning once per process; ember refused them with a TypeError."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

import ember

CALLS = {
    "add_": lambda lib, a, b, c: a.clone().add_(-0.5, b),
    "add": lambda lib, a, b, c: a.add(2, b),
    "sub_": lambda lib, a, b, c: a.clone().sub_(0.25, b),
    "sub": lambda lib, a, b, c: a.sub(1.5, b),
    "addcmul_": lambda lib, a, b, c: a.clone().addcmul_(0.5, b, c),
    "addcmul": lambda lib, a, b, c: a.addcmul(-2, b, c),
    "addcdiv_": lambda lib, a, b, c: a.clone().addcdiv_(0.5, b, c),
    "addcdiv": lambda lib, a, b, c: a.addcdiv(3.0, b, c),
    "torch.add": lambda lib, a, b, c: lib.add(a, -0.5, b),
    "torch.sub": lambda lib, a, b, c: lib.sub(a, 2, b),
    "torch.addcmul": lambda lib, a, b, c: lib.addcmul(a, 0.5, b, c),
    "torch.addcdiv": lambda lib, a, b, c: lib.addcdiv(a, 0.5, b, c),
    "new_form": lambda lib, a, b, c: a.add(b, alpha=3),
    "scalar_other": lambda lib, a, b, c: a.add(2),
}


def _operands(lib):
    return lib.tensor([0.0, 1.5, -2.0]), lib.tensor([1.0, 2.0, 3.0]), lib.tensor([4.0, -0.5, 2.0])


@pytest.mark.parametrize("call", sorted(CALLS))
def test_deprecated_overload_values_like_torch(call):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = CALLS[call](ember, *_operands(ember))
        want = CALLS[call](torch, *_operands(torch))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_optimizer_style_update_keeps_gradient_flow():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    (x.add(0.5, x * x)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 3.0])


PROBE = """
import warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    a = lib.ones(2)
    a.add_(0.5, a); a.addcmul_(0.5, a, a); lib.add(a, 2, a)
print([str(m.message) for m in w])
"""


@pytest.mark.slow  # two fresh interpreters (~9 s); the fast twin below checks ember's side in this process
def test_warns_once_per_process_with_torch_words():
    outs = []
    for lib in ("ember", "torch"):
        code = f"import {lib} as lib\n" + PROBE
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        outs.append(out.stdout.replace(" (Triggered internally", "\x00").split("\x00")[0])
    assert outs[0].strip().rstrip("]").rstrip("'") == outs[1].strip().rstrip("]").rstrip("'")
    assert "This overload of add_ is deprecated" in outs[0] and outs[0].count("deprecated") == 1


# torch 2.13's text for the first deprecated call (captured from torch by the slow test's probe)
TORCH_ADD_ = ("This overload of add_ is deprecated:\n\tadd_(Number alpha, Tensor other)\nConsider using one of the "
              "following signatures instead:\n\tadd_(Tensor other, *, Number alpha = 1)")


def test_warns_once_fast_twin(monkeypatch):
    import warnings

    from ember import _deprecated_overloads

    monkeypatch.setattr(_deprecated_overloads, "_WARNED", [False])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        a = ember.ones(2)
        a.add_(0.5, a)
        a.addcmul_(0.5, a, a)
        ember.add(a, 2, a)
    assert [str(m.message) for m in w] == [TORCH_ADD_]
