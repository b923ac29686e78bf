"""``ember.linalg`` (and the top-level / Tensor spellings) against torch 2.13, from the tables in
linalg_cases.py: values and dtypes in float64 and float32, gradients in float64 for random cotangents, special
inputs (singular, zero, identity, rank-deficient, inf), and errors (type and message)."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

from linalg_cases import CASES, ERRORS, SPECIAL, Case  # noqa: E402


def _tuple(x: object) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _np(t: object) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        return t.detach().numpy()
    if isinstance(t, ember.Tensor):
        return np.asarray(t.detach().numpy())
    return np.asarray(t)


def _inputs(case: Case) -> list:
    return case.inputs(np.random.default_rng(zlib.crc32(case.name.encode())))


def _run(case: Case, lib: object, arrays: list, dtype: str, grad: bool) -> tuple:
    make = torch.tensor if lib is torch else ember.tensor
    tdtype = getattr(lib, dtype)
    diff = case.diff if case.diff is not None else tuple(range(len(arrays)))
    tensors = []
    for i, a in enumerate(arrays):
        if a.dtype.kind == "f":
            tensors.append(make(a, dtype=tdtype, requires_grad=grad and i in diff))
        else:
            tensors.append(make(a))
    return tensors, _tuple(case.fn(lib, *tensors))


def _compare(case: Case, got: tuple, want: tuple, rtol: float, atol: float, what: str) -> None:
    assert len(got) == len(want), f"{case.name}: {len(got)} outputs, torch has {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g_np, w_np = _np(g), _np(w)
        assert g_np.shape == w_np.shape, f"{case.name} {what} output {i}: shape {g_np.shape} vs torch {w_np.shape}"
        if isinstance(w, torch.Tensor):
            assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1], \
                f"{case.name} {what} output {i}: dtype {g.dtype} vs torch {w.dtype}"
        scale = max(1.0, float(np.nanmax(np.abs(w_np), initial=0, where=np.isfinite(w_np)))) if w_np.size else 1
        np.testing.assert_allclose(g_np.astype(np.float64), w_np.astype(np.float64), rtol=rtol, atol=atol * scale,
                                   equal_nan=True, err_msg=f"{case.name} {what} output {i}")


@pytest.mark.parametrize("case", CASES + SPECIAL, ids=lambda c: c.name)
def test_values_and_gradients(case: Case) -> None:
    arrays = _inputs(case)
    t_in, t_out = _run(case, torch, arrays, "float64", case.grad)
    e_in, e_out = _run(case, ember, arrays, "float64", case.grad)
    _compare(case, e_out, t_out, case.rtol, case.atol, "float64")
    if not case.grad:
        return
    rng = np.random.default_rng(1)
    vs = [rng.standard_normal(tuple(o.shape)) if isinstance(o, torch.Tensor) and o.dtype.is_floating_point
          and o.requires_grad else None for o in t_out]
    sources = [i for i, t in enumerate(t_in) if t.requires_grad]
    t_loss = sum((o * torch.tensor(v)).sum() for o, v in zip(t_out, vs) if v is not None)
    e_loss = sum((o * ember.tensor(v)).sum() for o, v in zip(e_out, vs) if v is not None)
    t_grads = torch.autograd.grad(t_loss, [t_in[i] for i in sources], allow_unused=True)
    e_grads = ember.autograd.grad(e_loss, [e_in[i] for i in sources], allow_unused=True)
    for i, tg, eg in zip(sources, t_grads, e_grads):
        tg_np = np.zeros(arrays[i].shape) if tg is None else tg.numpy()
        eg_np = np.zeros(arrays[i].shape) if eg is None else _np(eg)
        scale = max(1.0, float(np.abs(tg_np[np.isfinite(tg_np)]).max(initial=0)))
        np.testing.assert_allclose(eg_np, tg_np, rtol=max(case.rtol, 1e-7), atol=1e-8 * scale, equal_nan=True,
                                   err_msg=f"{case.name}: gradient of input {i}")


@pytest.mark.parametrize("case", [c for c in CASES if c.float32], ids=lambda c: c.name)
def test_float32_values(case: Case) -> None:
    arrays = _inputs(case)
    _, t_out = _run(case, torch, arrays, "float32", False)
    _, e_out = _run(case, ember, arrays, "float32", False)
    _compare(case, e_out, t_out, 2e-3, 2e-4, "float32")


@pytest.mark.parametrize("name,fn,make", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_like_torch(name: str, fn: object, make: object) -> None:
    arrays = make()
    with pytest.raises(Exception) as t_err:
        fn(torch, *[torch.tensor(a) for a in arrays])
    with pytest.raises(RuntimeError) as e_err:
        fn(ember, *[ember.tensor(a) for a in arrays])
    if isinstance(t_err.value, torch.linalg.LinAlgError):
        assert isinstance(e_err.value, ember.linalg.LinAlgError), f"{name}: {type(e_err.value)}"
    head = str(t_err.value).split("\n")[0][:40]
    assert head in str(e_err.value), f"{name}: ember says {e_err.value!s:.200}, torch says {t_err.value!s:.200}"
