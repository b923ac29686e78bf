"""PyTorch's module paths under ember's name: ``import ember.cuda.amp``, ``ember.utils.data.dataloader``, ...

ember files some classes differently from PyTorch (BatchNorm lives in ``ember.nn.modules.normalization``,
AdamW in ``ember.optim.adam``, the data loader in ``ember.data``). Programs ported with ``import ember as
torch`` still say ``from torch.cuda.amp import GradScaler`` or ``torch.nn.modules.batchnorm._BatchNorm``, and
the ``ember run`` hook and stand-in shims map ``torch.X.Y`` to ``ember.X.Y``. So every path of
:data:`TORCH_LAYOUT` is importable (the very module object ember already has, no second copy) and, once
ember is imported, reachable as an attribute (``ember.nn.modules.pixelshuffle``), as in PyTorch where
``import torch`` loads these submodules eagerly.

Example:
    >>> import ember as torch
    >>> from ember.cuda.amp import GradScaler
    >>> GradScaler is torch.amp.GradScaler
    True
    >>> torch.nn.modules.batchnorm.BatchNorm2d is torch.nn.BatchNorm2d
    True
"""
from __future__ import annotations

import importlib
import sys

# ember path in PyTorch's layout -> the ember module that holds those names.
TORCH_LAYOUT: dict[str, str] = {
    "ember.cuda.amp": "ember.amp.cuda_amp",
    "ember.cuda.random": "ember.cuda",
    "ember.cuda.memory": "ember.cuda",
    "ember.cuda.streams": "ember.cuda",
    "ember.cuda.graphs": "ember.cuda_graphs",
    "ember.utils.data.dataloader": "ember.data.dataloader",
    "ember.utils.data.dataset": "ember.data.dataset",
    "ember.utils.data.sampler": "ember.data.sampler",
    "ember.utils.hooks": "ember.nn.modules.module",  # RemovableHandle
    "ember.utils.model_zoo": "ember.hub",  # load_url
    "ember.nn.modules.batchnorm": "ember.nn.modules.normalization",
    "ember.nn.modules.instancenorm": "ember.nn.modules.more",
    "ember.nn.modules.pixelshuffle": "ember.nn.modules.more",
    "ember.nn.modules.channelshuffle": "ember.nn.modules.more",
    "ember.nn.modules.distance": "ember.nn.modules.more",
    "ember.nn.modules.fold": "ember.nn.modules.more",
    "ember.nn.modules.padding": "ember.nn.modules.more",
    "ember.nn.modules.lazy": "ember.nn.modules.more",
    "ember.nn.modules.adaptive": "ember.nn.modules.loss",
    "ember.nn.utils.convert_parameters": "ember.nn.utils",
    "ember.nn.utils.spectral_norm": "ember.nn.utils",
    "ember.nn.utils.stateless": "ember.func",  # functional_call
    "ember.quantization": "ember.ao.quantization",  # PyTorch's older paths of torch.ao's quantization
    "ember.nn.quantized": "ember.ao.nn.quantized",
    "ember.nn.quantized.dynamic": "ember.ao.nn.quantized.dynamic",
    "ember.nn.intrinsic": "ember.ao.nn.intrinsic",
    "ember.nn.qat": "ember.ao.nn.qat",
    "ember.optim.adamw": "ember.optim.adam",
    "ember.optim.adamax": "ember.optim.more",
    "ember.optim.adadelta": "ember.optim.more",
    "ember.optim.nadam": "ember.optim.more",
    "ember.optim.radam": "ember.optim.more",
    "ember.optim.rprop": "ember.optim.more",
    "ember.optim.asgd": "ember.optim.more",
    "ember.optim.sparse_adam": "ember.optim.more",
    # torch.distributions keeps one family per module; ember groups them by theme (one_hot_categorical:
    # derived_families also holds OneHotCategorical, imported from discrete)
    "ember.distributions.bernoulli": "ember.distributions.discrete",
    "ember.distributions.beta": "ember.distributions.gamma_family",
    "ember.distributions.binomial": "ember.distributions.more_families",
    "ember.distributions.categorical": "ember.distributions.discrete",
    "ember.distributions.cauchy": "ember.distributions.more_families",
    "ember.distributions.chi2": "ember.distributions.more_families",
    "ember.distributions.continuous_bernoulli": "ember.distributions.unit_interval_families",
    "ember.distributions.dirichlet": "ember.distributions.gamma_family",
    "ember.distributions.exponential": "ember.distributions.continuous",
    "ember.distributions.fishersnedecor": "ember.distributions.tail_families",
    "ember.distributions.gamma": "ember.distributions.gamma_family",
    "ember.distributions.generalized_pareto": "ember.distributions.tail_families",
    "ember.distributions.geometric": "ember.distributions.more_families",
    "ember.distributions.gumbel": "ember.distributions.more_families",
    "ember.distributions.half_cauchy": "ember.distributions.derived_families",
    "ember.distributions.half_normal": "ember.distributions.more_families",
    "ember.distributions.inverse_gamma": "ember.distributions.derived_families",
    "ember.distributions.kumaraswamy": "ember.distributions.unit_interval_families",
    "ember.distributions.laplace": "ember.distributions.continuous",
    "ember.distributions.lkj_cholesky": "ember.distributions.matrix_families",
    "ember.distributions.log_normal": "ember.distributions.transformed_distribution",
    "ember.distributions.logistic_normal": "ember.distributions.unit_interval_families",
    "ember.distributions.mixture_same_family": "ember.distributions.mixtures",
    "ember.distributions.multinomial": "ember.distributions.mixtures",
    "ember.distributions.negative_binomial": "ember.distributions.derived_families",
    "ember.distributions.normal": "ember.distributions.continuous",
    "ember.distributions.one_hot_categorical": "ember.distributions.derived_families",
    "ember.distributions.pareto": "ember.distributions.derived_families",
    "ember.distributions.poisson": "ember.distributions.gamma_family",
    "ember.distributions.relaxed_bernoulli": "ember.distributions.relaxed",
    "ember.distributions.relaxed_categorical": "ember.distributions.relaxed",
    "ember.distributions.studentT": "ember.distributions.more_families",
    "ember.distributions.uniform": "ember.distributions.continuous",
    "ember.distributions.weibull": "ember.distributions.derived_families",
    "ember.distributions.wishart": "ember.distributions.matrix_families",
}

# PyTorch's torch.optim deletes its submodule attributes (torch.optim.adamw is no attribute there, and
# torch.optim.adamw.adamw is the functional form): these paths import but are not bound on the parent.
IMPORT_ONLY = frozenset(name for name in TORCH_LAYOUT if name.startswith("ember.optim."))


def install() -> None:
    """Register each path in ``sys.modules`` as the module ember has, and bind it on its parent if free.

    Registering (rather than a finder) keeps the import system from re-binding the parent's attribute:
    ``ember.nn.utils.spectral_norm`` stays the function, as ``torch.nn.utils.spectral_norm`` is.
    """
    for name, real in TORCH_LAYOUT.items():
        module = importlib.import_module(real)
        sys.modules.setdefault(name, module)
        parent_name, _, child = name.rpartition(".")
        parent = importlib.import_module(parent_name)
        if not hasattr(parent, "__path__"):
            # the `ember run` hook imports torch.cuda.amp below sys.modules["torch.cuda"] (ember.cuda): the
            # import system asks only packages (modules with __path__) for submodules
            parent.__path__ = []
        if name not in IMPORT_ONLY and child not in vars(parent):
            setattr(parent, child, module)
