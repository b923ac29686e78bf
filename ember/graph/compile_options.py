"""``torch.compile``'s options and global switches as ``ember.compile`` honours them.

* ``mode``: PyTorch's names are checked (``default``, ``lite``, ``reduce-overhead``, ``max-autotune-no-cudagraphs``,
  ``max-autotune``; anything else raises torch's ``RuntimeError``), and ``mode`` with ``options`` raises as in
  torch. Only ``reduce-overhead`` changes what ember does (CUDA graphs for whole steps on a GPU).
* ``backend``: a name torch knows (``inductor``, ``eager``, ``aot_eager``, ...) or a callable; every one compiles
  with ember's graph (``eager``/``aot_eager`` give eager's values in torch, and so do ember's graphs). An unknown
  name raises ``torch._dynamo.exc.InvalidBackend``.
* ``dynamic`` (True/False/None) is accepted: ember traces each new input shape into its own graph.
* Stances (``torch.compiler.set_stance``): ``force_eager`` runs every compiled function eagerly,
  ``eager_on_recompile`` runs a signature that would need a new graph eagerly, ``fail_on_recompile`` raises
  torch's ``RuntimeError`` instead; ``eager_then_compile`` is what ember does anyway (a signature's first call).
* ``torch._dynamo.reset()`` / ``torch.compiler.reset()`` drop every compiled function's graphs and guards.
* The recompile limit: signatures past it run eagerly with a warning, or raise ``FailOnRecompileLimitHit``
  under ``fullgraph=True`` or ``config.fail_on_recompile_limit_hit``. It is 16 (torch's is 8: ember specializes
  on more, every input shape, contiguity, the autocast region, the default dtype, where torch makes a shape
  dynamic after its first change) until a program assigns ``torch._dynamo.config.recompile_limit`` or
  ``cache_size_limit``; the config reads torch's defaults.

Example:
    >>> import ember
    >>> ember.compile(lambda x: x, mode="fastest")
    Traceback (most recent call last):
    ...
    RuntimeError: Unrecognized mode=fastest, should be one of: default, lite, reduce-overhead, max-autotune-no-cudagraphs, max-autotune
"""
from __future__ import annotations

import sys
import weakref
from typing import Any

from ember.graph.dynamo_errors import InvalidBackend

MODES = ("default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
# torch 2.13's list_backends(exclude_tags=()): what backend= may name
BACKENDS = ("aot_eager", "aot_eager_decomp_partition", "aot_eager_decomp_partition_crossref",
            "aot_eager_decomp_partition_with_mode", "aot_eager_default_partitioner", "aot_ts", "cudagraphs",
            "dynamo_accuracy_minifier_backend", "dynamo_minifier_backend", "eager", "eager_debug", "eager_noexcept",
            "ember", "inductor", "invoke_subgraph", "openxla", "openxla_eval", "pre_dispatch_eager", "ts", "tvm")
DEFAULT_LIMIT = 16

STANCE = ["default"]  # torch.compiler.set_stance's current stance (one list: read on every call)
LIVE: "weakref.WeakSet" = weakref.WeakSet()  # every CompiledFunction, for reset()


def check(options: dict) -> None:
    """Raise as torch.compile does for a bad ``mode``/``backend``/``options`` combination."""
    mode, backend = options.get("mode"), options.get("backend", "inductor")
    if mode is not None and options.get("options") is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if mode is not None and mode not in MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(MODES)}")
    if isinstance(backend, str) and backend not in BACKENDS:
        raise InvalidBackend(backend)
    if not isinstance(backend, str) and not callable(backend):
        raise InvalidBackend(repr(backend))


def _config() -> Any:
    # (looked up, not imported: ember._dynamo imports this package; a program that never imported the config
    # module has not changed it)
    return sys.modules.get("ember._dynamo.config")


def recompile_limit() -> int:
    """ember's 16, or ``torch._dynamo.config.recompile_limit`` / ``cache_size_limit`` once a program assigned one."""
    config = _config()
    assigned = getattr(config, "_assigned", ()) if config is not None else ()
    for name in ("recompile_limit", "cache_size_limit"):
        if name in assigned:
            return int(getattr(config, name))
    return DEFAULT_LIMIT


def fail_on_limit() -> bool:
    return bool(getattr(_config(), "fail_on_recompile_limit_hit", False))


def reset() -> None:
    """Drop every compiled function's graphs, warm-up counts and guards (torch._dynamo.reset)."""
    for compiled in list(LIVE):
        compiled.reset()
