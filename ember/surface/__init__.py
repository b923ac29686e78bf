"""More of PyTorch's surface, in families: constants and settings, top-level functions written in ember ops,
in-place variants, and the ``torch.<nn function>`` spellings. ``ember/_torch_names.py`` re-exports them.

Example:
    >>> import ember as torch
    >>> torch.tensor_split(torch.arange(7), 3)[0].tolist(), torch.pi > 3
    ([0, 1, 2], True)
"""
