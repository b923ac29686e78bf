"""ember's CPU random numbers are PyTorch's: the same seed and calls give bit-identical tensors.

References are real torch 2.13 calls made here; the Fisher-Yates shortcut is also checked against a plain
sequential shuffle.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.mt_random.permutation import fisher_yates

torch = pytest.importorskip("torch")

SEEDS = [0, 7, 2 ** 32 + 5, 2 ** 63 + 11, -3]


def _both(seed: int, call) -> tuple[np.ndarray, np.ndarray]:
    torch.manual_seed(seed)
    ember.manual_seed(seed)
    return np.asarray(call(torch)), np.asarray(call(ember))


def _equal(t: np.ndarray, e: np.ndarray) -> None:
    assert t.shape == e.shape and t.dtype == e.dtype, (t.shape, e.shape, t.dtype, e.dtype)
    np.testing.assert_array_equal(e, t)


def _f(x):
    return x.float().numpy() if x.dtype in (torch.float16, torch.bfloat16, ember.float16, ember.bfloat16) else x.numpy()


CALLS = {
    "rand": lambda T: T.rand(3, 5).numpy(),
    "rand_f64": lambda T: T.rand(37, dtype=T.float64).numpy(),
    "rand_f16": lambda T: _f(T.rand(40, dtype=T.float16)),
    "rand_bf16": lambda T: _f(T.rand(40, dtype=T.bfloat16)),
    "uniform_bounds": lambda T: T.empty(1000).uniform_(-0.0883883, 0.0883883).numpy(),
    "uniform_bounds_f64": lambda T: T.empty(999, dtype=T.float64).uniform_(-2.5, 0.1).numpy(),
    "uniform_bounds_bf16": lambda T: _f(T.empty(999, dtype=T.bfloat16).uniform_(-0.3, 0.7)),
    "randn_small": lambda T: T.randn(5).numpy(),
    "randn_15_16_17": lambda T: np.concatenate([T.randn(n).numpy() for n in (15, 16, 17)]),
    "randn_large": lambda T: T.randn(100003).numpy(),
    "randn_f64": lambda T: T.randn(7, dtype=T.float64).numpy(),
    "randn_f16": lambda T: _f(T.randn(50, dtype=T.float16)),
    "normal_std": lambda T: T.empty(300).normal_(0.5, 0.02).numpy(),
    "normal_small_std": lambda T: T.empty(6).normal_(-1.0, 3.0).numpy(),
    "randn_cache_between_calls": lambda T: np.concatenate([T.randn(3, dtype=T.float64).numpy(),
                                                          T.randn(2, dtype=T.float64).numpy()]),
    "randint": lambda T: T.randint(-5, 17, (300,)).numpy(),
    "randint_wide": lambda T: T.randint(0, 2 ** 45, (30,)).numpy(),
    "randint_int32": lambda T: T.randint(3, 9, (20,), dtype=T.int32).numpy(),
    "random_int64": lambda T: T.empty(20, dtype=T.int64).random_().numpy(),
    "random_uint8": lambda T: T.empty(20, dtype=T.uint8).random_().numpy(),
    "random_to": lambda T: T.empty(20).random_(10).numpy(),
    "random_int64_extremes": lambda T: T.empty(20, dtype=T.int64).random_(-2 ** 63, 2 ** 63 - 1).numpy(),
    "randperm": lambda T: np.concatenate([T.randperm(n).numpy() for n in (0, 1, 2, 10, 1000)]),
    "bernoulli_p": lambda T: T.empty(500).bernoulli_(0.3).numpy(),
    "bernoulli_tensor": lambda T: T.bernoulli(T.linspace(0, 1, 300)).numpy(),
    "bernoulli_tensor_f64": lambda T: T.bernoulli(T.linspace(0, 1, 300, dtype=T.float64)).numpy(),
    "dropout": lambda T: T.nn.functional.dropout(T.ones(64, 8), 0.25).numpy(),
    "dropout2d": lambda T: T.nn.functional.dropout2d(T.ones(4, 6, 2, 2), 0.5).numpy(),
    "exponential_f32": lambda T: T.empty(200).exponential_(2.0).numpy(),
    "cauchy": lambda T: T.empty(50, dtype=T.float64).cauchy_(1.0, 2.0).numpy(),
    "geometric": lambda T: T.empty(50, dtype=T.float64).geometric_(0.3).numpy(),
    "multinomial_one": lambda T: T.multinomial(T.tensor([[0.1, 0.5, 0.4], [0.0, 1.0, 3.0]]), 1).numpy(),
    "multinomial_without": lambda T: T.multinomial(T.tensor([0.1, 0.5, 0.4, 0.2, 0.0]), 3).numpy(),
    "multinomial_with": lambda T: T.multinomial(T.tensor([0.1, 0.5, 0.0, 0.4]), 20, replacement=True).numpy(),
    "randn_complex": lambda T: T.view_as_real(T.randn(20, dtype=T.complex64)).numpy(),
    "generator_object": lambda T: T.rand(5, generator=T.Generator().manual_seed(3)).numpy(),
    "then_default_stream": lambda T: (T.rand(5, generator=T.Generator().manual_seed(3)), T.rand(4))[1].numpy(),
}


@pytest.mark.parametrize("seed", SEEDS[:3])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_sampler_equals_torch(name: str, seed: int) -> None:
    t, e = _both(seed, CALLS[name])
    _equal(t, e)
    # the stream is left where torch leaves it: the next draw agrees too
    np.testing.assert_array_equal(ember.rand(3).numpy(), torch.rand(3).numpy())


@pytest.mark.parametrize("seed", SEEDS)
def test_seeds_wrap_and_truncate_as_torch(seed: int) -> None:
    t, e = _both(seed, lambda T: T.rand(4).numpy())
    _equal(t, e)
    assert ember.initial_seed() == torch.initial_seed()


FLOAT64_LARGE = {
    "randn": lambda T: T.randn(20011, dtype=T.float64).numpy(),
    "normal_mean_std": lambda T: T.empty(4000, dtype=T.float64).normal_(0.3, 2.5).numpy(),
    "exponential": lambda T: T.empty(20000, dtype=T.float64).exponential_(2.5).numpy(),
    "cauchy": lambda T: T.empty(20000, dtype=T.float64).cauchy_(0.3, 2.0).numpy(),
    "log_normal": lambda T: T.empty(20000, dtype=T.float64).log_normal_(0.2, 0.7).numpy(),
    "geometric": lambda T: T.empty(20000, dtype=T.float64).geometric_(0.3).numpy(),
    "normal_pairs": lambda T: np.concatenate([T.randn(9, dtype=T.float64).numpy() for _ in range(300)]),
}


@pytest.mark.parametrize("name", sorted(FLOAT64_LARGE))
def test_float64_samplers_equal_torch_bitwise(name: str) -> None:
    """float64 samplers call the C library's log/log1p/sin/cos/tan/exp as torch does (ember/mt_random/libm.py):
    NumPy's own float64 log/log1p/exp/tan differ from glibc's in 0.3-7% of values, so this fails without it."""
    t, e = _both(1, FLOAT64_LARGE[name])
    _equal(t, e)


def test_libm_helpers_equal_pythons_math_functions() -> None:
    import math

    from ember.mt_random import libm

    x = np.random.default_rng(0).random(3000)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-320, -1.0, 800.0])
    for name, arg in (("log", 1 - x), ("log1p", -x), ("sin", 7 * x), ("cos", 7 * x), ("tan", 3 * x - 1.5),
                      ("exp", 40 * x - 20)):
        want = np.array([getattr(math, name)(v) for v in arg])
        np.testing.assert_array_equal(getattr(libm, name)(arg), want, err_msg=name)
        with np.errstate(all="ignore"):  # C's special values where Python's math raises
            np.testing.assert_array_equal(getattr(libm, name)(special), getattr(np, name)(special), err_msg=name)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_large_dropout_masks_equal_torch_on_this_cpu(dtype: str) -> None:
    """torch 2.13's pip build draws bernoulli_(p)/dropout masks with the portable kernel on Intel CPUs too
    (no MKL stream): checked on an Intel Xeon (AVX-512) and on AMD EPYC machines."""
    t, e = _both(2, lambda T: _f(T.empty(300_001, dtype=getattr(T, dtype)).bernoulli_(0.3)))
    _equal(t, e)


def test_state_is_torchs_layout_both_ways() -> None:
    ember.manual_seed(11)
    ember.randn(3, dtype=ember.float64)  # leaves a cached normal in the state
    torch.set_rng_state(torch.from_numpy(ember.get_rng_state().numpy()))
    np.testing.assert_array_equal(torch.randn(4, dtype=torch.float64).numpy(),
                                  ember.randn(4, dtype=ember.float64).numpy())
    torch.manual_seed(12)
    torch.rand(700)
    ember.set_rng_state(ember.tensor(torch.get_rng_state().numpy()))
    np.testing.assert_array_equal(ember.get_rng_state().numpy(), torch.get_rng_state().numpy())
    np.testing.assert_array_equal(ember.rand(5).numpy(), torch.rand(5).numpy())


def test_old_json_state_is_refused_with_the_way_out() -> None:
    old = ember.tensor(np.frombuffer(b'{"seed": 1, "bit_generator": {"bit_generator": "PCG64"}}', dtype=np.uint8))
    with pytest.raises(ValueError, match="restore_rng=False"):
        ember.set_rng_state(old)
    with pytest.raises(ValueError, match="5056 bytes"):
        ember.set_rng_state(ember.zeros(10, dtype=ember.uint8))


def _modules(T):
    nn = T.nn
    return [nn.Linear(20, 30), nn.Conv2d(3, 8, 3), nn.LSTM(10, 16, num_layers=2), nn.GRU(5, 7), nn.Embedding(50, 8),
            nn.TransformerEncoderLayer(32, 4, 64), nn.ConvTranspose2d(4, 2, 3), nn.MultiheadAttention(16, 2),
            nn.Bilinear(3, 4, 5), nn.RNN(3, 4), nn.Conv1d(2, 3, 5)]


def test_module_initialization_equals_torch() -> None:
    torch.manual_seed(0)
    ember.manual_seed(0)
    for tm, em in zip(_modules(torch), _modules(ember)):
        ts, es = tm.state_dict(), em.state_dict()
        assert list(ts) == list(es)
        for key in ts:
            np.testing.assert_array_equal(es[key].numpy(), ts[key].numpy(), err_msg=f"{type(tm).__name__}.{key}")


@pytest.mark.parametrize("init", ["uniform_", "normal_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
                                  "kaiming_normal_", "trunc_normal_"])
def test_nn_init_equals_torch(init: str) -> None:
    torch.manual_seed(4)
    ember.manual_seed(4)
    t = getattr(torch.nn.init, init)(torch.empty(40, 30))
    e = getattr(ember.nn.init, init)(ember.empty(40, 30))
    np.testing.assert_array_equal(e.numpy(), t.numpy())


@pytest.mark.parametrize("args", [(0.0, 1.0, -2.0, 2.0), (0.0, 0.02, -0.04, 0.04), (0.0, 1.0, 1.5, 3.0),
                                  (1.0, 0.5, -1.0, 0.5)])
def test_trunc_normal_equals_torch_in_both_regimes(args: tuple) -> None:
    """Wide intervals redraw normals, narrow ones accept uniform proposals (torch 2.13's two branches)."""
    torch.manual_seed(6)
    ember.manual_seed(6)
    t = torch.nn.init.trunc_normal_(torch.empty(50, 20), *args)
    e = ember.nn.init.trunc_normal_(ember.empty(50, 20), *args)
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    np.testing.assert_array_equal(ember.rand(3).numpy(), torch.rand(3).numpy())


@pytest.mark.parametrize("kwargs", [dict(shuffle=True, batch_size=4), dict(shuffle=True, batch_size=3, drop_last=True),
                                    dict(sampler="replacement", batch_size=5)])
def test_dataloader_order_equals_torch(kwargs: dict) -> None:
    def batches(T):
        data = T.utils.data.TensorDataset(T.arange(23))
        options = dict(kwargs)
        if options.pop("sampler", None):
            options["sampler"] = T.utils.data.RandomSampler(data, replacement=True, num_samples=40)
        loader = T.utils.data.DataLoader(data, **options)
        epochs = [[b[0].tolist() for b in loader] for _ in range(2)]
        return epochs, T.rand(2).tolist()  # and the default stream stays in step

    torch.manual_seed(5)
    ember.manual_seed(5)
    assert batches(ember) == batches(torch)


def test_random_split_and_weighted_sampler_equal_torch() -> None:
    def draw(T):
        parts = T.utils.data.random_split(range(20), [0.5, 0.3, 0.2])
        weighted = list(T.utils.data.WeightedRandomSampler([0.1, 0.9, 0.4, 0.0, 2.0], 12, replacement=True))
        return [list(p.indices) for p in parts], weighted

    torch.manual_seed(9)
    ember.manual_seed(9)
    assert draw(ember) == draw(torch)


@pytest.mark.parametrize("n", list(range(0, 9)) + [64, 500])
def test_fisher_yates_shortcut_equals_the_sequential_shuffle(n: int) -> None:
    rng = np.random.default_rng(n)
    for _ in range(50 if n < 64 else 5):
        targets = np.array([rng.integers(i, n) for i in range(n - 1)], dtype=np.int64)
        expected = list(range(n))
        for i, j in enumerate(targets):
            expected[i], expected[j] = expected[j], expected[i]
        assert fisher_yates(targets, n).tolist() == expected


def _distribution_draws(T):
    D = T.distributions
    return {
        "Normal": D.Normal(T.zeros(5), T.ones(5)).sample((3,)),
        "Uniform": D.Uniform(T.tensor(-1.0), T.tensor(3.0)).sample((6,)),
        "Bernoulli": D.Bernoulli(probs=T.tensor([0.2, 0.7, 0.5])).sample((4,)),
        "Categorical": D.Categorical(probs=T.tensor([0.2, 0.3, 0.5])).sample((9,)),
        "Exponential": D.Exponential(T.tensor([1.0, 2.0])).sample((3,)),
        "MultivariateNormal": D.MultivariateNormal(T.zeros(3), T.eye(3)).sample((4,)),
        "Geometric": D.Geometric(probs=T.tensor(0.3)).sample((6,)),
        "Cauchy": D.Cauchy(T.tensor(0.0), T.tensor(1.0)).sample((5,)),
    }


def test_distribution_samples_equal_torch() -> None:
    torch.manual_seed(3)
    ember.manual_seed(3)
    t, e = _distribution_draws(torch), _distribution_draws(ember)
    for name in t:
        np.testing.assert_array_equal(e[name].numpy(), t[name].numpy(), err_msg=name)
    np.testing.assert_array_equal(ember.rand(3).numpy(), torch.rand(3).numpy())


@pytest.mark.parametrize("call", ["gumbel_softmax", "rrelu"])
def test_noise_of_functional_ops_follows_torchs_draws(call: str) -> None:
    """Same draws as torch (the stream stays in step); values equal up to float32 arithmetic order."""
    def run(T):
        F = T.nn.functional
        x = T.linspace(-1, 1, 12).reshape(3, 4)
        y = F.gumbel_softmax(x, tau=0.5) if call == "gumbel_softmax" else F.rrelu(x, training=True)
        return y.numpy(), T.rand(3).numpy()

    torch.manual_seed(8)
    ember.manual_seed(8)
    (ty, tn), (ey, en) = run(torch), run(ember)
    np.testing.assert_allclose(ey, ty, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(en, tn)
