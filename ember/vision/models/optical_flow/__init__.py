"""Optical flow models (torchvision's ``models.optical_flow``): ``raft_large`` and ``raft_small`` with their
weights enums; ``model(image1, image2)`` returns the list of ``(N, 2, H, W)`` flow predictions, one per update."""
from ember.vision.models.optical_flow.raft import *  # noqa: F401,F403
