"""Hand-written hostile pickles inside otherwise valid torch zip archives, and a writer killed mid-save (formats21).

Each payload is refused with a CheckpointError (UnsafeGlobalError for globals) naming the construct, nothing runs,
nothing is allocated from a size the file states, nothing is written outside; a save killed with SIGKILL leaves the
old file loadable and its temporary is removed by the next save.
"""
from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.serialization import CheckpointError, UnsafeGlobalError

_STORAGE = (b"(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpu"
            b"K\x02tQ")  # persistent id ('storage', FloatStorage, '0', 'cpu', 2): the archive's two floats


def _archive(pickle_body: bytes, extra: dict | None = None) -> io.BytesIO:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("archive/data.pkl", b"\x80\x02" + pickle_body + b".")
        z.writestr("archive/data/0", np.ones(2, np.float32).tobytes())
        for name, data in (extra or {}).items():
            z.writestr(name, data)
    out.seek(0)
    return out


def _tensor(offset: bytes, size: bytes, stride: bytes) -> bytes:
    return (b"ctorch._utils\n_rebuild_tensor_v2\n(" + _STORAGE + offset + size + stride
            + b"\x89ccollections\nOrderedDict\n)RtR")


_GLOBALS = {  # payload -> text the refusal must contain
    "os.system": (b"cos\nsystem\nX\x04\x00\x00\x00true\x85R", "GLOBAL os.system"),
    "builtins.eval": (b"c__builtin__\neval\nX\x01\x00\x00\x001\x85R", "GLOBAL builtins.eval"),
    "getattr escape": (b"c__builtin__\ngetattr\nctorch\nSize\nX\x07\x00\x00\x00__new__\x86R", "builtins.getattr"),
    "dotted attribute of an allowed global": (b"ctorch._utils\n_rebuild_tensor_v2.__globals__\n",
                                               "_rebuild_tensor_v2.__globals__"),
    "nested class lookup": (b"ccollections\nOrderedDict.__init__\n", "OrderedDict.__init__"),
    "STACK_GLOBAL subprocess": (b"X\x0a\x00\x00\x00subprocessX\x05\x00\x00\x00Popen\x93", "subprocess.Popen"),
    "importlib": (b"cimportlib\nimport_module\nX\x02\x00\x00\x00os\x85R", "importlib.import_module"),
}


@pytest.mark.parametrize("case", sorted(_GLOBALS))
def test_hostile_globals_are_refused_by_name(case) -> None:
    body, text = _GLOBALS[case]
    with pytest.raises(UnsafeGlobalError, match=text.replace(".", r"\.")) as info:
        ember.load(_archive(body))
    assert "Weights only load failed" in str(info.value) and "weights_only=False" in str(info.value)


_SHAPES = {  # payload -> text of the refusal
    "tensor past its storage": (_tensor(b"K\x00", b"K\x03\x85", b"K\x01\x85"), "past the storage"),
    "huge size on a small storage": (_tensor(b"K\x00", b"\x8a\x06\x00\x00\x00\x00\x00\x01\x85", b"K\x01\x85"),
                                     "past the storage"),
    "negative stride": (_tensor(b"K\x00", b"K\x02\x85", b"J\xff\xff\xff\xff\x85"), "negative"),
    "offset past the end": (_tensor(b"K\x05", b"K\x01\x85", b"K\x01\x85"), "past the storage"),
    "rebuild called on a list": (b"ctorch._utils\n_rebuild_tensor_v2\n(]K\x00K\x01\x85K\x01\x85\x89ccollections\n"
                                 b"OrderedDict\n)RtR", "instead of a storage"),
    "torch.Tensor called with a size": (b"ctorch\nTensor\nJ\x00\x00\x00\x40\x85R", "only allowed as the type"),
    "bytearray of a size": (b"c__builtin__\nbytearray\nJ\x00\x00\x00\x40\x85R", "only from bytes"),
    "storage declaring 2**60 elements": (b"(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000"
                                         b"X\x03\x00\x00\x00cpu\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x10tQ",
                                         "holds 8 bytes"),
    "setitem on a tensor": (_tensor(b"K\x00", b"K\x02\x85", b"K\x01\x85") + b"K\x00K\x05s", "SETITEM"),
}


@pytest.mark.parametrize("case", sorted(_SHAPES))
def test_hostile_shapes_and_calls_are_refused(case) -> None:
    body, text = _SHAPES[case]
    with pytest.raises(CheckpointError, match=text):
        ember.load(_archive(body))


def test_member_names_with_dot_dot_are_never_written(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    body = _tensor(b"K\x00", b"K\x02\x85", b"K\x01\x85")
    got = ember.load(_archive(body, {"../../escaped": b"x", "/abs/escaped": b"y"}))
    assert got.tolist() == [1.0, 1.0]
    assert not any("escaped" in p.name for p in tmp_path.rglob("*")) and not Path("/abs/escaped").exists()


_SLOW_SAVE = """
import sys, time, ember
class Slow:
    def __reduce__(self):
        print("writing", flush=True)
        time.sleep(60)
        return (int, (1,))
ember.save({"w": ember.ones(1000), "slow": Slow()}, sys.argv[1])
"""


@pytest.mark.slow  # a child process importing ember: 3-16 s; the fast twin is
# test_serialization_safetensors_roundtrip.py::test_atomic_write_keeps_old_file_on_failure (a write that raises)
def test_a_save_killed_midway_leaves_the_old_file_and_no_temporary(tmp_path) -> None:
    target = tmp_path / "ckpt.pt"
    ember.save({"version": 1, "w": ember.zeros(3)}, target)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    child = subprocess.Popen([sys.executable, "-c", _SLOW_SAVE, str(target)], stdout=subprocess.PIPE, env=env)
    try:
        assert child.stdout.readline().strip() == b"writing"  # inside ember.save, its temporary file open
        temporaries = [p for p in tmp_path.iterdir() if p.name.startswith(".ckpt.pt.")]
        assert temporaries, "ember.save writes next to the target first"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert ember.load(target)["version"] == 1  # the old file is whole
    ember.save({"version": 2}, target)  # the next save of the target removes the dead writer's temporary
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt"]
    assert ember.load(target) == {"version": 2}
