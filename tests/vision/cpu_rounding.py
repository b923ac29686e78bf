"""Comparing torchvision outputs whose float32 rounding depends on the CPU (grid sampling, blurs) on any CPU.

torchvision builds its sampling grid with a float32 batched matrix product (`base_grid.bmm(theta)`). torch runs
that product through its BLAS, and the BLAS kernel depends on the CPU: on an Intel AVX-512 machine MKL's kernel
rounds a few grid coordinates differently (one float32 ulp) from the AMD/OpenBLAS path ember's arithmetic agrees
with. A coordinate that moves by one ulp (about 4e-6 pixels at coordinate 32) moves a bilinear value by at most
that much times the pixel step, and flips a nearest-neighbour or uint8-rounded pixel whose source lies exactly on
a rounding boundary. So torchvision itself gives slightly different pixels on different machines. The same
holds for uint8 blurs: torch's float32 convolution sums in a CPU-dependent order (oneDNN's AVX-512 or AVX2
kernel), so a value within an ulp of .5 rounds to a different integer.

What is checked instead of bit equality:
- at least 99% of the elements agree to 1e-4 of the value range (floats; a coordinate error of 1e-4 pixels at
  the steepest step) or exactly (integers): a wrong interpolation weight, offset, fill or matrix moves far more
  than 1% of the pixels of these smooth test images;
- the rest may differ by a whole step: a nearest pixel, a rounded uint8 value, or a pixel on the image's border
  (inside for one grid, outside and filled for the other) flips when its source point moves by one ulp.
"""
from __future__ import annotations

import numpy as np

AGREEING_FRACTION = 0.99


def assert_same_up_to_cpu_rounding(got: np.ndarray, expected: np.ndarray, what: str = "") -> None:
    """Fail unless `got` is torchvision's `expected` up to CPU-dependent float32 rounding (grids, convolution sums).

    Example: assert_same_up_to_cpu_rounding(F.rotate(x, 30).numpy(), TF.rotate(t, 30).numpy(), "rotate 30")
    """
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape and got.dtype == expected.dtype, (what, got.shape, expected.shape, got.dtype)
    if got.dtype.kind == "f":
        scale = max(1.0, float(np.nanmax(np.abs(expected))) if expected.size else 1.0)
        agreeing = np.isclose(got, expected, atol=1e-4 * scale, rtol=0, equal_nan=True)
    else:
        agreeing = got == expected
    fraction = float(agreeing.mean()) if agreeing.size else 1.0
    assert fraction >= AGREEING_FRACTION, (
        f"{what}: only {fraction:.2%} of {got.size} elements agree with torchvision "
        f"(grid rounding explains at most {1 - AGREEING_FRACTION:.0%})")
