"""``ember.autograd.detect_anomaly`` / ``set_detect_anomaly`` against PyTorch's behaviour.

In anomaly mode a backward function returning NaN raises ``RuntimeError: Function 'DivBackward0'
returned nan values in its 1th output.`` (torch's exact wording), after a warning that shows the
forward line that created the op; ``check_nan=False`` keeps the tracebacks but not the check.
"""
from __future__ import annotations

import warnings
from typing import Any

import pytest

import ember
from ember.autograd import anomaly_mode

torch = pytest.importorskip("torch")


def _nan_backward(lib: Any) -> tuple:
    """Run x / x at x = 0 (the forward line below is what the warning must show); return the error
    message and the warnings."""
    x = lib.tensor([0.0, 1.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with lib.autograd.detect_anomaly():
            y = x / x  # the forward call that creates DivBackward0
            with pytest.raises(RuntimeError) as info:
                y.sum().backward()
    return str(info.value), [str(w.message) for w in caught]


def test_nan_in_backward_raises_like_torch_and_shows_the_forward_line() -> None:
    got, got_warnings = _nan_backward(ember)
    want, want_warnings = _nan_backward(torch)
    assert got == want == "Function 'DivBackward0' returned nan values in its 1th output."
    forward = [w for w in got_warnings if w.startswith("Error detected in DivBackward0")]
    assert forward and "y = x / x  # the forward call that creates DivBackward0" in forward[0]
    assert "ember/ops" not in forward[0]  # the user's frames, not ember's dispatch
    assert any("Anomaly Detection has been enabled" in w for w in got_warnings)
    assert any("Error detected in DivBackward0" in w for w in want_warnings)


def test_check_nan_false_lets_nan_through() -> None:
    x = ember.tensor([0.0], requires_grad=True)
    with pytest.warns(UserWarning, match="Anomaly Detection"):
        ctx = ember.autograd.detect_anomaly(check_nan=False)
    with ctx, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (x / x).sum().backward()
    assert x.grad.isnan().all()


def test_custom_function_is_named() -> None:
    class Bad(ember.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 2

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g * float("nan")

    x = ember.ones(2, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with ember.autograd.detect_anomaly():
            with pytest.raises(RuntimeError, match="Function 'BadBackward' returned nan values in its 0th output"):
                Bad.apply(x).sum().backward()


def test_set_detect_anomaly_call_and_context_manager() -> None:
    assert not ember.autograd.is_anomaly_enabled()
    ember.autograd.set_detect_anomaly(True)
    try:
        assert ember.autograd.is_anomaly_enabled() and ember.autograd.is_anomaly_check_nan_enabled()
        with ember.autograd.set_detect_anomaly(False):
            assert not ember.autograd.is_anomaly_enabled()
        assert ember.autograd.is_anomaly_enabled()
    finally:
        ember.autograd.set_detect_anomaly(False)
    assert not ember.autograd.is_anomaly_enabled()


def test_decorator_form() -> None:
    with pytest.warns(UserWarning):
        decorate = ember.autograd.detect_anomaly()

    @decorate
    def step() -> bool:
        return ember.autograd.is_anomaly_enabled()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert step()
    assert not ember.autograd.is_anomaly_enabled()


def test_off_records_nothing() -> None:
    """Off, the forward keeps no tracebacks (the only cost is one flag test per recorded node)."""
    before = len(anomaly_mode._TRACES)
    x = ember.ones(3, requires_grad=True)
    y = (x * 2).exp().sum()
    assert len(anomaly_mode._TRACES) == before
    y.backward()
    assert x.grad is not None


def test_error_inside_backward_warns_with_the_forward_trace() -> None:
    x = ember.ones(2, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ember.autograd.detect_anomaly():
            y = x.exp()
            y.add_(1)  # exp saved its output: backward must refuse it
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                y.sum().backward()
    assert any("Error detected in ExpBackward0" in str(w.message) and "y = x.exp()" in str(w.message)
               for w in caught)
