"""PyTorch's ``*_copy`` functions: each view op's result as new, contiguous memory (``torch.transpose_copy``,
``torch.view_copy``, ``torch.split_copy``, ...), and ``torch.alias``.

PyTorch defines them for functionalized graphs, where no output may alias an input; programs and
decompositions call them directly. Each is the view op followed by ``contiguous(memory_format=...)``'s copy,
so gradients flow through the view op's own record.

Example:
    >>> import ember as torch
    >>> x = torch.arange(6.0).view(2, 3)
    >>> y = torch.transpose_copy(x, 0, 1)
    >>> y.is_contiguous(), y.shape
    (True, ember.Size([3, 2]))
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable, Sequence

from ember.tensor import Tensor


def _fresh(view: Tensor) -> Tensor:
    """New contiguous memory holding ``view`` (``clone`` keeps the autograd history; ``contiguous`` the layout
    torch's ``*_copy`` kernels return)."""
    return view.clone().contiguous()


def _copy_of(view_fn: Callable[..., Any], name: str, doc_of: str) -> Callable[..., Any]:
    def copy_fn(input: Tensor, *args: Any, **kwargs: Any) -> Any:
        result = view_fn(input, *args, **kwargs)
        if isinstance(result, (tuple, list)):
            return tuple(_fresh(piece) for piece in result)
        return _fresh(result)

    copy_fn.__name__ = copy_fn.__qualname__ = name
    copy_fn.__doc__ = f"``torch.{name}``: ``{doc_of}`` whose result owns its memory (contiguous)."
    return copy_fn


def alias(input: Tensor) -> Tensor:
    """``torch.alias``: a new tensor object viewing ``input``'s memory (a view of the whole tensor)."""
    return input.view(input.shape)


def _slice(input: Tensor, dim: int = 0, start: int | None = None, end: int | None = None, step: int = 1) -> Tensor:
    index = [slice(None)] * input.dim()
    index[dim] = slice(start, end, step)
    return input[tuple(index)]


def _view(input: Tensor, size_or_dtype: Any, *more: int) -> Tensor:
    if more:
        return input.view(size_or_dtype, *more)
    return input.view(size_or_dtype)


def _split_with_sizes(input: Tensor, split_sizes: Sequence[int], dim: int = 0) -> tuple:
    return input.split(list(split_sizes), dim)


def _unfold(input: Tensor, dimension: int, size: int, step: int) -> Tensor:
    return input.unfold(dimension, size, step)


def narrow_copy(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """``torch.narrow_copy``: ``input.narrow(dim, start, length)`` as new memory."""
    return _fresh(input.narrow(dim, start, length))


def _views(ember: Any) -> dict[str, tuple[Callable[..., Any], str]]:
    return {
        "alias_copy": (alias, "torch.alias"),
        "as_strided_copy": (ember.as_strided, "torch.as_strided"),
        "detach_copy": (lambda x: x.detach(), "Tensor.detach"),
        "diagonal_copy": (ember.diagonal, "torch.diagonal"),
        "expand_copy": (lambda x, size, *rest, implicit=False: x.expand(size, *rest), "Tensor.expand"),
        "indices_copy": (lambda x: x.indices(), "Tensor.indices"),
        "values_copy": (lambda x: x.values(), "Tensor.values"),
        "permute_copy": (ember.permute, "torch.permute"),
        "select_copy": (ember.select, "torch.select"),
        "slice_copy": (_slice, "x[..., start:end:step, ...]"),
        "split_copy": (ember.split, "torch.split"),
        "split_with_sizes_copy": (_split_with_sizes, "torch.split_with_sizes"),
        "squeeze_copy": (ember.squeeze, "torch.squeeze"),
        "t_copy": (ember.t, "torch.t"),
        "transpose_copy": (ember.transpose, "torch.transpose"),
        "unbind_copy": (ember.unbind, "torch.unbind"),
        "unfold_copy": (_unfold, "Tensor.unfold"),
        "unsqueeze_copy": (ember.unsqueeze, "torch.unsqueeze"),
        "view_as_complex_copy": (ember.view_as_complex, "torch.view_as_complex"),
        "view_as_real_copy": (ember.view_as_real, "torch.view_as_real"),
        "view_copy": (_view, "Tensor.view"),
    }


def install(namespace: dict[str, Any]) -> None:
    """Put every ``*_copy`` function and ``alias`` into ``namespace`` (``ember``'s globals, whose view functions
    they wrap; some of those are generated into the package, so they are read from it, not imported)."""
    ember = SimpleNamespace(**namespace)
    for name, (fn, doc) in _views(ember).items():
        namespace.setdefault(name, _copy_of(fn, name, doc))
    namespace.setdefault("narrow_copy", narrow_copy)
    namespace.setdefault("alias", alias)
