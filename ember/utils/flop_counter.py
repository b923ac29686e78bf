"""``FlopCounterMode``: count the FLOPs a block of code runs, per op and per module (as in PyTorch).

Counts come from the op records' cost rules (:mod:`ember.ops.cost`): a multiply-add is 2 FLOPs, so
``mm`` of (M, K) @ (K, N) is ``2*M*N*K`` as in ``torch.utils.flop_counter``. Unlike torch's counter,
ember counts every op (elementwise ones at one FLOP per output element), not only matmul, conv and
attention; compare per op with :meth:`FlopCounterMode.get_flop_counts`. Backward ops are credited to
the module whose forward recorded the autograd node they run in.

Example:
    >>> import ember, ember.nn as nn
    >>> from ember.utils.flop_counter import FlopCounterMode
    >>> model = nn.Linear(8, 4, bias=False)
    >>> with FlopCounterMode(model, display=False) as counter:
    ...     model(ember.randn(2, 8)).sum().backward()
    >>> counter.get_flop_counts()["Linear"]["linear"], counter.get_total_flops()
    (128, 264)
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from ember.ops.cost import op_bytes, op_flops
from ember.ops.registry import Spec
from ember.autograd import engine
from ember.graph.ir import Value
from ember.profiler import _recorder
from ember.profiler._recorder import run_program


def _specs(values: Any) -> list:
    out = []
    for v in values:
        data = getattr(v, "_data", None)
        out.append(None if data is None else Spec(tuple(data.shape), data.dtype))
    return out


def _fmt(n: float) -> str:
    for unit, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3f}{unit}"
    return str(int(n))


class FlopCounterMode:
    """Context manager counting FLOPs of ops, autograd backward ops and compiled-graph nodes.

    ``mods``: a module (or list of modules) whose submodules get their own counts; ``depth``: how deep
    the printed table goes; ``display``: print the table on exit.
    """

    clock = staticmethod(_recorder._clock)  # the hooks take each op's start time from their listener

    backward_ops = True  # the engine dispatches the backward's ops (no array rules) while this counts

    def __init__(self, mods: Any = None, depth: int = 2, display: bool = True, custom_mapping: dict | None = None) -> None:
        self.depth = depth
        self.display = display
        self.custom_mapping = dict(custom_mapping or {})  # op name -> fn(inputs, outputs, attrs) -> int
        if mods is not None and not isinstance(mods, (list, tuple)):
            mods = [mods]
        self.mods = list(mods or [])
        self.flop_counts: dict = defaultdict(lambda: defaultdict(int))
        self._stack: list[str] = []
        self._node_modules: dict = {}
        self._pending: list = []
        self._handles: list = []
        # ember's own: the ideal bytes the counted ops read and wrote (ember.ops.cost.op_bytes), for the roofline
        self.bytes_moved = 0

    # ---- context -----------------------------------------------------------------------------------
    def __enter__(self) -> "FlopCounterMode":
        self.flop_counts.clear()
        self.bytes_moved = 0
        self._node_modules.clear()
        for root in self.mods:
            prefix = type(root).__name__
            for name, module in root.named_modules():
                self._hook(module, prefix if not name else f"{prefix}.{name}")
        _recorder.attach(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _recorder.detach(self)
        self._flush(None)
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        if self.display:
            print(self.get_table(self.depth))

    def _hook(self, module: Any, name: str) -> None:
        def push(mod: Any, args: Any) -> None:
            self._stack.append(name)

        def pop(mod: Any, args: Any, output: Any) -> None:
            if self._stack and self._stack[-1] == name:
                self._stack.pop()

        self._handles.append(module.register_forward_pre_hook(push))
        self._handles.append(module.register_forward_hook(pop))

    # ---- results -----------------------------------------------------------------------------------
    def get_total_flops(self) -> int:
        return sum(self.flop_counts["Global"].values())

    def get_flop_counts(self) -> dict:
        """``{module name: {op name: FLOPs}}``; ``"Global"`` holds everything."""
        return {module: dict(ops) for module, ops in self.flop_counts.items()}

    def get_table(self, depth: int | None = None) -> str:
        depth = self.depth if depth is None else depth
        total = self.get_total_flops() or 1
        rows = [("Module", "FLOP", "% Total")]
        names = ["Global"] + sorted((m for m in self.flop_counts if m != "Global"), key=lambda m: m.count("."))
        ordered = ["Global"] + sorted(names[1:])
        for module in ordered:
            level = 0 if module == "Global" else module.count(".") + 1
            if level > depth:
                continue
            flops = sum(self.flop_counts[module].values())
            rows.append(("  " * level + module, _fmt(flops), f"{100 * flops / total:.2f}%"))
            for op, count in sorted(self.flop_counts[module].items(), key=lambda kv: -kv[1]):
                rows.append(("  " * level + f" - {op}", _fmt(count), f"{100 * count / total:.2f}%"))
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        lines = [f"{r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:>{widths[2]}}" for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    # ---- hook methods (see ember.profiler._recorder) -------------------------------------------------
    def _count(self, name: str, flops: int, modules: Any) -> None:
        if not flops:
            return
        self.flop_counts["Global"][name] += flops
        for module in dict.fromkeys(modules or ()):
            self.flop_counts[module][name] += flops

    def _flops(self, op: Any, ins: list, outs: list, attrs: Any) -> int:
        rule = self.custom_mapping.get(op.name)
        return int(rule(ins, outs, attrs or {})) if rule is not None else op_flops(op, ins, outs, attrs or {})

    def op(self, op: Any, t0: int, args: tuple, attrs: Any, result: Any) -> None:
        outs = result if type(result) is tuple else (result,)
        ins, out_specs = _specs(args), _specs(outs)
        flops = self._flops(op, ins, out_specs, attrs)
        self.bytes_moved += op_bytes(op, ins, out_specs, attrs or {})

        if getattr(engine._LOCAL, "callbacks", None) is not None:  # inside backward: credit it to the node
            self._pending.append((op.name, flops))
            return
        modules = tuple(self._stack)
        self._count(op.name, flops, modules)
        node = getattr(outs[0], "grad_fn", None)
        if node is not None and modules:
            self._node_modules[id(node)] = (node, modules)  # the node is kept alive so its id stays unique

    def node(self, node: Any, t0: int, grads: Any) -> None:
        entry = self._node_modules.get(id(node))
        self._flush(entry[1] if entry is not None and entry[0] is node else None)

    array_node = node  # not called: backward_ops keeps the engine on the ember-op rules, whose ops it counts

    def _flush(self, modules: Any) -> None:
        for name, flops in self._pending:
            self._count(name, flops, modules)
        self._pending.clear()

    def graph_node(self, node: Any, t0: int, t1: int) -> None:
        ins = [Spec(v.shape, v.dtype) if isinstance(v, Value) else None for v in node.inputs]
        outs = [Spec(v.shape, v.dtype) for v in node.outputs]
        attrs = {k: v for k, v in node.attrs.items() if not k.startswith("_")}
        self._count(node.op.name, self._flops(node.op, ins, outs, attrs), tuple(self._stack))
        self.bytes_moved += op_bytes(node.op, ins, outs, attrs)

    def copy(self, *args: Any) -> None:
        pass

    def span(self, *args: Any) -> None:
        pass

    def run_program(self, executable: Any, env: list) -> None:
        run_program(self, executable, env)
