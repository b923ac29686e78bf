"""Neural-network building blocks (PyTorch's ``torch.nn``): Module, Parameter, layers, init, functional, utils.

Example:
    >>> import ember
    >>> net = ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.ReLU(), ember.nn.Linear(8, 2))
    >>> net(ember.randn(3, 4)).shape
    ember.Size([3, 2])
"""
from ember.nn import functional  # noqa: F401
from ember.nn import init  # noqa: F401
from ember.nn.parameter import Buffer, Parameter  # noqa: F401
from ember.nn.modules import *  # noqa: F401,F403
from ember.nn.modules import Module  # noqa: F401
from ember.nn import utils  # noqa: F401
from ember.nn import parallel  # noqa: F401
from ember.nn.parallel import DataParallel, DistributedDataParallel  # noqa: F401
from ember.nn.modules.more import factory_kwargs  # noqa: E402,F401
from ember.nn import attention  # noqa: E402,F401  (torch.nn.attention.sdpa_kernel, SDPBackend)
