"""The engine and its state: raw 32/64-bit words, uniform floats at each dtype's precision, the cached
second Box-Muller value, and PyTorch's 5056-byte state layout (``torch.get_rng_state()``)."""
from __future__ import annotations

import struct

import numpy as np

_WORDS = 624
_MASK53 = np.uint64((1 << 53) - 1)
# PyTorch's CPUGeneratorImplState: the_initial_seed (int64), left (int32), seeded (int32), next (uint64),
# state[624] (uint64), normal_x/normal_y/normal_rho (double), normal_is_valid (int32, padded to 8),
# next_float_normal_sample (float), is_next_float_normal_sample_valid (bool, padded to 4).
_HEAD = struct.Struct("<qiiQ")
_TAIL = struct.Struct("<dddi4xf?3x")
STATE_BYTES = _HEAD.size + 8 * _WORDS + _TAIL.size  # 5056


def _is_freshly_seeded(key: np.ndarray, seed: int) -> bool:
    s = seed & 0xFFFFFFFF
    return int(key[0]) == s and int(key[1]) == (1812433253 * (s ^ (s >> 30)) + 1) & 0xFFFFFFFF


class MTStream:
    """One MT19937 stream as PyTorch's CPU generator keeps it.

    Example:
        >>> s = MTStream(0)
        >>> int(s.words32(1)[0])
        2357136044
    """

    def __init__(self, seed: int = 67280421310721) -> None:
        self.bit_generator = np.random.MT19937()
        self.seed(seed)

    def seed(self, seed: int) -> None:
        """Seed as ``torch.manual_seed``: the engine takes the low 32 bits (its initial seed keeps all 64)."""
        self.initial_seed = int(seed) % 2 ** 64
        self.bit_generator._legacy_seeding(self.initial_seed & 0xFFFFFFFF)
        self.next_double_normal: float | None = None
        self.next_float_normal: float | None = None

    # -- raw words ----------------------------------------------------------------------------------------
    def words32(self, n: int) -> np.ndarray:
        """``n`` raw 32-bit outputs (as uint64), in engine order."""
        return self.bit_generator.random_raw(int(n))

    def words64(self, n: int) -> np.ndarray:
        """``n`` 64-bit words, each made of two outputs (the first is the high half), as ``random64()``."""
        pairs = self.words32(2 * int(n))
        return (pairs[0::2] << np.uint64(32)) | pairs[1::2]

    def unit_float64(self, n: int) -> np.ndarray:
        """Doubles in [0, 1) with 53 random bits each (two outputs per number)."""
        return (self.words64(n) & _MASK53).astype(np.float64) * 2.0 ** -53

    def unit_float32(self, n: int, digits: int = 24) -> np.ndarray:
        """Floats in [0, 1) keeping ``digits`` bits of one output: 24 for float32, 11 for float16, 8 for bfloat16
        (PyTorch's uniform for a dtype uses its mantissa's width, computed in float32)."""
        mask = np.uint64((1 << digits) - 1)
        return (self.words32(n) & mask).astype(np.float32) * np.float32(2.0 ** -digits)

    # -- state --------------------------------------------------------------------------------------------
    def state_bytes(self) -> bytes:
        """The state in PyTorch's layout (what ``torch.get_rng_state()`` returns), so states move both ways."""
        mt = self.bit_generator.state["state"]
        key, pos = np.asarray(mt["key"], dtype=np.uint64), int(mt["pos"])
        # NumPy's ``pos`` counts the words used from the current block; PyTorch counts down ``left``.
        left, nxt = (1, pos) if pos >= _WORDS else (_WORDS + 1 - pos, pos)
        if pos >= _WORDS and _is_freshly_seeded(key, self.initial_seed):
            nxt = 0  # PyTorch's seeding leaves next at 0 (the first draw regenerates the block either way)
        head = _HEAD.pack(self.initial_seed - 2 ** 64 if self.initial_seed >= 2 ** 63 else self.initial_seed,
                          left, 1, nxt)
        double_valid = self.next_double_normal is not None
        float_valid = self.next_float_normal is not None
        tail = _TAIL.pack(0.0, self.next_double_normal if double_valid else 0.0, 0.0, int(double_valid),
                          self.next_float_normal if float_valid else 0.0, float_valid)
        return head + key.astype("<u8").tobytes() + tail

    def load_state_bytes(self, raw: bytes) -> None:
        """Restore from PyTorch's layout; refuses anything else, naming what is wrong."""
        if len(raw) != STATE_BYTES:
            raise ValueError(f"Generator.set_state: expected a state of {STATE_BYTES} bytes (torch.get_rng_state's "
                             f"layout), got {len(raw)}")
        seed, left, _seeded, nxt = _HEAD.unpack_from(raw, 0)
        key = np.frombuffer(raw, dtype="<u8", count=_WORDS, offset=_HEAD.size)
        if not 1 <= left <= _WORDS or not 0 <= nxt <= _WORDS or (key >> np.uint64(32)).any():
            raise ValueError(f"Generator.set_state: the state is corrupt (left={left}, next={nxt}, or a word wider "
                             "than 32 bits)")
        _x, normal_y, _rho, double_valid, next_float, float_valid = _TAIL.unpack_from(raw, _HEAD.size + 8 * _WORDS)
        pos = _WORDS if left == 1 else _WORDS + 1 - left
        self.bit_generator.state = {"bit_generator": "MT19937",
                                    "state": {"key": key.astype(np.uint32), "pos": pos}}
        self.initial_seed = seed % 2 ** 64
        self.next_double_normal = float(normal_y) if double_valid else None
        self.next_float_normal = float(next_float) if float_valid else None
