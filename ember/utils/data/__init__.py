"""``torch.utils.data`` under ember's name: the same objects as :mod:`ember.data`.

Example:
    >>> from ember.utils.data import DataLoader, Dataset, TensorDataset
    >>> import ember.data
    >>> DataLoader is ember.data.DataLoader
    True
"""
from ember.data import *  # noqa: F401,F403
from ember.data import __all__  # noqa: F401
