"""``torch.jit`` on ember's graph compiler: ``trace`` and ``script`` build ember static graphs.

``trace(fn_or_module, example_inputs)`` runs the function once on symbolic tensors (ember.compile's tracer)
and returns a callable that runs the traced graph; ``.graph`` prints it, ``.code`` shows it as Python,
``save``/:func:`load` write and read ember's safe graph format (JSON + safetensors, never pickle).
``script`` accepts a module or function: it compiles on first call; data-dependent Python control flow
(``if x.sum() > 0``, ``.item()``) cannot become a static graph, so it then runs eagerly, warning once
with the construct named.

Example:
    >>> import ember
    >>> cell = ember.nn.Linear(4, 4)
    >>> traced = ember.jit.trace(cell, ember.rand(3, 4))
    >>> print(traced.graph)                                   # doctest: +ELLIPSIS
    Linear(%x: float32[3, 4]) {
    ...
"""
from ember.jit.api import (  # noqa: F401
    Attribute, Final, ScriptFunction, ScriptModule, TracedModule, annotate, export, freeze, ignore, interface,
    is_scripting, is_tracing, load, optimize_for_inference, save, script, trace, trace_module, unused,
)
from ember.jit.api import isinstance  # noqa: F401,A004  (torch.jit.isinstance)
from ember.jit.api import Future, enable_onednn_fusion, fork, onednn_fusion_enabled, wait  # noqa: F401
from ember.jit import annotations  # noqa: F401
from ember.jit.deprecation import script_method  # noqa: F401
from ember.jit.script_helpers import (  # noqa: F401
    Error, _overload, _overload_method, _script_if_tracing, _unwrap_optional, script_if_tracing)
