"""``ember.utils.summary(model, input)``: Keras' model summary table, plus FLOPs per layer.

One row per module (nested modules indented under their parent): name and type, output shape,
parameter count (its own parameters), whether they are trainable, and the forward FLOPs of the
module (its ops and its children's, counted from the op records by :class:`FlopCounterMode`). The
model runs once on the example input, in eval mode and without gradients (so batch-norm statistics
and dropout are untouched), and its training flags are restored afterwards.

Example:
    >>> import ember, ember.nn as nn
    >>> model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    >>> print(summary(model, ember.randn(1, 4)))                     # doctest: +SKIP
    Model: "Sequential"
    ...
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable
from ember.autograd import grad_mode


@dataclass
class LayerRow:
    name: str
    type: str
    depth: int
    output_shape: Any
    params: int
    trainable: int
    flops: int


@dataclass
class ModelSummary:
    """The rows and totals; ``str()`` is the table."""

    title: str
    rows: list = field(default_factory=list)
    total_params: int = 0
    trainable_params: int = 0
    total_flops: int = 0
    input_shapes: Any = None
    total_bytes: int = 0  # parameters' memory, as Keras prints beside the counts
    trainable_bytes: int = 0

    @property
    def non_trainable_params(self) -> int:
        return self.total_params - self.trainable_params

    def __str__(self) -> str:
        return format_summary(self)

    def __repr__(self) -> str:
        # One line: summary() has printed the table already (a REPL echoing the table would show it twice).
        flops = "" if self.total_flops is None else f", {_fmt_flops(self.total_flops)} FLOPs forward"
        return f"<ModelSummary {self.title}: {self.total_params:,} params{flops}; print() it for the table>"


def _shape_of(value: Any) -> Any:
    if hasattr(value, "shape"):
        return tuple(int(s) for s in value.shape)
    if isinstance(value, (list, tuple)):
        return [_shape_of(v) for v in value]
    if isinstance(value, dict):
        return {k: _shape_of(v) for k, v in value.items()}
    return None


def _fmt_shape(shape: Any) -> str:
    if shape is None:
        return "?"
    if isinstance(shape, tuple):
        return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
    if isinstance(shape, list):
        return "[" + ", ".join(_fmt_shape(s) for s in shape) + "]"
    return str(shape)


def _fmt_flops(n: int) -> str:
    if n is None:
        return "?"
    for unit, size in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(int(n))


def _fmt_bytes(n: int) -> str:
    """Keras' way: ``196.04 KB`` (powers of 1024)."""
    for unit, size in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.2f} B"


def summary(model: Any, input_data: Any = None, *, input_size: Any = None, dtype: Any = None, depth: int = 3,
            print_fn: Callable[[str], Any] | None = print) -> ModelSummary:
    """Keras' summary of ``model``, printed with ``print_fn`` (``None``: not printed) and returned.

    Pass an example input (``input_data``: a tensor or a tuple of tensors; or ``input_size``, with the
    batch dimension) to fill in the output shapes and FLOPs."""
    import ember
    from ember.utils.flop_counter import FlopCounterMode

    if input_data is None and input_size is not None:
        sizes = input_size if isinstance(input_size[0], (list, tuple)) else [input_size]
        input_data = tuple(ember.zeros(tuple(s), dtype=dtype) for s in sizes)
    shapes: dict = {}
    per_module: dict = {}
    root = type(model).__name__
    modules = list(model.named_modules())
    path_of = {id(m): (root if not name else f"{root}.{name}") for name, m in modules}
    if input_data is not None:
        inputs = input_data if isinstance(input_data, (list, tuple)) else (input_data,)
        handles = []
        def record(module: Any, args: Any, output: Any) -> None:  # returns None: the output is kept as is
            shapes.setdefault(id(module), _shape_of(output))

        for name, module in modules:
            handles.append(module.register_forward_hook(record))
        modes = {id(m): m.training for _, m in modules}
        model.eval()
        try:
            with grad_mode.no_grad(), FlopCounterMode(model, display=False) as counter:
                model(*inputs)
        finally:
            for handle in handles:
                handle.remove()
            for _, m in modules:
                m.training = modes[id(m)]
        counts = counter.get_flop_counts()
        per_module = {path: sum(ops.values()) for path, ops in counts.items()}
        total_flops = counter.get_total_flops()
    else:
        total_flops = None
    result = ModelSummary(title=root, total_flops=total_flops,
                          input_shapes=_shape_of(input_data) if input_data is not None else None)
    for name, module in modules:
        level = 0 if not name else name.count(".") + 1
        if level > depth:
            continue
        # a container's row counts its children's parameters too, as its FLOPs do (Keras' rows of nested models)
        own = list(module.parameters()) if hasattr(module, "parameters") else []
        params = sum(p.numel() for p in own)
        trainable = sum(p.numel() for p in own if p.requires_grad)
        flops = per_module.get(path_of[id(module)], 0) if total_flops is not None else None
        result.rows.append(LayerRow(name or root, type(module).__name__, level, shapes.get(id(module)), params,
                                    trainable, flops))
    every = list(model.parameters())
    result.total_params = sum(p.numel() for p in every)
    result.trainable_params = sum(p.numel() for p in every if p.requires_grad)
    result.total_bytes = sum(p.numel() * p.element_size() for p in every)
    result.trainable_bytes = sum(p.numel() * p.element_size() for p in every if p.requires_grad)
    if print_fn is not None:
        print_fn(str(result))
    return result


def format_summary(s: ModelSummary) -> str:
    header = ["Layer (type)", "Output Shape", "Param #", "Trainable", "FLOPs"]
    lines = []
    for row in s.rows:
        label = "  " * row.depth + (f"{row.name} ({row.type})" if row.depth else f"{row.type}")
        trainable = "--" if not row.params else ("Y" if row.trainable == row.params else
                                                 ("N" if row.trainable == 0 else "partial"))
        lines.append([label, _fmt_shape(row.output_shape), f"{row.params:,}", trainable, _fmt_flops(row.flops)])
    widths = [max([len(h)] + [len(r[i]) for r in lines]) for i, h in enumerate(header)]

    def fmt(cells: list) -> str:
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    rule = "=" * len(fmt(header))
    out = [f'Model: "{s.title}"', rule, fmt(header), rule] + [fmt(r) for r in lines] + [rule]
    out.append(f"Total params: {s.total_params:,} ({_fmt_bytes(s.total_bytes)})")
    out.append(f"Trainable params: {s.trainable_params:,} ({_fmt_bytes(s.trainable_bytes)})")
    out.append(f"Non-trainable params: {s.non_trainable_params:,} ({_fmt_bytes(s.total_bytes - s.trainable_bytes)})")
    if s.total_flops is not None:
        out.append(f"Forward FLOPs: {_fmt_flops(s.total_flops)} for input {_fmt_shape(s.input_shapes)} "
                   f"(a multiply-add = 2 FLOPs; a parent row counts its children, parameters and FLOPs)")
    else:
        out.append("Output shapes and FLOPs: pass an example input, e.g. summary(model, torch.randn(1, 3, 32, 32))")
    return "\n".join(out)
