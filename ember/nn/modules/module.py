"""``Module``: the base class of every layer, with PyTorch's registration, traversal, state_dict and hooks.

Assigning a :class:`~ember.nn.Parameter` or a ``Module`` to an attribute registers it; ``state_dict``
keys are the dotted attribute paths (``"0.weight"``, ``"bn.running_mean"``), exactly as PyTorch names
them, so checkpoints move between the two frameworks by name.

Example:
    >>> import ember
    >>> class Net(ember.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc = ember.nn.Linear(3, 2)
    ...     def forward(self, x):
    ...         return self.fc(x)
    >>> sorted(Net().state_dict())
    ['fc.bias', 'fc.weight']
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Iterator, NamedTuple, TypeVar

from ember import __future__ as _future
from ember import dtypes
from ember.autograd import grad_mode
from ember.nn.parameter import Buffer, Parameter, UninitializedBuffer, UninitializedParameter
from ember.tensor import Tensor
from ember.creation import empty, tensor
from ember.utils.swap import swap_tensors
from ember.device import device as Device
from ember.nn.modules._global_hooks import (  # noqa: F401 (torch.nn.modules.module's register_module_*_hook)
    HOOK_CHANGES, RemovableHandle, _add_hook, _global_backward_hooks, _global_backward_pre_hooks,
    _global_buffer_registration_hooks, _global_forward_hooks,
    _global_forward_hooks_always_called, _global_forward_hooks_with_kwargs, _global_forward_pre_hooks,
    _global_module_registration_hooks, _global_parameter_registration_hooks, register_module_backward_hook,
    register_module_buffer_registration_hook, register_module_forward_hook, register_module_forward_pre_hook,
    register_module_full_backward_hook, register_module_full_backward_pre_hook,
    register_module_module_registration_hook, register_module_parameter_registration_hook,
)

_LAZY = (UninitializedParameter, UninitializedBuffer)  # no shape: skipped by load_state_dict
_EXTRA_STATE_KEY_SUFFIX = "_extra_state"  # the state_dict key of get_extra_state()'s value, as PyTorch


class _IncompatibleKeys(NamedTuple):
    missing_keys: list
    unexpected_keys: list

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return f"_IncompatibleKeys(missing_keys={self.missing_keys}, unexpected_keys={self.unexpected_keys})"


def _addindent(text: str, spaces: int) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


_ABSENT = object()
_PLAIN = (int, float, bool, complex, str, tuple, type(None))


def _is_plain(value: Any) -> bool:
    """A number, string, None, or a tuple of such: a configuration value compared by ``==``. A tuple holding tensors
    (an RNN's ``self.hidden = (h, c)``, reassigned every forward) is an object: ``==`` of tensors is elementwise."""
    if type(value) is tuple:
        return all(_is_plain(v) for v in value)
    return type(value) in _PLAIN


def _stored(d: dict, name: str) -> Any:
    """The value an attribute has now, wherever the module keeps it (``_ABSENT`` when it has none)."""
    for store in ("_parameters", "_buffers", "_modules"):
        found = d.get(store)
        if found is not None and name in found:
            return found[name]
    return d.get(name, _ABSENT)


class Module:
    """Base class for all neural-network modules; subclasses define ``forward``."""

    training: bool
    _version: int = 1

    T_destination = TypeVar("T_destination", bound=dict)  # (PyTorch's class attributes, read by some libraries)
    call_super_init: bool = False
    dump_patches: bool = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments; "
                            "Module.__init__ takes none (call super().__init__() first in your __init__)")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = OrderedDict()
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_pre_hooks_with_kwargs"] = set()
        d["_forward_hooks"] = OrderedDict()
        d["_forward_hooks_with_kwargs"] = set()
        d["_forward_hooks_always_called"] = set()
        d["_backward_hooks"] = OrderedDict()
        d["_backward_pre_hooks"] = OrderedDict()
        d["_state_dict_pre_hooks"] = OrderedDict()
        d["_state_dict_hooks"] = OrderedDict()
        d["_load_state_dict_pre_hooks"] = OrderedDict()
        d["_load_state_dict_post_hooks"] = OrderedDict()

    forward: Callable[..., Any]

    def forward(self, *args: Any, **kwargs: Any) -> Any:  # noqa: F811
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # ---- registration ----------------------------------------------------------------------------
    def _check_ready(self, what: str) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call "
                                 "(call super().__init__() first in your __init__)")

    @staticmethod
    def _check_name(name: Any, kind: str) -> None:
        if not isinstance(name, str):  # torch's messages
            raise TypeError(f"{kind} name should be a string. Got {_typename(name)}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or ``None``, a declared-but-absent one such as a disabled bias)."""
        self._check_ready("parameters")
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                            "(torch.nn.Parameter or None required)")
        for hook in _global_parameter_registration_hooks.values():
            output = hook(self, name, param)
            if output is not None:
                param = output
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a tensor that is state but not learnable (e.g. BatchNorm's running_mean)."""
        self._check_ready("buffers")
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        if isinstance(tensor, Buffer):
            persistent = tensor.persistent
            tensor = Tensor._make(tensor._data, tensor._device, False)
        for hook in _global_buffer_registration_hooks.values():
            output = hook(self, name, tensor)
            if output is not None:
                tensor = output
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: "Module | None") -> None:
        """Add a child module, reachable as an attribute and in ``state_dict`` under ``name.``."""
        self._check_ready("modules")
        if module is not None and not isinstance(module, Module):  # torch's checks, in torch's order
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {_typename(name)}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        for hook in _global_module_registration_hooks.values():
            output = hook(self, name, module)
            if output is not None:
                module = output
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            self._check_ready("parameters")
            self._note_change(name, _stored(d, name), value)
            self._remove_from(name, d, "_buffers", "_modules")
            d.pop(name, None)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            self._note_change(name, params[name], value)
            params[name] = None
        elif isinstance(value, Module):
            self._check_ready("modules")
            self._note_change(name, _stored(d, name), value)
            self._remove_from(name, d, "_parameters", "_buffers")
            d.pop(name, None)
            for hook in _global_module_registration_hooks.values():
                output = hook(self, name, value)
                if output is not None:
                    value = output
            d["_modules"][name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as child module '{name}' "
                                "(torch.nn.Module or None expected)")
            self._note_change(name, d["_modules"][name], value)
            d["_modules"][name] = None
        elif isinstance(value, Buffer):
            self._check_ready("buffers")
            self._note_change(name, _stored(d, name), value)
            self._remove_from(name, d, "_parameters", "_modules")
            d.pop(name, None)
            self.register_buffer(name, value)
        elif d.get("_buffers") is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                "(torch.nn.Buffer, torch.Tensor or None expected)")
            self._note_change(name, d["_buffers"][name], value)
            d["_buffers"][name] = value
        else:
            if name != "training" and name in d:
                self._note_change(name, d[name], value)
            object.__setattr__(self, name, value)

    def _note_change(self, name: str, old: Any, new: Any) -> None:
        """Remember a public attribute that got another value after it was first set (a number such as
        ``negative_slope``/``eps``/``p``, or another parameter, buffer or submodule object): ``ember.compile`` keys
        its graphs on these values (``config_key``), since a trace bakes them in. Private names (``_step``,
        DistributedDataParallel's per-call flags) are bookkeeping, not configuration. Values, not a counter: a
        flag switched back and forth maps to the graphs already traced."""
        if old is new or old is _ABSENT or name.startswith("_"):
            return
        plain = _is_plain(new)
        if plain and type(old) is type(new) and _is_plain(old) and old == new and repr(old) == repr(new):
            return
        d = self.__dict__
        changed = d.setdefault("_config_changes", {})
        changed[name] = (type(new), repr(new)) if plain else id(new)
        d["_config_key"] = tuple(sorted(changed.items()))

    @property
    def config_key(self) -> tuple:
        """The public attributes changed since they were first set, with their values (see :meth:`_note_change`)."""
        return self.__dict__.get("_config_key", ())

    @staticmethod
    def _remove_from(name: str, d: dict, *stores: str) -> None:
        for store in stores:
            if d.get(store) is not None:
                d[store].pop(name, None)
                if store == "_buffers":
                    d["_non_persistent_buffers_set"].discard(name)

    def __setstate__(self, state: dict) -> None:
        # On the class, as torch's: pickle and deepcopy look ``__setstate__`` up on a not-yet-filled instance, and a
        # subclass whose ``__getattr__`` falls back to a child (zuko's BayesianModel) would recurse forever there.
        self.__dict__.update(state)

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails: parameters, buffers and children live in dicts.
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            found = d.get(store)
            if found is not None and name in found:
                return found[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if name in d.get(store, ()):
                del d[store][name]
                d["_non_persistent_buffers_set"].discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self) -> list:
        keys = list(super().__dir__()) + list(self._parameters) + list(self._buffers) + list(self._modules)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    # ---- traversal ----------------------------------------------------------------------------------
    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, "Module"]]:
        """Yield ``(dotted_name, module)`` for this module and all descendants, depth first."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            yield from module.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self) -> Iterator["Module"]:
        for _, module in self.named_modules():
            yield module

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        seen: set = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator["Module"]:
        for _, module in self.named_children():
            yield module

    def _named_members(self, store: str, prefix: str, recurse: bool,
                       remove_duplicate: bool) -> Iterator[tuple[str, Tensor]]:
        seen: set = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in getattr(module, store).items():
                if value is None:
                    continue
                if remove_duplicate:
                    if id(value) in seen:
                        continue
                    seen.add(id(value))
                yield module_prefix + ("." if module_prefix else "") + name, value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """Yield ``(dotted_name, parameter)``; shared parameters appear once unless remove_duplicate=False."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def get_submodule(self, target: str) -> "Module":
        module = self
        if target == "":
            return module
        for part in target.split("."):  # torch's messages
            if not hasattr(module, part):
                raise AttributeError(module._get_name() + " has no attribute `" + part + "`")
            module = getattr(module, part)
            if not isinstance(module, Module):
                raise AttributeError("`" + part + "` is not an nn.Module")
        return module

    def set_submodule(self, target: str, module: "Module", strict: bool = False) -> None:
        """Replace (or, unless ``strict``, add) the submodule at dotted ``target``; the parent must exist.
        Example: ``net.set_submodule("block.conv", nn.Identity())``."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        atoms = target.split(".")
        parent = self if len(atoms) == 1 else self.get_submodule(".".join(atoms[:-1]))
        if strict and not hasattr(parent, atoms[-1]):
            raise AttributeError(parent._get_name() + " has no attribute `" + atoms[-1] + "`")
        if hasattr(parent, atoms[-1]) and not isinstance(getattr(parent, atoms[-1]), Module):
            raise AttributeError("`" + atoms[-1] + "` is not an nn.Module")
        setattr(parent, atoms[-1], module)

    def get_parameter(self, target: str) -> Parameter:
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, name):
            raise AttributeError(module._get_name() + " has no attribute `" + name + "`")
        param = getattr(module, name)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + name + "` is not an nn.Parameter")
        return param

    def get_buffer(self, target: str) -> Tensor:
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, name):
            raise AttributeError(module._get_name() + " has no attribute `" + name + "`")
        if name not in module._buffers:
            raise AttributeError("`" + name + "` is not a buffer")
        return module._buffers[name]

    # ---- modes and gradients --------------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        """Set training mode here and in every descendant (affects Dropout, BatchNorm)."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for param in self.parameters():
            if param.grad is None:
                continue
            if set_to_none:
                param.grad = None
            else:
                param.grad = param.grad.detach() * 0

    def apply(self, fn: Callable[["Module"], Any]) -> "Module":
        """Call ``fn`` on every descendant and then on this module (e.g. custom initialization)."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ---- device and dtype ---------------------------------------------------------------------------
    def _apply(self, fn: Callable[[Tensor], Tensor]) -> "Module":
        """Replace every parameter's and buffer's data by ``fn(data)``, keeping Parameter identity."""
        for module in self.children():
            module._apply(fn)
        swap = _future.get_swap_module_params_on_conversion()
        overwrite = _future.get_overwrite_module_params_on_conversion()
        with grad_mode.no_grad():
            for key, param in self._parameters.items():
                if param is None:
                    continue
                new = fn(param.detach())
                grad = fn(param.grad.detach()) if param.grad is not None else None
                if swap:  # torch.__future__: the converted tensor moves into the same object
                    replacement = Parameter(new, requires_grad=param.requires_grad) if isinstance(param, Parameter) \
                        else new
                    param.grad = None
                    swap_tensors(param, replacement)
                    param.grad = grad
                elif overwrite:  # torch.__future__: a new Parameter object replaces the old one
                    fresh = Parameter(new, requires_grad=param.requires_grad)
                    fresh.grad = grad
                    self._parameters[key] = fresh
                else:
                    param.data = new
                    if grad is not None:
                        param.grad = grad
            for name, buf in self._buffers.items():
                if isinstance(buf, UninitializedBuffer):  # a lazy norm's: converted, still uninitialized
                    buf._data = fn(Tensor._make(buf._data, buf._device, False))._data
                elif buf is not None:
                    self._buffers[name] = fn(buf)
        return self

    def to(self, *args: Any, **kwargs: Any) -> "Module":
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(tensor)``; dtype changes floats only."""
        device = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        memory_format = kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"Module.to(): unexpected keyword arguments {sorted(kwargs)}")
        for arg in args:
            if isinstance(arg, Tensor):
                device, dtype = arg.device, arg.dtype
            elif isinstance(arg, dtypes.dtype):
                dtype = arg
            elif arg is not None:
                device = arg
        if dtype is not None:
            dtype = dtypes.to_dtype(dtype)
            if not dtype.is_floating_point:
                raise TypeError("nn.Module.to only accepts floating point or complex dtypes, but got desired "
                                f"dtype={dtype}")

        def convert(t: Tensor) -> Tensor:
            out = t.to(device) if device is not None else t
            if dtype is not None and t.is_floating_point():
                out = out.to(dtype)
            if memory_format is not None and t.ndim in (4, 5):  # PyTorch converts 4-D/5-D tensors only
                out = out.to(memory_format=memory_format)
            return out

        return self._apply(convert)

    def to_empty(self, *, device: Any, recurse: bool = True) -> "Module":
        """Parameters and buffers on ``device`` with new, uninitialized storage (a ``meta`` model made real:
        ``model.to_empty(device="cpu")`` then ``load_state_dict`` or ``reset_parameters``), as PyTorch's."""
        target = Device(device)

        def fresh(t: Tensor) -> Tensor:
            return empty(tuple(t.shape), dtype=t.dtype, device=target)

        if not recurse:
            with grad_mode.no_grad():
                for param in self._parameters.values():
                    if param is not None:
                        param.data = fresh(param.detach())
                for name, buf in self._buffers.items():
                    if buf is not None:
                        self._buffers[name] = fresh(buf)
            return self
        return self._apply(fresh)

    # cpu()/cuda() convert through _apply, as torch's, never through self.to(): a subclass may define to() by
    # calling cpu() (gpytorch's NNUtil), which recursed
    def cpu(self) -> "Module":
        return self._apply(lambda t: t.to("cpu"))

    def cuda(self, device: Any = None) -> "Module":
        target = "cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device)
        return self._apply(lambda t: t.to(target))

    def type(self, dst_type: Any) -> "Module":
        target = dtypes.to_dtype(dst_type)
        return self._apply(lambda t: t.to(target))

    def _cast_floats(self, target: dtypes.dtype) -> "Module":
        return self._apply(lambda t: t.to(target) if t.is_floating_point() else t)

    def float(self) -> "Module":
        return self._cast_floats(dtypes.float32)

    def double(self) -> "Module":
        return self._cast_floats(dtypes.float64)

    def half(self) -> "Module":
        return self._cast_floats(dtypes.float16)

    def bfloat16(self) -> "Module":
        return self._cast_floats(dtypes.bfloat16)

    def compile(self, *args: Any, **kwargs: Any) -> None:
        """``torch.nn.Module.compile``: this module's forward through ``ember.compile`` from now on (in place;
        returns None as torch's). Hooks still run around it, eagerly."""
        from ember.graph import compile as graph_compile

        self.forward = graph_compile(type(self).forward.__get__(self), *args, **kwargs)

    def share_memory(self) -> "Module":
        """Move every parameter (and its gradient) and buffer into shared memory, for Hogwild training with
        ember.multiprocessing: processes given this module update the same weights."""
        for tensor in list(self.parameters()) + list(self.buffers()):
            tensor.share_memory_()
        return self

    # ---- state dict ----------------------------------------------------------------------------------
    def get_extra_state(self) -> Any:
        """Override to save extra (picklable) state under ``<prefix>_extra_state``; pair with ``set_extra_state``."""
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be called. Please file "
                           "an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml to "
                           "report this bug.")

    def set_extra_state(self, state: Any) -> None:
        """Override to restore what ``get_extra_state`` returned (``load_state_dict`` calls it)."""
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be called. Please file "
                           "an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml to "
                           "report this bug.")

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if keep_vars else buf.detach()
        if type(self).get_extra_state is not Module.get_extra_state:
            destination[prefix + _EXTRA_STATE_KEY_SUFFIX] = self.get_extra_state()

    def state_dict(self, *args: Any, destination: dict | None = None, prefix: str = "",
                   keep_vars: bool = False) -> "OrderedDict[str, Tensor]":
        """All parameters and persistent buffers by dotted name (detached, sharing memory)."""
        if args:  # PyTorch's deprecated positional form state_dict(destination, prefix, keep_vars)
            destination = args[0]
            if len(args) > 1:
                prefix = args[1]
            if len(args) > 2:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()  # per-module versions, read back by _load_from_state_dict
        local_metadata = {"version": self._version}
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in list(self.__dict__.get("_state_dict_pre_hooks", {}).values()):
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in list(self.__dict__.get("_state_dict_hooks", {}).values()):
            result = hook(self, destination, prefix, local_metadata)
            if getattr(hook, "_from_public_api", False):
                if result is not None:
                    raise RuntimeError("state_dict post-hook must return None")
            elif result is not None:  # the private form may hand back a new dict, as PyTorch's
                destination = result
        return destination

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
        """Copy this module's own entries from ``state_dict`` (children are handled by the caller)."""
        for hook in list(self.__dict__.get("_load_state_dict_pre_hooks", {}).values()):
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        persistent = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local = {**{k: v for k, v in self._parameters.items() if v is not None},
                 **{k: v for k, v in persistent.items() if v is not None}}
        assign = local_metadata.get("assign_to_params_buffers", False)
        for name, target in local.items():
            key = prefix + name
            if key not in state_dict:
                missing_keys.append(key)
                continue
            value = _as_tensor(state_dict[key], key)
            if value is None:
                error_msgs.append(f'While copying the parameter named "{key}", expected torch.Tensor or Tensor-like '
                                  f"object from checkpoint but received {type(state_dict[key])}")
                continue
            if isinstance(target, _LAZY):  # a lazy module's placeholder: its own load hook materialized the rest
                continue
            if tuple(value.shape) != tuple(target.shape):
                error_msgs.append(
                    f"size mismatch for {key}: copying a param with shape {value.shape} from checkpoint, "
                    f"the shape in current model is {target.shape}."
                )
                continue
            with grad_mode.no_grad():
                if assign:
                    if name in self._parameters:
                        self._parameters[name] = Parameter(value.detach(), target.requires_grad)
                    else:
                        self._buffers[name] = value.detach()
                else:
                    try:
                        target.copy_(value)
                    except Exception as error:  # noqa: BLE001 - reported with the key, as PyTorch does
                        error_msgs.append(f'While copying the parameter named "{key}", whose dimensions in the '
                                          f"model are {target.shape} and whose dimensions in the checkpoint are "
                                          f"{value.shape}, an exception occurred : {error}.")
        extra_key = prefix + _EXTRA_STATE_KEY_SUFFIX
        has_extra = type(self).set_extra_state is not Module.set_extra_state
        if has_extra:
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        if strict:
            for key in state_dict:
                if not key.startswith(prefix) or (has_extra and key == extra_key):
                    continue
                head = key[len(prefix):].split(".", 1)[0]
                if head not in self._modules and head not in local:
                    unexpected_keys.append(key)

    def load_state_dict(self, state_dict: dict, strict: bool = True, assign: bool = False) -> _IncompatibleKeys:
        """Copy parameters and buffers from ``state_dict`` (ember tensors or NumPy arrays) by name.

        With ``strict=True`` missing or unexpected keys raise a RuntimeError that lists them; the
        result names them either way.
        """
        if not hasattr(state_dict, "keys"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing: list = []
        unexpected: list = []
        errors: list = []
        # PyTorch's protocol: each module gets its own entry of state_dict._metadata (its class's _version
        # when the checkpoint was written; absent for a plain dict), so version-aware loaders can convert.
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)  # modules may add or drop keys (BatchNorm's counter) on a copy
        if metadata is not None:
            state_dict._metadata = metadata

        def load(module: Module, prefix: str) -> None:
            local_metadata = dict(metadata.get(prefix[:-1], {})) if metadata is not None else {}
            if assign:
                local_metadata["assign_to_params_buffers"] = assign
            module._load_from_state_dict(state_dict, prefix, local_metadata, True, missing, unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")
            incompatible = _IncompatibleKeys(missing, unexpected)  # (hooks may edit the lists)
            for hook in list(module.__dict__.get("_load_state_dict_post_hooks", {}).values()):
                if hook(module, incompatible) is not None:
                    raise AssertionError("Hooks registered with ``register_load_state_dict_post_hook`` are not "
                                         "expected to return new values, if incompatible_keys need to be modified,"
                                         "it should be done inplace.")

        load(self, "")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected)
                              + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(errors))
        return _IncompatibleKeys(missing, unexpected)

    # ---- state-dict hooks (PyTorch's four public forms and the two private ones libraries use) ----------
    def _hook_store(self, name: str) -> OrderedDict:
        return self.__dict__.setdefault(name, OrderedDict())  # (modules unpickled from older checkpoints)

    def register_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, prefix, keep_vars)`` runs before ``state_dict`` saves this module."""
        return _add_hook(self._hook_store("_state_dict_pre_hooks"), hook, False)

    def register_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, state_dict, prefix, local_metadata)`` runs after it; it edits the dict in place."""
        hook._from_public_api = True
        return _add_hook(self._hook_store("_state_dict_hooks"), hook, False)

    def _register_state_dict_hook(self, hook: Callable) -> RemovableHandle:
        """The private form: the hook may return a new dict, which replaces the one being built."""
        if getattr(hook, "_from_public_api", False):
            raise RuntimeError("Cannot register the same function as the state dict post hook that was "
                               "previously registered via register_state_dict_post_hook")
        return _add_hook(self._hook_store("_state_dict_hooks"), hook, False)

    def _register_load_state_dict_pre_hook(self, hook: Callable, with_module: bool = False) -> RemovableHandle:
        """``hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)`` (the
        module first with ``with_module``) runs before this module loads; it may rename keys in place."""
        if with_module:
            inner = hook

            def hook(*args: Any) -> Any:
                return inner(self, *args)
        return _add_hook(self._hook_store("_load_state_dict_pre_hooks"), hook, False)

    def register_load_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
        error_msgs)`` runs before this module loads."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, incompatible_keys)`` runs after this module and its children loaded (it may clear the
        missing/unexpected lists in place, e.g. for keys it filled itself)."""
        return _add_hook(self._hook_store("_load_state_dict_post_hooks"), hook, False)

    # ---- hooks and calling ---------------------------------------------------------------------------
    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """``hook(module, args)`` (or ``(module, args, kwargs)``) runs before forward; may return new args."""
        handle = _add_hook(self._forward_pre_hooks, hook, prepend)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs.add(handle.id)
        return handle

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """``hook(module, args, output)`` runs after forward; a non-None return replaces the output."""
        handle = _add_hook(self._forward_hooks, hook, prepend)
        if with_kwargs:
            self._forward_hooks_with_kwargs.add(handle.id)
        if always_call:
            self._forward_hooks_always_called.add(handle.id)
        return handle

    def register_full_backward_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_output) -> tuple | None`` runs when the gradient w.r.t. the outputs is known.

        A returned tuple (one entry per output, ``None`` for non-tensors) replaces ``grad_output``
        for the rest of backward. Example:
            >>> h = lin.register_full_backward_pre_hook(lambda m, go: (go[0] * 2,))  # doctest: +SKIP
        """
        return _add_hook(self.__dict__.setdefault("_backward_pre_hooks", OrderedDict()), hook, prepend)

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_input, grad_output) -> tuple | None`` runs once the gradient w.r.t. the
        module's positional inputs is known (entries are ``None`` for non-tensors and inputs that take
        no gradient). A returned tuple replaces ``grad_input``. Example:
            >>> h = lin.register_full_backward_hook(lambda m, gi, go: print(gi[0].shape))  # doctest: +SKIP
        """
        return _add_hook(self.__dict__.setdefault("_backward_hooks", OrderedDict()), hook, prepend)

    def register_backward_hook(self, hook: Callable) -> RemovableHandle:
        """PyTorch's deprecated non-full hook; ember runs it as a full backward hook (the documented
        intent), not on the last op of forward as old PyTorch did."""
        return self.register_full_backward_hook(hook)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.__dict__.get("_backward_hooks") or self.__dict__.get("_backward_pre_hooks") \
                or _global_backward_hooks or _global_backward_pre_hooks:
            return self._call_with_backward_hooks(args, kwargs)
        return self._call_forward(args, kwargs)

    def _call_with_backward_hooks(self, args: tuple, kwargs: dict) -> Any:
        """Run forward with identity autograd nodes around the inputs and outputs (see _backward_hooks)."""
        from ember.nn.modules._backward_hooks import BackwardHook

        # torch's order: the global hooks (register_module_full_backward_hook) before the module's own
        hook = BackwardHook(self, list(_global_backward_hooks.values()) + list(self._backward_hooks.values()),
                            list(_global_backward_pre_hooks.values()) + list(self._backward_pre_hooks.values()))
        output = self._call_forward(args, kwargs, hook)
        if not isinstance(output, (Tensor, tuple)):
            import warnings

            warnings.warn(f"{type(self).__name__}: for backward hooks to be called, module output should be a "
                          "Tensor or a tuple of Tensors", UserWarning, stacklevel=3)
            return output
        return hook.setup_output_hook(output)

    def _call_forward(self, args: tuple, kwargs: dict, backward_hook: Any = None) -> Any:
        called = None  # always_call hooks already run: a failing forward runs the others, then raises
        try:  # (free in CPython 3.11+ unless something raises)
            if _global_forward_pre_hooks:  # register_module_forward_pre_hook's: before the module's own
                for hook in list(_global_forward_pre_hooks.values()):
                    result = hook(self, args)
                    if result is not None:
                        args = result if isinstance(result, tuple) else (result,)
            if self._forward_pre_hooks:
                for hook_id, hook in list(self._forward_pre_hooks.items()):
                    if hook_id in self._forward_pre_hooks_with_kwargs:
                        result = hook(self, args, kwargs)
                        if result is not None:
                            if not (isinstance(result, tuple) and len(result) == 2):
                                raise RuntimeError("forward pre-hook with kwargs must return None or a tuple "
                                                   f"(new_args, new_kwargs), but got {result!r}")
                            args, kwargs = result
                    else:
                        result = hook(self, args)
                        if result is not None:
                            args = result if isinstance(result, tuple) else (result,)
            if backward_hook is not None:
                args = backward_hook.setup_input_hook(args)
            output = self.forward(*args, **kwargs)
            if _global_forward_hooks or self._forward_hooks:
                called = set()
                output = self._run_forward_hooks(args, kwargs, output, called)
            return output
        except Exception:
            if self._forward_hooks_always_called or _global_forward_hooks_always_called:
                self._run_always_called_hooks(args, kwargs, called or set())
            raise

    def _run_forward_hooks(self, args: tuple, kwargs: dict, output: Any, called: set) -> Any:
        """The global forward hooks (register_module_forward_hook), then the module's, as torch runs them."""
        for hooks, always, with_kwargs in (
                (_global_forward_hooks, _global_forward_hooks_always_called, _global_forward_hooks_with_kwargs),
                (self._forward_hooks, self._forward_hooks_always_called, self._forward_hooks_with_kwargs)):
            for hook_id, hook in list(hooks.items()):
                if hook_id in always:
                    called.add(hook_id)
                result = hook(self, args, kwargs, output) if hook_id in with_kwargs else hook(self, args, output)
                if result is not None:
                    output = result
        return output

    def _run_always_called_hooks(self, args: tuple, kwargs: dict, called: set) -> None:
        import warnings

        for hooks, always, with_kwargs in (
                (_global_forward_hooks, _global_forward_hooks_always_called, _global_forward_hooks_with_kwargs),
                (self._forward_hooks, self._forward_hooks_always_called, self._forward_hooks_with_kwargs)):
            for hook_id, hook in list(hooks.items()):
                if hook_id not in always or hook_id in called:
                    continue
                try:
                    hook(self, args, kwargs, None) if hook_id in with_kwargs else hook(self, args, None)
                except Exception as error:  # noqa: BLE001 - torch silences it with this warning
                    warnings.warn("forward hook with ``always_call=True`` raised an exception that was silenced "
                                  f"as another error was raised in forward: {str(error)}", stacklevel=3)

    _call_impl = __call__

    # ---- printing ---------------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """One line of constructor arguments shown in ``repr`` (override in layers)."""
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        for name, module in self._modules.items():
            lines.append(f"({name}): " + _addindent(repr(module), 2))
        if not lines:
            return self._get_name() + "()"
        if len(lines) == 1 and not self._modules:
            return f"{self._get_name()}({lines[0]})"
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


def _as_tensor(value: Any, key: str) -> Tensor:
    if isinstance(value, Tensor):
        return value
    import numpy as np

    if isinstance(value, np.ndarray) or np.isscalar(value):
        return tensor(np.asarray(value))
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor: convert through NumPy
        return tensor(np.asarray(value.detach().cpu().numpy()))
    return None  # torch's message, collected with the other errors by _load_from_state_dict


def _typename(obj: Any) -> str:
    """``torch.typename``: ``torch.FloatTensor`` for a tensor, the qualified class name otherwise."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(type(obj), "__module__", "builtins")
    name = type(obj).__qualname__
    return name if module in ("builtins", None) else f"{module}.{name}"
