"""ember.func.vmap against torch.func.vmap on the same functions: values, shapes, in_dims/out_dims forms,
pytrees, nesting, chunking, randomness, in-place ops and error messages."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
import ember.func as ef

torch = pytest.importorskip("torch")
tf = pytest.importorskip("torch.func")


def E(a):
    return ember.tensor(np.asarray(a))


def T(a):
    return torch.tensor(np.asarray(a))


def same(mine, theirs, rtol=1e-7, atol=1e-10):
    if isinstance(mine, dict):
        assert set(mine) == set(theirs)
        for k in mine:
            same(mine[k], theirs[k], rtol, atol)
        return
    if isinstance(mine, (tuple, list)):
        assert type(mine) is type(theirs) and len(mine) == len(theirs)
        for m, t in zip(mine, theirs):
            same(m, t, rtol, atol)
        return
    m, t = mine.detach().numpy(), theirs.detach().numpy()
    assert m.shape == t.shape, (m.shape, t.shape)
    np.testing.assert_allclose(m, t, rtol=rtol, atol=atol)


def both(fn_of_lib, *arrays, **vmap_kwargs):
    """Run ``fn_of_lib(lib)`` under each library's vmap on the same arrays."""
    mine = ef.vmap(fn_of_lib(ember), **vmap_kwargs)(*[E(a) if isinstance(a, np.ndarray) else a for a in arrays])
    theirs = tf.vmap(fn_of_lib(torch), **vmap_kwargs)(*[T(a) if isinstance(a, np.ndarray) else a for a in arrays])
    return mine, theirs


@pytest.mark.parametrize("in_dims,out_dims", [(0, 0), (1, 0), (-1, 1), ((1, None), -1), ((None, 0), 2), ((-2, 1), 0)])
def test_in_dims_out_dims_forms(rng, in_dims, out_dims):
    a, b = rng.standard_normal((4, 5, 3)), rng.standard_normal((4, 5, 3))

    def fn(lib):
        return lambda x, y: (x * y).exp().sum(-1, keepdim=True) - y.mean(0)

    if isinstance(in_dims, tuple) and in_dims[1] is None:
        b = b[:, 0]
    if isinstance(in_dims, tuple) and in_dims[0] is None:
        a = a[0]
    same(*both(fn, a, b, in_dims=in_dims, out_dims=out_dims))


def test_pytree_inputs_and_outputs(rng):
    data = {"w": rng.standard_normal((3, 4)), "pair": (rng.standard_normal((4, 3, 2)), rng.standard_normal(2))}

    def fn(lib):
        return lambda d, s: {"y": d["w"] @ d["pair"][0] + d["pair"][1] * s, "n": (d["w"].norm(), s * 2)}

    in_dims = ({"w": 1, "pair": (0, None)}, None)
    out_dims = {"y": 1, "n": (0, None)}
    mine = ef.vmap(fn(ember), in_dims=in_dims, out_dims=out_dims)(
        {"w": E(data["w"]), "pair": (E(data["pair"][0]), E(data["pair"][1]))}, ember.tensor(2.0, dtype=ember.float64))
    theirs = tf.vmap(fn(torch), in_dims=in_dims, out_dims=out_dims)(
        {"w": T(data["w"]), "pair": (T(data["pair"][0]), T(data["pair"][1]))}, torch.tensor(2.0, dtype=torch.float64))
    same(mine, theirs)


def test_nested_vmap_outer_product_of_batches(rng):
    x, y = rng.standard_normal((4, 3)), rng.standard_normal((3, 5))
    mine = ef.vmap(ef.vmap(lambda a, b: a @ b, in_dims=(0, None)), in_dims=(None, 1))(E(x), E(y))
    theirs = tf.vmap(tf.vmap(lambda a, b: a @ b, in_dims=(0, None)), in_dims=(None, 1))(T(x), T(y))
    same(mine, theirs)


def test_nested_vmap_with_closure_of_outer_batch(rng):
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((5, 4))

    def outer(lib, vm):
        return lambda a: vm(lambda b: (a * b).sum() + b.max())(E(y) if lib is ember else T(y))

    same(ef.vmap(outer(ember, ef.vmap))(E(x)), tf.vmap(outer(torch, tf.vmap))(T(x)))


@pytest.mark.parametrize("shapes,in_dims", [
    (((4, 3), (3,)), (0, None)), (((4, 3), (4, 3)), (0, 0)), (((3,), (4, 3, 2)), (None, 0)),
    (((4, 2, 3), (3, 5)), (0, None)), (((4, 3), (4, 3, 5)), (0, 0)), (((2, 3), (5, 3, 4)), (None, 0)),
    (((4, 6, 2, 3), (4, 3)), (0, 0)), (((6, 2, 3), (4, 3, 2)), (None, 0)), (((3, 4, 2), (2, 4)), (1, 1)),
])
def test_matmul_every_rank_combination(rng, shapes, in_dims):
    a, b = rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])
    same(*both(lambda lib: lib.matmul, a, b, in_dims=in_dims))


def test_linear_with_batched_weights_and_einsum(rng):
    x, w, b = rng.standard_normal((4, 7, 3)), rng.standard_normal((4, 5, 3)), rng.standard_normal((4, 5))
    same(*both(lambda lib: lib.nn.functional.linear, x, w, b))
    same(*both(lambda lib: lib.nn.functional.linear, x[0], w, b, in_dims=(None, 0, 0)))
    same(*both(lambda lib: (lambda p, q: lib.einsum("ij,kj", p, q)), x, w[:, :2]))
    same(*both(lambda lib: (lambda p, q: lib.einsum("...j,kj->k...", p, q)), x, w[0], in_dims=(0, None)))


def test_conv_pool_and_norm_with_shared_weights(rng):
    x, w = rng.standard_normal((3, 2, 4, 7, 7)), rng.standard_normal((5, 4, 3, 3))

    def fn(lib):
        F = lib.nn.functional
        return lambda a, k: F.layer_norm(F.max_pool2d(F.relu(F.conv2d(a, k, padding=1)), 2), (5, 3, 3))

    same(*both(fn, x, w, in_dims=(0, None)))
    mine = ef.vmap(ef.grad(lambda k, a: fn(ember)(a[None], k).pow(2).sum()), in_dims=(None, 0))(E(w), E(x[0]))
    theirs = tf.vmap(tf.grad(lambda k, a: fn(torch)(a[None], k).pow(2).sum()), in_dims=(None, 0))(T(w), T(x[0]))
    same(mine, theirs, rtol=1e-6)


def test_unbatched_output_is_broadcast_and_out_dims_none(rng):
    x, c = rng.standard_normal((4, 3)), rng.standard_normal(2)
    same(*both(lambda lib: (lambda a, k: k * 2), x, c, in_dims=(0, None)))
    mine = ef.vmap(lambda a, k: (a.sum(), k + 1), in_dims=(0, None), out_dims=(0, None))(E(x), E(c))
    theirs = tf.vmap(lambda a, k: (a.sum(), k + 1), in_dims=(0, None), out_dims=(0, None))(T(x), T(c))
    same(mine, theirs)


@pytest.mark.parametrize("chunk_size", [1, 3, 5, 100])
def test_chunk_size_gives_the_same_result(rng, chunk_size):
    x = rng.standard_normal((7, 3))
    same(*both(lambda lib: (lambda a: (a.softmax(0), a.sum())), x, chunk_size=chunk_size))


def test_kwargs_are_not_batched(rng):
    x = rng.standard_normal((4, 3))
    mine = ef.vmap(lambda a, scale=1.0: a * scale)(E(x), scale=3.0)
    theirs = tf.vmap(lambda a, scale=1.0: a * scale)(T(x), scale=3.0)
    same(mine, theirs)


def test_inplace_ops_on_batched_tensors(rng):
    x, y = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))

    def fn(lib):
        def f(a, b):
            c = a.clone()
            c.mul_(b)
            c[0] = 5.0
            c[1:] += b[1:]
            return c
        return f

    same(*both(fn, x, y))


def test_inplace_write_of_batched_value_into_shared_tensor_raises_as_torch(rng):
    x = rng.standard_normal((4, 3))

    for method in ("mul_", "copy_"):
        def fn(lib):
            def f(a):
                z = lib.zeros(3, dtype=a.dtype)
                getattr(z, method)(a)
                return z
            return f

        with pytest.raises(RuntimeError) as theirs:
            tf.vmap(fn(torch))(T(x))
        with pytest.raises(RuntimeError) as mine:
            ef.vmap(fn(ember))(E(x))
        assert str(mine.value).split(" If said")[0] == str(theirs.value).split(" If said")[0]


def test_randomness_modes():
    x = ember.ones(5, 4)
    with pytest.raises(RuntimeError) as mine:
        ef.vmap(lambda a: a * ember.rand(4))(x)
    with pytest.raises(RuntimeError) as theirs:
        tf.vmap(lambda a: a * torch.rand(4))(torch.ones(5, 4))
    assert str(mine.value) == str(theirs.value)
    same_rows = ef.vmap(lambda a: a * ember.rand(4), randomness="same")(x)
    assert np.all(same_rows.numpy() == same_rows.numpy()[0])
    different = ef.vmap(lambda a: a * ember.randn(4), randomness="different")(x)
    assert len({tuple(r) for r in different.numpy().round(6)}) == 5
    dropped = ef.vmap(lambda a: ember.nn.functional.dropout(a, 0.5), randomness="different")(ember.ones(64, 32))
    rows = dropped.numpy()
    assert set(np.unique(rows)) <= {0.0, 2.0} and len({tuple(r) for r in rows}) == 64
    assert 0.35 < (rows == 0).mean() < 0.65
    nested = ef.vmap(ef.vmap(lambda a: a * ember.rand(()), randomness="different"), randomness="different")(x)
    assert len(set(nested.numpy().ravel().round(7))) == 20  # every (outer, inner) pair draws its own number
    with pytest.raises(RuntimeError, match="Only allowed values for randomness"):
        ef.vmap(lambda a: a, randomness="sometimes")
    with pytest.raises(RuntimeError, match="Only allowed values for randomness"):
        tf.vmap(lambda a: a, randomness="sometimes")


def _message(fn):
    with pytest.raises(Exception) as info:
        fn()
    return type(info.value), str(info.value)


@pytest.mark.parametrize("case", ["sizes", "in_dim_range", "non_tensor", "structure", "no_inputs", "no_batched",
                                  "bad_in_dims_type", "returns_non_tensor", "out_dims_none", "out_structure",
                                  "in_dim_type"])
def test_error_messages_match_torch(case):
    def run(lib, vm):
        x, y = lib.ones(2, 3), lib.ones(3, 3)

        def f(a, b=None):
            return a

        if case == "sizes":
            return vm(lambda a, b: a + b)(x, y)
        if case == "in_dim_range":
            return vm(f, in_dims=2)(x)
        if case == "non_tensor":
            return vm(f, in_dims=(0, 0))(x, 3.0)
        if case == "structure":
            return vm(f, in_dims=(0, 0, 0))(x, y)
        if case == "no_inputs":
            return vm(f)()
        if case == "no_batched":
            return vm(f, in_dims=None)(x) if False else vm(f, in_dims=(None,))(x)
        if case == "bad_in_dims_type":
            return vm(f, in_dims=[0])(x)
        if case == "returns_non_tensor":
            return vm(lambda a: 3.0)(x)
        if case == "out_dims_none":
            return vm(f, out_dims=None)(x)
        if case == "out_structure":
            return vm(lambda a: (a, a), out_dims=(0, 0, 0))(x)
        if case == "in_dim_type":
            return vm(f, in_dims=(1.5,))(x)
        raise AssertionError(case)

    mine, theirs = _message(lambda: run(ember, ef.vmap)), _message(lambda: run(torch, tf.vmap))
    assert mine[0] is theirs[0]
    if case in ("structure", "out_structure"):  # the tree specs print differently; the sentence is the same
        assert mine[1].split(" has structure")[0] == theirs[1].split(" has structure")[0]
    else:
        assert mine[1] == theirs[1].replace("torch.Tensor", "ember.tensor.Tensor")


def test_reading_values_inside_vmap_raises_like_torch():
    x = ember.ones(3, 2)
    with pytest.raises(RuntimeError, match=r"vmap: It looks like you're calling \.item\(\) on a Tensor"):
        ef.vmap(lambda a: a.sum().item())(x)
    with pytest.raises(RuntimeError, match="vmap: It looks like"):  # bool() reads the value through .item()
        ef.vmap(lambda a: a if a.sum() > 0 else -a)(x)


def test_batched_tensor_escaping_vmap_is_refused():
    leaked = []
    ef.vmap(lambda a: leaked.append(a) or a)(ember.ones(3, 2))
    with pytest.raises(RuntimeError, match="used after its vmap returned"):
        leaked[0] + 1


def test_loop_fallback_warns_once_naming_the_op():
    from ember.ops import batching

    batching._WARNED.discard("unique")
    rows = ember.tensor([[3.0, 1.0, 3.0], [2.0, 2.0, 5.0]])
    with pytest.warns(UserWarning, match="no batching rule for 'unique'"):  # unique(dim=) takes the loop
        out = ef.vmap(lambda r: ember.unique(r, dim=0))(rows)
    np.testing.assert_array_equal(out.numpy(), [[1.0, 3.0], [2.0, 5.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ef.vmap(lambda r: ember.unique(r, dim=0))(rows)  # once per process


@pytest.mark.parametrize("seq_dim,val_shape", [(None, (4, 3)), (0, (4, 3)), (0, (4, 2, 3))])
def test_searchsorted_batched_and_shared_sequences(rng, seq_dim, val_shape):
    seq = np.sort(rng.standard_normal((4, 6)), axis=1)
    if seq_dim is None:
        seq = seq[0]
    vals = rng.standard_normal(val_shape)
    same(*both(lambda lib: lib.searchsorted, seq, vals, in_dims=(seq_dim, 0)))


def test_vmap_on_standin_cuda_device(rng):
    x, w = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
    expected = tf.vmap(tf.grad(lambda w_, x_: torch.tanh(x_ @ w_.T).sum()), in_dims=(None, 0))(T(w), T(x))
    with ember.testing.standin_cuda():
        wc, xc = E(w).to("cuda"), E(x).to("cuda")
        got = ef.vmap(ef.grad(lambda w_, x_: ember.tanh(x_ @ w_.T).sum()), in_dims=(None, 0))(wc, xc)
        assert got.device.type == "cuda"
        np.testing.assert_allclose(got.cpu().numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)
        out = ef.vmap(lambda a: a.softmax(-1) @ wc.T)(xc[:, None, :].expand(4, 2, 3).contiguous())
        assert tuple(out.shape) == (4, 2, 5) and out.device.type == "cuda"


def test_batched_index_tensors_and_per_sample_embedding_gradients(rng):
    w, x, x4 = rng.standard_normal((10, 4)), rng.standard_normal((5, 6, 4)), rng.standard_normal((5, 2, 3, 6, 4))
    ids, ids2 = rng.integers(0, 6, (5, 3)), rng.integers(0, 6, (5, 2, 2))
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="vmap: there is no batching rule")
        same(*both(lambda lib: (lambda i, t: t[i]), ids, w, in_dims=(0, None)))
        same(*both(lambda lib: (lambda i, t: t[:, i[:2] % 4]), ids, w, in_dims=(0, None)))
        same(*both(lambda lib: (lambda i, t: t[i]), ids, x))
        same(*both(lambda lib: (lambda i, t: t[i, 1:]), ids, x))
        same(*both(lambda lib: (lambda t, i: t[:, 1:, i]), x4, ids2))
        for fn, args in (((lambda lib: lambda t, i: (t[i].tanh() ** 2).sum()), (w, ids)),
                         ((lambda lib: lambda t, i: (t[:, 1:, i] ** 2).sum()), (x4, ids2))):
            in_dims = (None, 0) if args[0] is w else (0, 0)
            mine = ef.vmap(ef.grad(fn(ember)), in_dims=in_dims)(E(args[0]), E(args[1]))
            theirs = tf.vmap(tf.grad(fn(torch)), in_dims=in_dims)(T(args[0]), T(args[1]))
            same(mine, theirs)
        emb_e, emb_t = ember.nn.Embedding(10, 4), torch.nn.Embedding(10, 4)
        with torch.no_grad():
            emb_t.weight.copy_(T(emb_e.weight.detach().numpy()))
        pe = {k: v.detach() for k, v in emb_e.named_parameters()}
        pt = {k: v.detach() for k, v in emb_t.named_parameters()}
        mine = ef.vmap(ef.grad(lambda p, i: ef.functional_call(emb_e, p, (i,)).pow(2).sum()), in_dims=(None, 0))(
            pe, E(ids))
        theirs = tf.vmap(tf.grad(lambda p, i: tf.functional_call(emb_t, p, (i,)).pow(2).sum()), in_dims=(None, 0))(
            pt, T(ids))
        same(mine, theirs, rtol=1e-6, atol=1e-7)


def test_attention_and_gelu_with_shared_keys_and_their_per_sample_gradients(rng):
    q, k, v = (rng.standard_normal((3, 2, 4, 5)) for _ in range(3))

    def attend(lib):
        return lambda a, b, c: lib.nn.functional.scaled_dot_product_attention(a, b, c, is_causal=True)

    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="vmap: there is no batching rule")
        same(*both(attend, q, k[0], v, in_dims=(0, None, 0)))

        def loss(lib):
            return lambda a, b, c: (lib.nn.functional.gelu(attend(lib)(a, b, c)) ** 2).sum()

        mine = ef.vmap(ef.grad(loss(ember), argnums=(0, 1, 2)), in_dims=(0, None, 0))(E(q), E(k[0]), E(v))
        theirs = tf.vmap(tf.grad(loss(torch), argnums=(0, 1, 2)), in_dims=(0, None, 0))(T(q), T(k[0]), T(v))
        same(mine, theirs, rtol=1e-6, atol=1e-9)
