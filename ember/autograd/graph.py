"""``torch.autograd.graph``: hooks on saved tensors, multi-tensor gradient hooks, the grad_fn Node type.

Example (offload what backward keeps to the host, as ``save_on_cpu`` does on a GPU):
    >>> import ember
    >>> from ember.autograd.graph import saved_tensors_hooks
    >>> shapes = []
    >>> def pack(t):
    ...     shapes.append(tuple(t.shape))
    ...     return t.detach().clone()
    >>> x = ember.ones(2, 3, requires_grad=True)
    >>> with saved_tensors_hooks(pack, lambda t: t):
    ...     y = (x * x).sum()
    >>> shapes
    [(2, 3), (2, 3)]
    >>> y.backward(); x.grad
    tensor([[2., 2., 2.],
            [2., 2., 2.]])
"""
from __future__ import annotations

import abc
import contextlib
import threading
from typing import Any, Callable, Iterator, NamedTuple, Sequence

from ember import cuda
from ember.autograd import engine, grad_mode, saved_hooks
from ember.autograd.node import AccumulateGradView, Node as _EmberNode, RemovableHandle

__all__ = ["saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks", "register_multi_grad_hook",
           "allow_mutation_on_saved_tensors", "Node", "GradientEdge", "get_gradient_edge", "increment_version"]


class Node(abc.ABC):
    """The type of every ``grad_fn`` (``isinstance(y.grad_fn, torch.autograd.graph.Node)``)."""

    @abc.abstractmethod
    def name(self) -> str:
        raise NotImplementedError

    @property
    @abc.abstractmethod
    def next_functions(self) -> tuple:
        raise NotImplementedError


Node.register(_EmberNode)
Node.register(AccumulateGradView)


class GradientEdge(NamedTuple):
    """Where a tensor's gradient is computed: its grad_fn (or its AccumulateGrad) and output slot."""

    node: Any
    output_nr: int
    ownership_token: Any = None


def get_gradient_edge(tensor: Any) -> GradientEdge:
    """The edge ``autograd.grad`` would capture for ``tensor``."""
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that does not require gradients")
    if tensor.grad_fn is None:
        return GradientEdge(AccumulateGradView(tensor), 0)
    return GradientEdge(tensor.grad_fn, tensor._output_nr)


def increment_version(tensor: Any) -> None:
    """Tell autograd that ``tensor`` (or each tensor of an iterable) was changed in place behind its back."""
    for t in ((tensor,) if hasattr(tensor, "_bump") else tensor):
        t._bump()


class saved_tensors_hooks:
    """Within the block, every tensor an op (or a custom Function) saves for backward is replaced by
    ``pack_hook(tensor)``; backward gets it back as ``unpack_hook(packed)``. Nested blocks: the innermost
    pair wins. As in PyTorch, tensors saved under hooks are not version-checked (the hooks own the value).
    """

    def __init__(self, pack_hook: Callable[[Any], Any], unpack_hook: Callable[[Any], Any]) -> None:
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self) -> None:
        saved_hooks.push(self.pack_hook, self.unpack_hook)

    def __exit__(self, *exc: object) -> None:
        saved_hooks.pop()


class save_on_cpu(saved_tensors_hooks):
    """Keep saved tensors on the host and copy them back to their device for backward (``pin_memory=True``:
    into page-locked memory, so both copies can run asynchronously). On CPU nothing is copied.

    Example:
        >>> import ember
        >>> x = ember.ones(3, requires_grad=True)
        >>> with ember.autograd.graph.save_on_cpu():
        ...     y = (x * x).sum()
        >>> y.backward(); x.grad
        tensor([2., 2., 2.])
    """

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        device_module = _device_module(device_type)

        def pack_to_cpu(tensor: Any) -> tuple:
            if not pin_memory:
                return (tensor.device, tensor.cpu())
            packed = tensor.detach().to("cpu", copy=True)
            if device_module is not None and device_module.is_available() and not tensor.is_sparse:
                packed = packed.pin_memory()
            return (tensor.device, packed)

        def unpack_from_cpu(packed: tuple) -> Any:
            device, tensor = packed
            return tensor.to(device, non_blocking=pin_memory)

        super().__init__(pack_to_cpu, unpack_from_cpu)


def _device_module(device_type: str) -> Any:
    return cuda if device_type == "cuda" else None


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message: str) -> Iterator[None]:
    """Refuse ``saved_tensors_hooks`` (with ``RuntimeError(error_message)``) inside the block; refused at
    once if a pair of hooks is active already."""
    previous = saved_hooks.disabled_message()
    saved_hooks.disable(error_message)
    try:
        yield
    finally:
        saved_hooks.restore(previous)


class _MultiHandle(RemovableHandle):
    def __init__(self, handles: tuple) -> None:
        self.handles = handles

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def _grad_fn_or_leaf(tensor: Any) -> Any:
    """What the engine runs for ``tensor``'s gradient: its grad_fn, or the leaf itself (its edge)."""
    return tensor.grad_fn if tensor.grad_fn is not None else tensor


def register_multi_grad_hook(tensors: Sequence[Any], fn: Callable, *, mode: str = "all") -> RemovableHandle:
    """``mode="all"``: call ``fn(grads)`` once the gradients of all of ``tensors`` that this backward
    computes are known (``None`` for the others); ``mode="any"``: call ``fn(grad)`` with the first one.

    Example:
        >>> import ember
        >>> a, b = ember.ones(2, requires_grad=True), ember.ones(2, requires_grad=True)
        >>> c = a * b
        >>> _ = ember.autograd.graph.register_multi_grad_hook((a, b, c), lambda gs: print([g is not None for g in gs]))
        >>> c.sum().backward(inputs=(a,))
        [True, False, True]
    """
    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    lock = threading.Lock()
    if mode == "all":
        tensors = tuple(tensors)
        count: dict[int, int] = {}
        expected: dict[int, int] = {}
        buffer: dict[int, list] = {}

        def inner_hook(index: int) -> Callable:
            def hook(grad: Any) -> None:
                task = _current_task()
                with lock:
                    if task.id not in count:
                        count[task.id] = 0
                        buffer[task.id] = [None] * len(tensors)
                        expected[task.id] = sum(task.will_execute(_grad_fn_or_leaf(t)) for t in tensors)
                    buffer[task.id][index] = grad
                    count[task.id] += 1
                    done = count[task.id] == expected[task.id]
                    if done:
                        grads = buffer.pop(task.id)
                        del count[task.id], expected[task.id]
                if done:
                    fn(grads)
            return hook

        return _MultiHandle(tuple(t.register_hook(inner_hook(i)) for i, t in enumerate(tensors)))

    ran: set = set()

    def first_only(grad: Any) -> None:
        task = _current_task()
        with lock:
            if task.id in ran:
                return
            ran.add(task.id)
        fn(grad)

    return _MultiHandle(tuple(t.register_hook(first_only) for t in tensors if t.requires_grad))


def _current_task() -> engine.GraphTask:
    task = engine.current_graph_task()
    if task is None:
        raise AssertionError("expected this hook to be called inside a backward call")
    return task


class _AllowMutationOnSavedContext:
    """What ``allow_mutation_on_saved_tensors`` yields: the tensors saved in the block, by version counter."""

    def __init__(self) -> None:
        self.saved: dict[int, list] = {}  # id of a version counter (shared by a tensor and its views) -> entries
        self.closed = False

    def clear(self) -> None:
        self.saved.clear()


class _Saved:
    __slots__ = ("tensor", "version", "copy")

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor
        self.version = tensor._vc[0]
        self.copy = None


@contextlib.contextmanager
def allow_mutation_on_saved_tensors() -> Iterator[_AllowMutationOnSavedContext]:
    """In the block, in-place ops may change tensors that backward saved: the saved value is copied just
    before the first change (of it or of any view sharing its memory), and backward uses the copy.
    Backward must run inside the block, as in PyTorch.

    Example:
        >>> import ember
        >>> with ember.autograd.graph.allow_mutation_on_saved_tensors():
        ...     a = ember.tensor([1.0, 2.0], requires_grad=True)
        ...     b = a.clone()
        ...     out = (b ** 2).sum()
        ...     _ = b.sin_()
        ...     out.backward()
        >>> a.grad
        tensor([2., 4.])
    """
    if saved_hooks.BEFORE_INPLACE:
        raise RuntimeError("allow_mutation_on_saved_tensors contexts cannot be nested")
    context = _AllowMutationOnSavedContext()

    def pack(tensor: Any) -> _Saved:
        entry = _Saved(tensor)
        context.saved.setdefault(id(tensor._vc), []).append(entry)
        return entry

    def unpack(entry: _Saved) -> Any:
        if context.closed:  # PyTorch raises an AssertionError here too
            raise AssertionError("Trying to backward outside of the 'allow_mutation_on_saved_tensors' context in which "
                               "the graph was originally recorded.")
        return entry.tensor if entry.copy is None else entry.copy

    def before_inplace(tensor: Any) -> None:
        vc = tensor._vc
        for entry in context.saved.get(id(vc), ()) if vc is not None else ():
            if entry.copy is None and entry.version == vc[0]:
                with grad_mode.no_grad():
                    entry.copy = entry.tensor.detach().clone()

    with saved_tensors_hooks(pack, unpack):
        saved_hooks.BEFORE_INPLACE.append(before_inplace)
        try:
            yield context
        finally:
            saved_hooks.BEFORE_INPLACE.pop()
            context.closed = True
            context.clear()
