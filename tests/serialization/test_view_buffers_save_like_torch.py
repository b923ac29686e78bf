"""A buffer registered as a view (minGPT's ``register_buffer("bias", torch.tril(...).view(1, 1, T, T))``) saves and
loads both ways: ember keeps a view's storage root in its ``__dict__`` for storage identity, and the torch-format
writer took that for user attributes and recursed without end (minGPT's chargpt checkpoint: RecursionError)."""
from __future__ import annotations

import copy
import io
import pickle

import numpy as np
import torch

import ember


class _Masked(ember.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("bias", ember.tril(ember.ones(4, 4)).view(1, 1, 4, 4))
        self.proj = ember.nn.Linear(4, 4)


def test_view_buffer_state_dict_saves_and_torch_loads_it(tmp_path):
    state = _Masked().state_dict()
    path = tmp_path / "ckpt.pt"
    ember.save(state, path)
    loaded = torch.load(path, weights_only=True)
    assert type(loaded["bias"]) is torch.Tensor and loaded["bias"].shape == (1, 1, 4, 4)
    np.testing.assert_array_equal(loaded["bias"].numpy(), np.tril(np.ones((4, 4), np.float32))[None, None])
    back = ember.load(path)
    np.testing.assert_array_equal(back["bias"].numpy(), state["bias"].numpy())


def test_user_attributes_still_travel_and_bookkeeping_does_not(tmp_path):
    view = ember.arange(6.0)[2:].detach()
    view.note = "kept"
    ember.save({"v": view}, tmp_path / "a.pt")
    loaded = torch.load(tmp_path / "a.pt", weights_only=False)
    assert loaded["v"].note == "kept" and not hasattr(loaded["v"], "_storage_root")
    np.testing.assert_array_equal(loaded["v"].numpy(), [2.0, 3.0, 4.0, 5.0])
    for clone in (pickle.loads(pickle.dumps(view)), copy.deepcopy(view)):
        assert clone.note == "kept" and "_storage_root" not in clone.__dict__
        np.testing.assert_array_equal(clone.numpy(), [2.0, 3.0, 4.0, 5.0])
