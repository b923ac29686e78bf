"""``torch.Tensor.<method>`` is one object, before and while overrides live, side by side with torch 2.13.

Libraries build ``__torch_function__`` tables at import, keyed on ``torch.Tensor.matmul`` and friends
(linear_operator's ``_HANDLED_FUNCTIONS``, PyTorch's ``HANDLED_FUNCTIONS`` recipe), and a handler calls ``func``
to run the default (an outer mode must see that call). ember's Tensor carries its overridable method forms only
while an override lives; the class-level read must not show the swap (``ember._torch_function.TensorMeta``).
Each scenario runs with ``L = torch`` and ``L = ember``; the recorded outcomes must be equal.
"""
from __future__ import annotations

import gc

import pytest

import ember
from ember import _torch_function

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _overrides_end_with_the_test():
    yield
    if _torch_function.SWITCH.on or _torch_function.SWITCH.carry:
        gc.collect()
    assert not _torch_function.SWITCH.on and not _torch_function.SWITCH.carry, "an override outlived its test"


def _import_time_table(L):
    """A table read before any override lives, then a Tensor-like object handed to a plain tensor's method,
    operator and function: ``func`` is the very object the table holds."""
    table = {L.Tensor.matmul: "matmul", L.Tensor.add: "add", L.matmul: "fn-matmul"}
    seen = []

    class Wrapped:
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(table.get(func, "missed " + getattr(func, "__name__", "?")))
            return "handled"

    x = L.ones(2, 2)
    results = [x @ Wrapped(), x.matmul(Wrapped()), L.matmul(x, Wrapped()), x + Wrapped(), x.add(Wrapped())]
    return results, seen, [L.Tensor.matmul is m for m in table if getattr(m, "__name__", "") == "matmul"][:1]


def _func_called_inside_a_mode_reaches_the_outer_mode(L):
    """A handler that calls ``func`` re-dispatches: the outer mode sees the inner mode's call."""
    from torch.overrides import TorchFunctionMode as TorchMode
    Mode = TorchMode if L is torch else ember.overrides.TorchFunctionMode
    log = []

    class Logging(Mode):
        def __init__(self, tag):
            super().__init__()
            self.tag = tag

        def __torch_function__(self, func, types, args=(), kwargs=None):
            log.append((self.tag, func.__name__, func is L.Tensor.sum))
            return func(*args, **(kwargs or {}))

    x = L.ones(3)
    with Logging("outer"), Logging("inner"):
        x.sum()
    return log


def _subclass_reads_the_same_objects(L):
    class Sub(L.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return super().__torch_function__(func, types, args, kwargs)

    got = [Sub.add is L.Tensor.add, L.Tensor.clip is L.Tensor.clamp, L.Tensor.clip.__name__,
           L.Tensor.expand_as.__name__]
    del Sub
    return got


@pytest.mark.parametrize("scenario", [_import_time_table, _func_called_inside_a_mode_reaches_the_outer_mode,
                                      _subclass_reads_the_same_objects])
def test_tensor_methods_keep_their_identity_like_torch(scenario) -> None:
    assert scenario(ember) == scenario(torch)


def test_plain_programs_run_the_plain_methods() -> None:
    """No override alive: instances call Tensor's own methods (the metaclass touches class-level reads only)."""
    x = ember.ones(2)
    assert x.add.__func__ is _torch_function._ORIGINAL["add"]
    assert ember.Tensor.add is _torch_function._METHOD_WRAPPERS["add"]
    assert type(ember.Tensor).__name__ == "TensorMeta"
