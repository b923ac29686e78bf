"""``TorchScriptModule.save``: write a module loaded from a TorchScript archive back as one ``torch.jit.load`` reads.

The archive keeps what ember did not change, byte for byte: the TorchScript source of every class and function
(``code/``), ``constants.pkl`` with its tensors, and ``version``. ``data.pkl`` is written from the module's current
values (parameters and buffers after training in ember, attributes the code set) in torch's own form: each object as
``GLOBAL '__torch__.<module> <Class>'``, ``EMPTY_TUPLE``, ``NEWOBJ`` and ``BUILD`` with its attributes in its class's
slot order; tensors as ``torch._utils._rebuild_tensor_v2`` over ``data/<key>`` storages (parameters too, with
``requires_grad=True``, as TorchScript writes them: shared tensors stay shared); lists and dicts with the type tags
torch writes (``build_tensorlist``, ``build_intlist``, ..., ``restore_type_tag(value, "List[str]")``), read from the
class's attribute annotations. The debug pickles (``*.debug_pkl``, source ranges for torch's error messages) are not
written; torch loads archives without them. Writing to a path is atomic.

Example:
    >>> import ember  # doctest: +SKIP
    >>> m = ember.jit.load("scripted.pt"); m.save("scripted_trained.pt")  # doctest: +SKIP
"""
from __future__ import annotations

import ast
import collections
import io
import pickle
import secrets
import zipfile
from typing import Any

import numpy as np

from ember.jit.torchscript.interpreter import ScriptObject, TSObject
from ember.nn.modules.module import Module
from ember.serialization.atomic import atomic_write
from ember.serialization.torch_names import TorchName
from ember.serialization.torch_writer import _Pickler, _REBUILD_TENSOR, _write_member
from ember.tensor import Tensor

_PICKLE = "torch.jit._pickle"
_TYPED_LISTS = {t: TorchName(_PICKLE, name) for t, name in (
    ("Tensor", "build_tensorlist"), ("int", "build_intlist"), ("float", "build_doublelist"), ("bool", "build_boollist"))}
_RESTORE_TYPE_TAG = TorchName(_PICKLE, "restore_type_tag")


class _Tagged:
    """A container to write wrapped in the typed-list helper or the type tag its annotation calls for."""

    __slots__ = ("value", "annotation")

    def __init__(self, value: Any, annotation: ast.expr) -> None:
        self.value, self.annotation = value, annotation


def _strip_optional(annotation: ast.expr | None) -> ast.expr | None:
    if (isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name)
            and annotation.value.id in ("Optional", "Final")):
        return annotation.slice
    return annotation


class _ArchivePickler(_Pickler):
    """torch_writer's pickler, plus TorchScript objects and type tags; Parameters as plain tensors."""

    def __init__(self, file: Any) -> None:
        super().__init__(file)
        self.class_names: dict[str, TorchName] = {}  # one object per name: the pickle memo is keyed by id

    def save(self, obj: Any, save_persistent_id: bool = True) -> None:
        if isinstance(obj, TSObject):
            self._save_object(obj)
            return
        if isinstance(obj, _Tagged):
            self._save_tagged(obj)
            return
        super().save(obj, save_persistent_id)

    def _save_object(self, obj: TSObject) -> None:
        memo = self.memo.get(id(obj))
        if memo is not None:
            self.write(self.get(memo[0]))
            return
        qualname = obj.ts_class.qualname
        if qualname not in self.class_names:
            module, _, name = qualname.rpartition(".")
            self.class_names[qualname] = TorchName(module, name)
        self.save(self.class_names[qualname])
        self.write(pickle.EMPTY_TUPLE + pickle.NEWOBJ)
        self.memoize(obj)
        annotations = obj.ts_class.attributes
        state = {}
        for attr in _order(obj):
            state[attr] = _tag(obj.ts_getattr(attr), annotations.get(attr))
        self.save(state)
        self.write(pickle.BUILD)

    def _save_tagged(self, tagged: _Tagged) -> None:
        annotation, value = tagged.annotation, tagged.value
        head = annotation.value.id if isinstance(annotation, ast.Subscript) else None
        inner = annotation.slice if head == "List" else None
        if inner is not None and isinstance(inner, ast.Name) and inner.id in _TYPED_LISTS:
            self.save(_TYPED_LISTS[inner.id])
            self.save((list(value),))
        else:
            if head == "List":
                value = [_tag(v, inner) for v in value]
            elif head == "Dict" and isinstance(annotation.slice, ast.Tuple):
                value = {k: _tag(v, annotation.slice.elts[1]) for k, v in value.items()}
            self.save(_RESTORE_TYPE_TAG)
            self.save((value, ast.unparse(annotation)))
        self.write(pickle.REDUCE)

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Tensor) and type(obj).__name__ == "Parameter":
            array = obj.detach().cpu().numpy()
            ref, offset, strides = self._storage_of(array)
            return (_REBUILD_TENSOR, (ref, offset, tuple(array.shape), strides, bool(obj.requires_grad),
                                      collections.OrderedDict()))
        return super().reducer_override(obj)


def _order(obj: TSObject) -> list[str]:
    if isinstance(obj, ScriptObject):
        return obj.order or list(obj.attrs)
    return obj.__dict__["_ts_order"]


def _tag(value: Any, annotation: ast.expr | None) -> Any:
    annotation = _strip_optional(annotation)
    if value is None or annotation is None:
        return value
    if isinstance(value, list) and isinstance(annotation, ast.Subscript) and getattr(
            annotation.value, "id", None) == "List":
        return _Tagged(value, annotation)
    if isinstance(value, dict) and isinstance(annotation, ast.Subscript) and getattr(
            annotation.value, "id", None) == "Dict":
        return _Tagged(value, annotation)
    return value


def save(module: Module, f: Any, extra_files: dict | None = None) -> None:
    """Write ``module`` (a TorchScriptModule from :func:`ember.jit.load`) to the path or binary file ``f``."""
    read = module.__dict__.get("_ts_archive")
    if read is None:
        raise TypeError("TorchScriptModule.save: this module was not loaded from a TorchScript archive")
    text = io.BytesIO()
    pickler = _ArchivePickler(text)
    pickler.dump(module)

    def write(out: Any) -> None:
        buffer = io.BytesIO()
        prefix = "archive/"
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
            _write_member(archive, buffer, prefix + "data.pkl", text.getvalue())
            for name in sorted(read.verbatim):
                _write_member(archive, buffer, prefix + name, read.verbatim[name])
            for ref in sorted(pickler.storages.values(), key=lambda r: int(r.key)):
                array = np.ascontiguousarray(ref.array).reshape(-1)
                _write_member(archive, buffer, f"{prefix}data/{ref.key}", array.view(np.uint8))
            for name, content in (extra_files or {}).items():
                if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
                    raise ValueError(f"TorchScriptModule.save: extra file name {name!r} must be a plain name")
                _write_member(archive, buffer, f"{prefix}extra/{name}",
                              content.encode() if isinstance(content, str) else bytes(content))
            _write_member(archive, buffer, prefix + "byteorder", b"little")
            _write_member(archive, buffer, prefix + ".data/serialization_id",
                          str(secrets.randbits(128)).zfill(40).encode())
        out.write(buffer.getvalue())

    if hasattr(f, "write"):
        write(f)
    else:
        atomic_write(f, write)
