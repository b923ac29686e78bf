"""Video classification models (torchvision's ``models.video``): ``r3d_18``, ``mc3_18``, ``r2plus1d_18``, ``s3d``,
``swin3d_t/s/b``, ``mvit_v1_b``, ``mvit_v2_s``
with their Kinetics-400 weights enums; input ``(N, 3, T, H, W)``."""
from ember.vision.models.video.mvit import *  # noqa: F401,F403
from ember.vision.models.video.resnet import *  # noqa: F401,F403
from ember.vision.models.video.s3d import *  # noqa: F401,F403
from ember.vision.models.video.swin_transformer import *  # noqa: F401,F403
