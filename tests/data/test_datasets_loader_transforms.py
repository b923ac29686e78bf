"""ember.data: datasets, samplers, collation, the threaded DataLoader, transforms and MNIST.

References: torch.utils.data (collation, batching, split sizes), NumPy (transforms), and the
published MNIST files in ../shared/data (checksums, label counts).
"""
from __future__ import annotations

import collections
import gzip
import hashlib
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.data import (
    BatchSampler, ConcatDataset, DataLoader, Dataset, IterableDataset, RandomSampler, SequentialSampler, Subset,
    SubsetRandomSampler, TensorDataset, default_collate, get_worker_info, random_split, transforms as T,
)
from ember.data.datasets import MNIST, FashionMNIST, load_carried_mnist, mnist as mnist_module

torch = pytest.importorskip("torch")
import torch.utils.data as tud  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
needs_mnist = pytest.mark.skipif(not (SHARED / "mnist" / "train-images-idx3-ubyte.gz").is_file(),
                                 reason="../shared/data/mnist is absent")
needs_fashion = pytest.mark.skipif(not (SHARED / "fashion-mnist" / "train-images-idx3-ubyte.gz").is_file(),
                                   reason="../shared/data/fashion-mnist is absent")


def to_np(x):
    return np.asarray(x.detach().__array__()) if hasattr(x, "detach") else np.asarray(x)


# ---- datasets -------------------------------------------------------------------------------------
def test_tensor_dataset_indexing_and_errors(rng):
    x, y = rng.standard_normal((6, 3)).astype(np.float32), np.arange(6)
    ds = TensorDataset(ember.tensor(x), y)
    assert len(ds) == 6
    xi, yi = ds[4]
    np.testing.assert_array_equal(to_np(xi), x[4])
    assert int(yi) == 4
    bx, by = ds.get_batch(np.array([5, 0, 2]))
    np.testing.assert_array_equal(to_np(bx), x[[5, 0, 2]])
    np.testing.assert_array_equal(to_np(by), [5, 0, 2])
    with pytest.raises(ValueError, match="same size in dim 0"):
        TensorDataset(ember.zeros(3, 2), ember.zeros(4))


def test_subset_concat_match_torch():
    a, b = TensorDataset(ember.arange(5)), TensorDataset(ember.arange(10, 17))
    cat = a + b
    ref = tud.ConcatDataset([tud.TensorDataset(torch.arange(5)), tud.TensorDataset(torch.arange(10, 17))])
    assert isinstance(cat, ConcatDataset) and len(cat) == len(ref)
    for i in [0, 4, 5, 11, -1, -12]:
        assert int(cat[i][0]) == int(ref[i][0])
    sub = Subset(cat, [11, 0, 6])
    assert [int(sub[i][0]) for i in range(3)] == [16, 0, 11]
    np.testing.assert_array_equal(to_np(Subset(a, [4, 1]).get_batch(np.array([1, 0]))[0]), [1, 4])


@pytest.mark.filterwarnings("ignore:Length of split")
@pytest.mark.parametrize("lengths", [[3, 7], [0.3, 0.7], [0.33, 0.33, 0.34], [0.5, 0.5, 0.0]])
def test_random_split_sizes_match_torch_and_partition(lengths):
    ds = TensorDataset(ember.arange(10))
    parts = random_split(ds, lengths, generator=ember.Generator().manual_seed(1))
    ref = tud.random_split(range(10), lengths, generator=torch.Generator().manual_seed(1))
    assert [len(p) for p in parts] == [len(r) for r in ref]
    seen = sorted(int(p[i][0]) for p in parts for i in range(len(p)))
    assert seen == list(range(10))
    again = random_split(ds, lengths, generator=ember.Generator().manual_seed(1))
    assert [p.indices for p in parts] == [p.indices for p in again]
    with pytest.raises(ValueError, match="sum of input lengths"):
        random_split(ds, [3, 3])


# ---- samplers --------------------------------------------------------------------------------------
@pytest.mark.parametrize("drop_last", [False, True])
def test_batch_sampler_matches_torch(drop_last):
    ours = BatchSampler(SequentialSampler(range(10)), 3, drop_last)
    ref = tud.BatchSampler(tud.SequentialSampler(range(10)), 3, drop_last)
    assert list(ours) == list(ref) and len(ours) == len(ref)


def test_random_samplers_are_permutations_and_seeded():
    perm = list(RandomSampler(range(50), generator=ember.Generator().manual_seed(3)))
    assert sorted(perm) == list(range(50)) and perm != list(range(50))
    assert perm == list(RandomSampler(range(50), generator=ember.Generator().manual_seed(3)))
    assert perm != list(RandomSampler(range(50), generator=ember.Generator().manual_seed(4)))
    drawn = list(RandomSampler(range(5), replacement=True, num_samples=40, generator=ember.Generator()))
    assert len(drawn) == 40 and set(drawn) <= set(range(5))
    longer = list(RandomSampler(range(4), num_samples=10, generator=ember.Generator()))
    assert len(longer) == 10 and sorted(longer[:4]) == [0, 1, 2, 3]
    sub = list(SubsetRandomSampler([7, 8, 9], generator=ember.Generator().manual_seed(0)))
    assert sorted(sub) == [7, 8, 9]
    ember.manual_seed(5)
    first = list(RandomSampler(range(20)))
    ember.manual_seed(5)
    assert list(RandomSampler(range(20))) == first  # no generator: the default generator decides


# ---- collation --------------------------------------------------------------------------------------
def _same(ours, ref):
    if isinstance(ref, torch.Tensor):
        assert isinstance(ours, ember.Tensor), type(ours)
        assert str(ours.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
        np.testing.assert_array_equal(to_np(ours), ref.numpy())
    elif isinstance(ref, dict):
        assert type(ours) is type(ref) and list(ours) == list(ref)
        for k in ref:
            _same(ours[k], ref[k])
    elif isinstance(ref, (list, tuple)):
        assert type(ours).__name__ == type(ref).__name__ and len(ours) == len(ref)
        for o, r in zip(ours, ref):
            _same(o, r)
    else:
        assert ours == ref


def test_default_collate_matches_torch(rng):
    point = collections.namedtuple("Point", "x y")
    arrays = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(4)]
    cases = [
        [(arrays[i], i) for i in range(4)],
        [{"a": float(i), "b": [i, i + 1], "name": f"s{i}"} for i in range(3)],
        [point(np.int64(i), 2.5 * i) for i in range(3)],
        [(True,), (False,)],
        [np.arange(3, dtype=np.int16), np.arange(3, 6, dtype=np.int16)],
    ]
    for batch in cases:
        _same(default_collate(batch), tud.default_collate(batch))
    tensors = [ember.tensor(a) for a in arrays]
    _same(default_collate(tensors), tud.default_collate([torch.from_numpy(a) for a in arrays]))
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([ember.zeros(2), ember.zeros(3)])
    with pytest.raises(TypeError, match="collate_fn"):
        default_collate([object(), object()])


# ---- DataLoader ------------------------------------------------------------------------------------
def _flat(loader):
    return [[to_np(t).tolist() for t in batch] for batch in loader]


@pytest.mark.parametrize("drop_last", [False, True])
def test_loader_batches_match_torch(drop_last, rng):
    x = rng.standard_normal((11, 2)).astype(np.float32)
    y = np.arange(11)
    ours = DataLoader(TensorDataset(x, y), batch_size=4, drop_last=drop_last)
    ref = tud.DataLoader(tud.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)), batch_size=4,
                         drop_last=drop_last)
    assert len(ours) == len(ref)
    assert _flat(ours) == [[t.numpy().tolist() for t in b] for b in ref]


class Squares(Dataset):
    """A plain map-style dataset (no get_batch), optionally slow."""

    def __init__(self, n, delay=0.0):
        self.n, self.delay = n, delay

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.delay:
            time.sleep(self.delay)
        return np.float32(i), i * i


def test_shuffle_generator_is_deterministic_and_workers_keep_order():
    ds = Squares(37)
    runs = []
    for workers in (0, 1, 2, 4):
        loader = DataLoader(ds, batch_size=5, shuffle=True, num_workers=workers,
                            generator=ember.Generator().manual_seed(7))
        runs.append(_flat(loader))
    assert all(r == runs[0] for r in runs)
    flat = sorted(v for batch in runs[0] for v in batch[1])
    assert flat == [i * i for i in range(37)]
    other = _flat(DataLoader(ds, batch_size=5, shuffle=True, generator=ember.Generator().manual_seed(8)))
    assert other != runs[0]


def test_random_transforms_identical_across_worker_counts(rng):
    images = rng.integers(0, 256, (24, 8, 8), dtype=np.uint8)
    ds = MNIST.from_arrays(images, np.arange(24) % 10,
                           transform=T.Compose([T.ToTensor(), T.RandomCrop(8, padding=2), T.RandomHorizontalFlip()]))
    results = []
    for workers in (1, 2, 3):
        ember.manual_seed(11)
        results.append(_flat(DataLoader(ds, batch_size=4, shuffle=True, num_workers=workers)))
    assert results[0] == results[1] == results[2]
    # Without workers the transforms draw from the default generator (as PyTorch's): repeatable under a seed.
    serial = []
    for _ in range(2):
        ember.manual_seed(11)
        serial.append(_flat(DataLoader(ds, batch_size=4, shuffle=True)))
    assert serial[0] == serial[1]
    # A Lambda makes the pipeline per-sample (not batchable): the per-batch streams still decide.
    per_item = MNIST.from_arrays(images, np.arange(24) % 10, transform=T.Compose(
        [T.ToTensor(), T.RandomCrop(8, padding=2), T.RandomHorizontalFlip(), T.Lambda(lambda t: t)]))
    assert not per_item.transform.batchable
    plain = []
    for workers in (1, 2):
        ember.manual_seed(11)
        plain.append(_flat(DataLoader(per_item, batch_size=4, num_workers=workers)))
    assert plain[0] == plain[1]
    ember.manual_seed(12)
    assert _flat(DataLoader(per_item, batch_size=4, num_workers=1)) != plain[0]  # the augmentation is random


def test_worker_errors_reraise_with_traceback():
    class Broken(Squares):
        def __getitem__(self, i):
            if i == 13:
                raise ValueError("sample 13 is corrupt")
            return super().__getitem__(i)

    for workers in (0, 2):
        with pytest.raises(ValueError, match="sample 13 is corrupt") as info:
            for _ in DataLoader(Broken(20), batch_size=4, num_workers=workers):
                pass
        if workers:
            message = str(info.value)
            assert "DataLoader worker process" in message and "Traceback" in message and "__getitem__" in message


def _loader_threads():
    return [t for t in threading.enumerate() if t.name.startswith("ember-dataloader")]


def test_break_and_exceptions_shut_down_threads():
    before = len(_loader_threads())
    for _ in range(3):
        for i, _batch in enumerate(DataLoader(Squares(200, delay=0.001), batch_size=2, num_workers=3,
                                              multiprocessing_context="thread")):
            if i == 2:
                break
    with pytest.raises(KeyError):
        for _batch in DataLoader(Squares(50), batch_size=2, num_workers=2, multiprocessing_context="thread"):
            raise KeyError("user error in the loop body")
    deadline = time.time() + 5
    while len(_loader_threads()) > before and time.time() < deadline:
        time.sleep(0.02)
    assert len(_loader_threads()) == before


def test_prefetch_is_bounded_and_loading_overlaps():
    lock = threading.Lock()
    state = {"active": 0, "peak": 0, "fetched": 0}

    class Probe(Squares):
        def __getitem__(self, i):
            with lock:
                state["active"] += 1
                state["peak"] = max(state["peak"], state["active"])
                state["fetched"] += 1
            time.sleep(0.002)
            with lock:
                state["active"] -= 1
            return super().__getitem__(i)

    loader = DataLoader(Probe(400), batch_size=1, num_workers=2, prefetch_factor=3, multiprocessing_context="thread")
    iterator = iter(loader)
    next(iterator)
    time.sleep(0.2)  # let the threads run ahead as far as they may
    assert state["fetched"] <= 1 + 2 * 3
    assert state["peak"] == 2  # two threads really loaded at the same time
    del iterator


def test_iterable_dataset_workers_and_worker_info():
    class Stream(IterableDataset):
        def __iter__(self):
            info = get_worker_info()
            for i in range(10):
                yield i, (info.id if info else -1)

    serial = _flat(DataLoader(Stream(), batch_size=3))
    # threads read one stream with one reader (processes follow torch: see tests/data/test_dataloader_processes.py)
    threaded = _flat(DataLoader(Stream(), batch_size=3, num_workers=2, multiprocessing_context="thread"))
    assert [b[0] for b in serial] == [b[0] for b in threaded] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert serial[0][1] == [-1] * 3 and threaded[0][1] == [0] * 3
    with pytest.raises(ValueError, match="shuffle"):
        DataLoader(Stream(), shuffle=True)


def test_loader_options():
    ds = Squares(10)
    by_sampler = DataLoader(ds, batch_sampler=[[3, 1], [0]])
    assert _flat(by_sampler) == [[[3.0, 1.0], [9, 1]], [[0.0], [0]]]
    assert len(by_sampler) == 2
    unbatched = list(DataLoader(ds, batch_size=None, sampler=[2, 5]))
    assert [int(b[1]) for b in unbatched] == [4, 25]
    custom = list(DataLoader(ds, batch_size=4, collate_fn=lambda b: len(b)))
    assert custom == [4, 4, 2]
    ids = []
    list(DataLoader(ds, batch_size=5, num_workers=2, worker_init_fn=ids.append, multiprocessing_context="thread"))
    assert sorted(ids) == [0, 1]
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(ds, batch_sampler=[[0]], batch_size=2)
    with pytest.raises(ValueError, match="prefetch_factor"):
        DataLoader(ds, prefetch_factor=2)


def test_pin_memory_hook_called_only_when_requested():
    from ember.data import dataloader, set_pin_memory_hook

    previous = dataloader._PIN_MEMORY_HOOK  # ember.cuda installs its own at import: put it back afterwards
    calls = []
    set_pin_memory_hook(lambda batch, device: calls.append(device) or batch)
    try:
        assert len(list(DataLoader(Squares(4), batch_size=2, pin_memory=True, num_workers=1))) == 2
        assert calls == ["", ""]
        list(DataLoader(Squares(4), batch_size=2))
        assert len(calls) == 2
    finally:
        set_pin_memory_hook(None)
    try:
        assert len(list(DataLoader(Squares(4), batch_size=2, pin_memory=True))) == 2  # no hook: a no-op
    finally:
        set_pin_memory_hook(previous)


def test_utils_data_alias():
    from ember.utils.data import DataLoader as D, Dataset as DS, TensorDataset as TD

    assert D is DataLoader and DS is Dataset and TD is TensorDataset


# ---- transforms ---------------------------------------------------------------------------------------
def test_to_tensor_and_normalize_match_numpy(rng):
    gray = rng.integers(0, 256, (5, 7), dtype=np.uint8)
    color = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    np.testing.assert_array_equal(to_np(T.ToTensor()(gray)), (gray.astype(np.float64) / 255).astype(np.float32)[None])
    out = T.ToTensor()(color)
    assert tuple(out.shape) == (3, 5, 7) and out.dtype is ember.float32
    np.testing.assert_allclose(to_np(out), color.transpose(2, 0, 1) / 255.0, rtol=1e-6)
    ref = torch.from_numpy(color.transpose(2, 0, 1).copy()).float().div(255)  # torchvision's formula
    np.testing.assert_array_equal(to_np(out), ref.numpy())
    mean, std = (0.1, 0.2, 0.3), (0.5, 0.25, 2.0)
    normed = T.Normalize(mean, std)(out)
    expect = (ref - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]
    np.testing.assert_allclose(to_np(normed), expect.numpy(), rtol=1e-6, atol=1e-7)
    both = T.Compose([T.ToTensor(), T.Normalize(mean, std)])
    batch = np.stack([color, color[::-1]])
    assert both.batchable
    np.testing.assert_allclose(to_np(both.apply_batch(batch))[1], to_np(both(color[::-1])), rtol=1e-6)
    with pytest.raises(ValueError, match="ToTensor first"):
        T.Normalize((0.5,), (0.5,))(ember.zeros(3))


def test_random_crop_and_flip(rng):
    image = ember.tensor(rng.standard_normal((2, 6, 6)).astype(np.float32))
    padded = np.pad(to_np(image), ((0, 0), (2, 2), (2, 2)))
    crop = T.RandomCrop(6, padding=2, generator=ember.Generator().manual_seed(0))
    windows = {(i, j): padded[:, i:i + 6, j:j + 6] for i in range(5) for j in range(5)}
    for _ in range(5):
        out = to_np(crop(image))
        assert any(np.array_equal(out, w) for w in windows.values())
    a = to_np(T.RandomCrop(4, generator=ember.Generator().manual_seed(3))(image))
    b = to_np(T.RandomCrop(4, generator=ember.Generator().manual_seed(3))(image))
    np.testing.assert_array_equal(a, b)
    batch = to_np(T.RandomCrop(6, padding=2, generator=ember.Generator().manual_seed(1)).apply_batch(
        ember.stack([image, image, image])))
    assert batch.shape == (3, 2, 6, 6) and all(any(np.array_equal(b, w) for w in windows.values()) for b in batch)
    np.testing.assert_array_equal(to_np(T.RandomHorizontalFlip(p=1.0)(image)), to_np(image)[..., ::-1])
    np.testing.assert_array_equal(to_np(T.RandomHorizontalFlip(p=0.0)(image)), to_np(image))
    flipped = to_np(T.RandomHorizontalFlip(p=1.0).apply_batch(ember.stack([image, image])))
    np.testing.assert_array_equal(flipped[1], to_np(image)[..., ::-1])
    assert T.Lambda(lambda v: v * 2)(3) == 6
    with pytest.raises(ValueError, match="larger than the padded input"):
        T.RandomCrop(10)(image)


# ---- MNIST ---------------------------------------------------------------------------------------------
def test_carried_subset_is_balanced_and_offline():
    train, test = MNIST.carried(train=True), MNIST.carried(train=False)
    assert len(train) == 12000 and len(test) == 2000
    np.testing.assert_array_equal(np.bincount(train.arrays()[1]), [1200] * 10)
    np.testing.assert_array_equal(np.bincount(test.arrays()[1]), [200] * 10)
    image, label = train[0]
    assert image.shape == (28, 28) and image.dtype == np.uint8 and isinstance(label, int)
    assert train.data.dtype is ember.uint8 and train.targets.dtype is ember.int64
    assert mnist_module.CARRIED_MNIST.stat().st_size < 4_000_000
    x, y = train.to_tensors(0.1307, 0.3081)
    assert tuple(x.shape) == (12000, 1, 28, 28) and abs(float(x.mean())) < 0.1


def test_mnist_batch_path_equals_item_path():
    transform = T.Compose([T.ToTensor(), T.Normalize((0.1307,), (0.3081,))])
    ds = MNIST.carried(train=False, transform=transform)
    idx = [5, 17, 3, 1999]
    fast_x, fast_y = ds.get_batch(np.array(idx))
    slow_x, slow_y = default_collate([ds[i] for i in idx])
    np.testing.assert_array_equal(to_np(fast_x), to_np(slow_x))
    np.testing.assert_array_equal(to_np(fast_y), to_np(slow_y))
    loader_x, _ = next(iter(DataLoader(ds, batch_size=4, sampler=idx)))
    np.testing.assert_array_equal(to_np(loader_x), to_np(slow_x))


def _independent_idx(path):
    raw = gzip.open(path).read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * k:8 + 4 * k], "big") for k in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


@needs_mnist
def test_full_mnist_from_shared_data():
    root = SHARED / "mnist"
    train, test = MNIST(root, train=True), MNIST(root, train=False)
    assert len(train) == 60000 and len(test) == 10000
    # The published label counts of the MNIST training set.
    np.testing.assert_array_equal(np.bincount(train.arrays()[1]),
                                  [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949])
    np.testing.assert_array_equal(test.arrays()[0], _independent_idx(root / "t10k-images-idx3-ubyte.gz"))
    # The carried subset is made of real MNIST training images with their labels.
    images, labels = train.arrays()
    lookup = {hashlib.sha1(images[i].tobytes()).hexdigest(): labels[i] for i in range(len(images))}
    c_images, c_labels = load_carried_mnist(train=True)
    for k in range(0, 12000, 997):
        assert lookup[hashlib.sha1(c_images[k].tobytes()).hexdigest()] == c_labels[k]


@needs_fashion
def test_fashion_mnist_from_shared_data():
    ds = FashionMNIST(SHARED, train=False)  # finds root/fashion-mnist
    assert len(ds) == 10000 and np.all(np.bincount(ds.arrays()[1]) == 1000)
    assert ds.classes[9] == "Ankle boot"


@needs_mnist
@pytest.mark.parametrize("layout", ["flat", "mnist", "MNIST/raw"])
def test_mnist_root_layouts(tmp_path, layout):
    folder = tmp_path if layout == "flat" else tmp_path / layout
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        (folder / name).symlink_to((SHARED / "mnist" / name).resolve())
    assert len(MNIST(tmp_path, train=False)) == 10000


@needs_mnist
def test_mnist_checksum_mismatch_and_missing_files(tmp_path):
    shutil.copy(SHARED / "mnist" / "t10k-labels-idx1-ubyte.gz", tmp_path)
    data = bytearray((SHARED / "mnist" / "t10k-images-idx3-ubyte.gz").read_bytes())
    data[-10] ^= 0xFF
    (tmp_path / "t10k-images-idx3-ubyte.gz").write_bytes(bytes(data))
    with pytest.raises(RuntimeError, match="checksum mismatch"):
        MNIST(tmp_path, train=False)
    with pytest.raises(RuntimeError, match="train-images-idx3-ubyte.gz"):
        MNIST(tmp_path, train=True)


def test_download_offline_fails_clearly(tmp_path, monkeypatch):
    import urllib.error

    def offline(url, timeout=30.0):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(mnist_module, "_fetch_url", offline)
    with pytest.raises(RuntimeError) as info:
        MNIST(tmp_path, train=True, download=True)
    message = str(info.value)
    assert "train-images-idx3-ubyte.gz" in message and str(tmp_path / "MNIST" / "raw") in message
    assert "no network" in message


def test_download_writes_verified_files(tmp_path, monkeypatch, rng):
    images = rng.integers(0, 256, (3, 28, 28), dtype=np.uint8)

    def idx(array):
        header = bytes([0, 0, 8, array.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in array.shape)
        return gzip.compress(header + array.tobytes())

    files = {"train-images-idx3-ubyte.gz": idx(images), "train-labels-idx1-ubyte.gz": idx(np.arange(3, dtype=np.uint8)),
             "t10k-images-idx3-ubyte.gz": idx(images[:1]), "t10k-labels-idx1-ubyte.gz": idx(np.zeros(1, np.uint8))}

    class Fake(MNIST):
        mirrors = ("http://bad.example/", "http://good.example/")
        resources = {name: hashlib.md5(payload).hexdigest() for name, payload in files.items()}

    def fetch(url, timeout=30.0):
        if url.startswith("http://bad"):
            raise OSError("mirror down")
        return files[url.rsplit("/", 1)[1]]

    monkeypatch.setattr(mnist_module, "_fetch_url", fetch)
    ds = Fake(tmp_path, train=True, download=True)
    np.testing.assert_array_equal(ds.arrays()[0], images)
    assert (tmp_path / "Fake" / "raw" / "train-images-idx3-ubyte.gz").is_file()
