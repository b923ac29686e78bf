"""Layers and functions the models share (torchvision's ``torchvision.ops``, the parts models use)."""
from ember.vision.ops.misc import MLP, Conv2dNormActivation, SqueezeExcitation  # noqa: F401
from ember.vision.ops.stochastic_depth import StochasticDepth, stochastic_depth  # noqa: F401
from ember.vision.ops.misc import Permute  # noqa: F401,E402
