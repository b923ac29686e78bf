"""Ready-made datasets: MNIST, FashionMNIST (IDX files) and the MNIST subset carried in the package.

Example:
    >>> from ember.data.datasets import MNIST
    >>> len(MNIST.carried(train=False))
    2000
"""
from ember.data.datasets.mnist import KMNIST, MNIST, FashionMNIST, load_carried_mnist, read_idx

__all__ = ["MNIST", "FashionMNIST", "KMNIST", "load_carried_mnist", "read_idx"]
