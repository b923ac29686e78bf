"""``torch._dynamo.config``: settings scripts assign (``suppress_errors = True``, ``cache_size_limit = 64``).

ember.compile falls back to eager by itself and keeps one graph per input signature, so these values are
stored (read back as assigned, PyTorch's defaults) and change nothing, except the recompile limit
(``recompile_limit``/``cache_size_limit``: they read torch's 8, but ember.compile allows 16 signatures until a
program assigns either name) and ``fail_on_recompile_limit_hit``, which ember.compile follows
(ember/graph/compile_options.py).

Example:
    >>> import ember
    >>> ember._dynamo.config.suppress_errors
    False
"""
import sys as _sys
import types as _types

suppress_errors = False
cache_size_limit = 8  # torch's default; ember.compile's limit is 16 until a program assigns one of these two
recompile_limit = 8
fail_on_recompile_limit_hit = False
accumulated_cache_size_limit = 256
verbose = False
capture_scalar_outputs = False
capture_dynamic_output_shape_ops = False
optimize_ddp = True
automatic_dynamic_shapes = True
assume_static_by_default = True


class _Config(_types.ModuleType):
    """The module's class: remembers which settings a program assigned (ember.compile follows those)."""

    def __setattr__(self, name: str, value: object) -> None:
        if not name.startswith("_"):
            self.__dict__.setdefault("_assigned", set()).add(name)
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Config
