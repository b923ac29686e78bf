"""``ember.vision``: torchvision's layout and names on ember (``import ember.vision as torchvision``).

``models`` (ResNet, VGG, AlexNet, MobileNet V2/V3, EfficientNet-B0, ViT-B/16 with torchvision's
state_dict keys and pretrained weights), ``transforms`` (on NumPy HWC images, PIL images and
tensors), ``datasets`` (MNIST, FashionMNIST, CIFAR-10/100, ImageFolder), ``ops``.

Example:
    >>> import ember.vision as torchvision
    >>> torchvision.models.resnet18().fc
    Linear(in_features=512, out_features=1000, bias=True)
"""
from ember.vision import datasets, models, ops, transforms, utils  # noqa: F401

__version__ = "0.1.0 (torchvision 0.28 API)"
