"""Hostile TorchScript archives: code and pickles that try to escape ember's interpreter are refused, each with an
error naming the file, the line and the construct, and nothing they ask for happens (no file is written).

Each archive starts as a real ``torch.jit.save`` of a tiny scripted module (torch 2.13, made in ``tmp_path``); its
``forward`` body (or its data.pkl / member names) is then replaced by the hostile text.
"""
from __future__ import annotations

import io
import re
import zipfile

import pytest

import ember
from ember.jit.torchscript import TorchScriptError
from ember.serialization import CheckpointError

torch = pytest.importorskip("torch")


class Victim(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.fc1(x) + 1


def _archive(tmp_path):
    path = tmp_path / "victim.pt"
    torch.jit.save(torch.jit.script(Victim()), str(path))
    return path


def _rewrite(src, dst, change):
    """Copy zip ``src`` to ``dst`` with ``change(name, data) -> (name, data) | None`` applied to every member."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            out = change(info.filename, zin.read(info))
            if out is not None:
                zout.writestr(out[0], out[1])
    return dst


def _root_source(names):
    return next(n for n in names if n.endswith(".py") and "/code/__torch__" in n and "nn/modules" not in n)


def _with_forward(tmp_path, body, prelude=""):
    """The victim archive with ``forward``'s body replaced by ``body`` (and ``prelude`` put before the class)."""
    src = _archive(tmp_path)
    with zipfile.ZipFile(src) as z:
        root = _root_source(z.namelist())

    def change(name, data):
        if name != root:
            return name, data
        text = data.decode()
        head = text[:text.index("def forward")]
        signature = re.search(r"def forward\(.*?\) -> Tensor:\n", text, re.S).group(0)
        lines = "".join(f"    {line}\n" for line in body.strip("\n").splitlines())
        return name, (prelude + head + signature + lines).encode()
    return _rewrite(src, tmp_path / "hostile.pt", change)


MARKER = "EMBER_HOSTILE_MARKER"

HOSTILE_BODIES = {
    "import": ('return __import__("os").system("touch EMBER_HOSTILE_MARKER")', "name '__import__'"),
    "subclasses": ("return self.__class__.__subclasses__()", "attribute __class__"),
    "exec": ('return exec("open(\'EMBER_HOSTILE_MARKER\', \'w\')")', "name 'exec'"),
    "eval": ('return eval("1")', "name 'eval'"),
    "open": ('return open("EMBER_HOSTILE_MARKER", "w")', "name 'open'"),
    "getattr_str": ('return getattr("abc", "upper")', "attribute access on a str"),
    "getattr_dunder": ('return getattr(self, "__dict__")', "special attributes"),
    "tensor_method": ("return (x).numpy()", "attribute access on a Tensor"),
    "tensor_class": ("return x.__class__", "attribute access on a Tensor"),
    "globals": ("return self.forward.__globals__", "attribute access on a BoundMethod"),
    "torch_save": ('return torch.save(x, "EMBER_HOSTILE_MARKER")', "call to torch.save"),
    "torch_load": ('return torch.load("EMBER_HOSTILE_MARKER")', "call to torch.load"),
    "ops_namespace": ('return ops.os.system("touch EMBER_HOSTILE_MARKER")', "call to ops.os.system"),
    "namespace_index": ('return torch.__builtins__["open"]("EMBER_HOSTILE_MARKER")', "cannot be indexed"),
    "constants_class": ("return CONSTANTS.__class__", "CONSTANTS.__class__"),
    "comprehension": ("return [y for y in range(3)]", "expression ListComp"),
    "lambda": ("return (lambda: 1)()", "expression Lambda"),
    "fstring": ('return f"{x.__class__}"', "expression JoinedStr"),
    "type": ("return type(x)", "name 'type'"),
    "int_subclasses": ("return int.__subclasses__()", "name 'int'"),
    "import_statement": ("import os\nreturn x", "statement Import"),
    "with": ('with open("EMBER_HOSTILE_MARKER", "w") as f:\n  pass\nreturn x', "statement With"),
    "try": ("try:\n  pass\nexcept Exception:\n  pass\nreturn x", "statement Try"),
    "delete": ("del x\nreturn x", "statement Delete"),
    "global": ("global torch\nreturn x", "statement Global"),
    "nested_def": ("def g():\n  return 1\nreturn x", "statement FunctionDef"),
    "module_operand": ("return self + 1", "operand"),
    "set_dunder": ('self.__class__ = 1\nreturn x', "assignment to .__class__"),
    "raise": ('raise RuntimeError("x")', "statement Raise"),
    "starred": ("return torch.add(*[x, x])", "*args"),
    "object_to_builtin": ("return torch.to(self, 7)", "cannot be passed to a builtin"),
    "namespace_to_builtin": ("return torch.copy(torch)", "cannot be passed to a builtin"),
    "method_to_builtin": ("return torch.keys(self.forward)", "cannot be passed to a builtin"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_BODIES))
def test_hostile_code_is_refused(tmp_path, monkeypatch, case):
    monkeypatch.chdir(tmp_path)
    body, expected = HOSTILE_BODIES[case]
    loaded = ember.jit.load(_with_forward(tmp_path, body))
    with pytest.raises(TorchScriptError) as error:
        loaded(ember.ones(2, 2))
    message = str(error.value)
    assert expected in message, message
    assert re.match(r"code/__torch__.*\.py, line \d+: ", message), message
    assert not (tmp_path / MARKER).exists()


def test_format_string_cannot_reach_attributes(tmp_path):
    """torch.format replaces only ``{}``: ``{0.__class__.__mro__}`` stays text (str.format would expand it)."""
    loaded = ember.jit.load(_with_forward(tmp_path, 'return torch.format("{0.__class__.__mro__} {}", 7)'))
    assert loaded(ember.ones(2, 2)) == "{0.__class__.__mro__} 7"


def test_raise_exception_names_only_builtin_exceptions(tmp_path):
    loaded = ember.jit.load(_with_forward(tmp_path, 'ops.prim.RaiseException("boom", "os.system")\nreturn x'))
    with pytest.raises(RuntimeError) as error:
        loaded(ember.ones(2, 2))
    assert type(error.value) is RuntimeError and str(error.value) == "boom"
    loaded = ember.jit.load(_with_forward(tmp_path, 'ops.prim.RaiseException("bad", "builtins.KeyError")'))
    with pytest.raises(KeyError):
        loaded(ember.ones(2, 2))


def test_recursion_is_bounded(tmp_path):
    loaded = ember.jit.load(_with_forward(tmp_path, "return (self).forward(x, )"))
    with pytest.raises(TorchScriptError, match="nests deeper than"):
        loaded(ember.ones(2, 2))


@pytest.mark.parametrize("prelude, expected", [
    ("import os\n", "import"),
    ("x = __import__('os')\n", "only classes and functions"),
    ("class Evil(os.Thing):\n  pass\n", "is not one of"),
    ("@staticmethod\ndef f():\n  return 1\n", "decorators"),
    ("class Evil(Module):\n  __parameters__ = __import__('os')\n", "not a literal"),
    ("def f(a=__import__('os')):\n  return a\n", "not a literal"),
])
def test_hostile_top_level_is_refused_at_load(tmp_path, monkeypatch, prelude, expected):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TorchScriptError, match=re.escape(expected)):
        ember.jit.load(_with_forward(tmp_path, "return x", prelude=prelude))


def _with_data(tmp_path, data_pkl):
    src = _archive(tmp_path)
    return _rewrite(src, tmp_path / "hostile_data.pt",
                    lambda name, data: (name, data_pkl if name.endswith("/data.pkl") else data))


def test_hostile_data_pickle_global_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    payload = b"\x80\x02cposix\nsystem\nX\x1b\x00\x00\x00touch EMBER_HOSTILE_MARKER\x85R."
    with pytest.raises(CheckpointError, match="posix.system"):
        ember.jit.load(_with_data(tmp_path, payload))
    assert not (tmp_path / MARKER).exists()


def test_data_pickle_class_not_in_code_is_refused(tmp_path):
    payload = b"\x80\x02c__torch__.evil\nNothing\n)\x81}b."
    with pytest.raises(CheckpointError, match="does not define"):
        ember.jit.load(_with_data(tmp_path, payload))


def test_data_pickle_reduce_of_torchscript_class_is_refused(tmp_path):
    payload = b"\x80\x02c__torch__\nVictim\n)R."
    with pytest.raises(CheckpointError, match="NEWOBJ and BUILD only"):
        ember.jit.load(_with_data(tmp_path, payload))


def test_data_pickle_custom_cpp_class_is_refused(tmp_path):
    payload = b"\x80\x02c__torch__.torch.classes.quantized\nConv2dPackedParamsBase\n)\x81}b."
    with pytest.raises(CheckpointError, match="C\\+\\+ custom classes"):
        ember.jit.load(_with_data(tmp_path, payload))


def test_dunder_attribute_in_state_is_refused(tmp_path):
    src = _archive(tmp_path)
    with zipfile.ZipFile(src) as z:
        root = _root_source(z.namelist())
        qual = root.split("/code/")[1][:-3].replace("/", ".")
    payload = (b"\x80\x02c" + qual.encode() + b"\nVictim\n)\x81}X\t\x00\x00\x00__class__K\x01sb.")
    with pytest.raises(CheckpointError, match="leading double underscores"):
        ember.jit.load(_with_data(tmp_path, payload))


def test_code_member_with_path_tricks_is_refused(tmp_path):
    src = _archive(tmp_path)
    with zipfile.ZipFile(src) as z:
        prefix = z.namelist()[0].split("/")[0]
    dst = _rewrite(src, tmp_path / "paths.pt", lambda name, data: (name, data))
    with zipfile.ZipFile(dst, "a") as z:
        z.writestr(f"{prefix}/code/__torch__/../../evil.py", b"import os\n")
    with pytest.raises(CheckpointError, match="not a TorchScript source file name"):
        ember.jit.load(dst)


def test_damaged_and_oversized_members(tmp_path):
    src = _archive(tmp_path)
    bad_version = _rewrite(src, tmp_path / "v.pt",
                           lambda name, data: (name, b"999\n" if name.endswith("/version") else data))
    with pytest.raises(CheckpointError, match="archive versions"):
        ember.jit.load(bad_version)
    not_utf8 = _rewrite(src, tmp_path / "u.pt", lambda name, data: (
        name, b"\xff\xfe" if name.endswith(".py") else data))
    with pytest.raises(CheckpointError, match="UTF-8"):
        ember.jit.load(not_utf8)
    buffer = io.BytesIO(src.read_bytes()[:-200])
    with pytest.raises(ValueError, match="truncated or damaged"):
        ember.jit.load(buffer)
