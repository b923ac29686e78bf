"""``ember.nn.functional``: activations, convolutions, pooling, normalization, losses, attention."""
from __future__ import annotations

from ember.ops.elementwise import relu, sigmoid, tanh  # noqa: F401
