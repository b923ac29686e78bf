"""``ember.utils``: PyTorch's ``torch.utils`` namespace (``ember.utils.data`` is ``ember.data``).

Example:
    >>> from ember.utils.data import DataLoader, TensorDataset
"""
from ember.utils import data, flop_counter  # noqa: F401
from ember.utils.model_summary import summary  # noqa: F401  (Keras' table + FLOPs per layer)
from ember.utils import checkpoint  # noqa: E402,F401  (torch.utils.checkpoint; tensorboard imports on use)
from ember.utils import dlpack  # noqa: E402,F401  (torch.utils.dlpack.from_dlpack / to_dlpack)
from ember.utils.swap import swap_tensors  # noqa: E402,F401  (torch.utils.swap_tensors)
from ember.utils import _pytree  # noqa: E402,F401  (torch.utils._pytree: tree_flatten/tree_map/register_pytree_node)
from ember.utils import _python_dispatch  # noqa: E402,F401  (torch.utils._python_dispatch: TorchDispatchMode)
