"""``torch.signal``: window functions (``ember.signal.windows``)."""
from ember.signal import windows  # noqa: F401
