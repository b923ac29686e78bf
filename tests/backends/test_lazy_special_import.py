"""float32 gelu/erf run ember's own erf (native kernel or NumPy table) and never import ``scipy.special``
(seconds on a loaded machine); other dtypes still take SciPy's function where it is installed."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("scipy")

_CODE = """
import sys
import numpy as np
import ember
x = ember.tensor(np.linspace(-4, 4, 257, dtype=np.float32))
ember.nn.functional.gelu(x)
ember.erf(x)
print('scipy.special' in sys.modules)
y = ember.erf(x.double())
print('scipy.special' in sys.modules)
from scipy.special import erf
print(bool(np.array_equal(y.numpy(), erf(np.linspace(-4, 4, 257, dtype=np.float32).astype(np.float64)))))
"""


def test_float32_erf_never_imports_scipy_special() -> None:
    env = dict(os.environ, EMBER_SPECIAL_FUNCTIONS="scipy")
    out = subprocess.run([sys.executable, "-c", _CODE], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True", "True"]
