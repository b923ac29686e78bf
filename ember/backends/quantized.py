"""``torch.backends.quantized``: the quantized engine switch (``torch.backends.quantized.engine = 'x86'``).

ember's quantized kernels (ember/ao) compute with PyTorch's x86/fbgemm arithmetic whatever the engine says; the
switch exists because tutorials and programs set it. Choosing 'qnnpack' or 'onednn' is accepted with a warning
that the results follow x86/fbgemm (docs/quantization.md).

Example:
    >>> import ember
    >>> ember.backends.quantized.engine
    'x86'
"""
from __future__ import annotations

import sys
import types
import warnings

SUPPORTED_ENGINES = ["qnnpack", "onednn", "x86", "fbgemm"]


class _QuantizedEngineModule(types.ModuleType):
    _engine = "x86"

    @property
    def engine(self) -> str:
        return self._engine

    @engine.setter
    def engine(self, value: str) -> None:
        if value not in SUPPORTED_ENGINES:
            raise RuntimeError(f"quantized engine {value!r} is not supported; supported engines: {SUPPORTED_ENGINES}")
        if value in ("qnnpack", "onednn"):
            warnings.warn(f"ember computes quantized ops with PyTorch's x86/fbgemm arithmetic; the {value!r} engine's "
                          "own rounding is not reproduced", stacklevel=2)
        type(self)._engine = value

    @property
    def supported_engines(self) -> list:
        return list(SUPPORTED_ENGINES)


sys.modules[__name__].__class__ = _QuantizedEngineModule
