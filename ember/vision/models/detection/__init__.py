"""Object detection models (torchvision's ``models.detection``): Faster R-CNN and the machinery it shares with
the other detectors (``GeneralizedRCNNTransform``, ``AnchorGenerator``, the RPN, ``RoIHeads``, box coders,
matchers and samplers). Names, arguments, module names and state_dict keys are torchvision's."""
from ember.vision.models.detection.faster_rcnn import *  # noqa: F401,F403
from ember.vision.models.detection import backbone_utils  # noqa: F401,E402
from ember.vision.models.detection.mask_rcnn import *  # noqa: F401,F403,E402
from ember.vision.models.detection.keypoint_rcnn import *  # noqa: F401,F403,E402
from ember.vision.models.detection.retinanet import *  # noqa: F401,F403,E402
from ember.vision.models.detection.fcos import *  # noqa: F401,F403,E402
from ember.vision.models.detection.ssd import *  # noqa: F401,F403,E402
from ember.vision.models.detection.ssdlite import *  # noqa: F401,F403,E402
