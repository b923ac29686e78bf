"""A saved graph edited by hand (or by an attacker) never runs code and fails with a clear error.

The graph below is saved, then each field of ``graph.json`` is replaced by code-injection strings,
wrong types, deep nesting, huge shapes and unknown ops. Loading (and, where loading accepts the
values, fusing and running, with the Numba code generator forced on) must never run the injected
code (a marker file) and must fail with ember's error classes, naming the file and the record.
"""
from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ember
import ember.graph as G
from ember.graph.passes import fuse_numba
from ember.graph.passes import kernel_text
from ember.graph.passes.kernel_text import UnsafeKernelValue
from ember.serialization import CheckpointError


def _payloads(marker: Path) -> list[str]:
    touch = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    return [
        f"{touch} or in0",  # valid Python when pasted where a kernel name goes (then "_" is appended)
        f"0) + ({touch}) + (0",
        f"'; {touch}; '",
        f"float({touch} or 0)",
        f"{{'__reduce__': {touch}}}",
        # Breaks out of the generated expression onto a line of its own, run when the source is exec'd
        # (this one ran on ember before the fix: the Numba generator pasted attribute strings).
        f"in0))\n{touch}\nif 0:\n        ((in0",
        f"in0)\n{touch}\nif 0:\n        (in0",
    ]


STEPS = {
    # a row reduction ends the group: NumPy kernel; sum's and to_dtype's attributes
    "reduce": lambda x: ((x.clamp(min=-1.0, max=2.0) * 3 + 1).exp().sum(dim=1, keepdim=False) ** 2).to(ember.float32),
    # elementwise only: one Numba loop generated as source (with the numba_everywhere fixture)
    "elementwise": lambda x: (x.clamp(min=-1.0, max=2.0) * 3 + 1).exp(),
}


@pytest.fixture(params=sorted(STEPS))
def saved(tmp_path, request):
    f = ember.compile(STEPS[request.param], warmup=0)
    x = ember.ones(4, 5, dtype=ember.float64)
    expected = f(x)
    f.save(str(tmp_path / "g"))
    doc = json.loads((tmp_path / "g" / "graph.json").read_text())
    return tmp_path, doc, x, expected


def _write(tmp_path: Path, doc: dict, name: str) -> Path:
    target = tmp_path / name
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(tmp_path / "g", target)
    (target / "graph.json").write_text(json.dumps(doc))
    return target


def _try_load_and_run(path: Path, x) -> Any:
    """The error loading or running raised, else the output."""
    try:
        return G.load(str(path))(x)[0]
    except Exception as error:  # noqa: BLE001 - an op refusing a bad value is fine too, as long as nothing ran
        return error


@pytest.fixture()
def numba_everywhere(monkeypatch):
    """Make every fused group go through the Numba source generator, where pasted text would run."""
    monkeypatch.setattr(fuse_numba, "MIN_STEPS", 1)
    monkeypatch.setattr(fuse_numba, "MIN_STEPS_BIG", 1)


def test_the_unedited_graph_loads_and_runs(saved, numba_everywhere):
    tmp_path, doc, x, expected = saved
    got = G.load(str(_write(tmp_path, doc, "same")))(x)[0]
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-6)


def test_injection_strings_in_every_attribute_and_literal_never_run(saved, numba_everywhere):
    tmp_path, doc, x, expected = saved
    marker = tmp_path / "PWNED"
    attempts, refused = 0, 0
    for k, node in enumerate(doc["nodes"]):
        fields = [("attrs", name) for name in node["attrs"]] + \
                 [("inputs", j) for j, i in enumerate(node["inputs"]) if "literal" in i]
        for where, key in fields:
            for payload in _payloads(marker):
                for encoded in ({"str": payload}, {"tuple": [{"str": payload}]}, payload):
                    bad = copy.deepcopy(doc)
                    if where == "attrs":
                        bad["nodes"][k]["attrs"][key] = encoded
                    else:
                        bad["nodes"][k]["inputs"][key] = {"literal": encoded}
                    result = _try_load_and_run(_write(tmp_path, bad, "bad"), x)
                    attempts += 1
                    assert not marker.exists(), (k, where, key, payload)
                    if isinstance(result, BaseException):
                        refused += 1
                    else:  # only an attribute the forward never reads (to_dtype's "source") may pass
                        assert (doc["nodes"][k]["op"], key) == ("to_dtype", "source"), (k, where, key)
                        np.testing.assert_allclose(result.numpy(), expected.numpy(), rtol=1e-6)
    assert attempts >= 7 * 3 * 4 and refused >= attempts - 21  # to_dtype.source: 21 at most  # clamp min/max, sum dims/keepdim, literals, dtype


def test_string_in_a_numeric_attribute_is_refused_at_load(saved):
    tmp_path, doc, x, _ = saved
    marker = tmp_path / "PWNED"
    bad = copy.deepcopy(doc)
    clamp = next(n for n in bad["nodes"] if n["op"] == "clamp")
    clamp["attrs"]["min"] = {"str": _payloads(marker)[0]}
    with pytest.raises(CheckpointError, match="attribute 'min' of op 'clamp' holds a string"):
        G.load(str(_write(tmp_path, bad, "bad")))
    assert not marker.exists()


def test_the_code_generators_never_paste_strings(tmp_path):
    """Second lock, for values that reach the fuser some other way: the generators refuse them."""
    marker = tmp_path / "PWNED"
    payload = _payloads(marker)[5]
    numba_kernel = fuse_numba.NumbaKernel([("t1", "maximum", ["in0", payload], {})], 1, ["t1"], "", [])
    if fuse_numba.available():
        with pytest.raises(UnsafeKernelValue, match="not a name the fuser made"):
            numba_kernel._build((np.ones(3),))
    for value in (payload, object(), {"__import__('os')": 1}, b"bytes"):
        with pytest.raises(UnsafeKernelValue):
            kernel_text.operand(value)
    assert kernel_text.literal((1, 2.5, None, True, float("inf"))) == "(1, 2.5, None, True, float('inf'))"
    assert not marker.exists()


def _mutations(doc: dict) -> list[tuple[str, dict, str]]:
    """(case, edited document, words the error must contain)."""
    out = []

    def edit(case: str, words: str, fn) -> None:
        bad = copy.deepcopy(doc)
        fn(bad)
        out.append((case, bad, words))

    node = next((k for k, n in enumerate(doc["nodes"]) if n["op"] == "sum"), None)
    if node is None:
        return out
    deep: dict = {"int": 1}
    for _ in range(200):
        deep = {"tuple": [deep]}
    edit("unknown op", "not a registered op", lambda d: d["nodes"][0].update(op="__import__('os').system"))
    edit("fused op", "not a registered op", lambda d: d["nodes"][0].update(op="fused"))
    edit("op not a string", "not a registered op", lambda d: d["nodes"][0].update(op=["clamp"]))
    edit("unknown attribute", "has no attribute", lambda d: d["nodes"][node]["attrs"].update(evil={"int": 1}))
    edit("private attribute", "private", lambda d: d["nodes"][node]["attrs"].update(_inplace={"int": 1}))
    edit("bool attr given a string", "holds a string", lambda d: d["nodes"][node]["attrs"].update(keepdim={"str": "x"}))
    edit("bool attr given an int", "expected bool", lambda d: d["nodes"][node]["attrs"].update(keepdim={"int": 1}))
    edit("deeply nested attribute", "deeper than", lambda d: d["nodes"][node]["attrs"].update(dims=deep))
    edit("untagged attribute", "tagged value", lambda d: d["nodes"][node]["attrs"].update(dims=[1]))
    edit("string in a tuple attribute", "holds a string",
         lambda d: d["nodes"][node]["attrs"].update(dims={"tuple": [{"str": "x"}]}))
    edit("unknown tag", "tagged value", lambda d: d["nodes"][node]["attrs"].update(dims={"code": "x"}))
    edit("int tag holding a string", "wrong type", lambda d: d["nodes"][node]["attrs"].update(dims={"int": "1"}))
    edit("huge string", "wrong type", lambda d: d["nodes"][node]["attrs"].update(dims={"str": "x" * 10_000}))
    edit("negative shape", "dimension outside", lambda d: d["values"][0].update(shape=[-1, 5]))
    edit("huge shape", "elements", lambda d: d["values"][0].update(shape=[1 << 30, 1 << 30]))
    edit("too many dims", "at most", lambda d: d["values"][0].update(shape=[1] * 100))
    edit("shape not ints", "not a list", lambda d: d["values"][0].update(shape=["4", 5]))
    edit("unknown dtype", "not an ember dtype", lambda d: d["values"][0].update(dtype="object"))
    edit("bad device", "device", lambda d: d["values"][0].update(device="cpu; import os"))
    edit("bad kind", "kind", lambda d: d["values"][0].update(kind="exec"))
    edit("duplicate id", "new integer", lambda d: d["values"][1].update(id=d["values"][0]["id"]))
    edit("dangling input", "not {'value'", lambda d: d["nodes"][0]["inputs"].__setitem__(0, {"value": 10**6}))
    edit("dangling output id", "not the id", lambda d: d["outputs"].append(999_999))
    edit("string literal input", "number", lambda d: d["nodes"][0]["inputs"].append({"literal": {"str": "x"}}))
    edit("unknown top field", "unknown fields", lambda d: d.update(code="print(1)"))
    edit("name not a string", "'name'", lambda d: d.update(name={"x": 1}))
    edit("top-level values not a list", "'values'", lambda d: d.update(values={"0": 1}))
    edit("output shape lies", "shape rule", lambda d: d["values"][-1].update(shape=[7]))
    edit("output dtype lies", "shape rule", lambda d: d["values"][-1].update(dtype="int8"))
    edit("too many outputs", "outputs", lambda d: d["nodes"][0]["outputs"].append(d["inputs"][0]))
    # second pass: cycles, forward references, numbers no dtype holds, strings outside an op's set
    edit("node reads its own output", "inconsistent",
         lambda d: d["nodes"][0]["inputs"].__setitem__(0, {"value": d["nodes"][0]["outputs"][0]}))
    edit("node reads a later node's output", "inconsistent",
         lambda d: d["nodes"][0]["inputs"].__setitem__(0, {"value": d["nodes"][-1]["outputs"][0]}))
    edit("two nodes write one value", "fresh values",
         lambda d: d["nodes"][1].update(outputs=list(d["nodes"][0]["outputs"])))
    edit("bool as a value id", "not {'value'", lambda d: d["nodes"][0]["inputs"].__setitem__(0, {"value": True}))
    edit("int literal beyond int64", "wrong type or range",
         lambda d: d["nodes"][0]["inputs"].append({"literal": {"int": 10 ** 400}}))
    edit("float literal beyond float", "wrong type or range",
         lambda d: d["nodes"][0]["inputs"].append({"literal": {"float": 10 ** 400}}))
    edit("dims beyond int64", "wrong type or range",
         lambda d: d["nodes"][node]["attrs"].update(dims={"tuple": [{"int": 1 << 70}]}))
    edit("another op spliced in with the old attributes", "(send)", lambda d: d["nodes"][0].update(op="send"))
    return out


def test_string_attributes_take_only_the_values_the_op_knows(tmp_path):
    """gelu's ``approximate`` and einsum's ``equation`` are the only string attributes; a string outside their
    sets (an injection, or a value eager gelu refuses) fails at load, naming the node."""
    f = ember.compile(lambda a, b: ember.einsum("ij,jk->ik", ember.nn.functional.gelu(a, approximate="tanh"), b),
                      warmup=0)
    a, b = ember.ones(2, 3, dtype=ember.float64), ember.ones(3, 2, dtype=ember.float64)
    expected = f(a, b)
    f.save(str(tmp_path / "g"))
    doc = json.loads((tmp_path / "g" / "graph.json").read_text())
    np.testing.assert_allclose(G.load(str(tmp_path / "g"))(a, b)[0].numpy(), expected.numpy())
    marker = tmp_path / "ran"
    for op, attr, value in [("gelu", "approximate", "sigmoid"),
                            ("gelu", "approximate", f"tanh'); __import__('pathlib').Path({str(marker)!r}).touch(); ('"),
                            ("einsum", "equation", "ij,jk->ik; import os"), ("einsum", "equation", "i" * 300)]:
        bad = copy.deepcopy(doc)
        next(n for n in bad["nodes"] if n["op"] == op)["attrs"][attr] = {"str": value}
        path = _write(tmp_path, bad, "bad")
        with pytest.raises(CheckpointError, match=f"attribute '{attr}' of op '{op}'"):
            G.load(str(path))
    assert not marker.exists()


def test_wrong_types_deep_nesting_huge_shapes_and_unknown_ops_are_refused(saved):
    tmp_path, doc, x, _ = saved
    for case, bad, words in _mutations(doc):
        path = _write(tmp_path, bad, "bad")
        with pytest.raises(CheckpointError) as info:
            G.load(str(path))
        message = str(info.value)
        assert "graph.json" in message and words in message, (case, message)


def test_malformed_json_files(saved):
    tmp_path, doc, x, _ = saved
    path = _write(tmp_path, doc, "bad")
    for text, words in [('{"a": 1, "a": 2}', "duplicate"), ('{"x": NaN}', "NaN"), ("[" * 100_000, "too deeply"),
                        ("\xff\xfe", "UTF-8"), ("[1, 2]", "not an ember graph")]:
        (path / "graph.json").write_bytes(text.encode("latin-1"))
        with pytest.raises(CheckpointError, match=words):
            G.load(str(path))


def test_weights_must_match_the_declared_values(saved):
    tmp_path, doc, x, _ = saved
    path = _write(tmp_path, doc, "bad")
    (path / "weights.safetensors").write_bytes(b"\x08" + bytes(7) + b"{}      ")
    record = next((r for r in doc["values"] if r.get("weight")), None)
    if record is not None:
        with pytest.raises(CheckpointError, match="lacks"):
            G.load(str(path))
    (path / "weights.safetensors").write_bytes(b"garbage!")
    with pytest.raises(CheckpointError, match="weights.safetensors"):
        G.load(str(path))


def test_graph_save_is_atomic_and_replaces_the_whole_directory(tmp_path, monkeypatch):
    f = ember.compile(lambda x: x * 2 + 1, warmup=0)
    f(ember.ones(3))
    target = tmp_path / "g"
    f.save(str(target))
    (target / "stray.txt").write_text("from an older save")
    f.save(str(target))  # replaced as a whole: nothing of the old directory survives
    assert sorted(p.name for p in target.iterdir()) == ["graph.json", "weights.safetensors"]
    before = (target / "graph.json").read_bytes()

    import ember.graph.serialize as serialize_module

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(serialize_module.json, "dump", broken)
    g = ember.compile(lambda x: x * 5, warmup=0)
    g(ember.ones(3))
    with pytest.raises(OSError, match="disk full"):
        g.save(str(target))
    monkeypatch.undo()
    assert (target / "graph.json").read_bytes() == before  # the old graph is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g"]  # and no temporary directory is left
    np.testing.assert_allclose(G.load(str(target))(ember.ones(3))[0].numpy(), [3.0, 3.0, 3.0])
