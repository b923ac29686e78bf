"""``ember.vision.transforms``: torchvision's transforms on PIL images, NumPy images and ember tensors."""
from ember.vision.transforms import functional  # noqa: F401
from ember.vision.transforms.transforms import *  # noqa: F401,F403
