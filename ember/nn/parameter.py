"""``Parameter``: a Tensor that a Module registers as learnable when assigned as an attribute.

Example:
    >>> import ember
    >>> p = ember.nn.Parameter(ember.zeros(2))
    >>> p.requires_grad
    True
"""
from __future__ import annotations

from typing import Any

from ember import dtypes
from ember.tensor import Tensor
from ember.creation import empty


class Parameter(Tensor):
    """A learnable tensor. Shares ``data``'s buffer; ``requires_grad`` is True by default."""

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> "Parameter":
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter: expected an ember Tensor as data, got {type(data).__name__}")
        param = Tensor._make.__func__(cls, data._data, data._device, False)
        # Share the version counter so in-place changes through either name are seen by autograd.
        if data._vc is None:
            data._vc = [0]
        param._vc = data._vc
        if requires_grad:
            param.requires_grad_(True)
        return param

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # everything happens in __new__ (Tensor.__init__ would rebuild the data); like torch's (object's
        # __init__) it ignores the call's arguments, so a subclass's __new__ may take more (geoopt's
        # ``ManifoldParameter(data, manifold=m)``)
        pass

    def __repr__(self) -> str:
        from ember._repr import tensor_repr

        return "Parameter containing:\n" + tensor_repr(self)

    __str__ = __repr__

    def __deepcopy__(self, memo: dict) -> "Parameter":
        if id(self) in memo:
            return memo[id(self)]
        out = Parameter(Tensor._make(self._data.copy(), self._device, False), self._requires_grad)
        if self.grad is not None:
            out.grad = self.grad.__deepcopy__(memo)
        memo[id(self)] = out
        return out


class Buffer(Tensor):
    """Marks a tensor as a buffer when assigned to a Module attribute (``torch.nn.Buffer``)."""

    def __new__(cls, data: Tensor, *, persistent: bool = True) -> "Buffer":
        buf = Tensor._make.__func__(cls, data._data, data._device, False)
        buf.persistent = persistent
        return buf

    def __init__(self, data: Tensor, *, persistent: bool = True) -> None:
        pass


_NO_SHAPE = ("Can't access the shape of an uninitialized parameter or buffer. This error usually happens in "
             "`load_state_dict` when trying to load an uninitialized parameter into an initialized one. Call "
             "`forward` to initialize the parameters before accessing their attributes.")


class _Shapeless:
    """A lazy placeholder has no shape yet: asking for it raises torch's RuntimeError (ember answered ``(0,)``)."""

    @property
    def shape(self) -> Any:
        raise RuntimeError(_NO_SHAPE)

    def size(self, dim: int | None = None) -> Any:
        raise RuntimeError(_NO_SHAPE)


class UninitializedParameter(_Shapeless, Parameter):
    """A parameter of a ``Lazy*`` module before its first forward (no shape yet); prints as PyTorch's
    ``<UninitializedParameter>`` and becomes a plain :class:`Parameter` when materialized, keeping its identity.

    Example:
        >>> ember.nn.LazyLinear(3).weight
        <UninitializedParameter>
    """

    cls_to_become = Parameter

    def materialize(self, shape: tuple, device: Any = None, dtype: Any = None) -> None:
        self._data = empty(shape, device=device, dtype=dtype)._data
        self.__class__ = self.cls_to_become

    def __repr__(self) -> str:
        return "<UninitializedParameter>"

    __str__ = __repr__

    def __deepcopy__(self, memo: dict) -> "UninitializedParameter":
        if id(self) not in memo:
            memo[id(self)] = _uninitialized_parameter(self._requires_grad, str(self.dtype).split(".")[-1])
        return memo[id(self)]

    def __reduce_ex__(self, protocol: int) -> tuple:  # a placeholder pickles as a placeholder (dtype kept)
        return _uninitialized_parameter, (self._requires_grad, str(self.dtype).split(".")[-1])


class UninitializedBuffer(_Shapeless, Tensor):
    """A buffer of a ``Lazy*`` module before its first forward (``running_mean``/``running_var`` of the lazy
    norms); becomes a plain Tensor when materialized, keeping its identity.

    Example:
        >>> ember.nn.LazyBatchNorm1d().running_mean
        <UninitializedBuffer>
    """

    cls_to_become = Tensor

    def __new__(cls, requires_grad: bool = False, device: Any = None, dtype: Any = None,
                persistent: bool = True) -> "UninitializedBuffer":
        buf = Tensor._make.__func__(cls, empty(0, device=device, dtype=dtype)._data, empty(0)._device, False)
        buf.persistent = persistent
        return buf

    def __init__(self, requires_grad: bool = False, device: Any = None, dtype: Any = None,
                 persistent: bool = True) -> None:
        pass  # everything happens in __new__

    def materialize(self, shape: tuple, device: Any = None, dtype: Any = None) -> None:
        self._data = empty(shape, device=device, dtype=dtype or self.dtype)._data
        self.__class__ = self.cls_to_become

    def __deepcopy__(self, memo: dict) -> "UninitializedBuffer":
        if id(self) not in memo:
            memo[id(self)] = type(self)(dtype=self.dtype, persistent=getattr(self, "persistent", True))
        return memo[id(self)]

    def __reduce_ex__(self, protocol: int) -> tuple:
        return _uninitialized_buffer, (str(self.dtype).split(".")[-1], getattr(self, "persistent", True))

    def __repr__(self) -> str:
        return "<UninitializedBuffer>"

    __str__ = __repr__


def _uninitialized_parameter(requires_grad: bool, dtype_name: str) -> UninitializedParameter:
    """Copies and unpickles an UninitializedParameter (its dtype by name)."""
    return UninitializedParameter(empty(0, dtype=getattr(dtypes, dtype_name)), requires_grad)


def _uninitialized_buffer(dtype_name: str, persistent: bool) -> UninitializedBuffer:
    """Unpickles an UninitializedBuffer (its dtype by name)."""
    return UninitializedBuffer(dtype=getattr(dtypes, dtype_name), persistent=persistent)


def is_lazy(param: Any) -> bool:
    """True for a lazy module's parameter or buffer not yet materialized (``torch.nn.parameter.is_lazy``)."""
    return isinstance(param, (UninitializedParameter, UninitializedBuffer))
