"""The public namespaces fx works with: generated code may write ``ember.X`` / ``ember.nn.functional.X``, and
tracing records calls of their functions.

``ember`` itself is read from ``sys.modules`` when first needed instead of imported here: ``ember/__init__``
imports ``ember.fx`` (``torch.fx`` must exist after ``import torch``), so a module-level ``import ember`` in fx
would make an import cycle; by the time fx traces or writes code, ``ember`` is fully imported.

Example:
    >>> from ember.fx._namespaces import public_namespaces
    >>> [prefix for prefix, _ in public_namespaces()]
    ['ember', 'ember.nn.functional', 'ember.linalg', 'ember.special', 'ember.fft']
"""
from __future__ import annotations

import sys
from types import ModuleType

from ember import fft, linalg, special
from ember.nn import functional


def ember_package() -> ModuleType:
    return sys.modules["ember"]


def public_namespaces() -> list[tuple[str, ModuleType]]:
    """(dotted prefix, module) for each namespace, the top level first."""
    return [("ember", ember_package()), ("ember.nn.functional", functional), ("ember.linalg", linalg),
            ("ember.special", special), ("ember.fft", fft)]
