"""UserWarnings that torch 2.13 prints in ordinary training scripts, printed by ember at the same calls (found by
torchdiffeq's bouncing-ball example and a probe of scheduler/optimizer calls):

- ``float(t)`` / ``complex(t)`` of a tensor that requires grad, with grad mode on, warns once per process
  ("Converting a tensor with requires_grad=True to a scalar ..."); ``int``, ``item``, ``bool``, ``no_grad`` and
  ``detach`` do not.
- ``lr_scheduler.step()`` before any ``optimizer.step()`` since the first scheduler was made warns with torch's
  words; steps taken before the scheduler existed do not count (torch starts counting when it patches ``step``).
"""
from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

import ember
from ember import _tensor_methods

CASES = ["float", "complex", "int", "item", "bool", "float_no_grad", "float_detach", "float_twice"]

PROBE = """
import warnings
def counts(torch):
    out = {}
    for case in %r:
        import importlib
        x = torch.tensor(2.0, requires_grad=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            reset(torch)
            if case == "float": float(x * 2)
            if case == "complex": complex(x)
            if case == "int": int(x)
            if case == "item": x.item()
            if case == "bool": bool(x)
            if case == "float_no_grad":
                with torch.no_grad(): float(x)
            if case == "float_detach": float(x.detach())
            if case == "float_twice": float(x); float(x)
        out[case] = [str(i.message).split(chr(10))[0] for i in w]
    return out
""" % (CASES,)


def _ember_counts():
    namespace: dict = {}
    exec(PROBE, namespace)  # noqa: S102 - the probe above, written here

    def reset(_):
        _tensor_methods._SCALAR_WARNED[0] = False

    namespace["reset"] = reset
    return namespace["counts"](ember)


def test_scalar_of_grad_tensor_warns_as_torch_measured():
    got = _ember_counts()
    msg = "Converting a tensor with requires_grad=True to a scalar may lead to unexpected behavior."
    expected = {case: [] for case in CASES}
    expected.update(float=[msg], complex=[msg], float_twice=[msg])  # torch 2.13, one fresh process per case
    assert got == expected


@pytest.mark.slow
def test_scalar_of_grad_tensor_warnings_equal_torch_in_fresh_processes():
    pytest.importorskip("torch")
    torch_counts = {}
    for case in CASES:  # torch warns once per process: a fresh one per case
        script = PROBE.replace("%r" % (CASES,), repr([case])) + "\nimport torch\ndef reset(_): pass\nprint(counts(torch))"
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
        torch_counts.update(eval(out))  # noqa: S307 - our own probe's printout
    assert _ember_counts() == torch_counts


def _scheduler_warnings(lib, step_before: bool, step_between: bool) -> list[str]:
    w = lib.nn.Parameter(lib.ones(2))
    opt = lib.optim.SGD([w], lr=0.1)
    if step_before:
        opt.step()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sched = lib.optim.lr_scheduler.StepLR(opt, 1)
        if step_between:
            opt.step()
        sched.step()
        lib.optim.lr_scheduler.ExponentialLR(opt, 0.9).step()  # a second scheduler: already counting
    return [str(x.message) for x in caught]


@pytest.mark.parametrize("step_before", [False, True])
@pytest.mark.parametrize("step_between", [False, True])
def test_scheduler_call_order_warning_equals_torch(step_before, step_between):
    torch = pytest.importorskip("torch")
    assert _scheduler_warnings(ember, step_before, step_between) == _scheduler_warnings(torch, step_before,
                                                                                        step_between)
