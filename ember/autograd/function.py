"""Custom differentiable functions: subclass ``Function`` with static ``forward``/``backward``.

Example:
    >>> import ember
    >>> class MyReLU(ember.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x.clamp(min=0)
    ...     @staticmethod
    ...     def backward(ctx, grad_output):
    ...         x, = ctx.saved_tensors
    ...         grad_input = grad_output.clone()
    ...         grad_input[x < 0] = 0
    ...         return grad_input
    >>> x = ember.tensor([-1.0, 2.0], requires_grad=True)
    >>> MyReLU.apply(x).sum().backward(); x.grad
    tensor([0., 1.])
"""
from __future__ import annotations

import functools
from typing import Any

from ember.autograd import anomaly_mode, grad_mode
from ember.autograd.engine import _tensor_class, run_backward
from ember.autograd.node import _FREED_MESSAGE, Node, SavedTensor


class FunctionCtx(Node):
    """The ``ctx`` a custom Function sees; it is also the function's node in the graph."""

    __slots__ = ("fn_class", "_saved", "needs_input_grad", "non_differentiable", "materialize_grads",
                 "num_outputs", "output_meta", "__dict__")

    def __init__(self, fn_class: type) -> None:
        super().__init__()
        self.fn_class = fn_class
        self._saved: tuple | None = ()
        self.needs_input_grad: tuple = ()
        self.non_differentiable: set[int] = set()
        self.materialize_grads = True
        self.num_outputs = 1
        self.output_meta = None

    def name(self) -> str:
        return f"{self.fn_class.__name__}Backward"

    def save_for_backward(self, *tensors: Any) -> None:
        for i, t in enumerate(tensors):
            if t is not None and not hasattr(t, "_vc"):
                raise TypeError(f"save_for_backward can only save variables, but argument {i} is of type "
                                f"{type(t).__name__}")
        self._saved = tuple(SavedTensor(t) if t is not None else None for t in tensors)

    def save_for_forward(self, *tensors: Any) -> None:
        """Tensors the Function's ``jvp`` reads as ``ctx.saved_tensors`` (PyTorch's ``save_for_forward``)."""
        self.__dict__["_saved_forward"] = tuple(tensors)

    @property
    def saved_tensors(self) -> tuple:
        if self.__dict__.get("_in_jvp") and "_saved_forward" in self.__dict__:
            return self.__dict__["_saved_forward"]
        if self._saved is None:
            raise RuntimeError(_FREED_MESSAGE)
        return tuple(s.unpack(self, self.fn_class.__name__, f"saved tensor {i}") if s is not None else None
                     for i, s in enumerate(self._saved))

    @property
    def saved_variables(self) -> tuple:
        """PyTorch's pre-0.4 name of ``saved_tensors`` (still read by older Functions), with torch's warning."""
        import warnings
        warnings.warn("'saved_variables' is deprecated; use 'saved_tensors'", DeprecationWarning, stacklevel=2)
        return self.saved_tensors

    @property
    def _raw_saved_tensors(self) -> tuple:
        """The saved entries themselves (``register_hooks(pack, unpack)`` on one of them)."""
        if self._saved is None:
            raise RuntimeError(_FREED_MESSAGE)
        return self._saved

    def mark_non_differentiable(self, *tensors: Any) -> None:
        self.non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors: Any) -> None:
        """Inputs that ``forward`` changed in place: ``apply`` returns them as themselves, with this node as their
        history (a view's base gets PyTorch's CopySlices), after PyTorch's in-place checks."""
        for t in tensors:
            t._bump()
        self.__dict__["_dirty"] = tensors

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = value

    def apply(self, grads: list) -> tuple:
        if self.freed:
            raise RuntimeError(_FREED_MESSAGE)
        if self.materialize_grads and self.output_meta:
            from ember import creation

            # Non-tensor outputs (meta None) get None, as in PyTorch: there is no shape to make zeros of.
            grads = [g if g is not None or m is None else creation.zeros(m[0], dtype=m[1], device=m[2])
                     for g, m in zip(grads, self.output_meta)]
        result = _user_backward(self.fn_class)(self, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        # As PyTorch: one gradient per forward input (None for non-tensors); extra trailing Nones are
        # allowed, anything else is an error rather than gradients silently given to the wrong inputs.
        expected = len(self.next_edges)
        if len(result) < expected or any(r is not None for r in result[expected:]):
            raise RuntimeError(
                f"function {self.name()} returned an incorrect number of gradients (expected {expected}, got "
                f"{len(result)}): {self.fn_class.__name__}.backward must return one gradient per argument of "
                "forward, None for arguments that are not tensors or need no gradient")
        result = tuple(result[:expected])
        shapes = self.__dict__.get("input_shapes")
        if shapes:
            for i, r in enumerate(result):
                if r is not None and i < len(shapes) and shapes[i] is None:
                    raise RuntimeError(f"function {self.name()} returned a gradient different than None at position "
                                       f"{i + 1}, but the corresponding forward input was not a Variable")
            result = tuple(_checked_grad(self, i, r, shapes[i]) for i, r in enumerate(result))
        return tuple(r if need else None for r, need in zip(result, self.needs_input_grad))

    def release(self) -> None:
        self._saved = None
        self.freed = True


def _overrides(cls: type, name: str) -> bool:
    """True when a Function subclass defines ``name`` itself (not the base class's placeholder)."""
    return getattr(cls, name) is not getattr(Function, name)


def _user_backward(cls: type) -> Any:
    """The reverse rule, as PyTorch picks it: ``vjp`` or ``backward`` (defining both is an error); a Function
    with only a forward rule (``jvp``) is run backward through that rule's transpose."""
    has_backward, has_vjp = _overrides(cls, "backward"), _overrides(cls, "vjp")
    if has_backward and has_vjp:
        raise RuntimeError("Implementing both 'backward' and 'vjp' for a custom Function is not allowed. You should "
                           "only implement one of them.")
    if has_vjp:
        return cls.vjp
    if not has_backward and _overrides(cls, "jvp"):
        return _backward_from_jvp
    return cls.backward


def _call_jvp(ctx: FunctionCtx, tangents: list) -> tuple:
    """Run the Function's ``jvp`` once, with ``ctx.saved_tensors`` giving what ``save_for_forward`` kept."""
    ctx.__dict__["_in_jvp"] = True
    try:
        out = ctx.fn_class.jvp(ctx, *tangents)
    finally:
        ctx.__dict__["_in_jvp"] = False
    return out if isinstance(out, tuple) else (out,)


def _backward_from_jvp(ctx: FunctionCtx, *grads: Any) -> tuple:
    """``J^T g`` from a ``jvp`` rule alone: the rule is linear in the tangents, so it is run once on zero tangents
    that require grad (kept on the node, as PyTorch calls ``jvp`` once) and reverse mode transposes it. ember's
    forward mode is built from reverse passes (docs/func.md), so this is how a ``jvp`` rule reaches
    ``forward_ad``/``func.jvp``; the result is differentiable in ``g`` (the double-vjp trick needs that)."""
    lin = ctx.__dict__.get("_jvp_linearized")
    if lin is None:
        like = next(g for g in grads if g is not None)
        meta = ctx.__dict__["_jvp_input_meta"]
        with grad_mode.enable_grad():
            tangents = [like.new_zeros(m[0], dtype=m[1], device=m[2]).requires_grad_(True) if m is not None else None
                        for m in meta]
            outs = _call_jvp(ctx, tangents)
        lin = ctx.__dict__["_jvp_linearized"] = (tangents, outs)
    tangents, outs = lin
    pairs = [(o, g) for o, g in zip(outs, grads)
             if o is not None and g is not None and getattr(o, "requires_grad", False)]
    leaves = [t for t in tangents if t is not None]
    found = run_backward([o for o, _ in pairs], [g for _, g in pairs], True, True, capture=leaves) if pairs else []
    it = iter(found if pairs else [None] * len(leaves))
    return tuple(next(it) if t is not None else None for t in tangents)


def _checked_grad(ctx: FunctionCtx, index: int, grad: Any, shape: tuple | None) -> Any:
    """A custom backward's gradient must match its input's shape or reduce to it (as PyTorch's
    ``validate_outputs``: a broadcast gradient is summed back to the input's shape)."""
    if grad is None or shape is None or not hasattr(grad, "shape") or tuple(grad.shape) == shape:
        return grad
    from ember.ops.elementwise import _broadcast_shapes, sum_to

    try:
        expandable = _broadcast_shapes(shape, tuple(grad.shape)) == tuple(grad.shape)
    except RuntimeError:
        expandable = False
    if not expandable:
        raise RuntimeError(f"function {ctx.name()} returned an invalid gradient at index {index} - got "
                           f"{list(grad.shape)} but expected shape compatible with {list(shape)}")
    return sum_to(grad, shape)


class Function:
    """Base class for custom autograd functions (PyTorch's ``torch.autograd.Function``)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Legacy autograd function with non-static forward method is deprecated. Please use "
                           "new-style autograd function with static forward method. (Example: "
                           "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)")

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("Function subclasses must implement a static forward(ctx, ...)")

    @staticmethod
    def backward(ctx: FunctionCtx, *grad_outputs: Any) -> Any:
        raise NotImplementedError("Function subclasses must implement a static backward(ctx, ...) (or vjp, or a "
                                  "jvp for forward mode)")

    @staticmethod
    def vjp(ctx: FunctionCtx, *grad_outputs: Any) -> Any:
        """PyTorch's alias of ``backward``: a subclass defines one of the two."""
        raise NotImplementedError("Function subclasses must implement a static backward(ctx, ...) or vjp(ctx, ...)")

    @staticmethod
    def jvp(ctx: FunctionCtx, *grad_inputs: Any) -> Any:
        raise NotImplementedError("You must implement the jvp function for custom autograd.Function to use it with "
                                  "forward mode AD.")

    @staticmethod
    def setup_context(ctx: FunctionCtx, inputs: tuple, output: Any) -> Any:
        """PyTorch 2's split form: ``forward(*args)`` without ``ctx``, then ``setup_context(ctx, inputs, output)``
        saves what backward needs (both run without recording)."""
        raise NotImplementedError("setup_context is not overridden")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        Tensor = _tensor_class()  # noqa: N806 - the class, loaded after this package
        ctx = FunctionCtx(cls)
        tensors_in = [a if isinstance(a, Tensor) else None for a in args]
        ctx.needs_input_grad = tuple(t is not None and t._requires_grad for t in tensors_in)
        with grad_mode.no_grad():
            if _overrides(cls, "setup_context"):
                if kwargs:
                    raise RuntimeError(f"{cls.__name__}.apply: a Function with setup_context takes its inputs "
                                       "positionally (keyword arguments are not passed to setup_context)")
                outputs = cls.forward(*args)
                cls.setup_context(ctx, args, outputs)
            else:
                outputs = cls.forward(ctx, *args, **kwargs)
        if _overrides(cls, "jvp") and not (_overrides(cls, "backward") or _overrides(cls, "vjp")):
            ctx.__dict__["_jvp_input_meta"] = [
                (tuple(t.shape), t.dtype, t.device) if t is not None and (t.is_floating_point() or t.is_complex())
                else None for t in tensors_in]
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        dirty = ctx.__dict__.get("_dirty", ())
        if dirty and any(all(d is not o for o in outs) for d in dirty):
            raise RuntimeError("Some elements marked as dirty during the forward method were not returned as output. "
                               "The inputs that are modified inplace must all be outputs of the Function.")
        record = grad_mode.STATE.enabled and any(ctx.needs_input_grad)
        if record:
            ctx.next_edges = tuple(
                ((t.grad_fn, t._output_nr) if t.grad_fn is not None else (t, 0)) if need else None
                for t, need in zip(tensors_in, ctx.needs_input_grad)
            )
            ctx.num_outputs = len(outs)
            if anomaly_mode.STATE.enabled:
                anomaly_mode.record(ctx)
            ctx.input_shapes = tuple(tuple(t.shape) if t is not None else None for t in tensors_in)
            ctx.output_meta = [(tuple(o.shape), o.dtype, o.device) if isinstance(o, Tensor) else None for o in outs]
            wrapped = []
            input_ids = {id(t) for t in tensors_in if t is not None}
            for i, o in enumerate(outs):
                if not isinstance(o, Tensor):
                    wrapped.append(o)
                    continue
                if dirty and any(o is d for d in dirty):
                    _rebase_dirty(ctx, o, i)
                    wrapped.append(o)
                    continue
                if id(o) in input_ids:  # forward returned an input as is: give it a new identity
                    o = o.detach()
                if id(o) in ctx.non_differentiable or not (o.is_floating_point() or o.dtype.is_complex):
                    o._requires_grad = False
                else:
                    o.grad_fn = ctx
                    o._output_nr = i
                    o._requires_grad = True
                wrapped.append(o)
            outs = tuple(wrapped)
        return outs[0] if single else outs


def _rebase_dirty(ctx: FunctionCtx, t: Any, index: int) -> None:
    """An input ``forward`` changed in place (``mark_dirty``) and returned: it keeps its identity and gets ``ctx``
    (output ``index``) as its history, as a recorded in-place op would (a view: CopySlices on its base)."""
    from ember.ops import inplace  # noqa: PLC0415 - ops import this package (grad mode) first

    inplace.check_inplace(t, ctx.fn_class.__name__, True)
    result = _tensor_class()._make(t._data, t._device, True)
    result.grad_fn = ctx
    result._output_nr = index
    inplace._rebase(t, result)


def once_differentiable(backward: Any) -> Any:
    """``torch.autograd.function.once_differentiable``: a decorator for a Function's ``backward`` that runs it
    without recording (its gradients are not differentiated again).

    Example:
        >>> class Square(Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         return x * x
        ...     @staticmethod
        ...     @once_differentiable
        ...     def backward(ctx, g):
        ...         (x,) = ctx.saved_tensors
        ...         return 2 * x * g
    """
    @functools.wraps(backward)
    def run_once(ctx: Any, *grad_outputs: Any) -> Any:
        with grad_mode.no_grad():
            return backward(ctx, *grad_outputs)

    return run_once
