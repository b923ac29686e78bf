"""``out=`` sharing memory with an input, for every function with PyTorch's ``out=`` keyword, against torch 2.13.

For each name of ``ember.ops.out_arg.OUT_FUNCTIONS`` the first argument list torch accepts on a 3x3 float32 matrix
``m`` that lives in a 256-element buffer (with a float32 result) is called with outs carved from that same buffer:
``m`` itself, a view of ``m`` with the same layout, ``m.t()``, and dense windows starting 0, 3 and 9 elements in
(so an out of another shape is resized over memory the input holds, or not). Where torch raises its "refer to a
single memory location" error ember must raise, and where torch computes ember must compute: the table of
per-function overlap rules in ``ember/ops/out_arg.py`` (TensorIterator's partial-overlap check, gathers'
no-overlap check, the functions that check after resizing, the ones that never check) is held to torch here.
Values are not compared: where torch's function does not check, its result depends on the order it overwrites
its own input (docs/testing.md, the sixth wave).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
from ember.ops.out_arg import OUT_FUNCTIONS

torch = pytest.importorskip("torch")

SKIP = {"empty", "normal", "bernoulli", "rand", "randn", "randint", "randperm", "multinomial"}
SOURCE = np.array([[2.0, 1.0, 0.5], [1.0, 3.0, 0.5], [0.5, 0.5, 4.0]], np.float32)
MESSAGE = "refer to a single memory location"


def _index(lib):
    return lib.tensor([2, 0, 1])


ARGS = [lambda L, m: (m,), lambda L, m: (m, m), lambda L, m: (m, 0), lambda L, m: (m, m, m), lambda L, m: (m, 2),
        lambda L, m: (m[0],), lambda L, m: (m[0], m[0]), lambda L, m: (m, 1, 0), lambda L, m: ([m, m],),
        lambda L, m: (m, 0, _index(L)), lambda L, m: (m, _index(L)), lambda L, m: (m, 0, _index(L), m),
        lambda L, m: (m, 1, True), lambda L, m: (m, 0.5), lambda L, m: (m, L.tensor([[0, 1], [1, 2], [2, 0]])),
        lambda L, m: (m, 1, L.tensor([[0, 1], [1, 2], [2, 0]])), lambda L, m: ((m, m),),
        lambda L, m: (m, 1, _index(L)), lambda L, m: (m[0], m[0], m[0]), lambda L, m: (m[0], _index(L))]
CONFIGS = ("same", "view", "t", 0, 3, 9)


def _first_args(fn) -> int | None:
    for k, make in enumerate(ARGS):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = fn(*make(torch, torch.tensor(SOURCE)))
        except Exception:  # noqa: BLE001 - the first argument list torch accepts
            continue
        rs = r if isinstance(r, (tuple, list)) else (r,)
        if all(isinstance(t, torch.Tensor) for t in rs) and rs[0].dtype == torch.float32 and rs[0].numel() > 0:
            return k
    return None


def _outcome(lib, fn, k: int, config) -> str:
    base = lib.zeros(256)
    base[:9] = lib.tensor(SOURCE.reshape(-1))
    base[9:] = 0.75
    m = base[:9].view(3, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            r = fn(*ARGS[k](lib, lib.tensor(SOURCE)))
        except Exception as error:  # noqa: BLE001
            return f"shape call raises {type(error).__name__}"
        results = r if isinstance(r, (tuple, list)) else (r,)

        def out_for(t, first: bool):
            if not first or t.dtype != lib.float32:
                return lib.empty(tuple(t.shape), dtype=t.dtype)
            if config == "same":
                return m
            if config == "view":
                return m.view(3, 3)
            if config == "t":
                return m.t()
            return base[config:config + t.numel()].view(tuple(t.shape))

        outs = tuple(out_for(t, i == 0) for i, t in enumerate(results))
        try:
            fn(*ARGS[k](lib, m), out=outs if isinstance(r, (tuple, list)) else outs[0])
        except Exception as error:  # noqa: BLE001 - the overlap error or another one
            return "overlap" if MESSAGE in str(error) else "raises"
    return "computes"


def _names() -> list:
    return [pytest.param(ns, name, id=f"{ns}.{name}") for ns, names in OUT_FUNCTIONS.items() for name in names
            if name not in SKIP]


@pytest.mark.parametrize("ns,name", _names())
def test_out_overlap_rules_match_torch(ns: str, name: str) -> None:
    t_fn = getattr(torch if ns == "torch" else getattr(torch, ns), name, None)
    e_fn = getattr(ember if ns == "torch" else getattr(ember, ns), name, None)
    if t_fn is None or e_fn is None:
        pytest.skip(f"{ns}.{name}: not in both libraries")
    k = _first_args(t_fn)
    if k is None:
        pytest.skip(f"{ns}.{name}: no float32 argument list among the candidates")
    for config in CONFIGS:
        want = _outcome(torch, t_fn, k, config)
        got = _outcome(ember, e_fn, k, config)
        if want == "overlap":
            assert got == "overlap", f"{ns}.{name} out={config}: torch refuses the overlap, ember {got}"
        elif want == "computes":
            assert got == "computes", f"{ns}.{name} out={config}: torch computes, ember {got}"
