"""Neural-network building blocks (PyTorch's ``torch.nn``)."""
from ember.nn import functional  # noqa: F401
