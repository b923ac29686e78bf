"""``GradientTape``: TensorFlow 2's interface, as a view over ember's autograd recording.

Inside the ``with`` block grad mode is on; ``watch(x)`` makes a constant tensor differentiable
for the tape's lifetime; ``gradient(target, sources)`` is ``autograd.grad`` with TF's conventions
(None for unconnected sources; a non-persistent tape answers once).

Example:
    >>> import ember
    >>> x = ember.tensor(3.0)
    >>> with ember.GradientTape() as tape:
    ...     tape.watch(x)
    ...     y = x * x
    >>> tape.gradient(y, x)
    tensor(6.)
"""
from __future__ import annotations

from typing import Any

from ember.autograd import grad_mode


class GradientTape:
    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True) -> None:
        self.persistent = persistent
        self.watch_accessed_variables = watch_accessed_variables
        self._watched: list = []
        self._used = False
        self._grad_context: Any = None

    def __enter__(self) -> "GradientTape":
        self._grad_context = grad_mode.enable_grad()
        self._grad_context.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._grad_context.__exit__(*exc)

    def watch(self, tensor: Any) -> None:
        """Record operations on ``tensor`` (or each tensor in a list) so gradients reach it."""
        items = tensor if isinstance(tensor, (list, tuple)) else [tensor]
        for t in items:
            if not t.requires_grad:
                if t.grad_fn is not None:
                    raise RuntimeError("GradientTape.watch: cannot watch a tensor computed outside the tape")
                t.requires_grad_(True)
                self._watched.append(t)

    def watched_variables(self) -> list:
        return list(self._watched)

    def gradient(self, target: Any, sources: Any, output_gradients: Any = None,
                 unconnected_gradients: str = "none") -> Any:
        from ember.autograd import grad
        from ember import creation

        if self._used and not self.persistent:
            raise RuntimeError("GradientTape.gradient can only be called once on a non-persistent tape; "
                               "use GradientTape(persistent=True) to compute several gradients")
        self._used = True
        single = not isinstance(sources, (list, tuple))
        source_list = [sources] if single else list(sources)
        targets = target if isinstance(target, (list, tuple)) else [target]
        if output_gradients is None:
            output_gradients = [creation.ones_like(t) for t in targets]
        elif not isinstance(output_gradients, (list, tuple)):
            output_gradients = [output_gradients]
        live = [s for s in source_list if s.requires_grad]
        results = grad(targets, live, output_gradients, retain_graph=self.persistent, allow_unused=True) if live else []
        by_id = {id(s): g for s, g in zip(live, results)}
        grads = []
        for s in source_list:
            g = by_id.get(id(s))
            if g is None and unconnected_gradients == "zero":
                g = creation.zeros_like(s)
            grads.append(g)
        if not self.persistent:
            self._release()
        return grads[0] if single else grads

    def _release(self) -> None:
        for t in self._watched:
            t._requires_grad = False
        self._watched = []

    def __del__(self) -> None:
        try:
            self._release()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
