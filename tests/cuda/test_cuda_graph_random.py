"""Random numbers in CUDA-graph replays (ember/graph/cuda_graph_step.py, the seeded streams of
ember/backends/standin.py and cuda_random.py): a compiled training step with dropout is captured once, its
random kernels read their seed from device memory, and the host writes a fresh seed from the generator before
each launch. References: the same compiled step run kernel by kernel (default mode: seeds drawn on the host)
under the same manual_seed, bit for bit; successive replays differ; manual_seed reproduces a replayed run."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.backends import capture_state, standin
from ember.testing import standin_cuda


@pytest.fixture()
def cuda():
    with standin_cuda():
        yield
    assert not capture_state.ACTIVE and not standin.BACKEND.is_capturing()


def _training():
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(6, 32), ember.nn.Dropout(0.5), ember.nn.Linear(32, 3)).cuda()
    optimizer = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        optimizer.zero_grad()
        out = model[1](model[0](x))  # the dropout's output: its zeros are the mask
        loss = ember.nn.functional.cross_entropy(model[2](out), y)
        loss.backward()
        optimizer.step()
        return loss, out

    return model, step


def _batches(n):
    rng = np.random.default_rng(3)
    return [(ember.tensor(rng.standard_normal((16, 6)).astype(np.float32), device="cuda"),
             ember.tensor(rng.integers(0, 3, 16), device="cuda")) for _ in range(n)]


def _run(mode, seed, batches):
    model, step = _training()
    compiled = ember.compile(step, mode=mode) if mode else ember.compile(step)
    ember.manual_seed(seed)
    outs = [tuple(t.detach().cpu().numpy() for t in compiled(x, y)) for x, y in batches]
    return model, compiled, outs


def test_a_step_with_dropout_replays_as_a_graph_and_draws_what_kernel_by_kernel_draws(cuda):
    batches = _batches(6)
    m1, graphed, outs1 = _run("reduce-overhead", 5, batches)
    m2, plain, outs2 = _run(None, 5, batches)
    executable = graphed.last.executable
    assert executable.captures == 1 and executable.replays == 3, executable.status
    for (l1, o1), (l2, o2) in zip(outs1, outs2):
        np.testing.assert_array_equal(l1, l2)
        np.testing.assert_array_equal(o1, o2)
    for p, q in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_array_equal(p.detach().cpu().numpy(), q.detach().cpu().numpy())
    masks = [o == 0 for _, o in outs1]  # dropout zeroes: a fresh mask per replay
    assert all(m.any() for m in masks) and not np.array_equal(masks[3], masks[4])
    _, _, again = _run("reduce-overhead", 5, batches)  # manual_seed reproduces a replayed run
    for (l1, o1), (l3, o3) in zip(outs1, again):
        np.testing.assert_array_equal(o1, o3)
    _, _, other = _run("reduce-overhead", 6, batches)
    assert not np.array_equal(outs1[4][1], other[4][1])


def test_seeded_stream_kernel_reads_the_seed_when_replayed(cuda):
    backend, xp = standin.BACKEND, standin.xp
    seed = xp.zeros((), dtype=np.int64)
    seed[...] = backend.asarray(np.asarray(11, dtype=np.int64))
    backend.capture_begin()
    y = backend.make_rng(seed, 2).random((5,), dtype=np.float32)
    graph = backend.capture_end()
    assert bool(xp.isnan(y).all())  # nothing ran during the capture
    graph.replay()
    np.testing.assert_array_equal(y.get(), backend.make_rng(11, 2).random((5,), dtype=np.float32).get())
    seed[...] = backend.asarray(np.asarray(12, dtype=np.int64))
    graph.replay()
    np.testing.assert_array_equal(y.get(), backend.make_rng(12, 2).random((5,), dtype=np.float32).get())


def test_eager_random_numbers_inside_a_captured_graph_are_new_at_each_replay(cuda):
    """torch.cuda.graph semantics: the default generator is registered with the graph, so rand/dropout inside the
    capture run, each replay draws new numbers, the generator moves past them, and manual_seed reproduces."""
    def capture_and_replay(seed):
        ember.manual_seed(seed)
        x = ember.zeros(64, device="cuda")
        g = ember.cuda.CUDAGraph()
        with ember.cuda.graph(g):
            y = x + ember.rand(64, device="cuda")
            z = ember.nn.functional.dropout(ember.ones(64, device="cuda"), 0.5)
        out = []
        for _ in range(3):
            g.replay()
            out.append((y.cpu().numpy().copy(), z.cpu().numpy().copy()))
        after = ember.rand(4, device="cuda").cpu().numpy()
        return out, after

    first, after = capture_and_replay(3)
    for u, mask in first:
        assert ((u >= 0) & (u < 1)).all() and set(np.unique(mask)) <= {0.0, 2.0} and (mask == 0).any()
    assert not np.array_equal(first[0][0], first[1][0]) and not np.array_equal(first[1][1], first[2][1])
    again, after_again = capture_and_replay(3)
    for (u1, m1), (u2, m2) in zip(first, again):
        np.testing.assert_array_equal(u1, u2)
        np.testing.assert_array_equal(m1, m2)
    np.testing.assert_array_equal(after, after_again)
    other, _ = capture_and_replay(4)
    assert not np.array_equal(other[0][0], first[0][0])


def test_an_unregistered_generator_is_refused_during_capture(cuda):
    gen = ember.Generator(device="cuda").manual_seed(1)
    g = ember.cuda.CUDAGraph()
    with pytest.raises(Exception, match="random numbers from the device generator"):
        with ember.cuda.graph(g):
            ember.rand(4, device="cuda", generator=gen)


def test_make_graphed_callables_with_dropout_draws_new_masks(cuda):
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(8, 32), ember.nn.Dropout(0.5), ember.nn.Linear(32, 2)).cuda()
    graphed = ember.cuda.make_graphed_callables(model, (ember.randn(4, 8, device="cuda", requires_grad=True),))
    x = ember.randn(4, 8, device="cuda")
    outs = [graphed(x).detach().cpu().numpy() for _ in range(3)]
    assert not np.array_equal(outs[0], outs[1]) and not np.array_equal(outs[1], outs[2])
