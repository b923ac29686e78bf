"""backend='gloo': ember's socket engine, its stores, rendezvous, collectives, DDP and launcher.

Fast tests run the ranks as threads of this process (each with its own mesh of real TCP connections over a
HashStore) or as forked processes; the slow ones start fresh interpreters (spawn, the launcher) and compare a
whole program's results with torch's own gloo.
"""
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

import ember
import ember.distributed as dist
from ember.distributed.collectives import ReduceOp
from ember.distributed.gloo import objects, ops
from ember.distributed.gloo.group import GlooGroup, World
from ember.distributed.gloo.mesh import Mesh
from ember.distributed.store import FileStore, HashStore, PrefixStore

HERE = Path(__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ranks(n, fn, timeout_s=10.0):
    """Run ``fn(rank, group)`` on ``n`` threaded ranks; returns the results, or raises the first rank's error."""
    store = HashStore()
    results, errors = [None] * n, [None] * n

    def main(r):
        mesh = world = None
        try:
            mesh = Mesh(r, n, PrefixStore("test", store), timedelta(seconds=timeout_s))
            world = World(mesh, store)
            group = GlooGroup(mesh, range(n), timedelta(seconds=timeout_s), 0, store, is_world=True)
            world.groups[0] = group
            results[r] = fn(r, group)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors[r] = error
        finally:
            if mesh is not None:
                mesh.close(world.state() if world is not None else None)

    threads = [threading.Thread(target=main, args=(r,), daemon=True) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a threaded rank hung"
    return results, errors


def _ok(results_errors):
    results, errors = results_errors
    for e in errors:
        if e is not None:
            raise e
    return results


# ---- stores ----------------------------------------------------------------------------------------------------
def _store_story(s, torch_like):
    out = []
    s.set("a", "1")
    out.append(s.get("a"))
    out += [s.add("c", 5), s.add("c", -2), s.get("c")]
    out += [s.compare_set("x", "", "v"), s.compare_set("x", "w", "z"), s.compare_set("x", "v", "z"), s.get("x")]
    out.append(s.compare_set("y", "nope", "v"))  # absent key, non-empty expected: torch returns expected
    out += [s.delete_key("x"), s.delete_key("x"), s.check(["a"]), s.check(["a", "zz"])]
    s.append("ap", "x")
    s.append("ap", b"y")
    out += [s.get("ap"), s.multi_get(["a", "c"])]
    with pytest.raises(torch_like.DistStoreError, match=r"(?i)wait timeout") as info:
        s.wait(["never"], timedelta(milliseconds=200))
    if torch_like is dist:  # torch's TCPStore message (its HashStore just says "Wait timeout")
        assert str(info.value) == "wait timeout after 200ms, keys: /never"
    return out


def test_stores_answer_as_torchs():
    import torch.distributed as td

    master = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=timedelta(seconds=5))
    theirs_tcp = td.TCPStore("127.0.0.1", 0, 1, True, timeout=timedelta(seconds=5))
    assert _store_story(master, dist) == _store_story(theirs_tcp, td)
    assert _store_story(HashStore(), dist) == _store_story(td.HashStore(), td)
    assert master.num_keys() == 3 and theirs_tcp.num_keys() == 4  # a, c, ap; torch counts one key of its own
    master.shutdown()


def test_file_store_is_shared_between_instances(tmp_path):
    path = str(tmp_path / "store")
    a, b = FileStore(path, 2), FileStore(path, 2)
    assert _store_story(a, dist)[:4] == [b"1", 5, 3, b"3"]
    assert b.get("ap") == b"xy" and b.add("c", 10) == 13 and a.get("c") == b"13"
    b.set_timeout(timedelta(milliseconds=100))
    with pytest.raises(dist.DistStoreError, match="keys: /missing"):
        b.get("missing")
    threading.Timer(0.2, lambda: a.set("late", "here")).start()
    b.set_timeout(timedelta(seconds=5))
    assert b.get("late") == b"here"  # waits across instances (processes in real use)


def test_tcp_store_client_waits_for_keys_and_for_the_master():
    port = _free_port()
    box = {}
    client_thread = threading.Thread(target=lambda: box.setdefault(
        "v", dist.TCPStore("127.0.0.1", port, 2, False, timeout=timedelta(seconds=10)).get("k")))
    client_thread.start()  # the client starts first: it retries connecting until the master is up
    time.sleep(0.3)
    master = dist.TCPStore("127.0.0.1", port, 2, True, timeout=timedelta(seconds=10))
    assert master.is_master and master.port == port
    time.sleep(0.2)
    master.set("k", b"value")
    client_thread.join(10)
    assert box["v"] == b"value"
    prefixed = PrefixStore("job", master)
    prefixed.set("x", "1")
    assert master.get("job/x") == b"1" and prefixed.get("x") == b"1"
    master.shutdown()


# ---- collectives on threaded ranks --------------------------------------------------------------------------
def _inputs(r, n, size, dtype=np.float32):
    return np.random.default_rng(10 + r).standard_normal(size).astype(dtype)


@pytest.mark.parametrize("n", [2, 3])
def test_all_reduce_every_op_matches_numpy_in_rank_order(n):
    cases = [(ReduceOp.SUM, np.add), (ReduceOp.PRODUCT, np.multiply), (ReduceOp.MIN, np.minimum),
             (ReduceOp.MAX, np.maximum)]
    sizes = (5, 40_000, 300_000)  # 160 KB: split with 3 ranks; 1.2 MB: split with 2 ranks too

    def body(r, g):
        got = {}
        for op, _ in cases:
            for size in sizes:
                t = ember.tensor(_inputs(r, n, size))
                ops.all_reduce(t, op, g)
                got[op, size] = t.numpy()
        t = ember.tensor(_inputs(r, n, 7))
        ops.all_reduce(t, ReduceOp.AVG, g)
        got["avg"] = t.numpy()
        ints = ember.tensor(np.arange(12, dtype=np.int64) * (r + 3))
        for op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR):
            x = ints.clone()
            ops.all_reduce(x, op, g)
            got[op] = x.numpy()
        flags = ember.tensor(np.array([r == 0, False, True]))
        ops.all_reduce(flags, ReduceOp.SUM, g)  # bools: logical or
        got["bool"] = flags.numpy()
        half = ember.tensor(_inputs(r, n, 4).astype(np.float16))
        ops.all_reduce(half, ReduceOp.SUM, g)  # 16-bit floats summed in float32
        got["half"] = half.numpy()
        return got

    results = _ok(_ranks(n, body))
    for op, fn in cases:
        for size in sizes:
            want = _inputs(0, n, size)
            for r in range(1, n):
                want = fn(want, _inputs(r, n, size))
            for got in results:  # bitwise: the same rank order on every rank, for every size
                np.testing.assert_array_equal(got[op, size], want)
    np.testing.assert_allclose(results[0]["avg"], sum(_inputs(r, n, 7) for r in range(n)) / n, rtol=1e-6)
    ints = [np.arange(12, dtype=np.int64) * (r + 3) for r in range(n)]
    for op, fn in ((ReduceOp.BAND, np.bitwise_and), (ReduceOp.BOR, np.bitwise_or), (ReduceOp.BXOR, np.bitwise_xor)):
        want = ints[0]
        for x in ints[1:]:
            want = fn(want, x)
        assert all(np.array_equal(res[op], want) for res in results)
    assert results[1]["bool"].tolist() == [True, False, True]
    want_half = sum(_inputs(r, n, 4).astype(np.float16).astype(np.float32) for r in range(n)).astype(np.float16)
    np.testing.assert_array_equal(results[0]["half"], want_half)


def test_the_other_collectives_match_numpy_on_three_ranks():
    n = 3

    def body(r, g):
        out = {}
        b = ember.tensor(_inputs(r, n, 4))
        ops.broadcast(b, 2, g)
        out["broadcast"] = b.numpy()
        lst = [ember.zeros(3) for _ in range(n)]
        ops.all_gather(lst, ember.tensor(_inputs(r, n, 3)), g)
        out["all_gather"] = np.stack([t.numpy() for t in lst])
        into = ember.zeros(n * 2, 3)
        ops.all_gather_into_tensor(into, ember.tensor(_inputs(r, n, (2, 3))), g)
        out["into"] = into.numpy()
        rs = ember.zeros(2)
        ops.reduce_scatter_tensor(rs, ember.tensor(_inputs(r, n, 2 * n)), ReduceOp.SUM, g)
        out["rs"] = rs.numpy()
        rs_list = ember.zeros(2)
        ops.reduce_scatter(rs_list, [ember.tensor(x) for x in _inputs(r, n, (n, 2))], ReduceOp.MAX, g)
        out["rs_list"] = rs_list.numpy()
        red = ember.tensor(_inputs(r, n, 5))
        ops.reduce(red, 1, ReduceOp.SUM, g)
        out["reduce"] = red.numpy()
        gl = [ember.zeros(2) for _ in range(n)] if r == 0 else None
        ops.gather(ember.tensor(_inputs(r, n, 2)), gl, 0, g)
        out["gather"] = None if gl is None else np.stack([t.numpy() for t in gl])
        sc = ember.zeros(2)
        ops.scatter(sc, [ember.tensor(np.full(2, 10.0 * k, np.float32)) for k in range(n)] if r == 1 else None, 1, g)
        out["scatter"] = sc.numpy()
        send_sizes = [k + 1 for k in range(n)]  # rank r sends k + 1 rows to rank k
        a_in = ember.tensor(np.arange(sum(send_sizes), dtype=np.float32) + 100 * r)
        a_out = ember.zeros(n * (r + 1))
        ops.all_to_all_single(a_out, a_in, [r + 1] * n, send_sizes, g)
        out["a2a"] = a_out.numpy()
        outs = [ember.zeros(k + 1) for k in range(n)]
        ops.all_to_all(outs, [ember.full((r + 1,), float(10 * r + k)) for k in range(n)], g)
        out["a2a_list"] = [t.numpy() for t in outs]
        works = [ops.all_reduce(ember.ones(3) * (r + 1), group=g, async_op=True) for _ in range(3)]
        work_tensors = [w.result()[0] for w in works]
        assert all(w.wait() and w.is_completed() and w.is_success() for w in works)
        out["async"] = [t.numpy() for t in work_tensors]
        objs = [None] * n
        ops.all_gather_object(objs, {"rank": r, "t": ember.tensor([float(r)])}, g)
        out["objects"] = [(o["rank"], o["t"].item()) for o in objs]
        bl = [r, "x"] if r == 0 else [None, None]
        ops.broadcast_object_list(bl, 0, g)
        out["bcast_obj"] = bl
        got_obj = [None]
        ops.scatter_object_list(got_obj, [{"to": k} for k in range(n)] if r == 2 else None, 2, g)
        out["scatter_obj"] = got_obj[0]
        gathered = [None] * n if r == 1 else None
        ops.gather_object(r * r, gathered, 1, g)
        out["gather_obj"] = gathered
        ops.barrier(g)
        return out

    res = _ok(_ranks(n, body))
    inp = lambda size: [_inputs(r, n, size) for r in range(n)]  # noqa: E731
    for r in range(n):
        np.testing.assert_array_equal(res[r]["broadcast"], inp(4)[2])
        np.testing.assert_array_equal(res[r]["all_gather"], np.stack(inp(3)))
        np.testing.assert_array_equal(res[r]["into"], np.concatenate(inp((2, 3))))
        np.testing.assert_array_equal(res[r]["rs"], sum(x[2 * r:2 * r + 2] for x in inp(2 * n)))
        np.testing.assert_array_equal(res[r]["rs_list"], np.max([x[r] for x in inp((n, 2))], axis=0))
        np.testing.assert_array_equal(res[r]["scatter"], np.full(2, 10.0 * r))
        sent = [np.split(np.arange(6, dtype=np.float32) + 100 * k, [1, 3]) for k in range(n)]
        np.testing.assert_array_equal(res[r]["a2a"], np.concatenate([sent[k][r] for k in range(n)]))
        for k in range(n):
            np.testing.assert_array_equal(res[r]["a2a_list"][k], np.full(k + 1, 10.0 * k + r))
        assert all(np.array_equal(a, np.full(3, 6.0)) for a in res[r]["async"])
        assert res[r]["objects"] == [(k, float(k)) for k in range(n)]
        assert res[r]["bcast_obj"] == [0, "x"] and res[r]["scatter_obj"] == {"to": r}
    np.testing.assert_allclose(res[1]["reduce"], sum(inp(5)), rtol=1e-6)
    np.testing.assert_array_equal(res[0]["reduce"], inp(5)[0])  # not the destination: unchanged
    np.testing.assert_array_equal(res[0]["gather"], np.stack(inp(2)))
    assert res[1]["gather_obj"] == [0, 1, 4] and res[0]["gather_obj"] is None


def test_point_to_point_matches_in_posting_order_and_any_source():
    def body(r, g):
        if r == 0:
            ops.send(ember.tensor([1.0, 1.0]), 1, g)
            ops.isend(ember.tensor([2.0, 2.0]), 1, g).wait()
            ops.send(ember.tensor([7.0]), 1, g, tag=5)
            ops.send_object_list([{"a": 1}, (2, 3)], 1, g)
            works = dist.batch_isend_irecv([dist.P2POp(dist.isend, ember.tensor([3.0]), 2, g),
                                            dist.P2POp(dist.irecv, back := ember.zeros(1), 2, g)])
            for w in works:
                w.wait()
            return back.tolist()
        if r == 2:
            got = ember.zeros(1)
            works = dist.batch_isend_irecv([dist.P2POp(dist.irecv, got, 0, g),
                                            dist.P2POp(dist.isend, ember.tensor([4.0]), 0, g)])
            for w in works:
                w.wait()
            return got.tolist()
        if r == 1:
            first, second = ember.zeros(2), ember.zeros(2)
            w1, w2 = ops.irecv(first, 0, g), ops.irecv(second, 0, g)
            w2.wait()  # waiting the second first still gives the first message to the first irecv
            w1.wait()
            tagged = ember.zeros(1)
            sender = ops.recv(tagged, None, g, tag=5)
            received = [None, None]
            ops.recv_object_list(received, 0, g)
            return first.tolist(), second.tolist(), tagged.tolist(), sender, received
        return None

    res = _ok(_ranks(3, body))
    assert res[1] == ([1.0, 1.0], [2.0, 2.0], [7.0], 0, [{"a": 1}, (2, 3)])
    assert res[0] == [4.0] and res[2] == [3.0]


def test_subgroups_number_their_own_collectives():
    def body(r, g):
        from ember.distributed.gloo import rendezvous

        sub = rendezvous.new_group(g, [0, 2], g.timeout)
        if r == 1:
            assert sub is None
            t = ember.tensor([5.0])
            ops.all_reduce(t, group=g)
            return t.item()
        assert sub.rank() == (0 if r == 0 else 1) and sub.size() == 2
        s = ember.tensor([float(r)])
        ops.all_reduce(s, group=sub)
        ops.broadcast(s, 2, sub)  # src is a world rank, as in torch
        t = ember.tensor([5.0])
        ops.all_reduce(t, group=g)
        return s.item(), t.item()

    assert _ok(_ranks(3, body)) == [(2.0, 15.0), 15.0, (2.0, 15.0)]


def test_rendezvous_errors_say_what_is_missing(monkeypatch):
    from ember.distributed.bootstrap import torchrun_environment
    from ember.distributed.gloo.rendezvous import make_store
    from ember.distributed.run import _parser, rank_environments

    for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="RANK environment variable"):
        dist.init_process_group("gloo")
    with pytest.raises(ValueError, match="MASTER_ADDR and MASTER_PORT"):
        dist.init_process_group("gloo", rank=0, world_size=1)
    with pytest.raises(ValueError, match="not understood"):
        make_store("udp://x:1", 0, 1, timedelta(seconds=1))
    assert not dist.is_initialized()
    opts = _parser().parse_args(["--nproc_per_node", "2", "--nnodes", "2", "--node_rank", "1", "t.py"])
    envs = rank_environments(opts, 29500)
    assert [(e["RANK"], e["LOCAL_RANK"], e["WORLD_SIZE"], e["MASTER_PORT"]) for e in envs] == \
        [("2", "0", "4", "29500"), ("3", "1", "4", "29500")]
    assert torchrun_environment({"PMI_RANK": "3", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1", "RANK": "9"}) == \
        {"WORLD_SIZE": "4", "LOCAL_RANK": "1"}  # what the launcher already set wins
    assert dist.get_default_backend_for_device("cpu") == "gloo" and dist.is_gloo_available()


# ---- failures: errors that name the rank, never a hang -----------------------------------------------------
def test_a_rank_that_never_arrives_is_named_after_the_timeout():
    def body(r, g):
        if r == 2:
            time.sleep(3.0)  # alive (its reader thread answers) but never calls the all_reduce
            return None
        t0 = time.monotonic()
        with pytest.raises(dist.DistBackendError) as info:
            ops.all_reduce(ember.ones(3), group=g)
        return str(info.value), time.monotonic() - t0

    res = _ok(_ranks(3, body, timeout_s=0.5))
    for message, waited in res[:2]:
        assert "all_reduce (collective #1 on the default group) timed out" in message
        assert "rank(s) 2 did not arrive" in message and "rank 2 has issued 0 collective(s)" in message
        assert waited < 2.9  # the 0.5 s timeout, then the answers: not the 3 s rank 2 sleeps


def test_a_rank_that_left_makes_the_others_fail_at_once():
    def body(r, g):
        if r == 1:
            return None  # ends (closes its connections with a leave notice) without taking part
        with pytest.raises(dist.DistBackendError, match="rank 1 ended its script"):
            ops.all_reduce(ember.ones(3), group=g)
        return "raised"

    assert _ok(_ranks(2, body, timeout_s=30))[0] == "raised"


def test_mismatched_shapes_and_monitored_barrier_are_named():
    def body(r, g):
        with pytest.raises(dist.DistBackendError, match="differ in shape or dtype"):
            ops.all_reduce(ember.ones(3 + r), group=g)
        if r == 1:
            time.sleep(1.0)
            return None
        with pytest.raises(dist.DistBackendError, match="Rank 1 failed to pass monitoredBarrier in 300 ms"):
            ops.monitored_barrier(g, timedelta(milliseconds=300))
        return "named"

    assert _ok(_ranks(2, body))[0] == "named"


def test_received_objects_cannot_run_code():
    evil = pickle.dumps(type("E", (), {"__reduce__": lambda self: (os.system, ("echo owned",))})())
    with pytest.raises(objects.RefusedObject, match="refusing to rebuild posix.system"):
        objects.loads(evil, "all_gather_object from rank 1")
    value = {"a": [1, 2.5, "s", None], "arr": np.arange(3), "t": ember.tensor([1.0, 2.0]), "set": {1, 2}}
    back = objects.loads(objects.dumps(value), "test")
    assert back["a"] == value["a"] and back["set"] == {1, 2} and back["t"].tolist() == [1.0, 2.0]
    np.testing.assert_array_equal(back["arr"], np.arange(3))


# ---- processes ---------------------------------------------------------------------------------------------
def _forked_rank(rank, port, out):
    """A forked rank: env:// rendezvous, DistributedDataParallel for two steps; exits without pytest teardown."""
    code = 1
    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2")
        dist.init_process_group("gloo", timeout=timedelta(seconds=30))
        model = ember.nn.Linear(3, 1)
        with ember.no_grad():
            model.weight.fill_(float(rank))  # replicas start from rank 0's weights
            model.bias.zero_()
        ddp = ember.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1e-6)  # one bucket per parameter
        x = ember.tensor(np.arange(6, dtype=np.float32).reshape(2, 3) + rank)
        for _ in range(2):
            ddp.zero_grad()
            ddp(x).sum().backward()
            with ember.no_grad():
                for p in ddp.parameters():
                    p -= 0.1 * p.grad
        np.save(out / f"w{rank}.npy", np.concatenate([model.weight.detach().numpy().ravel(), model.bias.detach().numpy()]))
        dist.destroy_process_group()
        code = 0
    finally:
        os._exit(code)


@pytest.mark.skipif(sys.platform != "linux", reason="forks the test process")
def test_forked_ranks_rendezvous_by_env_and_train_with_ddp(tmp_path):
    import multiprocessing

    port = _free_port()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_forked_rank, args=(r, port, tmp_path)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    # the gradient of sum(x @ w + b) is the column sums of x, averaged over the ranks' batches
    grad_w = (np.arange(6).reshape(2, 3).sum(0) + (np.arange(6).reshape(2, 3) + 1).sum(0)) / 2
    want = np.concatenate([-0.2 * grad_w, [-0.2 * 2]])
    for r in range(2):
        np.testing.assert_allclose(np.load(tmp_path / f"w{r}.npy"), want, rtol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("init", ["env", "tcp", "file"])
def test_spawned_ranks_train_like_one_process(init, tmp_path):
    result = subprocess.run([sys.executable, str(HERE / "worker_gloo_spawn.py"), init, str(tmp_path)],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0 and "gloo spawn ok" in result.stdout, result.stderr[-3000:]


def _torchrun(lib, n, prefix):
    port = _free_port()
    procs = [subprocess.Popen([sys.executable, str(HERE / "worker_gloo_vs_torch.py"), lib, prefix],
                              env=dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1",
                                       MASTER_PORT=str(port)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for r in range(n)]
    outs = [p.communicate(timeout=240) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]


@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 3])
def test_the_same_program_gives_torchs_gloo_results(n, tmp_path):
    _torchrun("torch", n, str(tmp_path / "torch"))
    _torchrun("ember", n, str(tmp_path / "ember"))
    for r in range(n):
        theirs, ours = np.load(tmp_path / f"torch{r}.npz"), np.load(tmp_path / f"ember{r}.npz")
        assert set(theirs.files) == set(ours.files)
        for key in theirs.files:
            if key.startswith("ddp_param"):  # 18 SGD steps: forward/backward rounding, not communication
                np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-5, atol=1e-6, err_msg=key)
            elif n == 3 and ours[key].dtype.kind == "f" and "all_reduce" in key or key == "reduce_scatter_tensor":
                np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-6, atol=1e-6, err_msg=key)  # sum order
            else:  # 2 ranks, integers, data movement: bitwise
                np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)


@pytest.mark.slow
def test_launcher_starts_ranks_itself_and_reports_the_failing_one(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(
        "import os, sys, ember, ember.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        "t = ember.tensor([float(dist.get_rank())]); dist.all_reduce(t)\n"
        "open(sys.argv[1] + os.environ['LOCAL_RANK'], 'w').write(f\"{os.environ['RANK']} {t.item()}\")\n"
        "if len(sys.argv) > 2 and dist.get_rank() == 1: raise ValueError('boom on rank 1')\n"
        "dist.barrier()\n")
    base = [sys.executable, "-m", "ember.distributed.run", "--launcher", "local", "--nproc_per_node", "3"]
    ok = subprocess.run(base + [str(script), str(tmp_path / "r")], capture_output=True, text=True, timeout=180)
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert [(tmp_path / f"r{r}").read_text() for r in range(3)] == [f"{r} 3.0" for r in range(3)]
    bad = subprocess.run(base + [str(script), str(tmp_path / "r"), "fail"], capture_output=True, text=True,
                         timeout=180)
    assert bad.returncode == 1
    assert "Root cause (first observed failure):" in bad.stderr and "ValueError: boom on rank 1" in bad.stderr
    assert "rank 1 raised ValueError: boom on rank 1" in bad.stderr  # the others' errors name the cause


@pytest.mark.slow
def test_a_torch_ddp_script_runs_unchanged_under_ember_run():
    script = str(HERE / "worker_torch_ddp_tutorial.py")
    theirs = subprocess.run([sys.executable, script, str(_free_port())], capture_output=True, text=True, timeout=180)
    ours = subprocess.run([sys.executable, "-m", "ember.cli", "run", script, str(_free_port())], capture_output=True,
                          text=True, timeout=180)
    assert theirs.returncode == 0 and ours.returncode == 0, ours.stderr[-3000:]
    loss_t, weights_t = [float(v) for v in theirs.stdout.split()[3::3]]
    loss_e, weights_e = [float(v) for v in ours.stdout.split()[3::3]]
    assert abs(loss_e - loss_t) < 1e-5 and abs(weights_e - weights_t) < 1e-5, (theirs.stdout, ours.stdout)


def test_all_gather_into_tensor_output_rule_is_shared_by_both_engines() -> None:
    """One rule (collectives.check_gather_into) for MPI and gloo: stacked or dim-0 concatenated, same dtype."""
    from ember.distributed.collectives import check_gather_into

    x = ember.zeros(2, 3)
    check_gather_into(ember.zeros(3, 2, 3), x, 3)  # stacked
    check_gather_into(ember.zeros(6, 3), x, 3)  # concatenated
    for bad in (ember.zeros(5, 3), ember.zeros(3, 3, 2), ember.zeros(6, 3, dtype=ember.float64)):
        rule = r"all_gather_into_tensor: output must have shape \(3, 2, 3\) or \(6, 3\)"
        with pytest.raises(ValueError, match=rule):
            check_gather_into(bad, x, 3)
