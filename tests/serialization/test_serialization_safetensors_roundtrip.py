"""ember.save(format="safetensors") / ember.load: safetensors + JSON, atomic writes, never pickle.

References: the safetensors library (an independent reader/writer of the format) and torch.
"""
from __future__ import annotations

import io
import json
import math
import os
import struct

import numpy as np
import pytest

import ember
from ember import serialization

safetensors_numpy = pytest.importorskip("safetensors.numpy")


def to_np(x):
    return np.asarray(x.detach().__array__())


def roundtrip(obj):
    buffer = io.BytesIO()
    ember.save(obj, buffer, format="safetensors")
    buffer.seek(0)
    return ember.load(buffer)


def test_nested_structures_roundtrip(rng):
    w = ember.tensor(rng.standard_normal((3, 4)).astype(np.float32))
    obj = {
        "model": {"fc.weight": w, "fc.bias": ember.zeros(4, dtype=ember.float64)},
        "optimizer": {"state": {0: {"step": ember.tensor(7.0), "exp_avg": ember.ones(2)}},
                      "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "params": [0], "foreach": None}]},
        "tied": w, "epoch": 3, "name": "run", "flag": True, "inf": math.inf, "nan": float("nan"),
        "blob": b"\x00\x01", "dtype": ember.int16, "array": np.arange(6, dtype=np.uint16).reshape(2, 3),
        "__private": [1, (2, 3)], "scalar_np": np.float32(1.5),
    }
    out = roundtrip(obj)
    np.testing.assert_array_equal(to_np(out["model"]["fc.weight"]), to_np(w))
    assert out["model"]["fc.bias"].dtype is ember.float64
    assert out["tied"] is out["model"]["fc.weight"]  # one tensor saved once, loaded once
    state = out["optimizer"]["state"][0]
    assert state["step"].shape == () and float(state["step"]) == 7.0
    assert out["optimizer"]["param_groups"] == [{"lr": 0.1, "betas": (0.9, 0.999), "params": [0], "foreach": None}]
    assert out["epoch"] == 3 and out["name"] == "run" and out["flag"] is True
    assert out["inf"] == math.inf and math.isnan(out["nan"])
    assert out["blob"] == b"\x00\x01" and out["dtype"] is ember.int16
    assert isinstance(out["array"], np.ndarray) and out["array"].dtype == np.uint16
    np.testing.assert_array_equal(out["array"], obj["array"])
    assert out["__private"] == [1, (2, 3)] and out["scalar_np"] == 1.5


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32",
                                   "float64", "bfloat16"])
def test_every_dtype_matches_the_safetensors_library(tmp_path, dtype, rng):
    values = rng.standard_normal((2, 3)) * 10
    t = ember.tensor(values > 0 if dtype == "bool" else values).to(getattr(ember, dtype))
    path = tmp_path / "t.safetensors"
    ember.save({"t": t, "non_contiguous": t.t()}, path, format="safetensors")
    theirs = safetensors_numpy.load_file(str(path))
    assert theirs["t"].dtype == t.dtype.np
    np.testing.assert_array_equal(theirs["t"], to_np(t))
    np.testing.assert_array_equal(theirs["non_contiguous"], to_np(t).T)
    ours = ember.load(path)
    assert ours["t"].dtype is t.dtype
    np.testing.assert_array_equal(to_np(ours["non_contiguous"]), to_np(t).T)


def test_reads_files_written_by_the_safetensors_library(tmp_path):
    path = str(tmp_path / "foreign.safetensors")
    safetensors_numpy.save_file({"a": np.ones((2, 3), np.float32), "b": np.arange(3, dtype=np.int64)}, path)
    out = ember.load(path)
    assert sorted(out) == ["a", "b"]
    np.testing.assert_array_equal(to_np(out["b"]), [0, 1, 2])


def test_state_dict_reads_back_in_torch(tmp_path):
    torch = pytest.importorskip("torch")
    safetensors_torch = pytest.importorskip("safetensors.torch")
    w = ember.randn(4, 5)
    path = tmp_path / "w.safetensors"
    ember.save({"layer.weight": w}, path, format="safetensors")
    loaded = safetensors_torch.load_file(str(path))["layer.weight"]
    assert isinstance(loaded, torch.Tensor)
    np.testing.assert_array_equal(loaded.numpy(), to_np(w))


def test_file_is_safetensors_with_json_metadata_not_pickle(tmp_path):
    path = tmp_path / "x.ember"
    ember.save({"w": ember.ones(2), "epoch": 1}, path, format="safetensors")
    raw = path.read_bytes()
    assert not raw.startswith(b"\x80")  # pickle protocol marker
    (length,) = struct.unpack("<Q", raw[:8])
    assert length % 8 == 0
    header = json.loads(raw[8:8 + length])
    assert header["w"]["dtype"] == "F32" and header["w"]["shape"] == [2]
    assert json.loads(header["__metadata__"]["ember.structure"])["epoch"] == 1
    with pytest.raises(TypeError, match="no pickle"):
        ember.save({"f": lambda: 0}, tmp_path / "bad", format="safetensors")
    with pytest.raises(ValueError, match="pickle_module"):
        ember.save({}, tmp_path / "bad", pickle_module=object())


def test_atomic_write_keeps_old_file_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.ember"
    ember.save({"version": 1}, path, format="safetensors")
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # like a plain open(), not mkstemp's 0600

    def broken(f, head, buffers):
        f.write(head[:5])
        raise OSError("disk full")

    monkeypatch.setattr(serialization.safetensors_format, "write_all", broken)
    with pytest.raises(OSError, match="disk full"):
        ember.save({"version": 2, "w": ember.ones(3)}, path, format="safetensors")
    monkeypatch.undo()
    assert ember.load(path) == {"version": 1}
    assert os.listdir(tmp_path) == ["ckpt.ember"]  # no temp file left behind


def test_parameters_and_requires_grad_survive():
    from ember import nn

    p = nn.Parameter(ember.ones(2))
    out = roundtrip({"p": p, "g": ember.zeros(1, requires_grad=True)})
    assert isinstance(out["p"], nn.Parameter) and out["p"].requires_grad
    assert out["g"].requires_grad


def test_module_state_dict_roundtrip(tmp_path):
    from ember import nn

    ember.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    net(ember.randn(5, 3))  # move the running statistics off their initial values
    ember.save(net.state_dict(), tmp_path / "net.ember")
    ember.manual_seed(1)
    other = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    other.load_state_dict(ember.load(tmp_path / "net.ember"))
    for (k, a), (_, b) in zip(net.state_dict().items(), other.state_dict().items()):
        np.testing.assert_array_equal(to_np(a), to_np(b), err_msg=k)


def test_corrupt_and_foreign_files_fail_clearly(tmp_path):
    (tmp_path / "short").write_bytes(b"\x01\x02")
    with pytest.raises(ValueError, match="too short"):
        ember.load(tmp_path / "short")
    (tmp_path / "pickle.pt").write_bytes(b"\x80\x02" + b"x" * 100)
    with pytest.raises(ValueError, match="pickle"):
        ember.load(tmp_path / "pickle.pt")
    with pytest.raises(FileNotFoundError):
        ember.load(tmp_path / "missing")
