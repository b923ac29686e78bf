"""``torch.return_types``: the named tuples that ``max(dim)``, ``sort``, ``topk``, ``linalg.svd``, ... return.

PyTorch makes them as CPython "struct sequences": tuple subclasses named ``torch.return_types.<op>`` with one
read-only attribute per field, built from ONE sequence (``torch.return_types.max((values, indices))``), printed
one field per line, equal to plain tuples, pickled as ``(cls, (tuple, {}))`` and without ``namedtuple``'s
``_fields``/``_replace``. A call with ``out=(...)`` returns the ``<op>_out`` type. ember's classes behave the same;
they are plain Python classes made by :func:`structseq` (``__module__`` is ``ember.return_types``; PyTorch files
name them ``torch.return_types.<op>`` and ember's reader and writer translate).

Example:
    >>> import ember
    >>> r = ember.tensor([[1., 3.], [2., 0.]]).max(1)
    >>> isinstance(r, ember.return_types.max), r.indices.tolist(), tuple(r) == (r.values, r.indices)
    (True, [1, 0], True)
"""
from __future__ import annotations

from typing import Any, Iterable

from ember import dtypes

__all__ = ["pytree_register_structseq", "all_return_types", "structseq"]


class _Field:
    """A read-only attribute reading item ``index`` (PyTorch's message when written or deleted)."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        return self if obj is None else tuple.__getitem__(obj, self.index)

    def __set__(self, obj: Any, value: Any) -> None:
        raise AttributeError("readonly attribute")

    def __delete__(self, obj: Any) -> None:
        raise AttributeError("readonly attribute")


class _StructSeq(tuple):
    """Base of every return type: a tuple of ``n_fields`` items with named, read-only fields."""

    __slots__ = ()
    n_fields = n_sequence_fields = 0
    n_unnamed_fields = 0
    __match_args__: tuple = ()

    def __new__(cls, sequence: Any = None, dict: Any = None) -> "_StructSeq":  # noqa: A002 - CPython's names
        if sequence is None:
            raise TypeError("structseq() missing required argument 'sequence' (pos 1)")
        try:
            items = tuple(sequence)
        except TypeError:
            raise TypeError("constructor requires a sequence") from None
        if len(items) != cls.n_fields:
            raise TypeError(f"{_public(cls)}() takes a {cls.n_fields}-sequence ({len(items)}-sequence given)")
        return tuple.__new__(cls, items)

    def __repr__(self) -> str:
        body = ",\n".join(f"{name}={value!r}" for name, value in zip(self.__match_args__, self))
        return f"{_public(type(self))}(\n{body})"

    __str__ = __repr__

    def __reduce__(self) -> tuple:
        return (type(self), (tuple(self), {}))


def _public(cls: type) -> str:
    """``torch.return_types.max`` under ``ember run`` (the program imported torch), else ``ember.return_types.max``."""
    return f"{dtypes.PUBLIC_NAME[0]}.return_types.{cls.__name__}"


def structseq(name: str, fields: Iterable[str]) -> type:
    """A return type called ``name`` with these fields (PyTorch's struct sequence, see the module docstring)."""
    fields = tuple(fields)
    namespace: dict[str, Any] = {"__slots__": (), "__module__": __name__, "__qualname__": name, "__doc__": None,
                                 "n_fields": len(fields), "n_sequence_fields": len(fields), "n_unnamed_fields": 0,
                                 "__match_args__": fields}
    for i, field in enumerate(fields):
        namespace[field] = _Field(i)
    return type(name, (_StructSeq,), namespace)


def make(cls: type, *items: Any) -> Any:
    """``cls`` holding ``items`` without re-checking them (ember's own results: the count is right by construction)."""
    return tuple.__new__(cls, items)


_VALUES_INDICES = ("values", "indices")

# Every public return type of torch 2.13 (``torch.return_types``), with its fields in order.
_TYPES: dict[str, tuple[str, ...]] = {
    "max": _VALUES_INDICES, "min": _VALUES_INDICES, "sort": _VALUES_INDICES, "topk": _VALUES_INDICES,
    "kthvalue": _VALUES_INDICES, "mode": _VALUES_INDICES, "median": _VALUES_INDICES, "nanmedian": _VALUES_INDICES,
    "cummax": _VALUES_INDICES, "cummin": _VALUES_INDICES,
    "aminmax": ("min", "max"), "frexp": ("mantissa", "exponent"),
    "histogram": ("hist", "bin_edges"), "histogramdd": ("hist", "bin_edges"),
    "geqrf": ("a", "tau"), "qr": ("Q", "R"), "slogdet": ("sign", "logabsdet"), "svd": ("U", "S", "V"),
    "triangular_solve": ("solution", "cloned_coefficient"), "lu_unpack": ("P", "L", "U"),
    "linalg_cholesky_ex": ("L", "info"), "linalg_eig": ("eigenvalues", "eigenvectors"),
    "linalg_eigh": ("eigenvalues", "eigenvectors"), "linalg_inv_ex": ("inverse", "info"),
    "linalg_ldl_factor": ("LD", "pivots"), "linalg_ldl_factor_ex": ("LD", "pivots", "info"),
    "linalg_lstsq": ("solution", "residuals", "rank", "singular_values"), "linalg_lu": ("P", "L", "U"),
    "linalg_lu_factor": ("LU", "pivots"), "linalg_lu_factor_ex": ("LU", "pivots", "info"),
    "linalg_qr": ("Q", "R"), "linalg_slogdet": ("sign", "logabsdet"), "linalg_solve_ex": ("result", "info"),
    "linalg_svd": ("U", "S", "Vh"),
}
all_return_types: list[type] = []
OUT_TYPE: dict[type, type] = {}  # a result type -> the type an ``out=(...)`` call returns (``max`` -> ``max_out``)

for _name, _fields in _TYPES.items():
    _cls = structseq(_name, _fields)
    globals()[_name] = _cls
    all_return_types.append(_cls)
    __all__.append(_name)
    if _name != "histogramdd":  # the one type torch has no ``_out`` twin of
        _out = structseq(_name + "_out", _fields)
        globals()[_name + "_out"] = _out
        all_return_types.append(_out)
        __all__.append(_name + "_out")
        OUT_TYPE[_cls] = _out
del _name, _fields, _cls, _out


def with_outs(result: Any, outs: tuple) -> Any:
    """What a call with ``out=outs`` returns: ``outs`` in the ``_out`` twin of ``result``'s type (a plain tuple
    when ``result`` is not a return type, as PyTorch's ``var_mean(out=)``)."""
    cls = OUT_TYPE.get(type(result))
    if cls is None:
        cls = type(result) if isinstance(result, _StructSeq) else None
    return tuple(outs) if cls is None else tuple.__new__(cls, tuple(outs))


def is_return_type(cls: Any) -> bool:
    return isinstance(cls, type) and issubclass(cls, _StructSeq)


def pytree_register_structseq(cls: type) -> None:
    """Make ``cls`` a node of ``ember.utils._pytree`` (flattened to its items, rebuilt from a list).
    Every return type here already is one (``ember.func.pytree`` knows :class:`_StructSeq`)."""
    if not is_return_type(cls):
        raise TypeError(f"pytree_register_structseq: {cls!r} is not a return type made by ember.return_types")
