"""``ember.nn.utils``: gradient clipping, parameter/vector conversion, and ``rnn`` (packed sequences)."""
from typing import Any

from ember.nn.utils import rnn  # noqa: F401
from ember.nn.utils.clip_grad import clip_grad_norm_, clip_grad_value_, get_total_norm  # noqa: F401
from ember.nn.utils.convert import parameters_to_vector, vector_to_parameters  # noqa: F401



def clip_grad_norm(parameters: Any, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: Any = None) -> Any:
    """PyTorch's deprecated alias of :func:`clip_grad_norm_` (warns as torch's), with its signature.

    >>> import ember
    >>> p = ember.nn.Parameter(ember.ones(2)); p.grad = ember.ones(2)
    >>> float(ember.nn.utils.clip_grad_norm([p], 1.0))  # doctest: +SKIP
    1.4142135381698608
    """
    import warnings

    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of `torch.nn.utils.clip_grad_norm_`.",
                  FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


from ember.nn.utils import parametrize, parametrizations, prune  # noqa: E402,F401
from ember.nn.utils.weight_norm import (  # noqa: E402,F401
    remove_spectral_norm, remove_weight_norm, spectral_norm, weight_norm,
)
from ember.nn.utils.fusion import (  # noqa: E402,F401
    convert_conv2d_weight_memory_format, convert_conv3d_weight_memory_format, fuse_conv_bn_eval, fuse_conv_bn_weights,
    fuse_linear_bn_eval, fuse_linear_bn_weights, skip_init,
)
from ember.nn.utils.clip_grad import clip_grads_with_norm_  # noqa: E402,F401
