"""Model builders with torchvision's names, arguments and state_dict keys, and their pretrained weights.

Example:
    >>> import ember.vision as torchvision
    >>> model = torchvision.models.resnet18(num_classes=10)
    >>> torchvision.models.ResNet18_Weights.IMAGENET1K_V1.meta["num_params"]
    11689512
"""
from ember.vision.models._api import (  # noqa: F401
    Weights, WeightsEnum, get_model, get_model_builder, get_model_weights, get_weight, list_models,
)
from ember.vision.models.alexnet import *  # noqa: F401,F403
from ember.vision.models.convnext import *  # noqa: F401,F403
from ember.vision.models.densenet import *  # noqa: F401,F403
from ember.vision.models.efficientnet import *  # noqa: F401,F403
from ember.vision.models.googlenet import *  # noqa: F401,F403
from ember.vision.models.inception import *  # noqa: F401,F403
from ember.vision.models.maxvit import *  # noqa: F401,F403
from ember.vision.models.mnasnet import *  # noqa: F401,F403
from ember.vision.models.mobilenetv2 import *  # noqa: F401,F403
from ember.vision.models.mobilenetv3 import *  # noqa: F401,F403
from ember.vision.models.regnet import *  # noqa: F401,F403
from ember.vision.models.resnet import *  # noqa: F401,F403
from ember.vision.models.shufflenetv2 import *  # noqa: F401,F403
from ember.vision.models.squeezenet import *  # noqa: F401,F403
from ember.vision.models.swin_transformer import *  # noqa: F401,F403
from ember.vision.models.vgg import *  # noqa: F401,F403
from ember.vision.models.vision_transformer import *  # noqa: F401,F403


from ember.vision.models import segmentation  # noqa: E402,F401  (torchvision.models.segmentation)
from ember.vision.models import detection  # noqa: E402,F401  (torchvision.models.detection)
from ember.vision.models import video  # noqa: E402,F401  (torchvision.models.video)
from ember.vision.models import optical_flow  # noqa: E402,F401  (torchvision.models.optical_flow)
from ember.vision.models import quantization  # noqa: E402,F401  (torchvision.models.quantization)
