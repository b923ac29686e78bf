"""``torch._dynamo.config``: settings scripts assign (``suppress_errors = True``, ``cache_size_limit = 64``).

ember.compile falls back to eager by itself and keeps one graph per input signature, so these values are
stored (read back as assigned, PyTorch's defaults) and change nothing.

Example:
    >>> import ember
    >>> ember._dynamo.config.suppress_errors
    False
"""
suppress_errors = False
cache_size_limit = 8
recompile_limit = 8
accumulated_cache_size_limit = 256
verbose = False
capture_scalar_outputs = False
capture_dynamic_output_shape_ops = False
optimize_ddp = True
automatic_dynamic_shapes = True
assume_static_by_default = True
