"""PyTorch's ``torch.ao.nn``: fused (``intrinsic``), quantization-aware (``qat``) and quantized modules."""
from ember.ao.nn import intrinsic, qat, quantized  # noqa: F401
