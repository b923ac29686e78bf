"""``ember.utils``: PyTorch's ``torch.utils`` namespace (``ember.utils.data`` is ``ember.data``).

Example:
    >>> from ember.utils.data import DataLoader, TensorDataset
"""
from ember.utils import data  # noqa: F401
from ember.utils import checkpoint  # noqa: E402,F401  (torch.utils.checkpoint; tensorboard imports on use)
