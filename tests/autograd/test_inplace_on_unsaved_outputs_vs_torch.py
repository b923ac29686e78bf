"""Changing an op's output in place before backward: allowed exactly where PyTorch allows it.

torchvision's ResNet feeds BatchNorm's output to ``ReLU(inplace=True)``; PyTorch's batch-norm backward
reads the input and the batch statistics, not the output, so that is legal. ember's multi-output records
saved every output, so the in-place ReLU made backward raise "modified by an inplace operation". The
class: every multi-output op whose backward does not read output 0 (batch/layer norm, max/min over a dim,
cummax/cummin, sort, max-pooling) must accept an in-place change of output 0, with torch's gradients; ops
whose backward does read their output (sigmoid, exp, softmax, tanh) must still refuse, as torch does.
"""
import numpy as np
import pytest
import torch

import ember

X = np.random.default_rng(0).standard_normal((2, 3, 4, 6))


def _programs(lib):
    F = lib.nn.functional
    return {
        "batch_norm_train": lambda x: F.batch_norm(x, None, None, training=True),
        "batch_norm_module": lambda x: lib.nn.BatchNorm2d(3).double()(x),
        "layer_norm": lambda x: F.layer_norm(x, (6,)),
        "group_norm": lambda x: F.group_norm(x, 3),
        "instance_norm": lambda x: F.instance_norm(x),
        "max_dim": lambda x: x.max(1)[0],
        "min_dim": lambda x: lib.min(x, dim=2).values,
        "max_dim_keepdim": lambda x: x.max(-1, keepdim=True)[0],
        "cummax": lambda x: lib.cummax(x, 3)[0],
        "cummin": lambda x: lib.cummin(x, 1).values,
        "sort": lambda x: lib.sort(x, dim=-1, descending=True)[0],
        "sort_values": lambda x: x.sort(1).values,
        "max_pool2d": lambda x: F.max_pool2d(x, 2),
        "max_pool2d_indices": lambda x: F.max_pool2d(x, 2, return_indices=True)[0],
        "max_pool1d": lambda x: F.max_pool1d(x.reshape(2, 3, 24), 3),
        "adaptive_max_pool2d": lambda x: F.adaptive_max_pool2d(x, (2, 3)),
    }


IN_PLACE = {
    "relu_": lambda y: y.relu_(),
    "add_": lambda y: y.add_(1.5),
    "mul_": lambda y: y.mul_(-2.0),
    "setitem": lambda y: y.__setitem__((0,), 0.25),
}


def _run(lib, name, change):
    x = lib.tensor(X.copy(), requires_grad=True)
    y = _programs(lib)[name](x)
    y = IN_PLACE[change](y) if change != "setitem" else (IN_PLACE[change](y), y)[1]
    (y * lib.arange(y.numel(), dtype=y.dtype).reshape(y.shape).cos()).sum().backward()
    return y.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize("change", sorted(IN_PLACE))
@pytest.mark.parametrize("name", sorted(_programs(torch)))
def test_in_place_change_of_an_unsaved_output_matches_torch(name, change):
    t_y, t_g = _run(torch, name, change)  # torch allows it: the test would be wrong otherwise
    e_y, e_g = _run(ember, name, change)
    np.testing.assert_allclose(e_y, t_y, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(e_g, t_g, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name", ["sigmoid", "exp", "tanh", "softmax"])
def test_ops_whose_backward_reads_the_output_still_refuse(name):
    for lib in (torch, ember):
        x = lib.tensor(X.copy(), requires_grad=True)
        y = lib.softmax(x, 1) if name == "softmax" else getattr(lib, name)(x)
        y.mul_(2.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_saved_result_of_an_unsaved_output_is_absent_and_indices_are_there():
    x = ember.tensor(X.copy(), requires_grad=True)
    values, indices = x.max(1)
    fn = values.grad_fn
    assert np.array_equal(fn._saved_result1.numpy(), indices.numpy())
    with pytest.raises(AttributeError, match="did not save its result 0"):
        fn._saved_result
