"""NumPy's floating-point RuntimeWarnings never leave ember's ops, whatever filters the user (or pytest) adds after
the import, and NumPy's own behaviour outside ember is left as it is (``np.geterr``, the user's warnings).

torch never warns for ``log(0)``, ``x / 0``, ``exp(1000)``, ``0 * inf``, ``fft`` of inf or the mean of nothing; ember
mutes them with one warnings filter kept at the front of the list (ember/_fp_warnings.py). The sweep runs every op
spec of tests/op_specs.py at special points (0, -0, +-inf, nan, huge, tiny) under ``simplefilter("error")``.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import ember
from ember import _fp_warnings

torch = pytest.importorskip("torch")

CASES = {
    "log of zero": lambda L: L.log(L.tensor(0.0)),
    "div by zero": lambda L: L.tensor([1.0, 0.0, -1.0]) / 0,
    "exp overflow": lambda L: L.exp(L.tensor([1000.0], dtype=L.float64)),
    "0 * inf": lambda L: L.tensor([0.0]) * float("inf"),
    "inf - inf": lambda L: L.tensor([float("inf")]) - float("inf"),
    "half cast overflow": lambda L: L.tensor([1e6]).half().float(),
    "fft of inf": lambda L: L.fft.fft(L.tensor([float("inf"), 1.0])).real,
    "mean of nothing": lambda L: L.mean(L.tensor([])),
    "softmax of inf": lambda L: L.softmax(L.tensor([float("inf"), 1.0]), 0),
    "log backward at 0": lambda L: _log_grad(L),
}


def _log_grad(L):
    x = L.tensor([0.0, 1.0], requires_grad=True)
    L.log(x).sum().backward()
    return x.grad


@pytest.mark.parametrize("name", list(CASES))
def test_error_filter_added_after_import_does_not_reach_embers_ops(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # in front of everything, as -W error or a test's own filter
        got = CASES[name](ember)
    expected = CASES[name](torch)
    np.testing.assert_array_equal(got.detach().numpy(), expected.detach().numpy())


def test_filter_comes_back_after_a_list_saved_before_ember():
    """pytest collects (imports) a test module inside ``catch_warnings``: the list put back on exit lacks ember's
    filter; the next change of the list puts it first again."""
    with warnings.catch_warnings():
        warnings.filters[:] = [f for f in warnings.filters if f is not _fp_warnings.FILTER]  # a list from before
        warnings.simplefilter("error")
        assert warnings.filters[0] is _fp_warnings.FILTER
        assert ember.isinf(ember.tensor([1.0]) / 0).all()
    assert warnings.filters[0] is _fp_warnings.FILTER


def test_numpy_outside_ember_keeps_its_behaviour():
    before = np.geterr()
    ember.log(ember.tensor([0.0, -1.0]))
    assert np.geterr() == before == {"divide": "warn", "over": "warn", "under": "ignore", "invalid": "warn"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning, match="divide by zero"):
            np.array([1.0]) / 0
        with pytest.raises(RuntimeWarning, match="Mean of empty slice"):  # NumPy's own module, called by the user
            np.mean(np.array([]))
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")
        np.log(np.array([0.0]))
    assert [str(w.message) for w in log] == ["divide by zero encountered in log"]


def _sweep(dtypes, shifts) -> list:
    sys.path.insert(0, __file__.rsplit("/", 2)[0])
    from op_specs import SPECS

    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3e38, 1e-45, 1e300, 1e-310, 1.0, -1.0, 65504.0, 7e4])
    rng = np.random.default_rng(0)
    raised = []
    for spec in SPECS:
        case = spec.shapes[0]
        for dt in dtypes:
            for shift in shifts:
                try:
                    args = [spec.fixed[i](rng, case) if i in spec.fixed else None for i in range(len(case))]
                except Exception:
                    continue
                for i, shape in enumerate(case):
                    if args[i] is None:
                        values = np.resize(np.roll(special, shift * 5 + i * 3), int(np.prod(shape))).reshape(shape)
                        with np.errstate(all="ignore"):
                            args[i] = ember.tensor(values.astype(dt), requires_grad=spec.grad and dt != "float16")
                    elif isinstance(args[i], np.ndarray):
                        args[i] = ember.tensor(args[i])
                with warnings.catch_warnings():
                    warnings.simplefilter("error")
                    try:
                        out = spec.fn(*args)
                        outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,))
                                if isinstance(o, ember.Tensor) and o.requires_grad]
                        if outs:
                            sum(o.float().sum() for o in outs).backward()
                    except RuntimeWarning as warning:
                        raised.append((spec.name, dt, str(warning)))
                    except Exception:  # outside an op's domain: its own error, not this test's business
                        pass
    return raised


def test_op_specs_at_special_points_float32():
    assert _sweep(("float32",), (0,)) == []


@pytest.mark.slow
def test_op_specs_at_special_points_all_float_dtypes():
    assert _sweep(("float16", "float32", "float64"), (0, 1, 2)) == []


@pytest.mark.slow
def test_pytest_with_error_filters_and_ember_imported_at_collection(tmp_path):
    (tmp_path / "test_user.py").write_text(textwrap.dedent("""
        import numpy as np, pytest, ember
        def test_log0():
            assert ember.log(ember.tensor(0.0)).item() == float("-inf")
        def test_numpy_still_warns():
            with pytest.raises(RuntimeWarning):
                np.array([1.0]) / 0
    """))
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings =\n    error\n")
    for extra in ([], ["-W", "error"]):
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra, "test_user.py"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:]
