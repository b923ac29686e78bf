"""The Tensor: an array on a device plus autograd state. Operators and methods forward to ops.

The operators are defined here, in the class; the long tail of op methods (``sum``, ``view``,
``add_``...) comes from the mixin :class:`ember._tensor_methods.TensorMethods`.

Example:
    >>> import ember
    >>> x = ember.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> (x * x).sum().backward()
    >>> x.grad
    tensor([[2., 4.],
            [6., 8.]])
"""
from __future__ import annotations

import copy
import warnings
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ember import _dispatch_levels, _torch_function, dtypes
from ember._size import Size, _new as _tuple_new
from ember._tensor_methods import TensorMethods, warn_scalar_of_grad_tensor
from ember.autograd import backward as run, grad_mode
from ember.backends import get_backend
from ember.device import CPU, device as Device, to_device
from ember.interpreters import SymbolicValue
from ember.ops import dispatch, elementwise as ew, inplace, layout, linalg, views
from ember.ops.registry import OPS
from ember.ops.inplace import setitem
from ember.ops.movement import getitem

_binary = dispatch.binary
_OperandTypeError = dispatch.OperandTypeError
_ADD, _SUB, _MUL, _DIV, _POW = OPS["add"], OPS["sub"], OPS["mul"], OPS["div"], OPS["pow"]

# Bumped when a tensor's shape or dtype changes in place (``p.data = other``, ``set_``): compiled graphs that read it
# as state must be traced again (ember/graph/compile.py checks on the next call; one list index per call).
LAYOUT_CHANGES = [0]


class Tensor(TensorMethods, metaclass=_torch_function.TensorMeta):
    """An n-dimensional array with autograd. Build one with ``ember.tensor`` or a creation op."""

    # _view_fn: set on views only (when _base is set): how to re-derive the view from _base, see
    # ember/ops/inplace.py (PyTorch's view replay after an in-place change of the base or a view).
    __slots__ = ("_data", "_device", "_requires_grad", "grad", "grad_fn", "_output_nr", "_vc", "_base",
                 "_hooks", "_retains_grad", "_view_fn", "__weakref__", "__dict__")

    # NumPy defers to the Tensor's reflected operators (np.float64(2) * t is a Tensor, not an ndarray), as for
    # PyTorch's tensors
    __array_priority__ = 1000

    # ---- construction -----------------------------------------------------------------------
    @classmethod
    def _make(cls, data: Any, device: Device, requires_grad: bool) -> "Tensor":
        t = object.__new__(cls)
        t._data = data
        t._device = device
        t._requires_grad = requires_grad
        t.grad = None
        t.grad_fn = None
        t._output_nr = 0
        t._vc = None
        t._base = None
        t._hooks = None
        t._retains_grad = False
        return t

    def __init__(self, *args: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False,
                 **extra: Any) -> None:
        """``Tensor(data)`` copies data as float32; ``Tensor(2, 3)`` makes an uninitialized 2x3."""
        from ember import creation

        if type(self) is not Tensor and hasattr(self, "_data"):
            # a subclass's __new__ built it already (``Tensor._make_subclass``); torch's __init__ is object's,
            # which ignores the call's arguments, its own keywords too (geoopt's ``ManifoldTensor(x, manifold=m)``)
            return
        if extra:
            raise TypeError(f"new() received an invalid combination of arguments: unexpected keyword "
                            f"argument(s) {', '.join(map(repr, extra))}; Tensor(data) and Tensor(*size) take "
                            f"dtype=, device= and requires_grad= only")

        if len(args) == 1 and not isinstance(args[0], (int, Size)):  # (a torch.Size is a shape, as PyTorch)
            made = creation.tensor(args[0], dtype=dtype or dtypes.get_default_dtype(), device=device)
        else:  # ``Tensor()`` is empty of shape (0,), as PyTorch's legacy constructor
            made = creation.empty(*(args or (0,)), dtype=dtype, device=device)
        for slot in ("_data", "_device", "grad", "grad_fn", "_output_nr", "_vc", "_base", "_hooks", "_retains_grad"):
            object.__setattr__(self, slot, getattr(made, slot))
        self._requires_grad = requires_grad

    # ---- __torch_function__ (ember/_torch_function.py; public names in ember.overrides) --------------
    __torch_function__ = classmethod(_torch_function.default_torch_function)
    as_subclass = _torch_function.as_subclass
    _make_subclass = staticmethod(_torch_function.make_subclass)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _dispatch_levels.subclass_defined(cls)  # (first: a wrapper's item/stride are its own, not overridable)
        _torch_function.subclass_defined(cls)

    # ---- __torch_dispatch__ (ember/_dispatch_levels.py; public names in ember.utils._python_dispatch) ----
    __torch_dispatch__ = classmethod(_dispatch_levels._disabled)
    _make_wrapper_subclass = staticmethod(_dispatch_levels.make_wrapper_subclass)

    # ---- metadata -----------------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        return _tuple_new(Size, self._data.shape)  # NumPy's shape: ints already, no check

    def size(self, dim: int | None = None) -> Any:
        if dim is None:
            return _tuple_new(Size, self._data.shape)  # NumPy's shape: ints already, no check
        return self._data.shape[self._dim(dim, "size")]

    @property
    def dtype(self) -> dtypes.dtype:
        return dtypes._BY_NP[self._data.dtype]

    @property
    def device(self) -> Device:
        return self._device

    @property
    def is_cuda(self) -> bool:
        return self._device.type == "cuda"

    @property
    def is_meta(self) -> bool:
        """On the ``meta`` device: a shape and a dtype, no data (ember/backends/meta.py)."""
        return self._device.type == "meta"

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    ndimension = dim

    def numel(self) -> int:
        return int(self._data.size)

    nelement = numel

    def element_size(self) -> int:
        return self._data.itemsize

    @property
    def itemsize(self) -> int:
        return self._data.itemsize

    @property
    def nbytes(self) -> int:
        return int(self._data.nbytes)

    def is_floating_point(self) -> bool:
        return self._data.dtype.kind == "f" or self.dtype is dtypes.bfloat16

    def is_contiguous(self, memory_format: Any = None) -> bool:
        """Dense in row-major order, or in ``memory_format``'s (``torch.channels_last``: NHWC)."""
        if memory_format is None:
            return bool(self._data.flags.c_contiguous) or 0 in self._data.shape
        return views.is_contiguous(self, memory_format)

    def stride(self, dim: int | None = None) -> Any:
        data = self._data
        # a zero-size NumPy array keeps no strides (all 0): report PyTorch's row-major ones (ember/ops/layout.py)
        strides = tuple(s // data.itemsize for s in data.strides) if data.size else layout.contiguous_strides(data.shape)
        return strides if dim is None else strides[self._dim(dim, "stride")]

    def data_ptr(self) -> int:
        return self._device.backend.data_ptr(self._data)

    def share_memory_(self) -> "Tensor":
        """Move the data into shared memory other processes can map (no-op if it is there); see
        ember.multiprocessing. Views made before the move keep the old memory."""
        from ember.multiprocessing import shared_storage

        if self._device.type != "cpu":
            return self  # torch: a no-op for CUDA tensors, which are shared through their own IPC
        if not shared_storage.is_shared(self._data):
            self._data = shared_storage.to_shared(self._data)
            if self.grad is not None:
                self.grad.share_memory_()
        return self

    def is_shared(self) -> bool:
        """True when the data lives in shared memory (after share_memory_(), or sent by another process)."""
        from ember.multiprocessing import shared_storage

        return self._device.type == "cpu" and shared_storage.is_shared(self._data)

    def _dim(self, dim: int, op: str) -> int:
        n = max(self._data.ndim, 1)
        if not -n <= dim < n:
            raise IndexError(f"{op}: Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
        return dim % n

    # ---- autograd state ------------------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        if self.grad_fn is not None and not requires_grad:
            raise RuntimeError(
                "requires_grad_: you can only change requires_grad flags of leaf variables. If you want to use a "
                "computed variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach()."
            )
        if requires_grad and not (self.is_floating_point() or self.dtype.is_complex):
            raise RuntimeError(f"requires_grad_: only Tensors of floating point and complex dtype can require gradients, got "
                               f"{self.dtype}")
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def _version(self) -> int:
        return self._vc[0] if self._vc is not None else 0

    def _bump(self) -> None:
        # the counter is made lazily (most tensors are never written in place); a write makes it, as
        # PyTorch counts every in-place change from 0 whether or not anything shares the storage yet
        vc = self._vc
        if vc is None:
            self._vc = [1]
        else:
            vc[0] += 1

    def detach(self) -> "Tensor":
        """A new tensor sharing this one's data, cut from the graph."""
        out = Tensor._make(self._data, self._device, False)
        if self._vc is None:
            self._vc = [0]
        out._vc = self._vc
        root = _storage_root_of(self)
        if root is not None:  # storage_offset()/as_strided see the same storage
            out._storage_root = root
        if isinstance(self._data, SymbolicValue):  # in a graph: a write into either must reach the other
            mark_alias = getattr(self._data.interpreter, "mark_alias", None)
            if mark_alias is not None:
                mark_alias(out, self)
        return out

    def detach_(self) -> "Tensor":
        if self._base is not None and self._base._requires_grad:
            raise RuntimeError("detach_: can't detach a view in place; use detach() instead")
        self.grad_fn = None
        self._requires_grad = False
        return self

    @property
    def data(self) -> "Tensor":
        """The same data outside autograd, with a version counter of its own: in-place changes through
        ``.data`` are not seen by autograd's saved-tensor check (the difference from ``detach()``, as in PyTorch)."""
        out = Tensor._make(self._data, self._device, False)
        root = _storage_root_of(self)
        if root is not None:
            out._storage_root = root
        if isinstance(self._data, SymbolicValue):  # in a graph: a write into either must reach the other
            mark_alias = getattr(self._data.interpreter, "mark_alias", None)
            if mark_alias is not None:
                mark_alias(out, self)
        return out

    @data.setter
    def data(self, value: "Tensor") -> None:
        new = value._data
        if new.shape != self._data.shape or new.dtype != self._data.dtype:
            LAYOUT_CHANGES[0] += 1  # ember.compile re-checks the tensors its graphs read (ember/graph/compile.py)
        self._data = new
        self._device = value._device

    def retain_grad(self) -> None:
        """Keep ``.grad`` for this non-leaf tensor after backward."""
        if self.grad_fn is None:
            return
        if self._retains_grad:
            return
        import weakref

        ref = weakref.ref(self)

        def store(grad: Tensor) -> None:
            tensor = ref()
            if tensor is not None:  # under create_graph the retained gradient keeps its history, as torch's
                grad = grad if grad_mode.STATE.enabled else grad.detach()
                tensor.grad = grad if tensor.grad is None else tensor.grad + grad

        store._retains_grad = True  # found by name when an in-place op moves it to the new history (node.py)
        self.grad_fn._register_tensor_prehook(self._output_nr, store)
        self._retains_grad = True

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def register_hook(self, hook: Callable[["Tensor"], "Tensor | None"]) -> Any:
        """Call ``hook(grad)`` when this tensor's gradient is computed; a returned tensor replaces it."""
        if not self._requires_grad:
            raise RuntimeError("register_hook: cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is None:
            if self._hooks is None:
                self._hooks = []
            self._hooks.append(hook)
            hooks = self._hooks
        else:
            hooks = self.grad_fn._register_tensor_prehook(self._output_nr, hook)
        return _RemovableHandle(hooks, hook)

    def register_post_accumulate_grad_hook(self, hook: Callable[["Tensor"], None]) -> Any:
        """Call ``hook(tensor)`` after backward has accumulated into this leaf's ``.grad``.

        Example:
            >>> import ember
            >>> w = ember.ones(2, requires_grad=True)
            >>> seen = []
            >>> _ = w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.tolist()))
            >>> (w * 3).sum().backward(); seen
            [[3.0, 3.0]]
        """
        if not self._requires_grad:
            raise RuntimeError("register_post_accumulate_grad_hook: the tensor does not require grad")
        if self.grad_fn is not None:
            raise RuntimeError("register_post_accumulate_grad_hook: post accumulate grad hooks cannot be registered "
                               "on non-leaf tensors (this tensor was produced by an op); use register_hook instead")
        hooks = self.__dict__.setdefault("_post_accumulate_hooks", [])
        hooks.append(hook)
        return _RemovableHandle(hooks, hook)

    def backward(self, gradient: "Tensor | None" = None, retain_graph: bool | None = None,
                 create_graph: bool = False, inputs: Sequence["Tensor"] | None = None) -> None:
        run([self], None if gradient is None else [gradient], retain_graph, create_graph, inputs=inputs)

    # ---- conversion ------------------------------------------------------------------------------
    def numpy(self, *, force: bool = False) -> np.ndarray:
        if self._requires_grad and not force:
            raise RuntimeError("numpy(): can't call numpy() on a Tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        if self._device.type != "cpu":
            if not force:
                raise TypeError(f"numpy(): can't convert {self._device} tensor to numpy. Use Tensor.cpu() to copy the "
                                "tensor to host memory first.")
            return self._device.backend.to_numpy(self._data)
        return self._data

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """NumPy's view of a CPU tensor; device tensors refuse (copy with ``.cpu()`` first), as in PyTorch."""
        if self._device.type != "cpu":
            raise TypeError(f"can't convert {self._device} device type tensor to numpy. Use Tensor.cpu() to copy the "
                            "tensor to host memory first.")
        array = self._data
        return array if dtype is None else array.astype(dtype)

    def __array_wrap__(self, array: Any, context: Any = None, return_scalar: bool = False) -> "Tensor":
        """A NumPy function or ufunc called on a tensor gives a tensor, as PyTorch's wrap: ``np.clip(t, 0, 1)``,
        ``np.sqrt(t)``, ``np.transpose(t, (1, 2, 0))``; a bool result becomes uint8 and a scalar a 0-d tensor
        (PyTorch's quirks, kept). Example: ``np.exp(ember.zeros(2))`` is ``tensor([1., 1.])``."""
        array = np.asarray(array)
        if array.dtype == np.bool_:
            array = array.astype(np.uint8)
        dtypes.from_numpy_dtype(array.dtype)  # (refuses dtypes a tensor cannot hold, as from_numpy)
        return Tensor._make(array, CPU, False)

    def item(self) -> Any:
        if self._data.size != 1:
            raise RuntimeError(f"item(): a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return self._device.backend.item(self._data)

    def tolist(self) -> Any:
        return self._device.backend.to_numpy(self._data).tolist()

    def __float__(self) -> float:
        if self.numel() != 1:  # PyTorch: ValueError here (item() raises RuntimeError)
            raise ValueError(f"only one element tensors can be converted to Python scalars (float() of a tensor of "
                             f"shape {tuple(self.shape)})")
        if self._requires_grad and grad_mode.STATE.enabled:
            warn_scalar_of_grad_tensor()
        return float(self.item())

    def __int__(self) -> int:
        if self.numel() != 1:
            raise ValueError(f"only one element tensors can be converted to Python scalars (int() of a tensor of "
                             f"shape {tuple(self.shape)})")
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.category != 1 or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with {self._data.size} values is ambiguous; use .any() "
                               "or .all()")
        return bool(self.item())

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self) -> Iterator["Tensor"]:
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        from ember._repr import tensor_repr

        return tensor_repr(self)

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        # PyTorch's rule: a plain 0-d tensor formats as its number (f"{loss}" -> "0.25", as training logs
        # expect); anything else formats as str() and refuses a format spec, as object.__format__ does.
        if self._data.ndim == 0 and type(self) is Tensor:
            return format(self.item(), spec)
        return object.__format__(self, spec)

    def __reduce_ex__(self, protocol: int) -> Any:
        """Pickle by value (array, requires_grad, class); see ember/serialization/pickling.py."""
        from ember.serialization.pickling import reduce_tensor

        return reduce_tensor(self)

    def __deepcopy__(self, memo: dict) -> "Tensor":
        out = Tensor._make(self._data.copy(), self._device, self._requires_grad)
        if self.grad is not None:
            out.grad = self.grad.__deepcopy__(memo)
        # the user's attributes, deep-copied as torch's; not ember's bookkeeping (a view's storage root: the copy owns
        # new memory)
        out.__dict__.update(copy.deepcopy(user_attributes(self), memo))
        if type(self) is not Tensor:
            out.__class__ = type(self)
        memo[id(self)] = out
        return out

    def to(self, *args: Any, **kwargs: Any) -> "Tensor":
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)``, with keyword forms."""
        target_device = kwargs.pop("device", None)
        target_dtype = kwargs.pop("dtype", None)
        copy = kwargs.pop("copy", False)
        non_blocking = bool(kwargs.pop("non_blocking", False))
        memory_format = kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to(): unexpected keyword arguments {sorted(kwargs)}")
        flags = 0  # positional non_blocking, then copy: to(dtype, non_blocking, copy), to(device, dtype, nb, copy)
        for arg in args:
            if isinstance(arg, bool):
                if flags >= 2 or not (target_device is not None or target_dtype is not None):
                    raise TypeError(f"to(): unexpected argument {arg!r}")
                if flags == 0:
                    non_blocking = arg
                else:
                    copy = arg
                flags += 1
            elif isinstance(arg, Tensor):
                target_device, target_dtype = arg.device, arg.dtype
            elif isinstance(arg, dtypes.dtype) or arg in (float, int, bool, complex):
                target_dtype = dtypes.to_dtype(arg)
            elif isinstance(arg, (str, Device)):
                target_device = arg
            elif arg is not None:
                raise TypeError(f"to(): unexpected argument {arg!r}")
        out = self
        if target_device is not None:
            target = to_device(target_device)
            if target != out._device:
                out = _transfer(out, target, non_blocking)
        if target_dtype is not None:
            target_dtype = dtypes.to_dtype(target_dtype)
            if out.dtype.is_complex and not target_dtype.is_complex:
                warnings.warn("Casting complex values to real discards the imaginary part (as in PyTorch); take "
                              ".real or .abs() explicitly to keep this quiet", UserWarning, stacklevel=2)
            out = dispatch.cast(out, target_dtype)
        if memory_format is not None and views.format_name(memory_format) != "preserve_format":
            if out is not self or copy or not views.to_alias_ok(self, memory_format):
                out = views.to_format(out, memory_format, owned=out is not self)  # torch's strides for the format
        elif copy and out is self:
            out = self.clone()
        return out

    def cpu(self) -> "Tensor":
        return self.to("cpu")

    def cuda(self, device: Any = None, non_blocking: bool = False) -> "Tensor":
        if device is None:
            device = "cuda"
        elif isinstance(device, int):
            device = f"cuda:{device}"
        return self.to(device, non_blocking=non_blocking)

    def pin_memory(self, device: Any = None) -> "Tensor":
        """A copy in page-locked host memory, so ``.to('cuda', non_blocking=True)`` can copy
        asynchronously (needs the CUDA backend, as PyTorch needs an accelerator)."""
        if self._device.type != "cpu":
            raise RuntimeError(f"pin_memory(): cannot pin a {self._device} tensor: only dense CPU tensors can be "
                               "pinned")
        if self.is_pinned():
            return self
        try:
            backend = get_backend("cuda")
        except RuntimeError as error:
            raise RuntimeError(f"pin_memory(): {error}") from None
        out = Tensor._make(backend.pin(self._data), self._device, False)
        return out.requires_grad_(True) if self._requires_grad else out

    def is_pinned(self, device: Any = None) -> bool:
        """Whether this CPU tensor lives in page-locked memory (False without a CUDA backend)."""
        if self._device.type != "cpu":
            return False
        backend = _cuda_backend_or_none()
        return backend is not None and backend.is_pinned(self._data)

    def type(self, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
        """PyTorch's legacy spelling: ``x.type()`` names the type ('torch.FloatTensor'); ``x.type(t)`` converts
        to a dtype, a legacy type (``torch.LongTensor``, ``torch.cuda.FloatTensor``: device too) or its name."""
        if dtype is None:
            return dtypes.legacy_type_name(self.dtype, self._device.type)
        if dtype is Tensor or dtype in ("torch.Tensor", "ember.Tensor"):
            # the class itself is the default tensor type (torch.FloatTensor under float32): a CPU float tensor
            dtype = f"torch.{dtypes.legacy_type_name(dtypes.get_default_dtype(), 'cpu').split('.')[-1]}"
        legacy = dtypes.parse_legacy_type(dtype)
        if legacy is None and isinstance(dtype, str):
            raise ValueError(f"Tensor.type: invalid type: {dtype!r} (expected a dtype or a name such as "
                               "'torch.FloatTensor' or 'torch.cuda.LongTensor')")
        if legacy is None:
            return self.to(dtypes.to_dtype(dtype), non_blocking=non_blocking)
        target, device_type = legacy
        if device_type != self._device.type:
            return self.to(device_type, target, non_blocking=non_blocking)
        return self.to(target, non_blocking=non_blocking)

    def type_as(self, other: "Tensor") -> "Tensor":
        return self.to(other.dtype)

    def float(self, memory_format: Any = None) -> "Tensor":
        return self.to(dtypes.float32, memory_format=memory_format)

    def double(self, memory_format: Any = None) -> "Tensor":
        return self.to(dtypes.float64, memory_format=memory_format)

    def half(self, memory_format: Any = None) -> "Tensor":
        return self.to(dtypes.float16, memory_format=memory_format)

    def bfloat16(self, memory_format: Any = None) -> "Tensor":
        return self.to(dtypes.bfloat16, memory_format=memory_format)

    def long(self, memory_format: Any = None) -> "Tensor":
        return self.to(dtypes.int64, memory_format=memory_format)

    def int(self, memory_format: Any = None) -> "Tensor":
        return self.to(dtypes.int32, memory_format=memory_format)

    def short(self, memory_format: Any = None) -> "Tensor":
        return self.to(dtypes.int16, memory_format=memory_format)

    def char(self, memory_format: Any = None) -> "Tensor":
        return self.to(dtypes.int8, memory_format=memory_format)

    def byte(self, memory_format: Any = None) -> "Tensor":
        return self.to(dtypes.uint8, memory_format=memory_format)

    def bool(self, memory_format: Any = None) -> "Tensor":
        return self.to(dtypes.bool_, memory_format=memory_format)

    # ---- operators (small direct functions: this is the eager hot path) -------------------------
    def __add__(self, other: Any) -> "Tensor":
        try:
            return _binary(_ADD, self, other)
        except _OperandTypeError:  # None, a string, another library's object: Python asks it (a Tensor-like
            return _torch_function.operator_fallback("__add__", self, other)  # class's __torch_function__ first)

    def __radd__(self, other: Any) -> "Tensor":
        try:
            return _binary(_ADD, other, self)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__radd__", self, other)

    def __sub__(self, other: Any) -> "Tensor":
        try:
            return _binary(_SUB, self, other)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__sub__", self, other)

    def __rsub__(self, other: Any) -> "Tensor":
        try:
            return _binary(_SUB, other, self)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__rsub__", self, other)

    def __mul__(self, other: Any) -> "Tensor":
        try:
            return _binary(_MUL, self, other)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__mul__", self, other)

    def __rmul__(self, other: Any) -> "Tensor":
        try:
            return _binary(_MUL, other, self)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__rmul__", self, other)

    def __truediv__(self, other: Any) -> "Tensor":
        try:
            return _binary(_DIV, self, other)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__truediv__", self, other)

    def __rtruediv__(self, other: Any) -> "Tensor":
        try:
            return _binary(_DIV, other, self)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__rtruediv__", self, other)

    def __rdiv__(self, other: Any) -> "Tensor":  # torch's name for it (what ``2 / x`` reports to __torch_function__)
        try:
            return _binary(_DIV, other, self)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__rdiv__", self, other)

    def __pow__(self, other: Any) -> "Tensor":
        try:
            return _binary(_POW, self, other)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__pow__", self, other)

    def __rpow__(self, other: Any) -> "Tensor":
        try:
            return _binary(_POW, other, self)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__rpow__", self, other)

    def __floordiv__(self, other: Any) -> "Tensor":
        try:
            return ew.floor_divide(self, other)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__floordiv__", self, other)

    def __rfloordiv__(self, other: Any) -> "Tensor":
        try:
            return ew.floor_divide(other, self)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__rfloordiv__", self, other)

    def __mod__(self, other: Any) -> "Tensor":
        try:
            return ew.remainder(self, other)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__mod__", self, other)

    def __rmod__(self, other: Any) -> "Tensor":
        try:
            return ew.remainder(other, self)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__rmod__", self, other)

    def __neg__(self) -> "Tensor":
        return ew.neg(self)

    def __pos__(self) -> "Tensor":
        return self

    def __abs__(self) -> "Tensor":
        return ew.abs(self)

    def __invert__(self) -> "Tensor":
        return ew.logical_not(self) if self.dtype.name == "bool" else ew.bitwise_not(self)

    def __matmul__(self, other: Any) -> "Tensor":
        if not isinstance(other, Tensor) and not isinstance(other, np.ndarray):
            # as torch: a Tensor-like operand's __torch_function__ takes it, else Python asks the other operand
            return _torch_function.operator_fallback("__matmul__", self, other)
        if isinstance(other, np.ndarray):  # as torch: a NumPy operand of an operator becomes a tensor
            other = dispatch._coerce_operand(other, linalg.MATMUL)
        return linalg.matmul(self, other)

    def __rmatmul__(self, other: Any) -> "Tensor":
        if not isinstance(other, Tensor) and not isinstance(other, np.ndarray):
            return _torch_function.operator_fallback("__rmatmul__", self, other)
        if isinstance(other, np.ndarray):  # ``array @ tensor``: ember's operators take arrays on either side
            other = dispatch._coerce_operand(other, linalg.MATMUL)
        return linalg.matmul(other, self)

    def __eq__(self, other: Any) -> "Tensor":  # type: ignore[override]
        try:
            return ew.eq(self, other)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__eq__", self, other)

    def __ne__(self, other: Any) -> "Tensor":  # type: ignore[override]
        try:
            return ew.ne(self, other)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__ne__", self, other)

    def __lt__(self, other: Any) -> "Tensor":
        try:
            return ew.lt(self, other)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__lt__", self, other)

    def __le__(self, other: Any) -> "Tensor":
        try:
            return ew.le(self, other)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__le__", self, other)

    def __gt__(self, other: Any) -> "Tensor":
        try:
            return ew.gt(self, other)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__gt__", self, other)

    def __ge__(self, other: Any) -> "Tensor":
        try:
            return ew.ge(self, other)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__ge__", self, other)

    # bool & bool is logical (exported as And); anything else is bitwise with PyTorch's promotion
    # (bool & int64 -> int64, bool | 2.5 -> an error)
    def __and__(self, other: Any) -> "Tensor":
        if self._data.dtype.kind == "b" and (type(other) is bool or (
                isinstance(other, Tensor) and other._data.dtype.kind == "b")):
            return ew.logical_and(self, other)
        try:
            return ew.bitwise_and(self, other)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__and__", self, other)

    def __or__(self, other: Any) -> "Tensor":
        if self._data.dtype.kind == "b" and (type(other) is bool or (
                isinstance(other, Tensor) and other._data.dtype.kind == "b")):
            return ew.logical_or(self, other)
        try:
            return ew.bitwise_or(self, other)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__or__", self, other)

    def __xor__(self, other: Any) -> "Tensor":
        if self._data.dtype.kind == "b" and (type(other) is bool or (
                isinstance(other, Tensor) and other._data.dtype.kind == "b")):
            return ew.logical_xor(self, other)
        try:
            return ew.bitwise_xor(self, other)
        except _OperandTypeError:
            return _torch_function.operator_fallback("__xor__", self, other)

    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__

    # ---- in-place arithmetic ----------------------------------------------------------------------
    def __iadd__(self, other: Any) -> "Tensor":
        return inplace.inplace_binary(_ADD, self, other, "add_")

    def __isub__(self, other: Any) -> "Tensor":
        return inplace.inplace_binary(_SUB, self, other, "sub_")

    def __imul__(self, other: Any) -> "Tensor":
        return inplace.inplace_binary(_MUL, self, other, "mul_")

    def __itruediv__(self, other: Any) -> "Tensor":
        return inplace.inplace_binary(_DIV, self, other, "div_")

    # Without these Python would fall back to ``x = x // y``: a new tensor, so ``v //= 2`` on a view
    # would leave its base unchanged.
    def __ifloordiv__(self, other: Any) -> "Tensor":
        return self.floor_divide_(other)

    def __imod__(self, other: Any) -> "Tensor":
        return self.remainder_(other)

    def __ipow__(self, other: Any) -> "Tensor":
        return self.pow_(other)

    def __iand__(self, other: Any) -> "Tensor":
        return self.bitwise_and_(other)

    def __ior__(self, other: Any) -> "Tensor":
        return self.bitwise_or_(other)

    def __ixor__(self, other: Any) -> "Tensor":
        return self.bitwise_xor_(other)

    def __ilshift__(self, other: Any) -> "Tensor":
        return self.bitwise_left_shift_(other)

    def __irshift__(self, other: Any) -> "Tensor":
        return self.bitwise_right_shift_(other)

    # ---- indexing ---------------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> "Tensor":
        return getitem(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        setitem(self, key, value)


class _RemovableHandle:
    def __init__(self, hooks: list, hook: Callable) -> None:
        self._hooks, self._hook = hooks, hook

    def remove(self) -> None:
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


def _cuda_backend_or_none() -> Any:
    try:
        return get_backend("cuda")
    except RuntimeError:
        return None


def _transfer(t: Tensor, target: Device, non_blocking: bool = False) -> Tensor:
    """Copy to another device; recorded so gradients flow back to the source device.

    ``non_blocking``: a host -> device copy from pinned memory, or a device -> host copy, may return
    before the data has arrived (the backend queues it on the current stream), as in PyTorch."""
    source = t._device
    if dispatch.is_symbolic(t):  # a graph is being built: the transfer is a node of it
        return dispatch.apply(OPS["to_device"], (t,), {"device": str(target), "source": str(source)})
    t0 = dispatch.PROFILER and dispatch.PROFILER.clock()
    if source.type == "cpu" and target.type != "cpu":
        data = target.backend.copy_from_host(t._data, target.index or 0, non_blocking)
    elif target.type == "cpu" and source.type != "cpu":
        data = source.backend.copy_to_host(t._data, non_blocking)
    else:  # within one device type (cuda:0 -> cuda:1) the backend copies directly; else through the host
        data = t._data if source.type == target.type else source.backend.to_numpy(t._data)
        data = target.backend.asarray(data, index=target.index or 0)
    out = Tensor._make(data, target, False)
    if t0 and dispatch.PROFILER is not None:  # a host<->device copy is a profiler event of its own
        dispatch.PROFILER.copy(t0, t._data, source, target)
    if t._requires_grad and grad_mode.STATE.enabled:
        dispatch.record(OPS["to_device"], (out,), (t,), {"device": str(target), "source": str(source)})
    return out


# The one seam of the core import graph (docs/architecture.md): dispatch and the op modules build and
# recognise Tensors, and Tensor's methods call the op modules, so one side must learn of the other at
# run time. The op layer is imported first and is handed the class here, once; type checkers see the
# real class through dispatch's TYPE_CHECKING import.
dispatch.Tensor = Tensor
dispatch._make = Tensor._make
_torch_function.bind(Tensor)
_dispatch_levels.Tensor = Tensor


def _storage_root_of(t: Any) -> Any:
    """A stand-in for the tensor holding ``t``'s storage (its base, or what it was detached from), read by
    ember/ops/strided.py: a bare tensor over the root's memory, so a detached value never keeps the root's autograd
    graph alive; None when ``t`` is its own storage."""
    if t._base is None:
        return t.__dict__.get("_storage_root")
    root = t._base
    known = root.__dict__.get("_storage_root")
    return known if known is not None else Tensor._make(root._data, root._device, False)


# Attributes ember itself keeps in a tensor's __dict__ (not the user's): storage identity of detached views, hooks,
# forward-AD bookkeeping, a wrapper subclass's strides. Pickling and torch-format saving carry only the user's.
INTERNAL_ATTRIBUTES = frozenset({"_storage_root", "_post_accumulate_hooks", "_wrapper_strides", "_in_jvp",
                                 "_jvp_linearized", "_jvp_input_meta"})


def user_attributes(t: Any) -> dict:
    """The Python attributes a user set on ``t`` (``t.note = 1``), without ember's own bookkeeping.

    >>> import ember
    >>> x = ember.ones(4); v = x[1:].detach(); v.note = "kept"
    >>> user_attributes(v)
    {'note': 'kept'}
    """
    return {k: v for k, v in getattr(t, "__dict__", {}).items() if k not in INTERNAL_ATTRIBUTES}
