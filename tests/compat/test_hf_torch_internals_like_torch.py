"""The torch internals Hugging Face ``transformers`` touches at import and load time, each against torch 2.13.

``@torch.no_grad`` without parentheses, ``torch.utils._pytree`` key paths, ``torch.cuda``'s graph names and
``StreamContext``, ``torch.distributed``'s placement types and named-but-refused DTensor/FSDP stack,
``get_process_group_ranks``, ``UntypedStorage.from_file`` (what ``safetensors.safe_open`` maps files with),
``Module.get_extra_state`` and ``TransformGetItemToIndex``.
"""
from __future__ import annotations

from collections import OrderedDict, namedtuple

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


# ---- grad mode as a decorator ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["no_grad", "enable_grad", "inference_mode"])
def test_grad_mode_decorates_without_parentheses_like_torch(name):
    def body(lib):
        def f(x):
            """doc"""
            return (x * 2).requires_grad
        return f

    for lib in (torch, ember):
        wrapped = getattr(lib, name)(body(lib))
        assert callable(wrapped) and wrapped.__doc__ == "doc"
        x = lib.ones(2, requires_grad=True)
        with lib.no_grad():
            inside_no_grad = wrapped(x)
        outside = wrapped(x)
        expected = {"no_grad": (False, False), "enable_grad": (True, True), "inference_mode": (False, False)}[name]
        assert (inside_no_grad, outside) == expected, (lib.__name__, name)


def test_inference_mode_false_as_decorator_keeps_its_mode():
    for lib in (torch, ember):
        @lib.inference_mode(False)
        def f(x):
            return (x * 2).requires_grad

        assert f(lib.ones(2, requires_grad=True)) is True
        assert isinstance(lib.no_grad(), lib.no_grad)  # called with no function: still a context manager


# ---- pytree key paths -----------------------------------------------------------------------------------
_NT = namedtuple("_NT", "a b")


def _tree():
    return {"x": [1, (2, 3)], "y": _NT(4, {"z": 5}), "o": OrderedDict(q=6)}


def test_pytree_flatten_with_path_like_torch():
    from ember.utils import _pytree as ep
    from torch.utils import _pytree as tp

    got, spec = ep.tree_flatten_with_path(_tree())
    want, _ = tp.tree_flatten_with_path(_tree())
    assert [(ep.keystr(k), v) for k, v in got] == [(tp.keystr(k), v) for k, v in want]
    assert [[str(k) for k in path] for path, _ in got] == [[str(k) for k in path] for path, _ in want]
    assert ep.tree_unflatten([v for _, v in got], spec) == _tree()
    assert ep.tree_map_with_path(lambda kp, v: ep.keystr(kp), _tree()) == tp.tree_map_with_path(
        lambda kp, v: tp.keystr(kp), _tree())
    assert [ep.keystr(k) for k, _ in ep.tree_leaves_with_path(_tree())] == [
        tp.keystr(k) for k, _ in tp.tree_leaves_with_path(_tree())]


def test_pytree_dict_helpers_and_registration_with_keys_like_torch():
    from ember.utils import _pytree as ep
    from torch.utils import _pytree as tp

    d = {"a": 1, "b": 2}
    assert ep._dict_flatten(d) == tp._dict_flatten(d)
    assert ep._dict_unflatten([5, 6], ["a", "b"]) == tp._dict_unflatten([5, 6], ["a", "b"])
    (keys, ctx), (tkeys, tctx) = ep._dict_flatten_with_keys(d), tp._dict_flatten_with_keys(d)
    assert ctx == tctx and [(str(k), v) for k, v in keys] == [(str(k), v) for k, v in tkeys]
    assert ep.SequenceKey(2).get([0, 1, 7]) == 7 and ep.MappingKey("k").get({"k": 3}) == 3
    assert ep.GetAttrKey("a").get(_NT(8, 9)) == 8

    class Box(dict):  # the way transformers registers ModelOutput: dict children, keys from the dict helper
        pass

    ep.register_pytree_node(Box, lambda b: (list(b.values()), list(b.keys())),
                            lambda values, ctx: Box(zip(ctx, values)), flatten_with_keys_fn=ep._dict_flatten_with_keys)
    pairs, _ = ep.tree_flatten_with_path([Box(w=1, v=[2])])
    assert [(ep.keystr(k), v) for k, v in pairs] == [("[0]['w']", 1), ("[0]['v'][0]", 2)]

    class NoKeys:
        pass

    ep.register_pytree_node(NoKeys, lambda n: ([], None), lambda values, ctx: NoKeys())
    with pytest.raises(ValueError, match="flatten_with_keys_fn"):
        ep.tree_flatten_with_path([NoKeys()])


# ---- torch.cuda names a CPU build has ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["CUDAGraph", "MemPool", "graph_pool_handle"])
def test_cuda_graph_names_exist_and_refuse_like_torch_cpu(name):
    assert hasattr(torch.cuda, name) and hasattr(ember.cuda, name)
    with pytest.raises(RuntimeError):
        getattr(torch.cuda, name)()
    with pytest.raises(RuntimeError, match=f"torch.cuda.{name}: ember captures CUDA graphs only on a CUDA device"):
        getattr(ember.cuda, name)()


def test_cuda_graph_context_and_stream_context():
    assert isinstance(torch.cuda.graph, type) and isinstance(ember.cuda.graph, type)
    with pytest.raises(RuntimeError, match="torch.cuda.graph"):
        ember.cuda.graph(None)
    assert ember.cuda.is_current_stream_capturing() is False
    import ember.cuda.graphs as graphs  # PyTorch's module path

    assert graphs.CUDAGraph is ember.cuda.CUDAGraph
    for lib in (torch, ember):
        context = lib.cuda.StreamContext(None)
        assert isinstance(context, lib.cuda.StreamContext) and context.stream is None
        with context:
            pass
        assert isinstance(lib.cuda.stream(None), lib.cuda.StreamContext)


# ---- torch.distributed ----------------------------------------------------------------------------------
def test_placement_types_like_torch():
    from torch.distributed.tensor import placement_types as tp

    from ember.distributed.tensor import placement_types as ep

    for make in (lambda m: m.Shard(0), lambda m: m.Shard(dim=2), lambda m: m.Replicate(), lambda m: m.Partial(),
                 lambda m: m.Partial("avg"), lambda m: m._StridedShard(1, split_factor=2)):
        e, t = make(ep), make(tp)
        assert (repr(e), str(e)) == (repr(t), str(t))
        assert (e.is_shard(), e.is_replicate(), e.is_partial()) == (t.is_shard(), t.is_replicate(), t.is_partial())
        assert e == make(ep) and hash(e) == hash(make(ep))
    assert (ep.Shard(0).is_shard(0), ep.Shard(0).is_shard(1)) == (tp.Shard(0).is_shard(0), tp.Shard(0).is_shard(1))
    assert (ep.Shard(0) == ep._StridedShard(0, split_factor=1)) == (tp.Shard(0) == tp._StridedShard(0, split_factor=1))
    assert (ep.Partial() == ep.Partial("sum"), ep.Partial() == ep.Partial("avg")) == (True, False)
    from ember.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy
    from torch.distributed.fsdp import CPUOffloadPolicy as TCPU, MixedPrecisionPolicy as TMP

    assert MixedPrecisionPolicy() .cast_forward_inputs == TMP().cast_forward_inputs
    assert CPUOffloadPolicy().pin_memory == TCPU().pin_memory


def test_dtensor_stack_is_named_and_refused():
    from ember.distributed._functional_collectives import all_to_all_single_autograd, wait_tensor
    from ember.distributed.algorithms.join import Join
    from ember.distributed.checkpoint.hf_storage import HuggingFaceStorageReader
    from ember.distributed.device_mesh import DeviceMesh, init_device_mesh
    from ember.distributed.fsdp import FullyShardedDataParallel, fully_shard
    from ember.distributed.tensor import DTensor, distribute_tensor
    from ember.distributed.tensor._utils import compute_local_shape_and_global_offset

    t = ember.ones(2)
    assert not isinstance(t, DTensor) and issubclass(DTensor, ember.Tensor)
    assert wait_tensor(t) is t
    for refused in (DTensor, DeviceMesh, Join, HuggingFaceStorageReader, FullyShardedDataParallel):
        with pytest.raises(NotImplementedError, match=f"{refused.__name__}: ember's torch.distributed has collectives"):
            refused()
    for refused in (distribute_tensor, init_device_mesh, fully_shard, compute_local_shape_and_global_offset,
                    all_to_all_single_autograd):
        with pytest.raises(NotImplementedError, match=f"{refused.__name__}: ember's torch.distributed"):
            refused(t)
    assert ember.distributed.is_available() is torch.distributed.is_available() is True


def test_get_process_group_ranks_needs_a_group_like_torch():
    assert "get_process_group_ranks" in dir(ember.distributed)
    with pytest.raises((RuntimeError, ValueError)):
        torch.distributed.get_process_group_ranks(None)
    with pytest.raises(RuntimeError, match="get_process_group_ranks"):
        ember.distributed.get_process_group_ranks(None)


# ---- storages mapped from files --------------------------------------------------------------------------
@pytest.mark.parametrize("shared", [False, True])
def test_untyped_storage_from_file_like_torch(tmp_path, shared):
    data = np.arange(40, dtype=np.uint8)
    path = tmp_path / "bytes.bin"
    path.write_bytes(data.tobytes())
    t = torch.UntypedStorage.from_file(str(path), shared=shared, nbytes=32)
    e = ember.UntypedStorage.from_file(str(path), shared=shared, nbytes=32)
    assert e.nbytes() == t.nbytes() == 32 and e.tolist() == t.tolist()
    assert e[5:9].tolist() == t[5:9].tolist()
    e[0] = 200
    assert path.read_bytes()[0] == (200 if shared else 0)  # shared writes reach the file, private ones do not
    with pytest.raises(RuntimeError):
        ember.UntypedStorage.from_file(str(path), shared=False, nbytes=41)


def test_safetensors_safe_open_reads_through_ember(tmp_path):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    tensors = {"w": torch.arange(6, dtype=torch.float64).reshape(2, 3), "i": torch.tensor([1, 2, 3], dtype=torch.int32)}
    path = str(tmp_path / "m.safetensors")
    safetensors_torch.save_file(tensors, path)
    storage = ember.UntypedStorage.from_file(path, shared=False, nbytes=len(open(path, "rb").read()))
    header = int.from_bytes(bytes(storage[:8].tolist()), "little")
    assert storage.nbytes() == 8 + header + 6 * 8 + 3 * 4


# ---- Module extra state ------------------------------------------------------------------------------------
def _extra_module(lib):
    class WithExtra(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(2, 2)
            self.note = {"step": 3}

        def get_extra_state(self):
            return dict(self.note)

        def set_extra_state(self, state):
            self.note = dict(state)

    outer = lib.nn.Sequential(WithExtra(), lib.nn.ReLU())
    return outer


def test_module_extra_state_like_torch():
    assert ember.nn.modules.module._EXTRA_STATE_KEY_SUFFIX == torch.nn.modules.module._EXTRA_STATE_KEY_SUFFIX
    t, e = _extra_module(torch), _extra_module(ember)
    assert list(e.state_dict()) == list(t.state_dict()) == ["0._extra_state", "0.lin.weight", "0.lin.bias"]
    assert e.state_dict()["0._extra_state"] == {"step": 3}
    sd = dict(e.state_dict())
    sd["0._extra_state"] = {"step": 9}
    e.load_state_dict(sd)
    assert e[0].note == {"step": 9}
    for lib, model in ((torch, t), (ember, e)):
        missing = {k: v for k, v in model.state_dict().items() if not k.endswith("_extra_state")}
        with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "0._extra_state"'):
            model.load_state_dict(missing)
        assert model.load_state_dict(missing, strict=False).missing_keys == ["0._extra_state"]
        plain = lib.nn.Linear(2, 2)
        with pytest.raises(RuntimeError, match="Unexpected key"):
            plain.load_state_dict({**plain.state_dict(), "_extra_state": 1})
        with pytest.raises(RuntimeError, match="should never be called"):
            plain.get_extra_state()


# ---- TransformGetItemToIndex ----------------------------------------------------------------------------------
def test_transform_getitem_to_index_like_torch():
    from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex as TMode

    from ember._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex as EMode

    table = np.arange(24).reshape(4, 6)
    tt, et = torch.tensor(table), ember.tensor(table)
    cases = [lambda lib: (lib.tensor(1), 2), lambda lib: (1, lib.tensor(3)),
             lambda lib: (lib.tensor([[0], [2]]), lib.tensor([[1, 5]])), lambda lib: (slice(1, None), 0)]
    for case in cases:
        with TMode():
            want = tt[case(torch)]
        with EMode():
            got = et[case(ember)]
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


# ---- torch._dynamo.eval_frame.OptimizedModule, device comparisons -------------------------------------------
def test_compiled_module_is_an_optimized_module_like_torch():
    from ember._dynamo.eval_frame import OptimizedModule

    for lib, optimized in ((torch, torch._dynamo.eval_frame.OptimizedModule), (ember, OptimizedModule)):
        module = lib.nn.Linear(2, 2)
        compiled = lib.compile(module)
        assert isinstance(compiled, optimized) and compiled._orig_mod is module
        assert not isinstance(module, optimized)
        assert not isinstance(lib.compile(lambda x: x + 1), optimized)
        assert [p is q for p, q in zip(compiled.parameters(), module.parameters())] == [True, True]
    assert ember._dynamo.eval_frame.OptimizedModule is OptimizedModule


@pytest.mark.parametrize("other", ["npu", "xpu", "not a device", 0, None])
def test_device_equals_unknown_strings_false_like_torch(other):
    assert (torch.device("cpu") == other) is False
    assert (ember.device("cpu") == other) is False
    assert (ember.device("cpu") != other) is True
