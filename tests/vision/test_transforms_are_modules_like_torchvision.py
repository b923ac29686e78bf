"""torchvision's transforms that are ``nn.Module`` subclasses are ``ember.nn.Module``s here, the others are not
(byol-pytorch builds its augmentation pipeline as ``nn.Sequential(T.RandomApply(...), T.RandomGrayscale(0.2), ...)``,
which ember refused: "RandomGrayscale is not a Module subclass"). Compared with torchvision 0.28."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import ember
import ember.vision.transforms as ET

torch = pytest.importorskip("torch")
from torchvision_ref import import_torchvision  # noqa: E402

try:
    TT = import_torchvision().transforms
except ImportError:  # pragma: no cover
    TT = None
pytestmark = pytest.mark.skipif(TT is None, reason="torchvision (test extra) is not installed")


def test_module_subclasses_match_torchvision():
    names = [n for n, c in vars(TT).items() if inspect.isclass(c) and not issubclass(c, type) and n[0].isupper()
             and n not in ("InterpolationMode", "AutoAugmentPolicy") and hasattr(ET, n)]
    assert len(names) >= 35
    for n in names:
        assert issubclass(getattr(ET, n), ember.nn.Module) == issubclass(getattr(TT, n), torch.nn.Module), n


def test_sequential_of_transforms_on_a_batch_matches_torchvision():
    data = np.random.default_rng(0).random((2, 3, 12, 12)).astype(np.float32)
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    pe = ember.nn.Sequential(ET.CenterCrop(8), ET.Grayscale(3), ET.Pad(1), ET.Normalize(mean, std))
    pt = torch.nn.Sequential(TT.CenterCrop(8), TT.Grayscale(3), TT.Pad(1), TT.Normalize(mean, std))
    np.testing.assert_allclose(pe(ember.tensor(data)).numpy(), pt(torch.tensor(data)).numpy(), rtol=1e-6, atol=1e-6)
    assert len(list(pe.children())) == 4 and list(pe.parameters()) == []


def test_seeded_random_pipeline_in_sequential_draws_as_torchvision():
    data = np.random.default_rng(1).random((2, 3, 16, 16)).astype(np.float32)
    outs = []
    for lib, T in ((torch, TT), (ember, ET)):
        seq = lib.nn.Sequential(T.RandomHorizontalFlip(), T.RandomResizedCrop((8, 8), antialias=True),
                                T.RandomApply(torch.nn.ModuleList([T.ColorJitter(0.4, 0.4, 0.4, 0.1)]) if lib is torch
                                              else [T.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.5))
        lib.manual_seed(3)
        outs.append(seq(lib.tensor(data)).numpy())
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-5)


def test_repr_has_no_module_state():
    assert repr(ET.RandomGrayscale(0.2)) == "RandomGrayscale(p=0.2)"
    assert "training" not in repr(ET.GaussianBlur(3, (0.1, 2.0)))
