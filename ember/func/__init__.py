"""``torch.func`` for ember: composable transforms of functions of tensors.

* :func:`vmap` - real batching: each op record's batching rule runs once on the whole batch;
* :func:`grad`, :func:`grad_and_value`, :func:`vjp`, :func:`jvp`, :func:`jacrev`, :func:`jacfwd`,
  :func:`hessian` - autodiff transforms that compose with vmap and with each other;
* :func:`functional_call`, :func:`stack_module_state` - modules as functions of their parameters;
* :func:`rearrange` - einops-style reshapes and transposes;
* :func:`functionalize`, :func:`debug_unwrap` - PyTorch's names (docs/func.md says what they do here).

See docs/func.md for what is batched how, and the design decisions.

Example:
    >>> import ember
    >>> from ember.func import grad, vmap
    >>> per_sample = vmap(grad(lambda w, x: (w * x).sum()), in_dims=(None, 0))(ember.ones(3), ember.eye(3))
    >>> per_sample.tolist()
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
"""
from ember.func.module_state import functional_call, replace_all_batch_norm_modules_, stack_module_state
from ember.func.module_state import _reparametrize_module  # noqa: F401  (torch.nn.utils.stateless's)
from ember.func.transforms import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, linearize, vjp
from ember.func.rearrange import rearrange
from ember.func.functionalize import debug_unwrap, functionalize
from ember.func.vmap import vmap

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "linearize",
           "functional_call", "stack_module_state", "replace_all_batch_norm_modules_", "rearrange", "functionalize",
           "debug_unwrap"]
