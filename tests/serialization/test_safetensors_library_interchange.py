"""safetensors files both ways against the safetensors library itself (formats21): ember.save(format="safetensors")
read by safetensors.safe_open / safetensors.torch.load_file, and files written by safetensors.torch and
safetensors.numpy (with user metadata, empty tensors, every dtype code safetensors.torch writes) read by ember.load."""
from __future__ import annotations

import json

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
st_torch = pytest.importorskip("safetensors.torch")
safetensors = pytest.importorskip("safetensors")

# dtype name shared by torch and ember -> safetensors code
_DTYPES = {"bool": "BOOL", "uint8": "U8", "int8": "I8", "int16": "I16", "uint16": "U16", "int32": "I32",
           "uint32": "U32", "int64": "I64", "uint64": "U64", "float16": "F16", "bfloat16": "BF16", "float32": "F32",
           "float64": "F64", "complex64": "C64", "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2",
           "float8_e4m3fnuz": "F8_E4M3FNUZ", "float8_e5m2fnuz": "F8_E5M2FNUZ"}


def _values(t) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        wide = torch.float64 if not t.dtype.is_complex and t.dtype != torch.bool else t.dtype
        return t.to(wide).numpy()
    if t.dtype.is_complex or t.dtype is ember.bool:
        return t.numpy()
    return t.to(ember.float64).numpy()


def _header(path) -> dict:
    raw = open(path, "rb").read()
    size = int.from_bytes(raw[:8], "little")
    return json.loads(raw[8:8 + size])


@pytest.mark.parametrize("name", sorted(_DTYPES))
def test_ember_file_reads_in_the_safetensors_library(name, tmp_path) -> None:
    base = (ember.arange(12) % 5).to(getattr(ember, name)).reshape(3, 4)
    state = {"t": base, "view": base.t()[1], "scalar": base[1, 1], "empty": base[:0]}
    path = tmp_path / "e.safetensors"
    ember.save(state, path, format="safetensors")
    assert {e["dtype"] for k, e in _header(path).items() if k != "__metadata__"} == {_DTYPES[name]}
    loaded = st_torch.load_file(str(path))
    for key, value in state.items():
        assert str(loaded[key].dtype) == f"torch.{name}" and tuple(loaded[key].shape) == tuple(value.shape), key
        np.testing.assert_array_equal(_values(loaded[key]), _values(value), err_msg=key)
    with safetensors.safe_open(str(path), "np" if name in ("bool", "float16", "float32") else "pt") as f:
        assert sorted(f.keys()) == sorted(state) and f.metadata()["format"] == "ember/1"


@pytest.mark.parametrize("name", sorted(_DTYPES))
def test_safetensors_torch_file_reads_in_ember(name, tmp_path) -> None:
    base = (torch.arange(12) % 5).to(getattr(torch, name)).reshape(3, 4)
    state = {"t": base, "row": base[1].clone(), "scalar": base[0, 0].clone(), "empty": base[:0].clone()}
    path = tmp_path / "t.safetensors"
    st_torch.save_file(state, str(path), metadata={"format": "pt", "note": "written by safetensors.torch"})
    for mmap in (False, True):
        loaded = ember.load(path, mmap=mmap)
        assert sorted(loaded) == sorted(state)
        assert loaded["t"].untyped_storage().nbytes() == base.untyped_storage().nbytes()  # its bytes, not the file's
        for key, value in state.items():
            assert loaded[key].dtype.name == name and tuple(loaded[key].shape) == tuple(value.shape), key
            np.testing.assert_array_equal(_values(loaded[key]), _values(value), err_msg=key)


def test_nested_ember_structure_is_flat_tensors_plus_json_for_the_library(tmp_path) -> None:
    path = tmp_path / "n.safetensors"
    ember.save({"model": {"fc.weight": ember.ones(2, 2)}, "step": 7, "betas": (0.9, 0.99)}, path,
               format="safetensors")
    with safetensors.safe_open(str(path), "pt") as f:
        assert list(f.keys()) == ["model.fc.weight"]
        tree = json.loads(f.metadata()["ember.structure"])
    assert tree["step"] == 7 and tree["model"]["fc.weight"] == {"__tensor__": "model.fc.weight"}
    assert ember.load(path)["betas"] == (0.9, 0.99)


def test_numpy_written_files_and_shared_models_read_in_ember(tmp_path) -> None:
    from safetensors.numpy import save_file

    path = tmp_path / "np.safetensors"
    save_file({"x": np.arange(3, dtype=np.int32), "y": np.full((2, 2), 0.5, np.float16), "z": np.empty((0, 4))},
              str(path), metadata={"k": "v"})
    loaded = ember.load(path)
    assert loaded["x"].tolist() == [0, 1, 2] and loaded["y"].dtype is ember.float16 and loaded["z"].shape == (0, 4)
    shared = torch.nn.Linear(2, 2)
    st_torch.save_model(torch.nn.Sequential(shared, shared), str(tmp_path / "m.safetensors"))  # dedups the tie
    model = ember.nn.Sequential(ember.nn.Linear(2, 2))
    model.load_state_dict(ember.load(tmp_path / "m.safetensors"))
    np.testing.assert_array_equal(model[0].weight.detach().numpy(), shared.weight.detach().numpy())


def test_dtypes_safetensors_has_but_ember_lacks_are_named(tmp_path) -> None:
    path = tmp_path / "c.safetensors"
    ember.save({"w": ember.ones(1)}, path, format="safetensors")
    raw = bytearray(path.read_bytes())
    at = raw.index(b'"F32"')
    raw[at:at + 5] = b'"F4" '
    path.write_bytes(bytes(raw))
    with pytest.raises(ember.serialization.CheckpointError, match="dtype F4 is not supported by ember"):
        ember.load(path)
    with pytest.raises(TypeError, match="cannot be stored in safetensors"):
        ember.save({"c": ember.ones(1, dtype=ember.complex128)}, tmp_path / "x.safetensors", format="safetensors")
