"""Which ``.grad`` a compiled training step starts from and leaves behind (``ember.compile``).

A step that calls ``loss.backward()`` itself writes the gradients of the parameters it reaches. The graph was
traced from one call, so it assumes what ``p.grad`` was then: ``None`` (backward makes a new gradient; the graph
never reads the old one), a tensor the graph reads and adds into (``p.grad`` kept between steps), or anything
(the step sets ``p.grad = None`` itself before backward). After a run ``p.grad`` must be the tensor the traced
call left there. Without this, ``opt.zero_grad()`` *outside* the compiled step (``p.grad = None``) left every
``p.grad`` None after the compiled runs (the graph wrote its gradients into a tensor nothing held any more, and
training silently stopped), and a call whose ``p.grad`` differed from the traced one read a stale gradient.

:func:`snapshot` records ``p.grad`` at the start of the traced call for the tensors the function reaches;
:func:`bindings` turns it, with the trace's record, into :class:`GradBinding` guards. A call whose state
breaks a guard is traced again (``ember.compile`` bounds how often).

Example:
    >>> import ember
    >>> w = ember.ones(2, requires_grad=True)
    >>> b = GradBinding(w, "none", None, None)
    >>> b.holds(), w.grad is None
    (True, True)
"""
from __future__ import annotations

from typing import Any

from ember.tensor import Tensor

_MISSING = object()


class GradBinding:
    """One leaf's guard: ``kind`` "none" (``t.grad`` must be None at the call), "same" (it must be
    ``start``, the tensor the graph reads) or "any"; ``final`` is what ``t.grad`` is after each run."""

    __slots__ = ("tensor", "kind", "start", "final")

    def __init__(self, tensor: Tensor, kind: str, start: Any, final: Any) -> None:
        self.tensor, self.kind, self.start, self.final = tensor, kind, start, final

    def holds(self) -> bool:
        grad = self.tensor.grad
        if self.kind == "none":
            return grad is None
        if self.kind == "same":
            return grad is self.start
        return True

    def bind(self) -> None:
        if self.tensor.grad is not self.final:
            self.tensor.grad = self.final


def snapshot(reachable: list) -> dict:
    """``id(t) -> t.grad`` for the leaf tensors among ``reachable`` objects (tensors, modules' parameters,
    optimizers' parameters), taken before the traced call runs."""
    found: dict = {}

    def note(t: Any) -> None:
        if isinstance(t, Tensor) and t._requires_grad and t.grad_fn is None:
            found[id(t)] = t.grad

    for c in reachable:
        if isinstance(c, Tensor):
            note(c)
        elif hasattr(c, "training") and hasattr(c, "parameters"):
            for p in c.parameters():
                note(p)
        elif hasattr(c, "param_groups") and hasattr(c, "step"):
            for group in c.param_groups:
                for p in group.get("params", ()):
                    note(p)
    return found


def starts(lifted: dict, before: dict) -> list:
    """``(tensor, kind, start)`` for each lifted leaf that requires grad (``lifted``: the tracer's record,
    ``id(t) -> (t, array, state, grad when lifted)``), read before the trace ends."""
    out = []
    for t, _, _, lift_grad in lifted.values():
        if not (t._requires_grad and t.grad_fn is None):
            continue
        start = before.get(id(t), _MISSING)
        if start is _MISSING:  # not reachable by name (a tensor in a list, ...): its grad when first read
            start = lift_grad
        if start is None:
            kind = "none"
        elif id(start) in lifted:  # the graph reads this gradient (backward adds into it)
            kind = "same"
        else:  # the step replaced it before reading it (zero_grad(set_to_none) inside the step)
            kind = "any"
        out.append((t, kind, start))
    return out


def bindings(found: list) -> list:
    """The guards, once the trace has ended (each leaf's ``.grad`` is then the real tensor a run leaves); each
    ``.grad`` is put back as the call found it, since the graph's first run is this call's step."""
    out = [GradBinding(t, kind, start, t.grad) for t, kind, start in found]
    for b in out:
        if b.kind != "any":
            b.tensor.grad = b.start
    return out
