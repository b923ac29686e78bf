"""The import hook: ``torch`` and every ``torch.X.Y`` resolve to ember's module of the same path.

``import torch.nn.functional as F`` gives the very object ``ember.nn.functional`` (no second copy), so
``isinstance`` checks and module state agree between code that says ``torch`` and code that says
``ember``. Paths where ember's layout differs from PyTorch's are listed in :data:`RENAMES`.
``torchvision`` maps to ``ember.vision`` when that package exists (``EMBER_RUN_NO_VISION=1`` keeps a real or
stand-in torchvision, e.g. when comparing with PyTorch runs that use the same stand-in).

Example:
    >>> from ember.run.alias import module_for
    >>> module_for("torch.nn.functional").__name__
    'ember.nn.functional'
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
import ember

# PyTorch path prefix -> ember path prefix, longest first where they nest.
RENAMES: dict[str, str] = {
    "torchvision": "ember.vision",
    "functorch": "ember.func.functorch",  # the deprecated standalone package (make_functional, ...)
    "torch.backends.cuda": "ember.backends.cuda_flags",  # ember.backends.cuda is the CUDA backend itself
    "torch.utils.data": "ember.data",
    "torch.nn.modules.batchnorm": "ember.nn.modules.normalization",
    "torch.nn.modules.instancenorm": "ember.nn.modules.more",
    "torch.nn.modules.pixelshuffle": "ember.nn.modules.more",
    "torch.nn.modules.channelshuffle": "ember.nn.modules.more",
    "torch.nn.modules.distance": "ember.nn.modules.more",
    "torch.nn.modules.fold": "ember.nn.modules.more",
    "torch.nn.modules.padding": "ember.nn.modules.more",
    "torch.nn.modules.lazy": "ember.nn.modules.more",
    "torch.nn.modules.adaptive": "ember.nn.modules.loss",
    "torch.optim.adamw": "ember.optim.adam",
    "torch.optim.adamax": "ember.optim.more",
    "torch.optim.adagrad": "ember.optim.adagrad",
    "torch.optim.adadelta": "ember.optim.more",
    "torch.optim.nadam": "ember.optim.more",
    "torch.optim.radam": "ember.optim.more",
    "torch.optim.rprop": "ember.optim.more",
    "torch.optim.asgd": "ember.optim.more",
    "torch.optim.lbfgs": "ember.optim.lbfgs",
    "torch": "ember",
}


def ember_name(torch_name: str) -> str | None:
    """The ember module path for a PyTorch one, or None when the name is not PyTorch's."""
    for prefix, target in RENAMES.items():
        if torch_name == prefix or torch_name.startswith(prefix + "."):
            return target + torch_name[len(prefix):]
    return None


def torch_name(ember_path: str) -> str:
    """The reverse: ``ember.nn.functional`` -> ``torch.nn.functional`` (for messages)."""
    for prefix, target in RENAMES.items():
        if ember_path == target or ember_path.startswith(target + "."):
            return prefix + ember_path[len(target):]
    return ember_path


class MissingTorchModule(ModuleNotFoundError):
    """A ``torch.X`` module path that ember does not provide."""


def module_for(name: str) -> types.ModuleType:
    """Import the ember module standing for PyTorch module ``name``.

    When ``ember.X.Y`` is not a module but ``ember.X`` has a module attribute ``Y``, that is used.
    """
    target = ember_name(name)
    if target is None:
        raise ValueError(f"{name!r} is not a PyTorch module path")
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as e:
        if e.name != target:
            raise
    parent_name, _, child = target.rpartition(".")
    if parent_name:
        try:
            parent = importlib.import_module(parent_name)
        except ModuleNotFoundError:
            parent = None
        obj = getattr(parent, child, None)
        if isinstance(obj, types.ModuleType):
            return obj
    raise MissingTorchModule(f"No module named {name!r}: ember has no {target!r}", name=name)


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, module: types.ModuleType) -> None:
        self.module = module

    def create_module(self, spec):  # noqa: ANN001 - the import protocol's signature
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        # The import system hands back sys.modules[name] after exec: make that ember's module.
        sys.modules[module.__name__] = self.module


class TorchToEmberFinder(importlib.abc.MetaPathFinder):
    """``sys.meta_path`` finder: PyTorch module names -> ember modules."""

    def find_spec(self, fullname, path=None, target=None):  # noqa: ANN001 - the import protocol's signature
        top = fullname.partition(".")[0]
        if top not in RENAMES:
            return None
        if top == "torchvision" and (os.environ.get("EMBER_RUN_NO_VISION") == "1"
                                     or importlib.util.find_spec("ember.vision") is None):
            return None  # no ember.vision (or opted out): let a real or stand-in torchvision be found
        module = module_for(fullname)
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(module))


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once) and drop any already imported real torch."""
    if not any(isinstance(f, TorchToEmberFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, TorchToEmberFinder())

    for name in [n for n in sys.modules if n.partition(".")[0] in ("torch", "functorch")]:
        if not getattr(sys.modules[name], "__name__", "").startswith("ember"):
            del sys.modules[name]
    sys.modules["torch"] = ember
    # the program imported torch: dtypes and sizes print as torch.float32 / torch.Size, as under PyTorch
    ember.dtypes.PUBLIC_NAME[0] = "torch"
