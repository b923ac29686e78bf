"""Other values read from files: generator states (in checkpoints) and MNIST's IDX headers."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.data.datasets.mnist import read_idx


def _state(payload: bytes):
    return ember.tensor(np.frombuffer(payload, dtype=np.uint8).copy())


def test_generator_state_from_a_file_is_checked():
    g = ember.Generator()
    good = g.get_state()
    raw = bytes(good.numpy())
    zero_left = raw[:8] + (0).to_bytes(4, "little") + raw[12:]
    wide_word = raw[:24] + (2 ** 40).to_bytes(8, "little") + raw[32:]
    for bad, words in [(b"{}", "before 0.2"), (b"\xff\xfe", "5056 bytes"), (raw[:-1], "5056 bytes"),
                       (zero_left, "corrupt"), (wide_word, "corrupt")]:
        with pytest.raises(ValueError, match=words):
            g.set_state(_state(bad))
    g.set_state(good)
    first = ember.randn(3, generator=g)
    g.set_state(good)
    np.testing.assert_array_equal(ember.randn(3, generator=g).numpy(), first.numpy())


def test_idx_headers_are_checked():
    with pytest.raises(ValueError, match="ends inside the header"):
        read_idx(bytes([0, 0, 8, 200]) + bytes(10), "x.idx")
    with pytest.raises(ValueError, match="truncated or corrupt"):
        read_idx(bytes([0, 0, 8, 1]) + (5).to_bytes(4, "big") + bytes(3), "x.idx")
    np.testing.assert_array_equal(read_idx(bytes([0, 0, 8, 1]) + (3).to_bytes(4, "big") + bytes([1, 2, 3])), [1, 2, 3])
