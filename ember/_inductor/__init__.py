"""``torch._inductor``: only ``config`` exists, so programs that tune Inductor (``coordinate_descent_tuning``,
``triton.cudagraphs``...) run; ember's code generator reads none of it (ember.compile has no Inductor).

Example:
    >>> import ember
    >>> ember._inductor.config.coordinate_descent_tuning = True
"""
from ember._inductor import config  # noqa: F401
