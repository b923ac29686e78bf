"""``torch.__future__``: switches for behaviour PyTorch plans to make the default.

* ``set_overwrite_module_params_on_conversion(True)``: ``module.to(...)``/``.float()``/... give each parameter
  a new Parameter object instead of changing the old one's data (references held elsewhere, such as an
  optimizer's, keep the old tensor).
* ``set_swap_module_params_on_conversion(True)``: those conversions swap the converted tensor into the
  existing Parameter object with ``torch.utils.swap_tensors`` (its class, dict and data move; references
  stay valid). It takes precedence over overwriting, as in PyTorch.

Example:
    >>> set_swap_module_params_on_conversion(True); get_swap_module_params_on_conversion()
    True
    >>> set_swap_module_params_on_conversion(False)
"""
from __future__ import annotations

__all__ = ["set_overwrite_module_params_on_conversion", "get_overwrite_module_params_on_conversion",
           "set_swap_module_params_on_conversion", "get_swap_module_params_on_conversion"]

_overwrite_module_params_on_conversion = False
_swap_module_params_on_conversion = False


def set_overwrite_module_params_on_conversion(value: bool) -> None:
    global _overwrite_module_params_on_conversion
    _overwrite_module_params_on_conversion = bool(value)


def get_overwrite_module_params_on_conversion() -> bool:
    return _overwrite_module_params_on_conversion


def set_swap_module_params_on_conversion(value: bool) -> None:
    global _swap_module_params_on_conversion
    _swap_module_params_on_conversion = bool(value)


def get_swap_module_params_on_conversion() -> bool:
    return _swap_module_params_on_conversion
