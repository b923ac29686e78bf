"""Files ember writes load in torch with ``torch.load(weights_only=True)``, and torch's files (zip and the legacy
non-zip format) load in ember, for every dtype both share (bool, integers, float16, bfloat16, float32/64,
complex64/128, the four float8 formats), with views sharing storage, non-contiguous tensors (transposed, strided,
offset), nested containers and OrderedDict state_dicts: same dtypes, shapes, bytes, and storage sharing."""
from __future__ import annotations

import collections

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
          "complex64", "complex128", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")


def _values(dtype: str) -> np.ndarray:
    rng = np.random.default_rng(DTYPES.index(dtype))
    x = rng.standard_normal(24) * 5
    x[:4] = [0.0, -0.0, 1.5, -3.0]
    if dtype.startswith("complex"):
        x = x + 1j * rng.standard_normal(24)
    return x.reshape(4, 6)


def _make(lib, dtype: str):
    x = _values(dtype)
    if dtype == "bool":
        return lib.tensor(x > 0)
    if dtype.startswith(("int", "uint")):
        return lib.tensor(np.round(x).astype(np.int64)).to(getattr(lib, dtype))
    if dtype.startswith("complex"):
        return lib.tensor(x).to(getattr(lib, dtype))
    return lib.tensor(x.astype(np.float32)).to(getattr(lib, dtype))


def _raw(t) -> np.ndarray:
    """The tensor's elements as bytes, comparable across libraries (bfloat16/float8 through a uint view)."""
    name = str(t.dtype).split(".")[-1]
    if isinstance(t, torch.Tensor):
        t = t.contiguous()
        if name == "bfloat16":
            return t.view(torch.int16).numpy()
        if name.startswith("float8"):
            return t.view(torch.uint8).numpy()
        return t.numpy()
    data = np.ascontiguousarray(t._data)
    if name == "bfloat16":
        return data.view(np.int16)
    if name.startswith("float8"):
        return data.view(np.uint8)
    return data


def _tree(lib, dtype: str) -> dict:
    base = _make(lib, dtype)
    state = collections.OrderedDict([("layer.weight", base), ("layer.bias", base[0])])
    return {"state": state, "t": base.t(), "strided": base[:, ::2], "offset": base[1:, 2:],
            "nested": [base[2], (base[:, 1], {"deep": base.reshape(-1)[5:11]})], "n": 3, "s": "text"}


def _check(got, want, lib_got) -> None:
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    assert tuple(got.shape) == tuple(want.shape)
    assert np.array_equal(_raw(got), _raw(want))


@pytest.mark.parametrize("dtype", DTYPES)
def test_ember_files_load_in_torch(dtype: str, tmp_path) -> None:
    tree = _tree(ember, dtype)
    ember.save(tree, tmp_path / "e.pt")
    back = torch.load(tmp_path / "e.pt", weights_only=True)
    want = _tree(torch, dtype)
    assert isinstance(back["state"], collections.OrderedDict) and list(back["state"]) == list(want["state"])
    for key in ("t", "strided", "offset"):
        _check(back[key], want[key], torch)
    _check(back["state"]["layer.bias"], want["state"]["layer.bias"], torch)
    _check(back["nested"][1][1]["deep"], want["nested"][1][1]["deep"], torch)
    assert back["n"] == 3 and back["s"] == "text"
    # views saved together share one storage in torch, as in ember
    assert back["state"]["layer.weight"].untyped_storage().data_ptr() == back["t"].untyped_storage().data_ptr()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_torch_files_load_in_ember(dtype: str, legacy: bool, tmp_path) -> None:
    tree = _tree(torch, dtype)
    torch.save(tree, tmp_path / "t.pt", _use_new_zipfile_serialization=not legacy)
    back = ember.load(tmp_path / "t.pt", weights_only=True)
    want = _tree(ember, dtype)
    assert isinstance(back["state"], collections.OrderedDict)
    for key in ("t", "strided", "offset"):
        _check(back[key], want[key], ember)
    _check(back["nested"][1][0], want["nested"][1][0], ember)
    _check(back["nested"][1][1]["deep"], want["nested"][1][1]["deep"], ember)
    # views of one storage stay views: a write through one shows in the other
    if dtype in ("float32", "int64", "complex128"):
        back["state"]["layer.weight"][0, 0] = 7
        assert back["state"]["layer.bias"][0].item() == 7
