"""Whether a CUDA graph is being captured right now, for op code that would otherwise read device data on the
host (a range check of targets, a fast-path test): such reads are refused during a capture, so ops take a path
without them while :data:`ACTIVE` is True. The backends set it in ``capture_begin``/``capture_end``.

Example:
    >>> from ember.backends import capture_state
    >>> capture_state.ACTIVE
    False
"""
from __future__ import annotations

ACTIVE = False
