"""``ember.vision``: torchvision's layout and names on ember (``import ember.vision as torchvision``).

``models`` (ResNet, VGG, AlexNet, MobileNet V2/V3, EfficientNet-B0, ViT-B/16 with torchvision's
state_dict keys and pretrained weights), ``transforms`` (on NumPy HWC images, PIL images and
tensors), ``datasets`` (MNIST, FashionMNIST, CIFAR-10/100, ImageFolder), ``ops``.

Example:
    >>> import ember.vision as torchvision
    >>> torchvision.models.resnet18().fc
    Linear(in_features=512, out_features=1000, bias=True)
"""
from ember.torch_version import EMBER_VERSION, TorchVersion
from ember.vision import datasets, models, ops, transforms, utils  # noqa: F401
from ember.vision._backends import (  # noqa: F401
    _is_tracing, disable_beta_transforms_warning, get_image_backend, get_video_backend, set_image_backend,
    set_video_backend,
)

# torchvision's API level with ember's version as the local part: programs parse and compare it
# (``version.parse(torchvision.__version__) >= version.parse("0.13")``)
__version__ = TorchVersion(f"0.28.0+ember.{EMBER_VERSION}")
