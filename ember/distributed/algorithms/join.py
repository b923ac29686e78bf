"""``torch.distributed.algorithms.join``: uneven inputs across ranks (named, refused when used)."""
from __future__ import annotations

from ember.distributed._not_here import refused_class

__all__ = ["Join", "Joinable", "JoinHook"]

Join = refused_class("torch.distributed.algorithms.join.Join", "Train with uneven inputs across ranks")


class Joinable:
    """Base of classes that take part in ``Join`` (a mixin; nothing to do without Join)."""


class JoinHook:
    """Per-rank hooks of ``Join`` (a base class; nothing to do without Join)."""
