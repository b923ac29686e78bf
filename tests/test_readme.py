"""The README's Python examples must run as written."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs(index: int) -> None:
    namespace: dict = {}
    exec(compile(BLOCKS[index], f"README.md block {index}", "exec"), namespace)  # noqa: S102
    assert namespace, "the block defined nothing"


def test_readme_has_examples() -> None:
    assert len(BLOCKS) >= 2
