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
    import numpy as np

    import ember

    tensors = [v for k, v in namespace.items() if not k.startswith("__") and isinstance(v, ember.Tensor)]
    assert tensors, "the block made no tensors"
    for t in tensors:  # a block whose math went wrong leaves NaN/inf behind
        assert np.isfinite(t.detach().numpy()).all()


def test_readme_has_examples() -> None:
    assert len(BLOCKS) >= 2
