"""The nested tensor: a batch of tensors whose sizes differ in some dims (``torch.nested``'s NestedTensor).

ember keeps the components themselves (a list of ordinary tensors, ``strided`` or ``jagged`` layout) and runs every
op on them one by one through the ``__torch_function__`` protocol (:mod:`ember._torch_function`): an op on a nested
tensor becomes the same op on each component, its ``dim`` arguments shifted past the batch dim, and the results
are nested again. Autograd therefore needs nothing of its own: gradients flow through the components' ops to the
tensors they came from (``as_nested_tensor``) or to the components' own leaves (``nested_tensor(...,
requires_grad=True)``; ``nt.grad`` is nested).

Sizes follow torch: ``nt.dim()`` counts the batch dim, ``nt.size(i)`` answers a dim all components share and
refuses a ragged one (``strided``); a ``jagged`` tensor's ragged dim 1 is a named size (``j1``) in ``nt.shape``.

Example:
    >>> import ember
    >>> nt = ember.nested.nested_tensor([ember.ones(2, 4), ember.ones(3, 4)], layout=ember.jagged)
    >>> nt.shape
    ember.Size([2, j1, 4])
    >>> (nt * 2).sum(-1).to_padded_tensor(0.0).tolist()
    [[8.0, 8.0, 0.0], [8.0, 8.0, 8.0]]
"""
from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any, Callable

import numpy as np

from ember import _torch_function
from ember.creation import tensor as as_tensor
from ember.nn import functional as F
from ember.ops.views import cat, stack
from ember.surface.constants import jagged, strided
from ember.tensor import Size, Tensor

_COUNTER = itertools.count(1)


class NestedInt:
    """A jagged tensor's ragged size (torch's ``j1``): equal only to itself, printed by its number."""

    _symbolic_size = True  # a Size may hold it (ember/_size.py), as torch.Size holds its SymInt

    def __init__(self) -> None:
        self.number = next(_COUNTER)

    def __repr__(self) -> str:
        return f"j{self.number}"

    def __eq__(self, other: Any) -> bool:
        return other is self

    def __hash__(self) -> int:
        return id(self)


# dim arguments by position (after self) for the functions and methods that take them
_DIM_POSITIONS: dict[str, tuple] = {
    "softmax": (1,), "log_softmax": (1,), "sum": (1,), "mean": (1,), "amax": (1,), "amin": (1,), "max": (1,),
    "min": (1,), "argmax": (1,), "argmin": (1,), "prod": (1,), "cumsum": (1,), "var": (1,), "std": (1,),
    "logsumexp": (1,), "transpose": (1, 2), "swapaxes": (1, 2), "unsqueeze": (1,), "squeeze": (1,),
    "unflatten": (1,), "flatten": (1, 2), "narrow": (1,), "select": (1,), "chunk": (2,), "split": (2,),
    "normalize": (2,), "glu": (1,),
}
_DIM_KEYWORDS = ("dim", "dim0", "dim1", "start_dim", "end_dim")
_REDUCTIONS = frozenset({"sum", "mean", "amax", "amin", "prod", "logsumexp", "var", "std"})


class NestedTensor(Tensor):
    """A batch of tensors of different sizes; build one with :func:`ember.nested.nested_tensor`."""

    @staticmethod
    def _build(components: list, layout: Any, ragged: Any = None) -> "NestedTensor":
        first = components[0]
        data = np.broadcast_to(np.zeros((), dtype=first._data.dtype), (len(components),))
        out = Tensor._make.__func__(NestedTensor, data, first._device, False)
        out._components = list(components)
        out._layout = layout
        out._ragged = ragged if ragged is not None else (NestedInt() if layout is jagged else None)
        _alive(out)
        return out

    # ---- metadata (torch's NestedTensor answers) ------------------------------------------------------------
    @property
    def is_nested(self) -> bool:
        return True

    @property
    def layout(self) -> Any:
        return self._layout

    @property
    def dtype(self) -> Any:
        return self._components[0].dtype

    @property
    def device(self) -> Any:
        return self._components[0].device

    @property
    def requires_grad(self) -> bool:
        return any(c.requires_grad for c in self._components)

    @property
    def grad(self) -> Any:
        grads = [c.grad for c in self._components]
        return None if all(g is None for g in grads) else NestedTensor._build(grads, self._layout, self._ragged)

    @grad.setter
    def grad(self, value: Any) -> None:
        if value is None:
            for c in getattr(self, "_components", ()):
                c.grad = None

    @property
    def grad_fn(self) -> Any:
        return None

    @grad_fn.setter
    def grad_fn(self, value: Any) -> None:
        pass

    @property
    def ndim(self) -> int:
        return self._components[0].ndim + 1

    def dim(self) -> int:
        return self.ndim

    def _sizes(self, d: int) -> set:
        return {c.shape[d - 1] for c in self._components}

    def size(self, dim: int | None = None) -> Any:
        if dim is None:
            if self._layout is not jagged:
                raise RuntimeError("Internal error: NestedTensorImpl doesn't support sizes. Please file an issue.")
            return self.shape
        d = dim + self.ndim if dim < 0 else dim
        if not 0 <= d < self.ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-self.ndim}, {self.ndim - 1}], "
                             f"but got {dim})")
        if d == 0:
            return len(self._components)
        sizes = self._sizes(d)
        if len(sizes) == 1:
            return sizes.pop()
        if self._layout is jagged and d == 1:
            return self._ragged
        raise RuntimeError(f"Given dimension {dim} is irregular and does not have a size.")

    @property
    def shape(self) -> Any:
        if self._layout is not jagged:
            raise RuntimeError("Internal error: NestedTensorImpl doesn't support sizes. Please file an issue.")
        return Size(tuple(self.size(d) for d in range(self.ndim)))

    def numel(self) -> int:
        return sum(c.numel() for c in self._components)

    def is_contiguous(self, memory_format: Any = None) -> bool:
        return True

    def requires_grad_(self, requires_grad: bool = True) -> "NestedTensor":
        for c in self._components:
            c.requires_grad_(requires_grad)
        return self

    def unbind(self, dim: int = 0) -> tuple:
        if dim != 0:
            raise RuntimeError(f"unbind(): nested tensors can only be unbound along dim 0, got {dim}")
        return tuple(self._components)

    def to_padded_tensor(self, padding: float, output_size: Any = None) -> Tensor:
        return to_padded_tensor(self, padding, output_size)

    def values(self) -> Tensor:
        """The components joined along the ragged dim (jagged layout)."""
        return _cat(self._components)

    def offsets(self) -> Tensor:
        lengths = [c.shape[0] for c in self._components]
        return as_tensor([0] + [int(n) for n in np.cumsum(lengths)])

    def lengths(self) -> None:
        return None

    def __len__(self) -> int:
        return len(self._components)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, int):
            return self._components[index]
        if isinstance(index, tuple) and index and isinstance(index[0], int):
            return self._components[index[0]][index[1:]]
        raise NotImplementedError(f"nested tensor indexing supports an integer first index, got {index!r}")

    def __repr__(self) -> str:
        if self._layout is jagged:
            return f"NestedTensor(size={tuple(self.shape)}, offsets={self.offsets()}, contiguous=True)"
        inner = ",\n".join("  " + repr(c).replace("\n", "\n  ") for c in self._components)
        return f"nested_tensor([\n{inner}\n])"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    # ---- every other call: per component ---------------------------------------------------------------------
    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        with _torch_function.DisableTorchFunctionSubclass():
            return _per_component(func, args, kwargs)


# Public functions look for __torch_function__ arguments only while an overriding class lives
# (ember/_torch_function.py's SWITCH). NestedTensor, defined at import, counts only while a nested tensor lives, so
# a program that never makes one pays nothing.
_LOCK = threading.Lock()
_LIVE = [0]
with _torch_function._LOCK:
    _torch_function.SWITCH.subclasses.discard(NestedTensor)
    _torch_function.SWITCH.update()


def _alive(nt: NestedTensor) -> None:
    with _LOCK, _torch_function._LOCK:
        _LIVE[0] += 1
        if _LIVE[0] == 1:
            _torch_function.SWITCH.subclasses.add(NestedTensor)
            _torch_function.SWITCH.update()
    weakref.finalize(nt, _gone)


def _gone() -> None:
    with _LOCK, _torch_function._LOCK:
        _LIVE[0] -= 1
        if _LIVE[0] == 0:
            _torch_function.SWITCH.subclasses.discard(NestedTensor)
            _torch_function.SWITCH.update()


_OWN = frozenset(n for n, v in vars(NestedTensor).items() if not n.startswith("__") or n in ("__len__",
                                                                                               "__getitem__", "__repr__"))


def _shift(value: Any, name: str) -> Any:
    """A nested dim as the components' dim (the batch dim 0 is not a component dim)."""
    if isinstance(value, (tuple, list)):
        return type(value)(_shift(v, name) for v in value)
    if not isinstance(value, int) or isinstance(value, bool):
        return value
    if value == 0:
        raise RuntimeError(f"{name}(): nested tensors do not support this op over the batch dimension 0")
    return value - 1 if value > 0 else value


def _name(func: Any) -> str:
    return getattr(func, "__name__", "") or ""


def _per_component(func: Any, args: tuple, kwargs: dict) -> Any:
    name = _name(func)
    nested = [a for a in args if isinstance(a, NestedTensor)] + [v for v in kwargs.values()
                                                                 if isinstance(v, NestedTensor)]
    first = nested[0]
    count = len(first._components)
    if any(len(n._components) != count for n in nested):
        raise RuntimeError(f"{name}(): nested tensors of {count} and "
                           f"{[len(n._components) for n in nested]} components cannot be combined")
    args = list(args)
    reduces_ragged = False
    for position in _DIM_POSITIONS.get(name, ()):
        if position < len(args):
            reduces_ragged |= name in _REDUCTIONS and first._layout is jagged and args[position] in (1, (1,), [1])
            args[position] = _shift(args[position], name)
    for key in _DIM_KEYWORDS:
        if key in kwargs:
            reduces_ragged |= name in _REDUCTIONS and first._layout is jagged and kwargs[key] in (1, (1,), [1])
            kwargs = dict(kwargs, **{key: _shift(kwargs[key], name)})
    func = _PER_COMPONENT.get(name, func)
    results = []
    for i in range(count):
        pick = (lambda v: v._components[i] if isinstance(v, NestedTensor) else v)
        results.append(func(*[pick(a) for a in args], **{k: pick(v) for k, v in kwargs.items()}))
    return _renest(results, first, reduces_ragged)


def _renest(results: list, like: NestedTensor, reduces_ragged: bool) -> Any:
    head = results[0]
    if isinstance(head, Tensor):
        if reduces_ragged:  # the ragged dim is gone: one dense tensor (torch's jagged sum(1))
            return stack(results)
        keep = like._ragged if all(r.ndim and r.shape[0] == c.shape[0] for r, c in zip(results, like._components)) \
            else None
        return NestedTensor._build(results, like._layout, keep)
    if isinstance(head, tuple) and head and all(isinstance(h, Tensor) for h in head):
        parts = [NestedTensor._build([r[k] for r in results], like._layout) for k in range(len(head))]
        return type(head)(*parts) if hasattr(type(head), "_fields") else tuple(parts)
    if head is None or all(r is None for r in results):
        return None
    return results


def _cat(components: list) -> Tensor:
    return cat(components, 0)


def to_padded_tensor(nt: NestedTensor, padding: float, output_size: Any = None) -> Tensor:
    """``torch.nested.to_padded_tensor``: one dense tensor, each component padded at the end of every dim."""
    if not isinstance(nt, NestedTensor):
        raise TypeError(f"to_padded_tensor(): expected a nested tensor, got {type(nt).__name__}")
    comps = nt._components
    ndim = comps[0].ndim
    target = [max(c.shape[d] for c in comps) for d in range(ndim)]
    if output_size is not None:
        sizes = list(output_size)[1:]
        if len(sizes) != ndim or any(s < t for s, t in zip(sizes, target)):
            raise RuntimeError(f"to_padded_tensor(): output_size {tuple(output_size)} is smaller than the largest "
                               f"component sizes {(len(comps), *target)}")
        target = sizes
    padded = []
    for c in comps:
        pads: list = []
        for d in reversed(range(ndim)):
            pads += [0, target[d] - c.shape[d]]
        padded.append(F.pad(c, pads, value=padding) if any(pads) else c)
    return stack(padded)


def make(components: list, layout: Any, copy: bool, requires_grad: bool, dtype: Any, device: Any,
         name: str) -> NestedTensor:
    """The constructors' common part: checks, dtype/device, copies."""
    layout = strided if layout is None else layout
    if layout not in (strided, jagged):
        raise RuntimeError(f"{name}(): layout must be ember.strided or ember.jagged, got {layout!r}")
    if not components:
        raise RuntimeError(f"{name}(): expected a non-empty list of tensors")
    comps = [c if isinstance(c, Tensor) else as_tensor(c) for c in components]
    ndims = {c.ndim for c in comps}
    if len(ndims) != 1:
        raise RuntimeError(f"{name}(): all tensors need to have the same dimension, got {sorted(ndims)}")
    if layout is jagged:
        rest = {tuple(c.shape[1:]) for c in comps}
        if len(rest) != 1:
            raise RuntimeError(f"{name}(): the jagged layout allows one ragged dim (dim 1); the components' other "
                               f"sizes differ: {sorted(rest)}")
    out = []
    for c in comps:
        if dtype is not None or device is not None:
            c = c.to(device=device or c.device, dtype=dtype or c.dtype)
        if copy:
            c = c.detach().clone().requires_grad_(requires_grad)
        else:
            c = c.clone()  # as_nested_tensor: a differentiable copy (history kept)
        out.append(c)
    return NestedTensor._build(out, layout)


def from_jagged(values: Tensor, offsets: Any = None, lengths: Any = None, jagged_dim: Any = None,
                min_seqlen: Any = None, max_seqlen: Any = None) -> NestedTensor:
    """``torch.nested.nested_tensor_from_jagged``: components are slices of ``values`` (views: gradients reach it)."""
    if offsets is None:
        if lengths is None:
            raise RuntimeError("nested_tensor_from_jagged(): give offsets or lengths")
        bounds = [0] + list(np.cumsum([int(x) for x in lengths.tolist()]))
    else:
        bounds = [int(x) for x in offsets.tolist()]
        if lengths is not None:
            return NestedTensor._build([values[s:s + int(n)] for s, n in zip(bounds, lengths.tolist())], jagged)
    return NestedTensor._build([values[a:b] for a, b in zip(bounds[:-1], bounds[1:])], jagged)


def _bmm(a: Any, b: Any) -> Any:
    return a @ b


_PER_COMPONENT: dict[str, Callable] = {"bmm": _bmm}  # ops whose per-component form is another op
