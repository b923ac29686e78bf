"""Custom operators (PyTorch's ``torch.library`` and ``torch.ops``): schemas, the registry of operators defined
in Python, and the ``torch.ops`` namespaces (including ``aten``). The public surface is :mod:`ember.library`.
"""
