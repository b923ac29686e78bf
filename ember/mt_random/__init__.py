"""PyTorch's CPU random numbers, drawn with NumPy: the same seed gives the same tensors as ``torch``.

PyTorch's CPU generator is a 32-bit Mersenne Twister (MT19937) seeded with the low 32 bits of the seed,
and each sampler turns its raw words into numbers in a fixed way (``uniform_`` of float32 keeps 24 bits of
one word, float64 53 bits of two, ``randn`` fills blocks of 16 by Box-Muller, ...). NumPy ships the same
engine (``np.random.MT19937`` with its legacy seeding), so this package reproduces PyTorch's samplers
vectorized over the raw words: ``ember.manual_seed(0); ember.rand(3)`` equals ``torch.manual_seed(0);
torch.rand(3)`` bit for bit, and so do model initializations, dropout masks and DataLoader shuffles.

Example:
    >>> from ember.mt_random import MTStream, samplers
    >>> stream = MTStream(0)
    >>> [round(float(v), 4) for v in samplers.uniform(stream, (3,), "float32")]
    [0.4963, 0.7682, 0.0885]
"""
from ember.mt_random.stream import MTStream

__all__ = ["MTStream"]
