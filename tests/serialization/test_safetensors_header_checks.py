"""ember.load checks a safetensors file as strictly as the safetensors library does.

Each crafted file is refused by ember with a CheckpointError naming the file, the tensor and the
problem, and (where the check is the format's, not ember's) by the safetensors library too, which
is the independent reference for what a valid file is.
"""
from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import ember
from ember.serialization import CheckpointError

safetensors_numpy = pytest.importorskip("safetensors.numpy")


def _file(header: dict | bytes, data: bytes = b"", pad: bool = True) -> bytes:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def _entry(dtype="F32", shape=(2,), offsets=(0, 8)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


GOOD = {"a": _entry(offsets=(0, 8)), "b": _entry(offsets=(8, 16))}

# (case id, file bytes, words the error must contain). The safetensors library refuses all of them
# except those in STRICTER, where ember is stricter on purpose.
STRICTER = {"duplicate key"}
CRAFTED = [
    ("reversed offsets", _file({"a": _entry(offsets=(8, 0))}, bytes(8)), ["'a'", "reversed"]),
    ("overlap", _file({"a": _entry(offsets=(0, 8)), "b": _entry(offsets=(4, 12))}, bytes(12)), ["'b'", "overlaps"]),
    ("hole", _file({"a": _entry(offsets=(0, 8)), "b": _entry(offsets=(12, 20))}, bytes(20)), ["'b'", "hole"]),
    ("hole at start", _file({"a": _entry(offsets=(4, 12))}, bytes(12)), ["'a'", "hole"]),
    ("negative shape", _file({"a": _entry(shape=(-2,), offsets=(0, 8))}, bytes(8)), ["'a'", "shape"]),
    ("float shape", _file({"a": _entry(shape=(2.0,), offsets=(0, 8))}, bytes(8)), ["'a'", "shape"]),
    ("nbytes mismatch", _file({"a": _entry(shape=(3,), offsets=(0, 8))}, bytes(8)), ["'a'", "needs 12 bytes"]),
    ("unknown dtype", _file({"a": _entry(dtype="F128", offsets=(0, 8))}, bytes(8)), ["'a'", "dtype"]),
    ("entry not a dict", _file({"a": [0, 8]}, bytes(8)), ["'a'", "expected an object"]),
    ("entry missing key", _file({"a": {"dtype": "F32", "shape": [2]}}, bytes(8)), ["'a'", "data_offsets"]),
    ("offsets wrong arity", _file({"a": _entry(offsets=(0, 8, 9))}, bytes(8)), ["'a'", "two integers"]),
    ("past end of file", _file({"a": _entry(offsets=(0, 8))}, bytes(4)), ["'a'", "truncated"]),
    ("trailing bytes", _file({"a": _entry(offsets=(0, 8))}, bytes(12)), ["'a'", "trailing"]),
    ("header longer than file", struct.pack("<Q", 1000) + b"{}", ["header", "exceeds the file size"]),
    ("header over 100 MB", struct.pack("<Q", 200_000_000) + b"{}", ["header", "limit"]),
    ("invalid utf-8", _file(b'{"\xff": 1}'), ["header", "UTF-8"]),
    ("not json", _file(b'{"a": '), ["header", "JSON"]),
    ("top level list", _file(b"[1, 2]"), ["header"]),
    ("metadata not strings", _file({"__metadata__": {"format": 1}}), ["__metadata__", "strings"]),
    ("duplicate key", _file(b'{"a": ' + json.dumps(_entry(offsets=(0, 8))).encode() + b', "a": '
                            + json.dumps(_entry(offsets=(0, 8))).encode() + b"}", bytes(8)), ["duplicate"]),
    ("too short", b"\x01\x02", ["too short"]),
    ("65 dimensions", _file({"a": _entry(shape=(1,) * 64 + (2,), offsets=(0, 8))}, bytes(8)), ["'a'", "65 dimensions"]),
]


@pytest.mark.parametrize("case, blob, words", CRAFTED, ids=[c[0] for c in CRAFTED])
def test_crafted_header_is_refused_like_the_safetensors_library(tmp_path, case, blob, words):
    path = tmp_path / "crafted.safetensors"
    path.write_bytes(blob)
    with pytest.raises(CheckpointError) as info:
        ember.load(path)
    message = str(info.value)
    assert str(path) in message, message
    for word in words:
        assert word in message, (word, message)
    if case in STRICTER:
        safetensors_numpy.load(blob)  # the library takes the last duplicate silently; ember refuses
    else:
        with pytest.raises(Exception):  # the reference library refuses the same file
            safetensors_numpy.load(blob)


def test_good_file_loads_and_matches_the_library():
    data = np.arange(4, dtype=np.float32).tobytes()
    blob = _file(GOOD, data)
    ours = ember.load(io.BytesIO(blob))
    theirs = safetensors_numpy.load(blob)
    for name in ("a", "b"):
        np.testing.assert_array_equal(ours[name].numpy(), theirs[name])


def test_ember_checks_beyond_the_library(tmp_path):
    """ember's own fields: a future format, and the JSON structure's schema."""
    future = _file({"__metadata__": {"format": "ember/2", "ember.structure": "{}"}})
    with pytest.raises(CheckpointError, match="newer ember"):
        ember.load(io.BytesIO(future))
    w = {"w": _entry(offsets=(0, 8)), "__metadata__": {"format": "ember/1"}}
    for structure, words in [
        ({"x": {"__tensor__": "missing"}}, "not in the file"),
        ({"x": {"__evil__": 1}}, "unknown tag"),
        ({"x": {"__dtype__": "object"}}, "not an ember dtype"),
        ({"x": {"__device__": "cuda:0; rm -rf"}}, "device"),
        ({"x": {"__float__": "1e400"}}, "__float__"),
        ({"x": {"__dict__": [[[1], 2]]}}, "dict key"),
        ({"x": {"__tensor__": "w", "requires_grad": "yes"}}, "requires_grad"),
        ({"x": {"__tuple__": 5}}, "no list"),
    ]:
        header = dict(w, __metadata__={"format": "ember/1", "ember.structure": json.dumps(structure)})
        path = tmp_path / "s.safetensors"
        path.write_bytes(_file(header, bytes(8)))
        with pytest.raises(CheckpointError, match=words) as info:
            ember.load(path)
        assert str(path) in str(info.value) and "structure at" in str(info.value)
    deep = "[" * 100_000 + "]" * 100_000
    header = dict(w, __metadata__={"format": "ember/1", "ember.structure": deep})
    with pytest.raises(CheckpointError, match="nested too deeply"):
        ember.load(io.BytesIO(_file(header, bytes(8))))
    nested = {"k": None}
    for _ in range(150):
        nested = {"k": nested}
    header = dict(w, __metadata__={"format": "ember/1", "ember.structure": json.dumps(nested)})
    with pytest.raises(CheckpointError, match="deeper than"):
        ember.load(io.BytesIO(_file(header, bytes(8))))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_interrupted_saves_leave_no_temporaries_behind(tmp_path):
    target = tmp_path / "ckpt.pt"
    dead = tmp_path / f".ckpt.pt.{_dead_pid()}.deadbeef.tmp"
    dead.write_bytes(b"half a checkpoint")
    alive = tmp_path / f".ckpt.pt.{os.getppid()}.cafef00d.tmp"  # a writer that is still running
    alive.write_bytes(b"being written")
    other = tmp_path / f".other.pt.{_dead_pid()}.deadbeef.tmp"  # another target's: not ours to clean
    other.write_bytes(b"x")
    ember.save({"w": ember.ones(2)}, target)
    assert not dead.exists()
    assert alive.exists() and other.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([target.name, alive.name, other.name])
    old = os.path.getmtime(alive) - 2 * 24 * 3600  # a day-old temp is stale even if its PID is alive
    os.utime(alive, (old, old))
    ember.save({"w": ember.ones(2)}, target)
    assert not alive.exists()


def test_edited_training_checkpoints_fail_with_the_field_named(tmp_path):
    from ember.train.checkpoint import load_checkpoint, save_checkpoint

    path = tmp_path / "run.ckpt"
    save_checkpoint(path, ember.nn.Linear(2, 1), epochs_completed=1)
    checkpoint = ember.load(path)
    for key, value, words in [("rng", {"ember": "x"}, "rng state"), ("schedulers", {"a": 1}, "'schedulers'"),
                              ("epochs_completed", "1; import os", "'epochs_completed'"), ("history", None, "'history'")]:
        edited = dict(checkpoint, **{key: value})
        ember.save(edited, path, format="safetensors")
        with pytest.raises(CheckpointError, match=words) as info:
            load_checkpoint(path, ember.nn.Linear(2, 1))
        assert str(path) in str(info.value)
