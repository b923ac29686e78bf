"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict``, ``ParameterList``, ``ParameterDict``.

Example:
    >>> import ember
    >>> net = ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.ReLU(), ember.nn.Linear(8, 2))
    >>> len(net), type(net[1]).__name__, len(net[:2])
    (3, 'ReLU', 2)
"""
from __future__ import annotations

import operator
from collections import OrderedDict
from typing import Any, Iterable, Iterator, Mapping

from ember.nn.modules.module import Module, _addindent
from ember.nn.parameter import Parameter
from ember.tensor import Tensor


def _index(idx: Any, size: int, kind: str) -> int:
    idx = operator.index(idx)
    if not -size <= idx < size:
        raise IndexError(f"{kind}: index {idx} is out of range for a container of length {size}")
    return idx % size


class Sequential(Module):
    """Chains modules: ``forward(x)`` feeds ``x`` through each in order. Accepts an OrderedDict too."""

    def __init__(self, *args: Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index(idx, len(self), "Sequential")]

    def __setitem__(self, idx: int, module: Module) -> None:
        key = list(self._modules.keys())[_index(idx, len(self), "Sequential")]
        setattr(self, key, module)

    def __delitem__(self, idx: Any) -> None:
        keys = list(self._modules.keys())
        targets = keys[idx] if isinstance(idx, slice) else [keys[_index(idx, len(self), "Sequential")]]
        for key in targets:
            delattr(self, key)
        # Renumber so indices stay 0..n-1, as PyTorch does.
        items = list(self._modules.values())
        self._modules.clear()
        for i, module in enumerate(items):
            self._modules[str(i)] = module

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __add__(self, other: "Sequential") -> "Sequential":
        return Sequential(*self, *other)

    def append(self, module: Module) -> "Sequential":
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> "Sequential":
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> "Sequential":
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)
        return self

    def pop(self, index: int = -1) -> Module:
        module = self[index]
        del self[index]
        return module

    def forward(self, input: Any) -> Any:
        for module in self:
            input = module(input)
        return input


class ModuleList(Module):
    """A list of modules, registered so their parameters are found. ``forward`` is yours to write."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self), "ModuleList"))]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, str(_index(idx, len(self), "ModuleList")), module)

    def __delitem__(self, idx: Any) -> None:
        keys = list(self._modules.keys())
        targets = keys[idx] if isinstance(idx, slice) else [keys[_index(idx, len(self), "ModuleList")]]
        for key in targets:
            del self._modules[key]
        items = list(self._modules.values())
        self._modules.clear()
        for i, module in enumerate(items):
            self._modules[str(i)] = module

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> "ModuleList":
        return self.extend(modules)

    def __repr__(self) -> str:
        """PyTorch's printout: runs of equal submodules are one entry, ``(0-5): 6 x TransformerEncoderLayer(``."""
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        runs: list = []  # [first index, last index, text]
        for i, text in enumerate(reprs):
            if runs and runs[-1][2] == text:
                runs[-1][1] = i
            else:
                runs.append([i, i, text])
        lines = [_addindent(f"({a}): {t}" if a == b else f"({a}-{b}): {b - a + 1} x {t}", 2) for a, b, t in runs]
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

    def __add__(self, other: Iterable[Module]) -> "ModuleList":
        return ModuleList([*self, *other])

    def append(self, module: Module) -> "ModuleList":
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> "ModuleList":
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise TypeError("ModuleList.extend should be called with an iterable, but got " + type(modules).__name__)
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)

    def pop(self, index: int = -1) -> Module:
        module = self[index]
        del self[index]
        return module

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleList has no forward(); iterate over it in your module's forward")


class _DictContainer(Module):
    """Shared by ModuleDict and ParameterDict: a string-keyed view of one of the module's own stores
    (``_STORE`` names it); subclasses say how a value is registered (``__setitem__``)."""

    _STORE = ""

    def _store(self) -> Any:
        return self.__dict__[self._STORE]

    def __getitem__(self, key: str) -> Any:
        return self._store()[key]

    def __delitem__(self, key: str) -> None:
        del self._store()[key]

    def __len__(self) -> int:
        return len(self._store())

    def __iter__(self) -> Iterator[str]:
        return iter(self._store())

    def __contains__(self, key: str) -> bool:
        return key in self._store()

    def keys(self) -> Any:
        return self._store().keys()

    def values(self) -> Any:
        return self._store().values()

    def items(self) -> Any:
        return self._store().items()

    def clear(self) -> None:
        self._store().clear()

    def pop(self, key: str) -> Any:
        return self._store().pop(key)

    def update(self, values: Any) -> None:
        items = values.items() if hasattr(values, "items") else values
        for key, value in items:
            self[key] = value


class ModuleDict(_DictContainer):
    """An ordered dict of modules keyed by string."""

    _STORE = "_modules"

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleDict has no forward(); index it in your module's forward")


class ParameterList(Module):
    """A list of Parameters (tensors are wrapped), registered under "0", "1", ...

    As PyTorch's (since 1.12) it holds any object: a tensor becomes a Parameter, a Module (another ParameterList:
    lucidrains' nViT keeps one per layer) is registered as a submodule, anything else is a plain attribute.
    """

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, slice):
            out = self.__class__()
            for i in range(*idx.indices(len(self))):
                out.append(self[i])
            return out
        return getattr(self, str(_index(idx, len(self), "ParameterList")))

    def __setitem__(self, idx: int, value: Any) -> None:
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, str(_index(idx, len(self), "ParameterList")), value)

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return iter([self[i] for i in range(len(self))])

    def __iadd__(self, values: Iterable[Any]) -> "ParameterList":
        return self.extend(values)

    def append(self, value: Any) -> "ParameterList":
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values: Iterable[Any]) -> "ParameterList":
        if isinstance(values, Tensor) or not hasattr(values, "__iter__"):
            raise TypeError(f"ParameterList.extend should be called with an iterable, but got {type(values).__name__}")
        for value in values:
            self.append(value)
        return self

    def extra_repr(self) -> str:
        # PyTorch's lines carry two spaces of their own (so its printout has "ParameterList(  (0): ...)")
        return "\n".join(_param_line(i, p, str(p.dtype)) if isinstance(p, Tensor)
                         else f"  ({i}): Object of type: {type(p).__name__}" for i, p in enumerate(self))


class ParameterDict(_DictContainer):
    """An ordered dict of Parameters keyed by string."""

    _STORE = "_parameters"

    def __init__(self, parameters: Any = None) -> None:
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __setitem__(self, key: str, value: Any) -> None:
        self.register_parameter(key, _as_param(value))

    def extra_repr(self) -> str:  # (PyTorch names the legacy type here: torch.FloatTensor)
        return "\n".join(_param_line(k, p, p.type()) for k, p in self._parameters.items())


def _param_line(key: Any, p: Any, type_text: str) -> str:
    """One line of ParameterList/ParameterDict's printout, as PyTorch's extra_repr writes it."""
    device = f" ({p.device})" if p.device.type not in ("cpu", "meta") else ""
    kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
    return f"  ({key}): {kind} containing: [{type_text} of size {'x'.join(map(str, p.shape))}{device}]"


def _as_param(value: Any) -> Parameter:
    if isinstance(value, Parameter):
        return value
    if isinstance(value, Tensor):
        return Parameter(value)
    raise TypeError(f"ParameterList/ParameterDict: expected a Tensor or Parameter, got {type(value).__name__}")
