"""PyTorch's ``torch.ao``: quantization (``ember.ao.quantization``) and quantized modules (``ember.ao.nn``).

This package file imports nothing, so the serializer can load ``ember.ao.qtensor`` without the modules;
``import ember`` imports the subpackages. See docs/quantization.md.
"""
