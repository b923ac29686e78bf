"""torchvision's transforms that are ``torch.nn.Module`` subclasses, as here.

Since torchvision 0.8 most transforms (``Normalize``, ``RandomResizedCrop``, ``ColorJitter``, ``GaussianBlur``,
``RandomApply``, the auto-augment policies, ...) are ``nn.Module``s, so programs put them in ``nn.Sequential``
(byol-pytorch's augmentation pipeline) or move them with ``.to(device)``; ``Compose``, ``ToTensor``,
``ToPILImage``, ``Lambda``, ``RandomChoice`` and ``RandomOrder`` are not. ember's transform classes set their
fields in ``__init__`` without calling ``Module.__init__``, so the module state is made in ``__new__``; each
class keeps its own ``__call__`` (no hooks), and ``forward`` runs it.

Example:
    >>> import ember, ember.vision.transforms as T
    >>> isinstance(T.RandomGrayscale(0.2), ember.nn.Module), isinstance(T.Compose([]), ember.nn.Module)
    (True, False)
"""
from __future__ import annotations

from typing import Any

from ember.nn.modules.module import Module


class TransformModule(Module):
    """A transform that is also an ``nn.Module`` (module state made before the class's own ``__init__``)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> "TransformModule":
        obj = super().__new__(cls)
        Module.__init__(obj)
        return obj

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return type(self).__call__(self, *args, **kwargs)
