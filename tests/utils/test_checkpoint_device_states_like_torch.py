"""``torch.utils.checkpoint.get_device_states`` / ``set_device_states`` and ``torch.cuda._initialized``: the
reversible layers of performer-pytorch (and reformer-pytorch) save and restore device RNG states with them.
Compared with torch 2.13's CPU build; the device path runs on the stand-in CUDA device."""
import numpy as np
import pytest

import ember
from ember.testing import standin_cuda
from ember.utils.checkpoint import get_device_states, set_device_states

torch = pytest.importorskip("torch")
import torch.utils.checkpoint as tcheck  # noqa: E402


def test_cpu_tensors_give_empty_lists_like_torch():
    args = (1, [2.0], {"a": 3})
    got = get_device_states(ember.ones(2), [ember.zeros(1)], {"k": ember.ones(1)}, *args)
    want = tcheck.get_device_states(torch.ones(2), [torch.zeros(1)], {"k": torch.ones(1)}, *args)
    assert got == ([], []) and want == ([], [])
    set_device_states([], [])
    tcheck.set_device_states([], [])
    set_device_states([0], [None], device_type="meta")  # ignored, as torch


def test_cuda_initialized_like_torch_cpu_build():
    assert ember.cuda._initialized is torch.cuda._initialized is False
    with pytest.raises(AttributeError, match="no attribute '_not_there'"):
        ember.cuda._not_there


def test_device_rng_states_replay_dropout_on_a_device():
    with standin_cuda():
        assert ember.cuda._initialized is True
        x = ember.ones(4, device="cuda")
        ids, states = get_device_states(x, [ember.ones(1)], x)
        assert ids == [0, 0]  # one entry per tensor, as torch
        first = ember.rand(5, device="cuda").cpu().numpy()
        set_device_states(ids, states)
        np.testing.assert_array_equal(ember.rand(5, device="cuda").cpu().numpy(), first)
        with pytest.raises(RuntimeError, match="no 'xpu' devices"):
            set_device_states(ids, states, device_type="xpu")
