"""float8 storage dtypes (float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz) against torch 2.13: every
one of the 256 codes, conversions from float32 around every rounding boundary (ties, overflow, inf, NaN) and from
every other dtype, printing, finfo, save/load both ways, and which ops run (torch's CPU list) or raise."""
from __future__ import annotations

import io

import numpy as np
import pytest

import ember
from ember import float8

torch = pytest.importorskip("torch")

NAMES = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")


def _bits(t) -> np.ndarray:
    return t.view(torch.uint8).numpy() if isinstance(t, torch.Tensor) else t._data.view(np.uint8)


def _boundaries(name: str) -> np.ndarray:
    """Every finite value, every midpoint between neighbours (ties), the points past the largest, each with its
    float32 neighbours, both signs, and inf/NaN/zeros."""
    table = float8.decode_table(name).astype(np.float64)
    finite = np.unique(np.abs(table[np.isfinite(table)]))
    step = finite[-1] - finite[-2]
    points = np.concatenate([finite, (finite[1:] + finite[:-1]) / 2, finite[-1] + step * np.array([0.25, 0.5, 1, 4])])
    p32 = points.astype(np.float32)
    near = np.concatenate([p32, np.nextafter(p32, np.float32(np.inf)), np.nextafter(p32, np.float32(-np.inf))])
    special = np.array([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 1e30, -1e30, 1e-30, -1e-30], np.float32)
    return np.concatenate([near, -near, special])


@pytest.mark.parametrize("name", NAMES)
def test_all_256_codes_decode_as_torch(name: str) -> None:
    codes = np.arange(256, dtype=np.uint8)
    want = torch.from_numpy(codes.copy()).view(getattr(torch, name)).float().numpy()
    got = ember.tensor(codes).view(getattr(ember, name)).float().numpy()
    both_nan = np.isnan(want) & np.isnan(got)
    assert np.array_equal(np.isnan(want), np.isnan(got))
    assert np.array_equal(got[~both_nan], want[~both_nan])
    assert np.array_equal(np.signbit(got[~both_nan]), np.signbit(want[~both_nan]))


@pytest.mark.parametrize("name", NAMES)
def test_float32_to_float8_rounds_and_saturates_as_torch(name: str) -> None:
    rng = np.random.default_rng(0)
    random_bits = rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([_boundaries(name), random_bits])
    want = _bits(torch.from_numpy(x.copy()).to(getattr(torch, name)))
    got = _bits(ember.tensor(x).to(getattr(ember, name)))
    assert np.array_equal(got, want), f"{int((got != want).sum())} codes differ, e.g. at {x[got != want][:5]}"


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("source", ["float64", "float16", "bfloat16", "int64", "int8", "uint8", "bool", "complex64"])
def test_other_dtypes_to_float8_as_torch(name: str, source: str) -> None:
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.standard_normal(500) * 10.0 ** rng.integers(-6, 6, 500), [0, 1, -1, 300, 1e5, 7, 240]])
    t = torch.tensor(x).to(getattr(torch, source))
    e = ember.tensor(x).to(getattr(ember, source))
    assert np.array_equal(_bits(e.to(getattr(ember, name))), _bits(t.to(getattr(torch, name))))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("target", ["float32", "float64", "float16", "bfloat16", "int32", "int64", "bool"] + list(NAMES))
def test_float8_to_other_dtypes_as_torch(name: str, target: str) -> None:
    codes = np.arange(256, dtype=np.uint8)
    t = torch.from_numpy(codes.copy()).view(getattr(torch, name))
    e = ember.tensor(codes).view(getattr(ember, name))
    finite = np.isfinite(t.float().numpy())
    if target.startswith(("int", "bool")):  # NaN/inf into integers is undefined behaviour in C: finite codes only
        t, e = t[torch.from_numpy(finite)], e[ember.tensor(finite)]
    want, got = t.to(getattr(torch, target)), e.to(getattr(ember, target))
    if target in NAMES:
        assert np.array_equal(_bits(got), _bits(want))
    else:
        w, g = want.float().numpy() if target == "bfloat16" else want.numpy(), got.float().numpy() if \
            target == "bfloat16" else got.numpy()
        assert np.array_equal(w, g, equal_nan=w.dtype.kind == "f")


@pytest.mark.parametrize("name", NAMES)
def test_every_finite_code_round_trips_through_float32(name: str) -> None:
    codes = np.arange(256, dtype=np.uint8)
    values = ember.tensor(codes).view(getattr(ember, name))
    back = values.float().to(getattr(ember, name))
    keep = ~np.isnan(values.float().numpy())
    assert np.array_equal(_bits(back)[keep], codes[keep])


@pytest.mark.parametrize("name", NAMES)
def test_printing_and_finfo_as_torch(name: str) -> None:
    x = [1.0, -2.5, 448.0, 0.1, float("nan"), 1e6, float("inf"), -0.0]
    want = repr(torch.tensor(x).to(getattr(torch, name))).replace("torch.", "")
    got = repr(ember.tensor(x).to(getattr(ember, name))).replace("ember.", "")
    assert got == want
    small = [0.25, 1.0, 3.0]
    assert repr(ember.tensor(small).to(getattr(ember, name))).replace("ember.", "") == repr(
        torch.tensor(small).to(getattr(torch, name))).replace("torch.", "")
    fe, ft = ember.finfo(getattr(ember, name)), torch.finfo(getattr(torch, name))
    for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(fe, field) == getattr(ft, field), field
    assert getattr(ember, name).is_floating_point and getattr(ember, name).itemsize == 1


@pytest.mark.parametrize("name", NAMES)
def test_save_load_both_ways_with_shared_views(name: str, tmp_path) -> None:
    values = np.array([1.0, -2.5, 448.0, 0.1, np.nan, -0.0, 3.0, 0.5], np.float32)
    t = torch.tensor(values).to(getattr(torch, name)).reshape(2, 4)
    torch.save({"w": t, "row": t[1], "col": t[:, 1]}, tmp_path / "t.pt")
    loaded = ember.load(tmp_path / "t.pt", weights_only=True)
    assert loaded["w"].dtype is getattr(ember, name)
    assert np.array_equal(_bits(loaded["w"]), _bits(t))
    assert np.array_equal(_bits(loaded["col"]), _bits(t[:, 1].contiguous()))
    e = ember.tensor(values).to(getattr(ember, name)).reshape(2, 4)
    ember.save({"w": e, "row": e[1], "col": e[:, 1]}, tmp_path / "e.pt")
    back = torch.load(tmp_path / "e.pt", weights_only=True)
    assert back["w"].dtype is getattr(torch, name)
    assert np.array_equal(_bits(back["w"]), _bits(e)) and np.array_equal(_bits(back["col"]), _bits(e[:, 1]))
    back["w"][1, 0] = 5.0  # views share storage after loading, as saved
    assert back["row"][0].float().item() == 5.0


OPS = {
    "mul": lambda L, x, y: x * y, "abs": lambda L, x, y: x.abs(), "eq": lambda L, x, y: x == y,
    "ne_scalar": lambda L, x, y: x != 1, "isnan": lambda L, x, y: x.isnan(), "where": lambda L, x, y: L.where(x == y, x, y),
    "cat": lambda L, x, y: L.cat([x, y]), "stack": lambda L, x, y: L.stack([x, y]), "index": lambda L, x, y: x[[0, 2]],
    "slice": lambda L, x, y: x[1:], "view": lambda L, x, y: x.view(2, 2).t().contiguous(),
    "index_select": lambda L, x, y: x.index_select(0, L.tensor([1, 0])), "clone": lambda L, x, y: x.clone(),
    "expand": lambda L, x, y: x.expand(2, 4), "repeat": lambda L, x, y: x.repeat(2), "pad": lambda L, x, y:
    L.nn.functional.pad(x, (1, 1)), "fill_": lambda L, x, y: x.clone().fill_(1000.0), "setitem": lambda L, x, y:
    x.clone().__setitem__(0, 1000.0) or x, "copy_": lambda L, x, y: L.empty(4, dtype=x.dtype).copy_(y.float() * 300),
    "full": lambda L, x, y: L.full((2,), 500.0, dtype=x.dtype), "zeros": lambda L, x, y: L.zeros(2, dtype=x.dtype),
    "tensor": lambda L, x, y: L.tensor([1e6, -3.3], dtype=x.dtype), "equal": lambda L, x, y: L.equal(x, y),
    "to_int": lambda L, x, y: x[:2].to(L.int32), "tolist": lambda L, x, y: x[:2].tolist(),
    # refused by torch 2.13 on the CPU
    "add": lambda L, x, y: x + y, "neg": lambda L, x, y: -x, "sum": lambda L, x, y: x.sum(),
    "mean": lambda L, x, y: x.mean(), "max": lambda L, x, y: x.max(), "lt": lambda L, x, y: x < y,
    "matmul": lambda L, x, y: x @ y, "mul_scalar": lambda L, x, y: x * 2, "exp": lambda L, x, y: x.exp(),
    "sort": lambda L, x, y: x.sort(), "flip": lambda L, x, y: x.flip(0), "masked_fill": lambda L, x, y:
    x.masked_fill(x == y, 0), "relu": lambda L, x, y: x.relu(), "clamp": lambda L, x, y: x.clamp(0, 1),
    "sub": lambda L, x, y: x - y, "div": lambda L, x, y: x / y, "cumsum": lambda L, x, y: x.cumsum(0),
    "argmax": lambda L, x, y: x.argmax(), "promote_float": lambda L, x, y: x + x.float(),
    "promote_float8": lambda L, x, y: x * y.to(L.float8_e5m2 if x.dtype != L.float8_e5m2 else L.float8_e4m3fn),
    "topk": lambda L, x, y: x.topk(1), "sqrt": lambda L, x, y: x.sqrt(), "gather": lambda L, x, y:
    x.gather(0, L.tensor([1])), "isinf": lambda L, x, y: x.isinf(),
}


def _outcome(lib, name: str, op: str) -> tuple:
    x = lib.tensor([1.0, -2.5, 300.0, 0.1]).to(getattr(lib, name))
    y = lib.tensor([1.0, 3.0, 2.0, 0.1]).to(getattr(lib, name))
    try:
        r = OPS[op](lib, x, y)
    except Exception as error:  # noqa: BLE001 - where torch raises, ember must raise
        return ("raise", type(error).__name__)
    if isinstance(r, (lib.Tensor,)):
        dt = str(r.dtype).split(".")[-1]
        values = _bits(r) if dt in NAMES else r.numpy()
        return ("ok", dt, tuple(r.shape), values.tolist())
    return ("ok", r)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("op", sorted(OPS))
def test_ops_run_or_raise_as_torch(name: str, op: str) -> None:
    want = _outcome(torch, name, op)
    got = _outcome(ember, name, op)
    if want[0] == "raise":
        assert got[0] == "raise", f"torch raises {want[1]}, ember returns {got}"
    else:
        assert got == want


def test_refusal_names_the_op_and_dtype() -> None:
    x = ember.tensor([1.0, 2.0]).to(ember.float8_e4m3fn)
    with pytest.raises(NotImplementedError, match=r"\"sum\" not implemented for 'Float8_e4m3fn'"):
        x.sum()
    with pytest.raises(RuntimeError, match="Promotion for Float8 Types is not supported"):
        _ = x + x.float()


def test_conversions_are_numpy_only() -> None:
    """ember/float8.py computes codes and values with NumPy alone (ml_dtypes only holds the bytes)."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(float8))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"numpy", "functools", "typing", "__future__"}, imported
    assert float8.encode(np.array([500.0], np.float32), "float8_e4m3fn").tolist() == [126]


def test_buffer_for_io() -> None:
    x = ember.tensor([1.0, 2.0]).to(ember.float8_e5m2)
    buffer = io.BytesIO()
    ember.save(x, buffer)
    buffer.seek(0)
    assert torch.load(buffer, weights_only=True).float().tolist() == [1.0, 2.0]
