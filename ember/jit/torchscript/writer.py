"""``TorchScriptModule.save``: write a loaded TorchScript module back as an archive ``torch.jit.load`` reads."""
from __future__ import annotations

from typing import Any


def save(module: Any, f: Any, extra_files: dict | None = None) -> None:
    raise NotImplementedError("saving a TorchScript module loaded by ember is not written yet")
