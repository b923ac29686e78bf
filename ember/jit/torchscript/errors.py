"""The error a TorchScript archive's code raises when ember will not (or cannot) run part of it.

Example:
    >>> str(TorchScriptError("code/__torch__.py", 7, "call to 'open'", "is not a known TorchScript builtin"))
    "code/__torch__.py, line 7: call to 'open': is not a known TorchScript builtin"
"""
from __future__ import annotations


class TorchScriptError(RuntimeError):
    """A construct in a TorchScript archive's code that ember's interpreter refuses; names the file and line."""

    def __init__(self, file: str, line: int | None, construct: str, problem: str) -> None:
        self.file, self.line, self.construct, self.problem = file, line, construct, problem
        place = f"{file}, line {line}" if line else file
        super().__init__(f"{place}: {construct}: {problem}")
