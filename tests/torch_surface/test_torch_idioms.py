"""Everyday PyTorch idioms must run unchanged with `import ember as torch`."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch as reference

import ember as torch
import ember.nn as nn
import ember.nn.functional as F
from ember.utils.data import DataLoader, TensorDataset


def test_device_selection_idiom() -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    assert torch.randn(2).to(device).device == device
    if importlib.util.find_spec("cupy") is None:
        assert torch.cuda.is_available() is False and torch.cuda.device_count() == 0
        with pytest.raises(RuntimeError, match="no CUDA device"):
            torch.cuda.synchronize()
    torch.cuda.manual_seed_all(0)
    torch.backends.cudnn.benchmark = True
    assert torch.backends.cudnn.benchmark is True
    torch.backends.cudnn.benchmark = False


def test_top_level_softmax_matches_torch() -> None:
    x = np.random.default_rng(0).standard_normal((3, 5))
    np.testing.assert_allclose(torch.softmax(torch.tensor(x), dim=1).numpy(),
                               reference.softmax(reference.tensor(x), dim=1).numpy(), rtol=1e-12)
    np.testing.assert_allclose(torch.log_softmax(torch.tensor(x), dim=0).numpy(),
                               reference.log_softmax(reference.tensor(x), dim=0).numpy(), rtol=1e-12)


def test_state_dict_save_load_round_trip(tmp_path) -> None:
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(inplace=True), nn.Linear(4, 2))
    path = tmp_path / "model.pt"
    torch.save(model.state_dict(), path)
    other = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    other.load_state_dict(torch.load(path))
    x = torch.randn(5, 3)
    np.testing.assert_array_equal(model(x).detach().numpy(), other(x).detach().numpy())


def test_training_loop_idioms() -> None:
    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randint(0, 3, (32,))), batch_size=8, shuffle=True)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    losses = []
    for _ in range(20):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        correct = sum((model(xb).argmax(dim=1) == yb).float().sum().item() for xb, yb in loader)
    assert losses[-1] < losses[0]
    assert correct / 32 > 0.5
