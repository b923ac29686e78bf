"""Every op torch's OpInfo database describes, with torch's own sample inputs, run on ember and compared with torch.

See ``trust_opinfo.py`` for what is compared. The default run takes each op in one dtype (rotating over the op's
dtypes, so neighbouring ops cover different ones) with its first samples and their non-contiguous copies, plus
float64 gradients of every third op; ``-m slow`` takes every dtype, every op's gradients, more samples, torch's
extremal ``reference_inputs`` and its ``error_inputs`` (torch raises: ember must raise). Differences that are
decisions or torch's own quirks are in ``trust_opinfo_allow.py`` with their reasons; anything else fails, naming
the op, variant, dtype and sample:

    python tests/trust/trust_opinfo_cli.py --ops diag --dtypes float32     # reproduce, see every difference
"""
from __future__ import annotations

import pytest

pytest.importorskip("torch")

try:
    import trust_opinfo as T  # noqa: E402

    OPS = sorted(T.load_op_db(), key=T.op_id)
except Exception as error:  # noqa: BLE001 - torch without its testing package: nothing to compare against
    pytest.skip(f"torch's OpInfo database is not importable: {error}", allow_module_level=True)

from trust_opinfo_allow import allowed  # noqa: E402

BLOCKS = 12


def _dtype_for(index: int, op: object) -> str | None:
    names = [d for d in T.DTYPES if T.supported(op, d)]
    return names[index % len(names)] if names else None


def _check(indices: range | list, dtypes: str, which: str, limit: int, grad: bool) -> list:
    failures = []
    for i in indices:
        op = OPS[i]
        if grad and not op.supports_autograd:
            continue
        if dtypes == "rotate":
            chosen = [d for d in [_dtype_for(i, op)] if d]
        elif dtypes == "grad":
            chosen = ["float64"] if T.supported(op, "float64") else []
        else:
            chosen = [d for d in T.DTYPES if T.supported(op, d)] if which != "error" else ["float32"]
        for dt in chosen:
            for problem in T.check_op(op, dt, which, limit, grad):
                if allowed(op, dt, problem) is None:
                    failures.append(problem)
    return failures


def _blocks() -> list:
    size = -(-len(OPS) // BLOCKS)
    return [pytest.param(range(k, min(k + size, len(OPS))), id=f"ops{k}-{min(k + size, len(OPS)) - 1}")
            for k in range(0, len(OPS), size)]


def _report(failures: list) -> str:
    return f"{len(failures)} differences from torch:\n" + "\n".join(f[:600] for f in failures[:8])


@pytest.mark.parametrize("indices", _blocks())
def test_opinfo_samples_agree_with_torch(indices: range) -> None:
    failures = _check(indices, "rotate", "sample", 2, grad=False)
    assert not failures, _report(failures)


# Gradients by default on every GRAD_STRIDE-th op (a fixed third, spread over the alphabet): ~2/3 of this test's time
# in make test. test_opinfo_gradients_sweep (slow) checks every op's gradients, with up to 40 samples each.
GRAD_STRIDE = 3


@pytest.mark.parametrize("indices", _blocks())
def test_opinfo_float64_gradients_agree_with_torch(indices: range) -> None:
    failures = _check([i for i in indices if i % GRAD_STRIDE == 0], "grad", "sample", 1, grad=True)
    assert not failures, _report(failures)


@pytest.mark.slow
@pytest.mark.parametrize("indices", _blocks())
def test_opinfo_every_dtype_agrees_with_torch(indices: range) -> None:
    failures = _check(indices, "all", "sample", 40, grad=False)
    assert not failures, _report(failures)


@pytest.mark.slow
@pytest.mark.parametrize("indices", _blocks())
def test_opinfo_reference_inputs_agree_with_torch(indices: range) -> None:
    failures = _check(indices, "all", "reference", 40, grad=False)
    assert not failures, _report(failures)


@pytest.mark.slow
@pytest.mark.parametrize("indices", _blocks())
def test_opinfo_gradients_sweep(indices: range) -> None:
    failures = _check(indices, "grad", "sample", 40, grad=True)
    assert not failures, _report(failures)


@pytest.mark.slow
@pytest.mark.parametrize("indices", _blocks())
def test_opinfo_error_inputs_raise_in_ember(indices: range) -> None:
    failures = _check(indices, "all", "error", 40, grad=False)
    assert not failures, _report(failures)


def test_the_comparison_catches_an_aliasing_difference() -> None:
    """The checker is not vacuous: a function that returns a view where torch copies (diag of a matrix made a
    view) and one with a wrong value are both reported."""
    import ember

    diag = next(op for op in OPS if op.name == "diag")

    class Fake:
        name, variant_test_name = diag.name, ""
        op, method_variant, inplace_variant = diag.op, None, None
        sample_inputs, supports_autograd = diag.sample_inputs, True

    saved = ember.diag
    try:
        ember.diag = lambda x, diagonal=0: x.diagonal(diagonal)  # the old bug
        assert any("aliasing" in p for p in T.check_op(Fake, "float32", "sample", 4))
        ember.diag = lambda x, diagonal=0: saved(x, diagonal) + 1e-3  # a wrong value
        assert any("values differ" in p for p in T.check_op(Fake, "float32", "sample", 4))
    finally:
        ember.diag = saved
