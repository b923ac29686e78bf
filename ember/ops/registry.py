"""The op registry: one record per primitive op drives eager, autograd, tracing, fusion and export.

An :class:`OpDef` holds everything ember knows about an op:

* ``impl(xp, *arrays, **attrs)`` - the forward, written once against an array namespace;
* ``shape_rule(*specs, **attrs)`` - output (shape, dtype) without computing (used by tracers);
* ``vjp`` - the backward, written in ember ops so it can itself be differentiated, traced and
  exported: one rule per input, ``(lambda ctx, g: g * ctx.inputs[1], lambda ctx, g: g * ctx.inputs[0])``
  (``None`` for an input without gradient), which the engine calls only for inputs that need a
  gradient; or one function ``vjp(ctx, g) -> tuple`` where the inputs' gradients share work (it may
  test ``ctx.needs[i]``). Either way the rule says only the math: :meth:`OpDef.input_grads` sums
  broadcast gradients back to each input's shape and drops unneeded ones;
* ``onnx`` - the ONNX op name (or a callable building nodes) for export;
* ``flops(inputs, outputs, attrs)`` / ``bytes_moved(inputs, outputs, attrs)`` - the work an op does, from
  specs (shapes and dtypes) only; ``None`` takes its category's default (:mod:`ember.ops.cost`);
* ``save`` - what backward needs kept alive: ``"inputs"``, ``"output"``, ``"both"``, ``"none"``, or
  ``"cross"`` for bilinear ops (mul, matmul): each input is needed only for the *other* input's
  gradient, so it is saved only when another input requires grad (``y * 2`` keeps nothing of ``y``,
  and changing ``y`` in place afterwards is fine, as in PyTorch); ``"first"`` keeps only input 0
  (``where``'s condition), ``"after_first"`` all but input 0 (``getitem``'s index tensors).

Example:
    >>> from ember.ops.registry import OPS
    >>> OPS["mul"].category
    'binary'
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import numpy as np
from ember.dtypes import from_numpy_dtype
from ember.ops.opmath import FLOAT32_SCALAR_OPS, OPMATH_CATEGORIES, OPMATH_SKIP, half_opmath


class Spec(NamedTuple):
    """An abstract value: what a tracer knows about a tensor without its data."""

    shape: tuple
    dtype: Any  # an ember dtype
    device: Any = None


@dataclass(eq=False)
class OpDef:
    name: str
    category: str  # unary | binary | ternary | reduction | movement | linalg | nn | cast | creation
    impl: Callable[..., Any]
    vjp: Callable[..., Any] | tuple | None = None  # one function, or one rule per input (see above)
    shape_rule: Callable[..., Any] | None = None
    save: str = "inputs"
    onnx: Any = None
    num_outputs: int = 1
    # Outputs that never carry gradient (e.g. argmax indices of max); they get requires_grad=False.
    nondiff_outputs: tuple = ()
    # Multi-output ops saving outputs (save="output"/"both"): the positions the vjp reads (None: all). An output
    # not listed is not saved, so changing it in place before backward is fine, as in PyTorch (BatchNorm's
    # output feeding ReLU(inplace=True): the backward reads the batch statistics, not the output).
    saved_outputs: tuple | None = None
    # Inputs (by position) that never carry gradient (e.g. index tensors of gather).
    nondiff_inputs: tuple = ()
    # Multi-output ops: False hands the vjp None (not zeros) for outputs that got no gradient, as PyTorch
    # does for its built-in ops (svd/eigh need it: a zero gV through 1/(l_j - l_i) is NaN at repeated values).
    materialize_grads: bool = True
    # Mixed precision (ember/amp/policy.py): inside an autocast region, "lower" casts floating inputs to
    # the region's dtype (matmul, conv), "fp32" to float32 (prod, losses), "promote" to the widest input.
    autocast: str | None = None
    # Cost model (profiler, FlopCounterMode, MFU): fn(input specs, output specs, attrs) -> int. None takes the
    # category default in ember/ops/cost.py (elementwise: one per output element, reductions: one per input...).
    flops: Callable[[tuple, tuple, dict], int] | None = None
    bytes_moved: Callable[[tuple, tuple, dict], int] | None = None
    doc: str = ""
    # Flags. float_only: integer inputs are promoted to the default float dtype first (exp, div).
    float_only: bool = False
    # view: the output may share the input's memory (reshape, permute, getitem): autograd tracks it.
    view: bool = False
    # The namespace ufunc in-place variants call with ``out=`` (``add_`` -> ``"add"``), if any.
    ufunc: str | None = None
    # side_effect: runs for its effect (assign); random: draws numbers (never folded, merged or fused);
    # comm: moves data between processes (send/recv).
    side_effect: bool = False
    random: bool = False
    comm: bool = False
    # Graph simplification: ``rule(node, inputs) -> replacement | None`` (see ember/ops/simplify.py).
    simplify: Callable[..., Any] | None = None
    # vmap's batching rule (ember/ops/batching.py): a generic rule's name ("dims", "dim", "leading", "loop", ...) or
    # ``rule(args, bdims, attrs, size) -> (result, out_bdims)``. None: "elementwise" for unary/binary/ternary/cast
    # records; any other record must say (tests/func/test_batching_rules_cover_ops.py checks it).
    batch: str | Callable[..., Any] | None = None
    # The backward on NumPy arrays, for plain backward passes (create_graph=False) on CPU float32/float64:
    # the same form as ``vjp`` (one rule per input, or one function), each rule ``(ctx, g) -> array`` with
    # ``ctx`` an ``ArrayCtx`` (ember/autograd/node.py) and ``g`` an array. It skips the ops' dispatch and
    # Tensor wrapping (~2 us per op: most of a small backward pass). It must compute what ``vjp`` computes,
    # bit for bit (the same NumPy calls in the same order; tests/autograd/test_array_vjp_matches_vjp.py).
    array_vjp: Callable[..., Any] | tuple | None = None
    # ``register`` wraps ``impl`` of the arithmetic categories with ember/ops/opmath.py's float32 math for half inputs
    # (``impl_opmath`` is that wrapper, ``impl_no_half`` the impl as written). Eager dispatch, knowing the dtypes
    # already, calls ``impl_no_half`` when no input is half and ``impl`` is still the wrapper (the wrapper's own check
    # costs ~1 us per call; an ``impl`` patched afterwards, by a test or a profiler, is always called).
    impl_no_half: Callable[..., Any] | None = None
    impl_opmath: Callable[..., Any] | None = None
    # The backward on NumPy arrays for nodes recorded under ``vmap`` (``vmap(grad(f))``'s per-sample backward):
    # ``rule(ctx, g, gdim) -> [(array, bdim) | None per input]`` with ``ctx`` a ``BatchArrayCtx``
    # (ember/ops/batch_arrays.py) whose arrays carry the batch first (``bdim`` 0) or none (``None``). Without
    # it, elementwise records with ``array_vjp`` run those rules on the batch-aligned arrays; other records
    # take ``vjp`` through their batching rules (two dispatches and two Tensors per op).
    batch_array_vjp: Callable[..., Any] | None = None
    # PyTorch's name of this op's backward node when it depends on the call (``getitem`` of an int is
    # ``SelectBackward0``, of a slice ``SliceBackward0``): ``rule(node) -> str`` reading the node's attrs and input
    # shapes, asked only when the name is read (printing, anomaly mode, profiles). None: :attr:`backward_name`.
    torch_backward_name: Callable[[Any], str] | None = None

    def __repr__(self) -> str:
        return f"<op {self.name} ({self.category})>"

    def input_grads(self, ctx: Any, grad: Any) -> tuple:
        """Run the vjp rule and finish its answer, once for every rule and both gradient walkers
        (eager autograd, symbolic ``ember.graph.gradients``): gradients an input does not need become
        None, and a gradient with its output's broadcast shape is summed back to its input's shape
        (the adjoint of broadcasting). So rules say only the math: ``mul``'s is ``(g * b, g * a)``,
        one rule per input, and the rules of inputs that need no gradient are never called (a conv's
        input gradient when only its weight trains)."""
        needs, shapes = ctx.needs, ctx.input_meta
        vjp = self.vjp
        out = []
        if vjp.__class__ is tuple:  # one rule per input: compute only what is needed
            rules = len(vjp)
            for i, need in enumerate(needs):
                rule = vjp[i] if need and i < rules else None
                if rule is None:
                    out.append(None)
                    continue
                g = rule(ctx, grad)
                shape = shapes[i]
                if g is not None and g.shape != shape and tuple(g.shape) != tuple(shape):
                    g = g.sum_to_size(tuple(shape))
                out.append(g)
            return tuple(out)
        result = vjp(ctx, grad)
        if not isinstance(result, tuple):
            result = (result,)
        for i, g in enumerate(result):
            if g is not None and i < len(needs) and not needs[i]:
                g = None
            elif g is not None and i < len(shapes) and shapes[i] is not None and tuple(g.shape) != tuple(shapes[i]):
                g = g.sum_to_size(tuple(shapes[i]))
            out.append(g)
        return tuple(out)

    def array_input_grads(self, ctx: Any, grad: Any) -> tuple:
        """:meth:`input_grads` for ``array_vjp``: arrays in, arrays out, the same finishing (unneeded
        gradients dropped, broadcast gradients summed back with the ``sum_to`` op's own impl)."""
        needs, shapes = ctx.needs, ctx.input_meta
        vjp = self.array_vjp
        if vjp.__class__ is tuple:
            if len(vjp) == 1 and len(needs) == 1:  # one input (unary ops, reductions, views): no lists
                rule = vjp[0]
                if rule is None or not needs[0]:
                    return (None,)
                g = rule(ctx, grad)
                if g is None:
                    return (None,)
                shape = shapes[0]
                if g.shape != shape:
                    g = OPS["sum_to"].impl(np, g, tuple(shape))
                return (g if type(g) is np.ndarray else np.asarray(g),)  # NumPy gives scalars for 0-d results
            if len(vjp) == 2 and len(needs) == 2:  # two inputs (binary ops, matmul): unrolled, no lists
                rule0, rule1 = vjp
                g0 = rule0(ctx, grad) if needs[0] and rule0 is not None else None
                g1 = rule1(ctx, grad) if needs[1] and rule1 is not None else None
                if g0 is not None:
                    if g0.shape != shapes[0]:
                        g0 = OPS["sum_to"].impl(np, g0, tuple(shapes[0]))
                    if type(g0) is not np.ndarray and not getattr(g0, "lazy_grad", False):
                        g0 = np.asarray(g0)
                if g1 is not None:
                    if g1.shape != shapes[1]:
                        g1 = OPS["sum_to"].impl(np, g1, tuple(shapes[1]))
                    if type(g1) is not np.ndarray and not getattr(g1, "lazy_grad", False):
                        g1 = np.asarray(g1)
                return (g0, g1)
            result = []
            for rule, need in zip(vjp, needs):
                result.append(rule(ctx, grad) if need and rule is not None else None)
        else:
            result = list(vjp(ctx, grad))
        for i, g in enumerate(result):
            if g is None:
                continue
            if not needs[i]:
                result[i] = None
                continue
            shape = shapes[i]
            if g.shape != shape:
                result[i] = g = OPS["sum_to"].impl(np, g, tuple(shape))
            if type(g) is not np.ndarray and not getattr(g, "lazy_grad", False):  # NumPy gives scalars for 0-d
                result[i] = np.asarray(g)  # results (autograd.index_grad's lazy gradients pass as they are)
        return tuple(result)

    @property
    def backward_name(self) -> str:
        # PyTorch's generated names: each part capitalized, and a letter after a digit too (Log1PBackward0,
        # MaxPool2DWithIndicesBackward0, UpsampleNearest1DBackward0)
        name = "".join(part.capitalize() for part in self.name.split("_"))
        return "".join(c.upper() if k and name[k - 1].isdigit() else c for k, c in enumerate(name)) + "Backward0"


OPS: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    """Add one op record. Names are unique: registering twice is a bug, not an override."""
    if op.name in OPS:
        raise ValueError(f"op {op.name!r} is already registered")
    if op.category in OPMATH_CATEGORIES and op.name not in OPMATH_SKIP:  # float16/bfloat16 computed in float32, rounded once (PyTorch's CPU)
        op.impl_no_half = op.impl
        op.impl = op.impl_opmath = half_opmath(op.impl, float32_scalars=op.name in FLOAT32_SCALAR_OPS)
    OPS[op.name] = op
    return op


def abstract_eval(op: OpDef, specs: tuple, attrs: dict) -> Any:
    """Output spec(s) of ``op`` for abstract inputs.

    Uses the op's shape rule when it has one; otherwise evaluates ``impl`` on zero-stride
    stand-in arrays (``np.broadcast_to`` of one element), which costs no memory for views and
    only the output's size for the rest.
    """
    if op.shape_rule is not None:
        return op.shape_rule(*specs, **attrs)

    dummies = []
    for spec in specs:
        if isinstance(spec, Spec):
            npd = spec.dtype.np
            dummies.append(np.broadcast_to(np.ones((), dtype=npd), spec.shape))
        else:
            dummies.append(spec)
    with np.errstate(all="ignore"):
        out = op.impl(np, *dummies, **attrs)
    if isinstance(out, tuple):
        return tuple(Spec(tuple(o.shape), from_numpy_dtype(o.dtype)) for o in out)
    return Spec(tuple(np.shape(out)), from_numpy_dtype(np.asarray(out).dtype))
