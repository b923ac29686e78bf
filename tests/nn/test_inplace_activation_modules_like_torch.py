"""Activation and dropout modules built with ``inplace=True`` write into their input, as PyTorch's do. A residual
block whose ``nn.Sequential`` starts with ``nn.ReLU(True)`` therefore computes ``relu(x) + block(x)`` in both
libraries (pytorch-vqvae's ResBlock; ember computed ``x + block(x)`` before, so its VQ-VAE's encoder output differed
from torch's on the same weights). Values, gradients, identities and errors compared with torch 2.13."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
LIBS = {"ember": ember, "torch": torch}

MODULES = {
    "ReLU": lambda nn: nn.ReLU(True), "ReLU6": lambda nn: nn.ReLU6(True), "SELU": lambda nn: nn.SELU(True),
    "SiLU": lambda nn: nn.SiLU(True), "Mish": lambda nn: nn.Mish(True), "Hardswish": lambda nn: nn.Hardswish(True),
    "Hardsigmoid": lambda nn: nn.Hardsigmoid(True), "LeakyReLU": lambda nn: nn.LeakyReLU(0.2, True),
    "ELU": lambda nn: nn.ELU(0.5, True), "CELU": lambda nn: nn.CELU(0.7, True),
    "Hardtanh": lambda nn: nn.Hardtanh(-0.5, 0.5, True), "Threshold": lambda nn: nn.Threshold(0.1, -2.0, True),
    "Dropout eval": lambda nn: nn.Dropout(0.5, True).eval(), "Dropout2d eval": lambda nn: nn.Dropout2d(0.5, True).eval(),
}
DATA = np.linspace(-3.0, 3.0, 24).reshape(2, 3, 4)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_writes_into_its_input_as_torch(name):
    seen = {}
    for lib_name, lib in LIBS.items():
        x = lib.tensor(DATA.copy())
        y = MODULES[name](lib.nn)(x)
        seen[lib_name] = (y is x, x.numpy().copy(), y.numpy().copy())
    assert seen["ember"][0] == seen["torch"][0]
    np.testing.assert_allclose(seen["ember"][1], seen["torch"][1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(seen["ember"][2], seen["torch"][2], rtol=1e-12, atol=1e-12)


def _resblock(lib, act):
    nn = lib.nn
    lib.manual_seed(0)

    class ResBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = nn.Sequential(act(nn), nn.Linear(4, 4), act(nn), nn.Linear(4, 4))

        def forward(self, x):
            return x + self.block(x)

    return ResBlock().double()


@pytest.mark.parametrize("name", ["ReLU", "LeakyReLU", "ELU", "Hardtanh"])
def test_residual_block_with_leading_inplace_activation(name):
    results = {}
    for lib_name, lib in LIBS.items():
        block = _resblock(lib, MODULES[name])
        state = {k: v for k, v in _resblock(torch, MODULES[name]).state_dict().items()}
        block.load_state_dict({k: lib.tensor(v.numpy()) for k, v in state.items()})
        h = lib.tensor(DATA.reshape(6, 4).copy(), requires_grad=True)
        x = h * 1.0  # a non-leaf, as a layer's output
        out = block(x)
        out.sum().backward()
        results[lib_name] = (out.detach().numpy(), h.grad.numpy(), [p.grad.numpy() for p in block.parameters()])
    np.testing.assert_allclose(results["ember"][0], results["torch"][0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(results["ember"][1], results["torch"][1], rtol=1e-12, atol=1e-12)
    for e, t in zip(results["ember"][2], results["torch"][2]):
        np.testing.assert_allclose(e, t, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("lib_name", ["ember", "torch"])
def test_inplace_on_a_leaf_requiring_grad_refused(lib_name):
    lib = LIBS[lib_name]
    x = lib.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        lib.nn.ReLU(inplace=True)(x)


def test_out_of_place_default_keeps_input():
    x = ember.tensor([-1.0, 2.0])
    y = ember.nn.ReLU()(x)
    assert y is not x and x.tolist() == [-1.0, 2.0]


def test_relu6_is_a_hardtanh_as_torch():
    for lib in LIBS.values():
        m = lib.nn.ReLU6(inplace=True)
        assert isinstance(m, lib.nn.Hardtanh) and (m.min_val, m.max_val) == (0.0, 6.0)
        assert repr(m) == "ReLU6(inplace=True)" and repr(lib.nn.ReLU6()) == "ReLU6()"
        np.testing.assert_array_equal(lib.nn.ReLU6()(lib.tensor([-1.0, 3.0, 7.0])).numpy(), [0.0, 3.0, 6.0])
