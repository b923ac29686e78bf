"""The README's Python examples must run as written."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


MULTI_RANK = "# run: 2 ranks"


@pytest.mark.parametrize("index", [i for i, b in enumerate(BLOCKS) if MULTI_RANK not in b])
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


@pytest.mark.parametrize("index", [i for i, b in enumerate(BLOCKS) if MULTI_RANK in b])
def test_readme_multi_rank_block_runs_on_two_ranks(index: int, tmp_path: Path) -> None:
    from mpi_support import MPIEXEC, run_on_ranks

    if MPIEXEC is None:
        pytest.skip("mpi4py/mpiexec not installed")
    script = tmp_path / "block.py"
    script.write_text(BLOCKS[index] + "\nimport numpy as _np\nassert _np.isfinite(loss_t.numpy()).all()\n"
                      "print('block ok')\n")
    assert run_on_ranks([script]).count("block ok") == 2
