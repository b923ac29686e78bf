"""``torch._dynamo.config``: PyTorch's setting names with their defaults; ember.compile reads none of them
(it has no bytecode tracer, guards or caches to configure). Any other name can be set too.

Example:
    >>> from ember._dynamo import config
    >>> config.suppress_errors
    False
"""
suppress_errors = False
cache_size_limit = 8
accumulated_cache_size_limit = 256
verbose = False
capture_scalar_outputs = False
capture_dynamic_output_shape_ops = False
optimize_ddp = True
automatic_dynamic_shapes = True
assume_static_by_default = True
recompile_limit = 8
inline_inbuilt_nn_modules = True
