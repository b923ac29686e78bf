"""PyTorch's module paths exist under ember's name (``import ember as torch`` keeps them working).

Programs say ``from torch.cuda.amp import GradScaler``, ``from torch.utils.data.dataloader import
default_collate`` or ``torch.nn.modules.pixelshuffle.PixelShuffle``. Each path of ``ember._layout`` must
import, be an attribute of its parent once ember is imported, and offer every name PyTorch's module
defines that ember has in the namespace PyTorch re-exports it from.
"""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap

import pytest

import ember
from ember._layout import TORCH_LAYOUT

torch = pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# where PyTorch re-exports the names of each family of module paths
NAMESPACE = {"ember.cuda.amp": "ember.amp", "ember.nn.utils.stateless": "ember.func",
             "ember.cuda": "ember.cuda", "ember.utils.data": "ember.utils.data", "ember.nn.modules": "ember.nn",
             "ember.nn.utils": "ember.nn.utils", "ember.optim": "ember.optim",
             # PyTorch's older quantization paths are the torch.ao modules themselves
             "ember.quantization": "ember.ao.quantization", "ember.nn.quantized": "ember.ao.nn.quantized",
             "ember.nn.quantized.dynamic": "ember.ao.nn.quantized.dynamic", "ember.nn.intrinsic": "ember.ao.nn.intrinsic",
             "ember.nn.qat": "ember.ao.nn.qat",
             # torch.distributions.normal.Normal, ...: one family per module in PyTorch (d2l, RL programs)
             "ember.distributions": "ember.distributions"}


# torch.nn.modules.adaptive holds only AdaptiveLogSoftmaxWithLoss, which ember lacks (docs/pytorch-compat.md);
# torch.utils.hooks and torch.utils.model_zoo have no re-exporting namespace (import and attribute checked above)
# torch.nn.quantized.dynamic defines no names of its own and has no __all__ (its classes live in torch.ao)
NOTHING_TO_COMPARE = {"ember.nn.modules.adaptive", "ember.utils.hooks", "ember.utils.model_zoo",
                      "ember.nn.quantized.dynamic"}


def _namespace(path: str) -> str:
    return NAMESPACE.get(path) or NAMESPACE[path.rpartition(".")[0]]


def _public_names(module) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in dir(module) if not n.startswith("_")
                 and getattr(getattr(module, n), "__module__", None) == module.__name__]
    return list(names)


@pytest.mark.parametrize("path", sorted(TORCH_LAYOUT))
def test_path_imports_and_is_an_attribute(path: str) -> None:
    module = importlib.import_module(path)
    importlib.import_module("torch" + path[len("ember"):])
    parent, _, child = path.partition(".")[2].rpartition(".")
    torch_parent, ember_parent = torch, ember
    for part in parent.split(".") if parent else ():  # a top-level path (ember.quantization) has no parent part
        torch_parent, ember_parent = getattr(torch_parent, part), getattr(ember_parent, part)
    # as in PyTorch: the parent's attribute is the module, a function of that name, or absent (torch.optim)
    torch_obj = getattr(torch_parent, child, None)
    if isinstance(torch_obj, type(sys)):
        assert getattr(ember_parent, child) is module
    elif torch_obj is None:
        assert not hasattr(ember_parent, child)
    else:
        assert callable(getattr(ember_parent, child))


@pytest.mark.parametrize("path", sorted(set(TORCH_LAYOUT) - NOTHING_TO_COMPARE))
def test_path_offers_the_names_ember_has(path: str) -> None:
    torch_module = importlib.import_module("torch" + path[len("ember"):])
    namespace = importlib.import_module(_namespace(path))
    module = importlib.import_module(path)
    offered = [n for n in _public_names(torch_module) if hasattr(namespace, n)]
    assert offered, f"{path}: nothing to compare (the test would check nothing)"
    # torch.cuda.amp's classes are deprecated subclasses of torch.amp's (and ember's likewise): names only
    same = path != "ember.cuda.amp"
    missing = [n for n in offered
               if not hasattr(module, n) or (same and getattr(module, n) is not getattr(namespace, n))]
    assert not missing, f"{path} lacks {missing}"


def test_nn_utils_spectral_norm_stays_the_function() -> None:
    import ember.nn.utils.spectral_norm  # noqa: F401  (importing the path must not rebind the function)
    assert callable(ember.nn.utils.spectral_norm) and not isinstance(ember.nn.utils.spectral_norm, type(sys))


def test_cuda_amp_and_dataloader_paths_under_ember_run(tmp_path) -> None:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        from torch.cuda.amp import GradScaler, autocast
        from torch.utils.data.dataloader import default_collate, get_worker_info
        import torch
        import torch.optim.adamw
        from torch.optim.adamw import AdamW
        assert AdamW is torch.optim.AdamW
        assert torch.nn.modules.batchnorm.BatchNorm2d is torch.nn.BatchNorm2d
        print(GradScaler(enabled=False).is_enabled(), default_collate([1, 2]).tolist(), get_worker_info())
        """))
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, "-m", "ember.cli", "run", str(script)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["False", "[1,", "2]", "None"]
