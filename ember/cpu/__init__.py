"""``torch.cpu`` counterparts: ``ember.cpu.amp.autocast`` / ``GradScaler`` (deprecated aliases in PyTorch).

Example:
    >>> import ember
    >>> with ember.cpu.amp.autocast():  # doctest: +SKIP  (FutureWarning, as in PyTorch)
    ...     pass
"""
from ember.cpu import amp  # noqa: F401


def is_available() -> bool:
    """The CPU is always there."""
    return True


def device_count() -> int:
    return 1
