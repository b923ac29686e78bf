"""The file matrix (formats21): objects written by torch 2.13 read by ember.load, objects written by ember.save read by
torch.load(weights_only=True), and which globals each library's weights-only loader accepts, case by case.

Every file is written into memory or tmp_path by the real library; nothing here is a stored fixture.
"""
from __future__ import annotations

import collections
import datetime
import io
import os
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

warnings.filterwarnings("ignore", message=".*(TypedStorage|Sparse CSR|sparse_compressed).*")


def _name(dtype) -> str:
    return str(dtype).split(".")[-1]


def _np(t):
    """A tensor's values as float64/complex NumPy (bfloat16/float8 read through float32)."""
    if isinstance(t, torch.Tensor):
        t = t.detach().resolve_conj().resolve_neg()
        if t.is_quantized:
            t = t.dequantize()
        if t.layout != torch.strided:
            t = t.to_dense()
        if t.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz,
                       torch.float8_e5m2fnuz, torch.uint16, torch.uint32):
            t = t.to(torch.float64 if t.dtype in (torch.uint16, torch.uint32) else torch.float32)
        if t.dtype == torch.uint64:
            return t.numpy().astype(np.float64)
        return t.numpy()
    t = t.detach()
    if t.is_quantized:
        t = t.dequantize()
    if t.layout is not ember.strided:
        t = t.to_dense()
    if "float8" in t.dtype.name or t.dtype is ember.bfloat16:
        t = t.float()
    return np.asarray(t.numpy(), dtype=np.float64 if t.dtype.name.startswith("uint") and t.dtype.itemsize > 1
                      else None)


def _same(a, b, path="$"):
    """``a`` (torch's object) and ``b`` (ember's) hold the same structure, types, dtypes, shapes and values."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, ember.Tensor), (path, type(b))
        assert _name(a.dtype) == _name(b.dtype), (path, a.dtype, b.dtype)
        assert tuple(a.shape) == tuple(b.shape), (path, a.shape, b.shape)
        assert a.requires_grad == b.requires_grad, path
        assert isinstance(a, torch.nn.Parameter) == isinstance(b, ember.nn.Parameter), (path, type(b))
        assert str(a.layout).split(".")[-1] == str(b.layout).split(".")[-1], (path, a.layout, b.layout)
        if a.device.type == "meta":
            assert b.device.type == "meta", path
        else:
            np.testing.assert_array_equal(_np(a), _np(b), err_msg=path)
    elif isinstance(a, torch.Size):
        assert isinstance(b, ember.Size) and tuple(a) == tuple(b), (path, b)
    elif isinstance(a, dict):
        assert type(a).__name__ == type(b).__name__ and list(a) == list(b), (path, type(b), list(b))
        for key in a:
            _same(a[key], b[key], f"{path}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), (path, type(b))
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, (torch.dtype, torch.device, torch.layout)) or type(a).__name__ == "qscheme":
        assert str(a).replace("torch.", "") == str(b).replace("ember.", ""), (path, a, b)
    elif isinstance(a, float) and a != a:
        assert b != b, path
    else:
        assert type(a) is type(b) and a == b, (path, a, b)


def _torch_cases() -> dict:
    """name -> a function building the object torch saves (a fresh one each call)."""
    def base():
        return torch.arange(24, dtype=torch.float32).reshape(4, 6)

    def views():
        b = base()
        return {"base": b, "slice": b[1:3, 2:5], "t": b.t(), "row": b[3], "step": b[:, ::2],
                "expand": torch.arange(3.0).expand(4, 3), "scalar_view": b[2, 2]}

    def coo():
        return torch.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3))

    cases = {
        "views of one storage": views,
        "0-dim and empty": lambda: [torch.tensor(2.5), torch.empty(0, 3), torch.zeros(2, 0, dtype=torch.int64)],
        "parameters": lambda: {"p": torch.nn.Parameter(torch.randn(2, 2)),
                               "frozen": torch.nn.Parameter(torch.randn(2), requires_grad=False)},
        "requires_grad tensor": lambda: torch.ones(3, requires_grad=True),
        "containers": lambda: collections.OrderedDict(a=[1, (2.0, "x", None, True)], b={3: b"raw", (1, 2): 1 + 2j},
                                                      c={1, 2}, d=frozenset([3]), e=2**70, f=[float("inf")]),
        "torch values": lambda: [torch.Size([2, 3]), torch.float16, torch.device("cpu"), torch.bfloat16],
        "Counter and bytearray": lambda: {"c": collections.Counter("aab"), "b": bytearray(b"xy")},
        "channels_last": lambda: torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
        "conj and neg bits": lambda: [torch.tensor([1 + 2j]).conj(), torch.tensor([1 + 2j]).conj().imag],
        "sparse coo": lambda: {"u": coo(), "c": coo().coalesce(),
                               "hybrid": torch.sparse_coo_tensor([[0, 1]], torch.ones(2, 3), (4, 3))},
        "sparse csr/csc": lambda: {"csr": torch.eye(3).to_sparse_csr(), "csc": torch.tensor([[0., 2.], [3., 0.]])
                                   .to_sparse_csc()},
        "quantized": lambda: [torch.quantize_per_tensor(torch.linspace(-1, 1, 6), 0.1, 3, torch.quint8),
                              torch.quantize_per_channel(torch.randn(3, 2), torch.tensor([0.1, 0.2, 0.3]),
                                                         torch.tensor([0, 1, 2]), 0, torch.qint8)],
        "meta tensor": lambda: torch.empty(3, 4, device="meta"),
        "nn.Buffer": lambda: {"buf": torch.nn.Buffer(torch.ones(2)), "plain": torch.zeros(1)},
        "qschemes and layouts": lambda: [torch.per_tensor_symmetric, torch.per_channel_affine, torch.sparse_coo],
    }
    for dt in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint16,
               torch.uint32, torch.uint64, torch.float16, torch.bfloat16, torch.float32, torch.float64,
               torch.complex64, torch.complex128, torch.float8_e4m3fn, torch.float8_e5m2):
        def typed(dt=dt):
            t = (torch.arange(12) % 5).to(dt).reshape(3, 4)
            return {"t": t, "col": t[:, 1], "tail": t.reshape(-1)[5:]}
        cases[f"dtype {_name(dt)}"] = typed
    return cases


_TORCH_CASES = _torch_cases()


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
@pytest.mark.parametrize("case", sorted(_TORCH_CASES))
def test_torch_save_files_load_in_ember(case, legacy, tmp_path) -> None:
    obj = _TORCH_CASES[case]()
    if legacy and case in ("meta tensor",):
        pytest.skip("torch's legacy writer cannot save meta tensors")
    path = tmp_path / "t.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
    # compared with the object saved (torch 2.13 itself cannot read its legacy files of float8/uint16-64 tensors:
    # "type object 'torch.storage.UntypedStorage' has no attribute 'dtype'")
    for mmap in (False, True):
        _same(obj, ember.load(path, mmap=mmap))


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_views_stay_one_storage_in_ember(legacy, tmp_path) -> None:
    path = tmp_path / "v.pt"
    torch.save(_TORCH_CASES["views of one storage"](), path, _use_new_zipfile_serialization=not legacy)
    for mmap in (False, True):
        got = ember.load(path, mmap=mmap)
        storages = {got[k].untyped_storage().data_ptr() for k in ("base", "slice", "t", "row", "step", "scalar_view")}
        assert len(storages) == 1 and got["slice"].untyped_storage().nbytes() == 96  # torch's storage, not the file
        got["slice"][0, 0] = -1.0  # base[1, 2]
        assert float(got["base"][1, 2]) == -1.0 and float(got["t"][2, 1]) == -1.0
        got["step"][3, 0] = -2.0  # base[3, 0]
        assert float(got["row"][0]) == -2.0
    assert float(torch.load(path)["base"][1, 2]) == 8.0  # copy-on-write: the file is unchanged


def _ember_cases() -> dict:
    def views():
        b = ember.arange(24, dtype=ember.float32).reshape(4, 6)
        return {"base": b, "slice": b[1:3, 2:5], "t": b.t(), "row": b[3], "step": b[:, ::2],
                "expand": ember.arange(3.0).expand(4, 3), "scalar_view": b[2, 2]}

    cases = {
        "views of one storage": views,
        "0-dim and empty": lambda: [ember.tensor(2.5), ember.empty(0, 3), ember.zeros(2, 0, dtype=ember.int64)],
        "parameters": lambda: {"p": ember.nn.Parameter(ember.randn(2, 2)),
                               "frozen": ember.nn.Parameter(ember.randn(2), requires_grad=False)},
        # (no frozenset: torch's weights_only refuses it; ember reads it)
        "containers": lambda: collections.OrderedDict(a=[1, (2.0, "x", None, True)], b={3: b"raw", (1, 2): 1 + 2j},
                                                      c={1, 2}, e=2**70),
        "ember values": lambda: [ember.Size([2, 3]), ember.float16, ember.device("cpu"), ember.uint16],
        "Counter and bytearray": lambda: {"c": collections.Counter("aab"), "b": bytearray(b"xy")},
        "negative strides": lambda: ember.arange(6.0).flip(0),
        "sparse": lambda: {"coo": ember.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2)),
                           "csr": ember.eye(3).to_sparse_csr(), "csc": ember.eye(2).to_sparse_csc()},
        "meta tensor": lambda: ember.empty(3, 4, device="meta"),
        "nn.Buffer": lambda: {"buf": ember.nn.Buffer(ember.ones(2)), "plain": ember.zeros(1)},
        "qschemes and layouts": lambda: [ember.per_tensor_symmetric, ember.per_channel_affine, ember.sparse_coo],
        "quantized": lambda: ember.quantize_per_tensor(ember.linspace(-1, 1, 6), 0.1, 3, ember.quint8),
    }
    for name in ("bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64", "float16",
                 "bfloat16", "float32", "float64", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2"):
        def typed(name=name):
            t = (ember.arange(12) % 5).to(getattr(ember, name)).reshape(3, 4)
            return {"t": t, "col": t[:, 1], "tail": t.reshape(-1)[5:]}
        cases[f"dtype {name}"] = typed
    return cases


_EMBER_CASES = _ember_cases()


@pytest.mark.parametrize("case", sorted(_EMBER_CASES))
def test_ember_save_files_load_in_torch_weights_only(case) -> None:
    obj = _EMBER_CASES[case]()
    buffer = io.BytesIO()
    ember.save(obj, buffer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)
    _same(loaded, obj)
    _same(loaded, ember.load(io.BytesIO(buffer.getvalue())))  # and back in ember, the same


def test_ember_views_stay_one_storage_in_torch() -> None:
    buffer = io.BytesIO()
    ember.save(_EMBER_CASES["views of one storage"](), buffer)
    got = torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)
    pointer = got["base"].untyped_storage().data_ptr()
    for key in ("slice", "t", "row", "step", "scalar_view"):
        assert got[key].untyped_storage().data_ptr() == pointer, key
    assert got["expand"].stride() == (0, 1) and got["expand"].untyped_storage().nbytes() == 12
    got["slice"][0, 0] = -1.0
    assert float(got["base"][1, 2]) == -1.0 and float(got["t"][2, 1]) == -1.0


def test_buffers_and_attributes_keep_their_marks_both_ways() -> None:
    buffer = io.BytesIO()
    torch.save({"b": torch.nn.Buffer(torch.ones(2), persistent=False)}, buffer)
    got = ember.load(io.BytesIO(buffer.getvalue()))["b"]
    assert isinstance(got, ember.nn.Buffer) and got.persistent is False
    t = ember.ones(2)
    t.note = "kept"
    out = io.BytesIO()
    ember.save({"t": t, "b": ember.nn.Buffer(ember.ones(1), persistent=False)}, out)
    loaded = torch.load(io.BytesIO(out.getvalue()), weights_only=True)
    assert loaded["t"].note == "kept" and loaded["b"]._is_buffer and loaded["b"].persistent is False


def test_storages_load_as_typed_storages_both_ways() -> None:
    x = torch.arange(4.0)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.save({"s": x.storage(), "x": x, "u": torch.ones(1, dtype=torch.float16).untyped_storage()}, buffer)
    got = ember.load(io.BytesIO(buffer.getvalue()))
    assert got["s"].dtype is ember.float32 and got["s"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert got["s"].data_ptr() == got["x"].untyped_storage().data_ptr()
    assert got["u"].dtype is ember.uint8 and got["u"].tolist() == [0, 60]
    out = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ember.save({"s": ember.arange(2.0).storage(), "u": ember.ones(1, dtype=ember.float16).untyped_storage()}, out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        back = torch.load(io.BytesIO(out.getvalue()), weights_only=True)
        assert back["s"].dtype == torch.float32 and back["s"].tolist() == [0.0, 1.0]
        assert back["u"].tolist() == [0, 60]


class _Thing:
    pass


# object -> does torch 2.13's weights_only loader accept it; ember must agree on each
_ACCEPTANCE = {
    "range": (lambda: range(3), False), "numpy array": (lambda: np.ones(2), False),
    "numpy scalar": (lambda: np.float32(1.0), False), "deque": (lambda: collections.deque([1]), False),
    "defaultdict": (lambda: collections.defaultdict(int, a=1), False),
    "timedelta": (lambda: datetime.timedelta(days=1), False), "Ellipsis": (lambda: ..., False),
    "local class": (lambda: _Thing(), False), "return type": (lambda: torch.max(torch.ones(2), 0), False),
    "Counter": (lambda: collections.Counter("ab"), True), "bytearray": (lambda: bytearray(b"a"), True),
    "qscheme": (lambda: torch.per_channel_symmetric, True), "layout": (lambda: torch.sparse_csr, True),
    "meta": (lambda: torch.empty(2, device="meta"), True), "buffer": (lambda: torch.nn.Buffer(torch.ones(1)), True),
    "uint64": (lambda: torch.ones(2, dtype=torch.uint64), True),
    "storage": (lambda: torch.ones(2).untyped_storage(), True),
}


@pytest.mark.parametrize("case", sorted(_ACCEPTANCE))
def test_weights_only_accepts_what_torch_accepts(case) -> None:
    build, accepted = _ACCEPTANCE[case]
    buffer = io.BytesIO()
    torch.save(build(), buffer)
    raw = buffer.getvalue()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.load(io.BytesIO(raw), weights_only=True)
            torch_ok = True
        except Exception:  # noqa: BLE001 - torch's refusal
            torch_ok = False
    assert torch_ok is accepted, "torch 2.13's allow-list changed; update the table"
    if accepted:
        ember.load(io.BytesIO(raw))
    else:
        with pytest.raises(ember.serialization.UnsafeGlobalError, match="Weights only load failed. Unsupported "
                           "global: GLOBAL ") as info:
            ember.load(io.BytesIO(raw))
        assert "weights_only=False" in str(info.value) and "add_safe_globals" in str(info.value)


@pytest.mark.parametrize("name", ["complex32", "float8_e8m0fnu", "uint4", "int2", "float4_e2m1fn_x2"])
def test_dtypes_ember_lacks_are_refused_by_name(name) -> None:
    buffer = io.BytesIO()
    torch.save(getattr(torch, name), buffer)
    with pytest.raises(ember.serialization.CheckpointError, match=f"ember has no dtype torch.{name}"):
        ember.load(io.BytesIO(buffer.getvalue()))


def _patched(data_pkl_edit) -> io.BytesIO:
    """torch's file of a tensor with attribute ``note`` (``_rebuild_from_type_v2``), its pickle edited."""
    import zipfile

    t = torch.ones(2)
    t.note = 7
    saved = io.BytesIO()
    torch.save(t, saved)
    out = io.BytesIO()
    with zipfile.ZipFile(saved) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            target.writestr(info.filename, data_pkl_edit(data) if info.filename.endswith("data.pkl") else data)
    out.seek(0)
    return out


def test_rebuild_from_type_refuses_foreign_functions_and_attributes() -> None:
    """A crafted _rebuild_from_type_v2 may only call ember's tensor rebuilds and set plain, new attributes."""
    assert ember.load(_patched(lambda d: d)).note == 7
    with pytest.raises(ember.serialization.CheckpointError, match="not a tensor rebuild function"):
        ember.load(_patched(lambda d: d.replace(b"ctorch._utils\n_rebuild_tensor_v2\n", b"c__builtin__\nset\n")))
    for attr in (b"_data", b"__class__", b"grad_fn", b"requires_grad"):
        def edit(d, attr=attr):
            return d.replace(b"X\x04\x00\x00\x00note", b"X" + len(attr).to_bytes(4, "little") + attr)
        with pytest.raises(ember.serialization.CheckpointError, match="refuses to set attribute"):
            ember.load(_patched(edit))


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_map_location_forms_as_torch_calls_them(legacy, tmp_path) -> None:
    """str, device, dict and callable map_location; a callable is called with each storage and its location."""
    path = tmp_path / "m.pt"
    w = torch.arange(3.0)
    torch.save({"w": w, "v": w[1:]}, path, _use_new_zipfile_serialization=not legacy)
    seen = []

    def record(storage, location):
        seen.append((type(storage).__name__, storage.nbytes(), location))
        return storage

    for form in (None, "cpu", ember.device("cpu"), {"cpu": "cpu"}, record, lambda s, loc: None):
        got = ember.load(path, map_location=form)
        assert got["w"].tolist() == [0.0, 1.0, 2.0] and got["v"].device.type == "cpu", form
    assert seen and all(s == ("UntypedStorage", 12, "cpu") for s in seen)  # the view's storage is w's, as in torch
    got = ember.load(path, map_location="meta")
    assert got["w"].device.type == "meta" and tuple(got["w"].shape) == (3,)
    with pytest.raises(RuntimeError, match="not a storage"):
        ember.load(path, map_location=lambda s, loc: 3)
    if not ember.cuda.is_available():
        for form in ("cuda", {"cpu": "cuda:0"}, lambda s, loc: s.cuda(0)):
            with pytest.raises(RuntimeError, match="CUDA"):
                ember.load(path, map_location=form)


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_every_pickle_protocol_torch_writes(protocol, legacy, tmp_path) -> None:
    """torch.save(pickle_protocol=N): protocols 4-5 frame the legacy file's first pickle (was "not a PyTorch
    checkpoint"); torch.load(weights_only=False) is the reference (its weights-only loader refuses sets there)."""
    w = torch.arange(6.0).reshape(2, 3)
    obj = {"w": w, "row": w[1], "od": collections.OrderedDict(a=torch.ones(1, dtype=torch.bfloat16)), "b": b"xy",
           "s": {1, 2}, "big": 2**70}
    path = tmp_path / "p.pt"
    torch.save(obj, path, pickle_protocol=protocol, _use_new_zipfile_serialization=not legacy)
    expected = torch.load(path, weights_only=False)
    for mmap in (False, True):
        got = ember.load(path, mmap=mmap)
        _same(expected, got)
        assert got["row"].untyped_storage().data_ptr() == got["w"].untyped_storage().data_ptr()
    assert ember.serialization.get_unsafe_globals_in_checkpoint(path) == []
