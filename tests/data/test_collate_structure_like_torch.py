"""``default_collate`` and the DataLoader give batches of torch's structure (found by captum, whose DataLoader
attribution checks ``type(batch) is list``): tuple samples collate into a list (ember's TensorDataset fast path
gave a tuple), lists stay lists, namedtuples and dicts keep their type, strings inside a sample come back as the
tuple torch's transposition makes (ember gave a list), numbers become int64/float64 tensors."""
from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

P = namedtuple("P", "x y")


def _structure(obj):
    """Types and values, nested, with tensors as (dtype name, values)."""
    if isinstance(obj, (ember.Tensor, torch.Tensor)):
        return ("tensor", str(obj.dtype).split(".")[-1], obj.tolist())
    if isinstance(obj, dict):
        return (type(obj).__name__, {k: _structure(v) for k, v in obj.items()})
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, [_structure(v) for v in obj])
    return obj


SAMPLES = [
    [(1, 2.5), (3, 4.5)],
    [P(1, "a"), P(2, "b")],
    [[1, "a", (2.0, "q")], [3, "b", (4.0, "r")]],
    [{"t": "a", "v": [1, 2]}, {"t": "b", "v": [3, 4]}],
    ["a", "b"],
    [(True, np.float32(1.5), np.arange(2)), (False, np.float32(2.5), np.arange(2))],
]


@pytest.mark.parametrize("k", range(len(SAMPLES)))
def test_default_collate_structure_equals_torch(k):
    got = ember.utils.data.default_collate(SAMPLES[k])
    ref = torch.utils.data.default_collate(SAMPLES[k])
    assert _structure(got) == _structure(ref)


def _loader_batches(lib, dataset_fn, **kw):
    return [_structure(b) for b in lib.utils.data.DataLoader(dataset_fn(lib), **kw)]


def _tensor_dataset(lib):
    return lib.utils.data.TensorDataset(lib.arange(10.0).reshape(5, 2), lib.arange(5))


def _tuple_dataset(lib):
    class D(lib.utils.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return lib.ones(2) * i, {"id": i, "name": f"s{i}"}, f"t{i}"

    return D()


@pytest.mark.parametrize("make", [_tensor_dataset, _tuple_dataset])
@pytest.mark.parametrize("shuffle", [False, True])
def test_dataloader_batches_equal_torch(make, shuffle):
    kw = dict(batch_size=2, shuffle=shuffle)
    ember.manual_seed(3)
    torch.manual_seed(3)
    assert _loader_batches(ember, make, **kw) == _loader_batches(torch, make, **kw)
