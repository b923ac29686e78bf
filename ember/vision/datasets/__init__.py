"""``ember.vision.datasets``: MNIST, FashionMNIST, KMNIST (IDX files), CIFAR-10/100 (python batches, read with a
restricted unpickler), ImageFolder / DatasetFolder (Pillow), FakeData."""
from ember.data.datasets import KMNIST, FashionMNIST, MNIST  # noqa: F401
from ember.vision.datasets.cifar import CIFAR10, CIFAR100  # noqa: F401
from ember.vision.datasets.folder import DatasetFolder, ImageFolder  # noqa: F401
from ember.vision.datasets.fakedata import FakeData  # noqa: F401
