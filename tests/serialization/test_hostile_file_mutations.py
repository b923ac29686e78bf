"""Every loader against damaged and hostile versions of a file it wrote: a clear error or a correct load, nothing else.

A seeded mutator damages a valid file of each format (``ember.save`` zip and safetensors, torch's legacy pickle,
``ember.export.save`` archives, ``ember.jit.save`` graph folders, training checkpoints): truncation at any byte,
runs of flipped bytes, a length or size field set huge (the zip directory's sizes, safetensors' header length, a
storage's element count), zip members renamed to escape the folder (``../``), and hostile pickles. The loader must
either load (the damage hit padding) or raise one of the clear errors (``CheckpointError``/``ValueError``,
``pickle.UnpicklingError``, ``RuntimeError``, ``NotImplementedError``) whose message names the file or the
loader - never an internal ``IndexError``/``KeyError``/``TypeError``/``struct.error``/``zlib.error``/``MemoryError``,
never a write outside its own temporary folder, never code from the file run.
"""
from __future__ import annotations

import io
import os
import pickle
import struct
import zipfile

import numpy as np
import pytest

import ember
from ember.serialization import CheckpointError

CLEAR = (ValueError, pickle.UnpicklingError, RuntimeError, NotImplementedError)
N_MUTATIONS = 60


def _state() -> dict:
    return {"w": ember.arange(12, dtype=ember.float32).reshape(3, 4), "b": ember.tensor([1, 2], dtype=ember.int64),
            "h": ember.ones(2, dtype=ember.float16), "meta": {"step": 3, "name": "x", "lr": [0.1, 0.01]}}


def _mutate(data: bytes, rng: np.random.Generator) -> bytes:
    kind = rng.integers(0, 4)
    buf = bytearray(data)
    if kind == 0:  # truncated
        return bytes(buf[:int(rng.integers(0, len(buf)))])
    if kind == 1:  # a run of random bytes
        start = int(rng.integers(0, len(buf)))
        run = int(rng.integers(1, 9))
        buf[start:start + run] = rng.integers(0, 256, size=len(buf[start:start + run]), dtype=np.uint8).tobytes()
        return bytes(buf)
    if kind == 2:  # a 4- or 8-byte field set huge (sizes, offsets, counts, lengths)
        start = int(rng.integers(0, max(1, len(buf) - 8)))
        width = int(rng.choice([4, 8]))
        buf[start:start + width] = (b"\xff" * (width - 1) + b"\x7f") if rng.random() < 0.5 else b"\x00" * width
        return bytes(buf)
    start = int(rng.integers(0, len(buf)))  # one byte off by one (lengths, opcodes, counts)
    buf[start] = (buf[start] + int(rng.choice([1, -1]))) % 256
    return bytes(buf)


def _check_outcome(load, blob: bytes, label: str, tmp_path) -> None:
    before = set(os.listdir(tmp_path))
    try:
        load(blob)
    except CLEAR as error:
        assert str(error), f"{label}: an error without a message ({type(error).__name__})"
    except Exception as error:  # noqa: BLE001 - the point: anything else is an unclear error
        raise AssertionError(f"{label}: unclear error {type(error).__name__}: {error}") from error
    assert set(os.listdir(tmp_path)) <= before | {"in.bin"}, f"{label}: wrote {set(os.listdir(tmp_path)) - before}"


def _load_path(tmp_path, reader):
    def load(blob: bytes):
        path = tmp_path / "in.bin"
        path.write_bytes(blob)
        return reader(str(path))
    return load


def _zip_file() -> bytes:
    buffer = io.BytesIO()
    ember.save(_state(), buffer)
    return buffer.getvalue()


def _safetensors_file(tmp_path) -> bytes:
    path = tmp_path / "s.safetensors"
    ember.save(_state(), str(path), format="safetensors")
    data = path.read_bytes()
    path.unlink()
    return data


def _export_file() -> bytes:
    model = ember.nn.Sequential(ember.nn.Linear(3, 2), ember.nn.ReLU())
    buffer = io.BytesIO()
    ember.export.save(ember.export.export(model, (ember.ones(2, 3),)), buffer)
    return buffer.getvalue()


@pytest.mark.parametrize("fmt", ["zip", "safetensors", "legacy", "export"])
def test_damaged_files_give_clear_errors(tmp_path, fmt: str) -> None:
    if fmt == "zip":
        data, load = _zip_file(), _load_path(tmp_path, ember.load)
    elif fmt == "safetensors":
        data, load = _safetensors_file(tmp_path), _load_path(tmp_path, ember.load)
    elif fmt == "legacy":
        torch = pytest.importorskip("torch")
        buffer = io.BytesIO()
        torch.save({"w": torch.arange(12.0).reshape(3, 4), "n": 3}, buffer, _use_new_zipfile_serialization=False)
        data, load = buffer.getvalue(), _load_path(tmp_path, ember.load)
    else:
        data, load = _export_file(), _load_path(tmp_path, ember.export.load)
    load(data)  # the undamaged file loads
    rng = np.random.default_rng(sum(map(ord, fmt)))
    for i in range(N_MUTATIONS):
        _check_outcome(load, _mutate(data, rng), f"{fmt} mutation {i}", tmp_path)


def test_damaged_graph_folders_give_clear_errors(tmp_path) -> None:
    model = ember.nn.Sequential(ember.nn.Linear(3, 2), ember.nn.Tanh())
    folder = tmp_path / "g"
    ember.jit.save(ember.jit.trace(model, (ember.ones(2, 3),)), str(folder))
    files = {name: (folder / name).read_bytes() for name in os.listdir(folder)}
    rng = np.random.default_rng(7)
    for i in range(N_MUTATIONS):
        name = sorted(files)[i % len(files)]
        damaged = _mutate(files[name], rng)

        def load(blob: bytes, name=name):
            (folder / name).write_bytes(blob)
            try:
                return ember.jit.load(str(folder))
            finally:
                (folder / name).write_bytes(files[name])

        _check_outcome(load, damaged, f"graph {name} mutation {i}", tmp_path)


def test_damaged_training_checkpoints_give_clear_errors(tmp_path) -> None:
    model = ember.nn.Linear(3, 2)
    opt = ember.optim.Adam(model.parameters())
    model(ember.ones(1, 3)).sum().backward()
    opt.step()
    path = tmp_path / "ckpt.safetensors"
    ember.train.save_checkpoint(str(path), model, opt, epochs_completed=2)
    data = path.read_bytes()
    rng = np.random.default_rng(11)

    def load(blob: bytes):
        path.write_bytes(blob)
        return ember.train.load_checkpoint(str(path), ember.nn.Linear(3, 2), None, restore_rng=False)

    for i in range(N_MUTATIONS):
        _check_outcome(load, _mutate(data, rng), f"checkpoint mutation {i}", tmp_path)


def _zip_with(members: dict) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def test_export_archive_with_escaping_or_hostile_members(tmp_path) -> None:
    """export.load reads fixed member names into its own temporary folder: a member named ../x or /abs is never
    written; a hostile export.json (not an object, wrong spec records) is a clear error."""
    good = zipfile.ZipFile(io.BytesIO(_export_file()))
    members = {name: good.read(name) for name in good.namelist()}
    escape = dict(members)
    escape["../escaped.txt"] = b"owned"
    escape["/tmp/ember_abs_escape.txt"] = b"owned"
    ember.export.load(io.BytesIO(_zip_with(escape)))  # loads; the stray members are ignored
    assert not (tmp_path.parent / "escaped.txt").exists() and not os.path.exists("/tmp/ember_abs_escape.txt")
    for meta in [b"[]", b"{\"format\": \"ember.export/1\", \"inputs\": 5, \"outputs\": []}",
                 b"{\"format\": \"ember.export/1\", \"inputs\": [[1, 2, 3, 4, 5, 6]], \"outputs\": []}",
                 b"\xff\xfe", b"{\"format\": \"ember.export/1\"}", b"1e999999"]:
        bad = dict(members)
        bad["export.json"] = meta
        with pytest.raises(ValueError, match="export.load"):
            ember.export.load(io.BytesIO(_zip_with(bad)))


def test_zip_bomb_member_is_refused_before_inflating(tmp_path) -> None:
    """A deflated member whose declared size is far beyond what the program needs is refused from its header."""
    good = zipfile.ZipFile(io.BytesIO(_export_file()))
    members = {name: good.read(name) for name in good.namelist()}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content if name != "graph.json" else content + b" " * (300 << 20))
    with pytest.raises(ValueError, match="export.load.*graph.json"):
        ember.export.load(io.BytesIO(buffer.getvalue()))


class _Marker:
    """A pickle whose load would run code: creating a file."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_hostile_pickles_never_run(tmp_path, protocol: int) -> None:
    marker = tmp_path / "ran.txt"
    payloads = {
        "reduce_open": pickle.dumps({"w": _Marker(str(marker))}, protocol=protocol),
        "global_eval": b"cbuiltins\neval\n(S'open(" + repr(str(marker)).encode() + b", \"w\")'\ntR.",
        "nested": pickle.dumps([[{"a": (_Marker(str(marker)),)}]], protocol=protocol),
    }
    for name, payload in payloads.items():
        for wrap in (lambda p: p, lambda p: _zip_with({"archive/data.pkl": p, "archive/version": b"3\n"})):
            with pytest.raises(CLEAR) as info:
                ember.load(io.BytesIO(wrap(payload)))
            assert "weights_only" in str(info.value) or "not" in str(info.value), (name, str(info.value))
            assert not marker.exists(), f"{name}: the pickle ran code"


def test_huge_declared_storage_is_refused_without_allocating(tmp_path) -> None:
    """A storage record declaring 10**15 elements fails on its size check, not by trying to allocate."""
    torch = pytest.importorskip("torch")
    buffer = io.BytesIO()
    torch.save({"w": torch.arange(4.0)}, buffer)
    archive = zipfile.ZipFile(io.BytesIO(buffer.getvalue()))
    members = {name: archive.read(name) for name in archive.namelist()}
    pkl_name = next(n for n in members if n.endswith("data.pkl"))
    payload = members[pkl_name]
    # the storage's numel is pickled as BININT1 4 (K\x04) right after the location string 'cpu'
    at = payload.index(b"X\x03\x00\x00\x00cpuq")
    k = payload.index(b"K\x04", at)
    members[pkl_name] = payload[:k] + b"J" + struct.pack("<i", 2**31 - 1) + payload[k + 2:]
    with pytest.raises(CLEAR):
        ember.load(io.BytesIO(_zip_with(members)))
