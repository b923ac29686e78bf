"""QA of autocast and GradScaler corners against torch 2.13 CPU: autocast in ember.compile's cache key,
nested regions with different dtypes, forward recomputed under no_grad then with grad inside one region,
and one GradScaler driving two optimizers (unscale_ per optimizer, one update)."""
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _pair(seed=0, n_in=4, n_out=3):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((n_out, n_in)).astype(np.float32)
    b = rng.standard_normal(n_out).astype(np.float32)
    e, t = ember.nn.Linear(n_in, n_out), torch.nn.Linear(n_in, n_out)
    e.load_state_dict({"weight": ember.tensor(w), "bias": ember.tensor(b)})
    t.load_state_dict({"weight": torch.from_numpy(w.copy()), "bias": torch.from_numpy(b.copy())})
    return e, t


def test_autocast_state_is_part_of_the_compile_cache_key():
    lin, tlin = _pair()
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    step = ember.compile(lambda v: lin(v) * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none of these may fall back to eager
        for region, tdtype in [(None, None), (ember.bfloat16, torch.bfloat16), (ember.float16, torch.float16),
                               (None, None)]:
            for _ in range(3):  # warm-up, trace, replay: each must honour the region it runs in
                if region is None:
                    got = step(ember.tensor(x))
                    want = tlin(torch.from_numpy(x)) * 2
                else:
                    with ember.autocast("cpu", dtype=region):
                        got = step(ember.tensor(x))
                    with torch.autocast("cpu", dtype=tdtype):
                        want = tlin(torch.from_numpy(x)) * 2
                assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], (region, got.dtype)
                np.testing.assert_allclose(got.float().detach().numpy(), want.float().detach().numpy(),
                                           rtol=2e-2, atol=2e-2)


def test_nested_autocast_regions_with_different_dtypes_match_torch():
    a = np.ones((2, 2), np.float32)
    seen, tseen = [], []
    for lib, out in ((ember, seen), (torch, tseen)):
        m = lib.tensor(a)
        with lib.autocast("cpu", dtype=lib.bfloat16):
            out.append((m @ m).dtype)
            with lib.autocast("cpu", dtype=lib.float16):
                out.append((m @ m).dtype)
                with lib.autocast("cpu", enabled=False):
                    out.append((m @ m).dtype)
                out.append((m @ m).dtype)
            out.append((m @ m).dtype)
        out.append((m @ m).dtype)
    assert [str(d).split(".")[-1] for d in seen] == [str(d).split(".")[-1] for d in tseen]


def test_forward_recomputed_under_no_grad_then_with_grad_in_one_region():
    # what activation checkpointing does: the first forward keeps no graph, the recomputation does;
    # the autocast weight-cast cache must not hand the history-free cast to the second one
    rng = np.random.default_rng(2)
    w0 = rng.standard_normal((4, 4)).astype(np.float32)
    x0 = rng.standard_normal((3, 4)).astype(np.float32)
    w, tw = ember.tensor(w0, requires_grad=True), torch.tensor(w0, requires_grad=True)
    with ember.autocast("cpu"):
        with ember.no_grad():
            first = ember.tensor(x0) @ w
        again = ember.tensor(x0) @ w
    with torch.autocast("cpu"):
        with torch.no_grad():
            tfirst = torch.from_numpy(x0) @ tw
        tagain = torch.from_numpy(x0) @ tw
    assert not first.requires_grad and again.requires_grad and again.dtype is ember.bfloat16
    np.testing.assert_array_equal(first.float().numpy(), again.float().detach().numpy())
    np.testing.assert_allclose(again.float().detach().numpy(), tagain.float().detach().numpy(), rtol=1e-2, atol=1e-2)
    (again.float() ** 2).sum().backward()
    (tagain.float() ** 2).sum().backward()
    assert w.grad.dtype is ember.float32
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=3e-2, atol=3e-2)
    assert tfirst.requires_grad is False


@pytest.mark.parametrize("inf_in", [None, "second"])
def test_one_scaler_two_optimizers_matches_torch(inf_in):
    # torch's recipe: unscale_ (e.g. to clip) per optimizer, step each, one update; an inf in one optimizer's
    # grads skips only that optimizer's step, and the scale backs off once
    e1, t1 = _pair(3)
    e2, t2 = _pair(4, 3, 2)
    o1, to1 = ember.optim.SGD(e1.parameters(), lr=0.1, momentum=0.9), torch.optim.SGD(t1.parameters(), lr=0.1,
                                                                                         momentum=0.9)
    o2, to2 = ember.optim.Adam(e2.parameters(), lr=0.01), torch.optim.Adam(t2.parameters(), lr=0.01)
    scaler = ember.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=2)
    tscaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=2)
    rng = np.random.default_rng(5)
    for step in range(3):
        x = rng.standard_normal((6, 4)).astype(np.float32)
        for lib, m1, m2, opts, sc in ((ember, e1, e2, (o1, o2), scaler), (torch, t1, t2, (to1, to2), tscaler)):
            for o in opts:
                o.zero_grad()
            h = m1(lib.tensor(x) if lib is ember else torch.from_numpy(x))
            loss = (m2(h) ** 2).mean()
            if inf_in == "second" and step == 1:
                loss = loss + m2.bias.sum() * float("inf")  # inf reaches only the second optimizer's grads
            sc.scale(loss).backward()
            sc.unscale_(opts[0])
            lib.nn.utils.clip_grad_norm_(m1.parameters(), 0.5)
            sc.step(opts[0])
            sc.step(opts[1])
            sc.update()
        assert scaler.get_scale() == tscaler.get_scale(), (step, scaler.get_scale(), tscaler.get_scale())
        for em, tm in ((e1, t1), (e2, t2)):
            for p, tp in zip(em.parameters(), tm.parameters()):
                np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert scaler.state_dict() == tscaler.state_dict()


def test_scaler_refuses_a_second_unscale_before_update_like_torch():
    lin, _ = _pair()
    opt = ember.optim.SGD(lin.parameters(), lr=0.1)
    scaler = ember.amp.GradScaler("cpu")
    scaler.scale(lin(ember.ones(2, 4)).sum()).backward()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
