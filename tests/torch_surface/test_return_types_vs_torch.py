"""``torch.return_types``: every call that returns a named tuple gives the type torch 2.13 gives (name, fields,
``_out`` twin under ``out=``), and the types behave as torch's struct sequences (construction, read-only fields,
printout, equality, pickling, ``torch.save``/``torch.load`` both ways, pytrees, compile)."""
from __future__ import annotations

import contextlib
import io
import pickle

import numpy as np
import pytest

import ember
from ember import dtypes, return_types
from ember.func.pytree import tree_flatten, tree_unflatten

torch = pytest.importorskip("torch")

X = [[3., 1., 2., 5.], [0., 4., 6., 1.5], [2.5, 8., 9., 7.]]  # no ties: which index wins one differs
S = [[4., 1., 0.5], [1., 3., 0.2], [0.5, 0.2, 2.]]
I64 = "L.empty(0, dtype=L.int64)"

# (expression over L = torch or ember, x (3x4), s (3x3 symmetric positive definite))
CALLS = [
    "L.max(x, 1)", "x.max(1)", "L.max(x, dim=1, keepdim=True)", "L.min(x, 1)", "x.min(dim=0)",
    "L.sort(x)", "x.sort(1, descending=True)", "L.sort(x, stable=True)", "x.sort(stable=True, dim=0)",
    "L.topk(x, 2)", "x.topk(1, dim=0)", "L.kthvalue(x, 2)", "x.kthvalue(1, 0)", "L.mode(x, 1)", "x.mode()",
    "L.median(x, 1)", "x.median(dim=0)", "L.nanmedian(x, 1)", "x.nanmedian(0)", "L.cummax(x, 1)", "x.cummin(0)",
    "L.cummin(x, 1)", "x.cummax(dim=1)", "L.aminmax(x)", "x.aminmax(dim=1)", "L.aminmax(x, dim=0, keepdim=True)",
    "L.var_mean(x, 1)", "L.std_mean(x)", "L.var_mean(x)", "L.frexp(x)", "x.frexp()",
    "L.histogram(x.flatten(), 3)", "x.flatten().histogram(bins=3)", "L.histogramdd(x, bins=[2, 2, 2, 2])",
    "L.linalg.slogdet(s)", "L.slogdet(s)", "s.slogdet()", "L.linalg.eigh(s)", "L.linalg.eig(s)", "L.linalg.qr(s)",
    "L.linalg.svd(s)", "L.svd(s)", "s.svd()", "L.linalg.lu_factor(s)", "L.linalg.lu_factor_ex(s)",
    "L.linalg.lu(s)", "L.lu_unpack(*L.linalg.lu_factor(s))", "L.linalg.inv_ex(s)", "L.linalg.cholesky_ex(s)",
    "L.linalg.solve_ex(s, s)", "L.linalg.lstsq(s, s)", "L.linalg.ldl_factor(s)", "L.linalg.ldl_factor_ex(s)",
    "L.geqrf(s)", "s.geqrf()",
    f"L.max(x, 1, out=(L.empty(0), {I64}))", f"L.min(x, 0, out=(L.empty(0), {I64}))",
    f"L.sort(x, out=(L.empty(0), {I64}))", f"L.topk(x, 2, out=(L.empty(0), {I64}))",
    f"L.kthvalue(x, 1, 1, out=(L.empty(0), {I64}))", f"L.median(x, 1, out=(L.empty(0), {I64}))",
    f"L.nanmedian(x, 1, out=(L.empty(0), {I64}))", f"L.mode(x, 1, out=(L.empty(0), {I64}))",
    f"L.cummax(x, 1, out=(L.empty(0), {I64}))", f"L.cummin(x, 1, out=(L.empty(0), {I64}))",
    "L.aminmax(x, out=(L.empty(0), L.empty(0)))", "L.linalg.eigh(s, out=(L.empty(0), L.empty(0)))",
    "L.linalg.qr(s, out=(L.empty(0), L.empty(0)))", "L.linalg.svd(s, out=(L.empty(0), L.empty(0), L.empty(0)))",
    "L.linalg.slogdet(s, out=(L.empty(0), L.empty(0)))", "L.frexp(x, out=(L.empty(0), L.empty(0, dtype=L.int32)))",
    "L.linalg.lu_factor(s, out=(L.empty(0), L.empty(0, dtype=L.int32)))",
    "L.std_mean(x, 0)",
]
# Results whose values are not unique (eigenvector and singular vector signs): only the structure is compared.
SIGN_AMBIGUOUS = ("eig", "svd", "qr", "geqrf", "lstsq")


def _describe(result):
    kind = type(result)
    return (kind.__name__, kind.__module__.replace("ember.", "torch."), getattr(kind, "__match_args__", None),
            isinstance(result, tuple), len(result) if isinstance(result, tuple) else None)


def _run(L, call):
    x, s = L.tensor(X), L.tensor(S)
    with _quiet():
        return eval(call, {"L": L, "x": x, "s": s})


@contextlib.contextmanager
def _quiet():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@contextlib.contextmanager
def _printing_as_torch():
    old = dtypes.PUBLIC_NAME[0]
    dtypes.PUBLIC_NAME[0] = "torch"  # what ``ember run`` sets: the program imported torch
    try:
        yield
    finally:
        dtypes.PUBLIC_NAME[0] = old


@pytest.mark.parametrize("call", CALLS)
def test_result_type_and_values_as_torch(call):
    expected, got = _run(torch, call), _run(ember, call)
    assert _describe(got) == _describe(expected)
    if any(word in call for word in SIGN_AMBIGUOUS):
        return
    for e, g in zip(expected, got):
        if isinstance(e, tuple):  # histogramdd's bin edges
            assert type(g) is tuple
            for ee, gg in zip(e, g):
                np.testing.assert_allclose(gg.numpy(), ee.numpy(), rtol=1e-6)
        else:
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-6)


def _public_types(module):
    return {n: getattr(module, n) for n in dir(module)
            if not n.startswith("_") and isinstance(getattr(module, n), type) and issubclass(getattr(module, n), tuple)}


def test_every_public_torch_return_type_exists_with_its_fields():
    theirs, ours = _public_types(torch.return_types), _public_types(return_types)
    assert sorted(theirs) == sorted(ours)
    for name, cls in theirs.items():
        mine = ours[name]
        assert mine.__match_args__ == cls.__match_args__, name
        assert (mine.n_fields, mine.n_sequence_fields, mine.n_unnamed_fields) == \
            (cls.n_fields, cls.n_sequence_fields, cls.n_unnamed_fields), name
        assert mine.__name__ == mine.__qualname__ == name
        assert not hasattr(mine, "_fields") and not hasattr(cls, "_fields")  # struct sequences, not namedtuples
    assert set(ours.values()) == set(return_types.all_return_types)
    assert set(ours) <= set(return_types.__all__)


def _outcome(fn):
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001 - the exception class is what is compared
        return ("raise", type(e).__name__)


@pytest.mark.parametrize("make", [
    lambda T: tuple(T((1, 2))), lambda T: tuple(T([5, 6])), lambda T: tuple(T(iter((7, 8)))),
    lambda T: tuple(T((7, 8), {})), lambda T: T((1, 2, 3)), lambda T: T(5), lambda T: T(1, 2),
    lambda T: T(), lambda T: T(values=1, indices=2), lambda T: T((1,)),
])
def test_construction_as_torch(make):
    theirs = _outcome(lambda: make(torch.return_types.max))
    ours = _outcome(lambda: make(return_types.max))
    assert ours == theirs


def test_behaves_as_torch_struct_sequence():
    for L, rt in ((torch, torch.return_types), (ember, return_types)):
        r = rt.max((1, 2))
        assert r == (1, 2) and hash(r) == hash((1, 2)) and r.values == 1 and r.indices == 2
        assert rt.max((1, 2)) == rt.min((1, 2))  # tuple equality, as torch
        assert type(r[0:1]) is tuple and type(r + r) is tuple and r.count(1) == 1 and r.index(2) == 1
        assert isinstance(r, tuple) and not issubclass(rt.max_out, rt.max)
        with pytest.raises(AttributeError):
            r.values = 3
        with pytest.raises(AttributeError):
            del r.indices
        with pytest.raises(AttributeError):
            r.other = 1
        assert r.__reduce__() == (rt.max, ((1, 2), {}))
        v, i = r
        assert (v, i) == (1, 2)
        match r:
            case rt.max(values=a, indices=b):
                assert (a, b) == (1, 2)
            case _:
                raise AssertionError("no match")


@pytest.mark.parametrize("call", ["L.max(x, 1)", "L.sort(x, 0)", "L.aminmax(x)", "L.linalg.slogdet(s)",
                                  "L.frexp(x)", "L.linalg.lu_factor(s)", f"L.topk(x, 2, out=(L.empty(0), {I64}))"])
def test_printout_as_torch(call):
    expected = repr(_run(torch, call))
    with _printing_as_torch():
        got = _run(ember, call)
        assert repr(got) == expected and str(got) == expected
    assert repr(got) == expected.replace("torch.", "ember.")  # dtypes too: ember.int32


def test_out_returns_the_out_tensors_in_the_out_type():
    x = ember.tensor(X)
    v, i = ember.empty(0), ember.empty(0, dtype=ember.int64)
    r = ember.max(x, 1, out=(v, i))
    assert type(r) is return_types.max_out and r.values is v and r.indices is i
    assert v.tolist() == [5., 6., 9.] and i.tolist() == [3, 2, 2]
    assert return_types.with_outs(ember.var_mean(x, 1), (v, i)) == (v, i)  # not a return type: a plain tuple
    assert type(return_types.with_outs(ember.var_mean(x, 1), (v, i))) is tuple


def test_plain_pickle_round_trip():
    r = ember.tensor(X).max(1)
    back = pickle.loads(pickle.dumps(r))
    assert type(back) is return_types.max
    assert back.values.tolist() == r.values.tolist() and back.indices.tolist() == r.indices.tolist()


def test_save_load_both_ways_through_the_allow_list(tmp_path):
    path = str(tmp_path / "r.pt")
    ember.save(ember.tensor(X).max(1), path)
    with pytest.raises(Exception, match="torch.return_types.max"):
        torch.load(path, weights_only=True)  # torch refuses it by default too
    with torch.serialization.safe_globals([torch.return_types.max]):
        theirs = torch.load(path, weights_only=True)
    assert type(theirs) is torch.return_types.max and theirs.values.tolist() == [5., 6., 9.]
    with pytest.raises(ember.serialization.UnsafeGlobalError, match=r"add_safe_globals\(\[torch.return_types.max\]\)"):
        ember.load(path)
    with ember.serialization.safe_globals([return_types.max]):
        ours = ember.load(path)
    assert type(ours) is return_types.max and ours.indices.tolist() == [3, 2, 2]
    assert type(ember.load(path, weights_only=False)) is return_types.max

    buffer = io.BytesIO()
    torch.save(torch.tensor(X).sort(1), buffer)
    buffer.seek(0)
    with ember.serialization.safe_globals([(return_types.sort, "torch.return_types.sort")]):
        ours = ember.load(buffer)
    assert type(ours) is return_types.sort
    assert ours.values.tolist() == torch.tensor(X).sort(1).values.tolist()


def test_pytree_vmap_and_compile_keep_the_type():
    x = ember.tensor(X)
    leaves, spec = tree_flatten(x.max(1))
    assert len(leaves) == 2 and type(tree_unflatten(leaves, spec)) is return_types.max
    assert type(ember.func.vmap(lambda row: row.max(0))(x)) is return_types.max
    assert type(torch.vmap(lambda row: row.max(0))(torch.tensor(X))) is torch.return_types.max
    step = ember.compile(lambda t: t.sort(1))
    for _ in range(3):  # eager first call, then traced and compiled
        out = step(x)
        assert type(out) is return_types.sort and out.indices.tolist() == x.sort(1).indices.tolist()


def test_collate_of_return_types_as_torch():
    from torch.utils.data import default_collate as torch_collate
    from ember.data import default_collate
    theirs = torch_collate([torch.tensor(X).max(1), torch.tensor(X).max(1)])
    ours = default_collate([ember.tensor(X).max(1), ember.tensor(X).max(1)])
    assert type(ours) is type(theirs)
    assert [o.tolist() for o in ours] == [t.tolist() for t in theirs]
