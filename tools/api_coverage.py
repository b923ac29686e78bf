"""How much of PyTorch's public API ember has, namespace by namespace.

PyTorch's names come from the installed reference ``torch`` (a test-only dependency): each namespace's
``__all__`` where it has one, else its public ``dir()``; names re-exported from outside PyTorch (``typing``,
``math``...) and submodules are not counted. :data:`EXCLUDED` lists, per namespace, the name patterns left
out on purpose, each with its reason. ember's side is looked up through the same import hook ``ember run``
uses (``torch.X`` -> ``ember.X``), so a module path counts only if ``import torch.X`` works under ember.

Usage:
    python tools/api_coverage.py                  # the table
    python tools/api_coverage.py --missing nn     # the names of one namespace ember lacks
    python tools/api_coverage.py --markdown       # the table as Markdown (docs/pytorch-compat.md)
"""
from __future__ import annotations

import argparse
import fnmatch
import importlib
import os
import sys
import types
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Namespace label -> PyTorch module path ("Tensor" is the class torch.Tensor).
NAMESPACES: dict[str, str] = {
    "torch": "torch",
    "Tensor": "torch.Tensor",
    "nn": "torch.nn",
    "nn.functional": "torch.nn.functional",
    "nn.init": "torch.nn.init",
    "nn.utils": "torch.nn.utils",
    "nn.utils.rnn": "torch.nn.utils.rnn",
    "nn.utils.parametrize": "torch.nn.utils.parametrize",
    "nn.utils.prune": "torch.nn.utils.prune",
    "optim": "torch.optim",
    "optim.lr_scheduler": "torch.optim.lr_scheduler",
    "optim.swa_utils": "torch.optim.swa_utils",
    "utils.data": "torch.utils.data",
    "autograd": "torch.autograd",
    "autograd.functional": "torch.autograd.functional",
    "accelerator": "torch.accelerator",
    "backends.cudnn": "torch.backends.cudnn",
    "backends.cuda": "torch.backends.cuda",
    "backends.mps": "torch.backends.mps",
    "cuda.amp": "torch.cuda.amp",
    "amp": "torch.amp",
    "multiprocessing": "torch.multiprocessing",
    "serialization": "torch.serialization",
    "jit": "torch.jit",
    "distributions": "torch.distributions",
    "distributions.constraints": "torch.distributions.constraints",
    "distributions.transforms": "torch.distributions.transforms",
    "linalg": "torch.linalg",
    "fft": "torch.fft",
    "special": "torch.special",
    "func": "torch.func",
    "sparse": "torch.sparse",
    "autograd.forward_ad": "torch.autograd.forward_ad",
}

# Module paths real programs import (issue 17): each counts as one name, present if it imports under ember.
MODULE_PATHS = [
    "torch.accelerator", "torch.backends.cudnn", "torch.backends.cuda", "torch.backends.mps", "torch.cuda",
    "torch.cuda.amp", "torch.amp", "torch.autograd", "torch.autograd.functional", "torch.multiprocessing",
    "torch.serialization", "torch.utils.tensorboard", "torch.utils.data", "torch.utils.data.dataloader",
    "torch.utils.data.dataset", "torch.utils.data.sampler", "torch.utils.data.distributed", "torch.nn.modules",
    "torch.nn.modules.module", "torch.nn.modules.activation", "torch.nn.modules.linear", "torch.nn.modules.conv",
    "torch.nn.modules.loss", "torch.nn.modules.batchnorm", "torch.nn.modules.normalization",
    "torch.nn.modules.container", "torch.nn.modules.dropout", "torch.nn.modules.pooling", "torch.nn.modules.rnn",
    "torch.nn.modules.sparse", "torch.nn.modules.transformer", "torch.nn.modules.padding",
    "torch.nn.modules.flatten", "torch.nn.modules.upsampling", "torch.nn.modules.pixelshuffle",
    "torch.nn.modules.utils", "torch.nn.parameter", "torch.nn.functional", "torch.nn.init", "torch.nn.utils",
    "torch.nn.utils.rnn", "torch.nn.utils.parametrize", "torch.nn.utils.parametrizations", "torch.nn.utils.prune",
    "torch.nn.parallel", "torch.optim", "torch.optim.optimizer", "torch.optim.lr_scheduler", "torch.optim.swa_utils",
    "torch.optim.sgd", "torch.optim.adam", "torch.optim.adamw", "torch.jit", "torch.onnx", "torch.random",
    "torch.distributed", "torch.testing", "torch.utils.checkpoint", "torch.hub", "torch.fft", "torch.linalg",
    "torch.special", "torch.distributions", "torch.types", "torch.overrides",
]

# Left out on purpose: (namespace, pattern) -> reason. Patterns are fnmatch globs on the name.
EXCLUDED: dict[tuple[str, str], str] = {}


def _exclude(namespace: str, reason: str, *patterns: str) -> None:
    for p in patterns:
        EXCLUDED[(namespace, p)] = reason


_QUANT = ("quantization beyond ember.ao's eager mode (docs/quantization.md): quantized RNN ops, 4/2-bit dtypes, "
          "fused observer kernels, empty quantized factories")
_QUANT_METHODS = "quantized-tensor methods: ember has them on its QuantizedTensor only (docs/quantization.md)"
_SPARSE = ("compressed sparse layouts (CSR/CSC/BSR/BSC) and semi-structured 2:4 sparsity: ember's sparse tensors "
           "are COO only (docs/sparse.md)")
_COMPLEX = "complex32 (ComplexHalf): ember's complex dtypes are complex64/complex128"
_VENDOR = "vendor kernels and their flags (cuDNN, MKL-DNN, FBGEMM, MIOpen, NNPACK, XPU, MPS, MTIA)"
_JIT_IR = "TorchScript IR and compiler internals (ember.jit traces into ember's own graph IR instead)"
_SYM = "symbolic shapes / dynamo / export internals (ember.compile has its own tracer)"
_INTERNAL = "C++ runtime internals, storages and deprecated typed storages"
_NAMED = "named tensors (a prototype in PyTorch)"
_NESTED = "nested/jagged tensors"
_exclude("Tensor", _QUANT_METHODS, "dequantize", "q_*", "qscheme", "int_repr", "is_quantized")
for ns in ("torch", "Tensor"):
    _exclude(ns, _QUANT, "quantize_per_tensor_dynamic", "*quantized*", "quint4x2", "quint2x4",
             "fused_moving_avg_obs_fake_quant", "choose_qparams*", "_fused*", "_make_per_*")
    _exclude(ns, _SPARSE, "sparse_csr_*", "sparse_csc_*", "sparse_bsr_*", "sparse_bsc_*", "sparse_compressed_*",
             "to_sparse_csr", "to_sparse_csc", "to_sparse_bsr", "to_sparse_bsc", "crow_indices", "col_indices",
             "ccol_indices", "row_indices", "_to_sparse*")
    _exclude(ns, _COMPLEX, "chalf", "complex32")
    _exclude(ns, _VENDOR, "cudnn_*", "miopen_*", "mkldnn_*", "fbgemm_*", "nnpack*", "is_vulkan_*", "mps",
             "*_mkldnn*", "is_mkldnn", "is_xpu", "is_mps", "is_ipu", "is_hpu", "is_mtia", "is_maia", "xpu",
             "ipu", "is_vulkan", "is_xla", "is_meta", "is_mkldnn", "to_mkldnn", "native_*", "_cudnn*",
             "cuda_*", "vulkan*", "is_mtia", "mtia")
    _exclude(ns, _NAMED, "names", "refine_names", "rename", "rename_", "align_to", "align_as", "has_names")
    _exclude(ns, _NESTED, "nested_*", "is_nested", "_nested*")
    _exclude(ns, _INTERNAL, "*Storage", "storage*", "untyped_storage", "typed_storage", "_storage",
             "data_ptr", "is_shared", "share_memory_", "pin_memory", "is_pinned", "_C", "classproto",
             "set_", "record_stream", "storage_offset", "module_load", "new_tensor", "dim_order", "_*")
    _exclude(ns, "out-of-place copies of view ops made for functionalization (view_copy, t_copy, ...)",
             "*_copy")
_exclude("torch", _SYM, "sym_*", "Sym*", "compile", "_dynamo", "export", "fx", "cond", "while_loop",
         "unravel_index", "compiler", "library", "is_inference_mode_enabled", "vmap", "func", "ops",
         "Generator", "set_float32_matmul_precision", "get_float32_matmul_precision", "use_deterministic_algorithms",
         "are_deterministic_algorithms_enabled", "is_deterministic_algorithms_warn_only_enabled",
         "set_deterministic_debug_mode", "get_deterministic_debug_mode", "set_warn_always", "is_warn_always_enabled",
         "DisableTorchFunction*", "enable_grad", "typename", "is_storage", "TypedStorage", "UntypedStorage",
         "get_device_module", "GradScaler")
_exclude("torch", _JIT_IR, "jit", "ScriptModule", "ScriptFunction", "script*", "trace*", "Tag", "Stream",
         "Event", "StreamContext", "AggregationType", "FileCheck", "Future", "wait", "fork")
_exclude("torch", _INTERNAL, "AVG", "ConcreteTypeStore", "DeserializationStorageContext", "ExcludeDispatchKeyGuard",
         "Graph*", "IODescriptor", "LiteScriptModule", "LockingLogger", "ModuleDict", "NoopLogger",
         "PyTorchFileReader", "PyTorchFileWriter", "SerializationStorageContext", "StaticModule",
         "ThroughputBenchmark", "*Type", "Argument*", "Node", "Block", "Value", "Use", "Code", "CallStack",
         "InferredType", "AliasDb", "BenchmarkConfig", "BenchmarkExecutionStats", "BufferDict", "CompilationUnit",
         "DispatchKey*", "ErrorReport", "FunctionSchema", "GraphExecutorState", "LoggerBase", "PyObjectType",
         "ScriptClass*", "ScriptDict*", "ScriptList*", "ScriptMethod", "ScriptObject*", "DeviceObjType",
         "default_generator", "device", "dtype", "finfo", "iinfo", "memory_format", "layout", "Size",
         "return_types", "set_vital", "vitals_enabled", "read_vitals", "get_file_path", "prepare_multiprocessing_environment",
         "import_ir_module*", "init_num_threads", "merge_type_from_type_comment", "parse_ir", "parse_schema",
         "parse_type_comment", "unify_type_list", "autocast_*_nesting", "is_anomaly_*", "set_anomaly_enabled",
         "_assert*", "fused_*", "segment_reduce", "rand_like", "sym_*", "SymInt", "SymFloat", "SymBool",
         "is_grad_enabled")
# The excluded list above accidentally names core objects (device, dtype, finfo, iinfo, Size, rand_like,
# is_grad_enabled, enable_grad, Generator...). Those are PyTorch API ember must have: re-include them.
_ALWAYS_COUNTED = {"device", "dtype", "finfo", "iinfo", "Size", "rand_like", "is_grad_enabled", "enable_grad",
                   "Generator", "default_generator", "compile", "memory_format", "layout", "vmap",
                   "set_float32_matmul_precision", "get_float32_matmul_precision", "use_deterministic_algorithms",
                   "are_deterministic_algorithms_enabled", "typename", "is_storage", "unravel_index", "GradScaler",
                   "is_inference_mode_enabled", "new_tensor", "pin_memory", "is_pinned", "share_memory_",
                   "is_shared", "data_ptr", "storage_offset", "values", "indices", "real", "imag", "is_meta",
                   "set_warn_always", "is_warn_always_enabled", "trace", "Stream", "Event", "jit", "export",
                   "fx", "func", "library", "ops", "compiler", "ScriptModule", "ScriptFunction", "script",
                   "index_copy", "is_complex", "is_anomaly_enabled", "set_anomaly_enabled",
                   "is_anomaly_check_nan_enabled", "sgn", "sgn_"}
for ns in ("nn",):
    _exclude(ns, _QUANT, "quantized", "qat", "quantizable", "intrinsic")
    _exclude(ns, "the lazy-module mixin and parameter placeholders are internals of Lazy* modules",
             "UninitializedBuffer")
for ns in ("nn.functional",):
    _exclude(ns, _VENDOR, "*cudnn*")
    _exclude(ns, "float8 / grouped GEMM kernels (CUDA-only prototypes)", "scaled_mm", "scaled_grouped_mm",
             "grouped_mm", "ScalingType", "SwizzleType")
    _exclude(ns, "re-exported helpers of PyTorch's implementation, not API", "boolean_dispatch",
             "has_torch_function*", "handle_torch_function", "BroadcastingList*", "Callable", "DType",
             "TYPE_CHECKING", "Optional", "Union", "GRID_SAMPLE_*", "reproducibility_notes", "sparse_support_notes",
             "tf32_notes", "math", "importlib", "warnings", "List", "Tuple", "Tensor", "torch",
             "assert_int_or_pair")
_exclude("autograd", "profiler and kernel-trace internals (ember has its own profiler)", "profiler*",
         "kineto_available", "DeviceType", "ProfilerActivity", "ProfilerState", "ProfilerConfig", "KinetoEvent",
         "emit_*", "record_function", "_*")
_exclude("backends.cuda", _VENDOR, "*cufft*", "*cublas*", "*cusolver*", "cuFFT*", "cuBLASModule", "SDPAParams",
         "can_use_*", "is_ck_sdpa_available", "is_flash_attention_available", "preferred_blas_library",
         "preferred_rocm_fa_library", "*fp16_bf16*", "tunable*", "ContextProp", "ctypes", "contextlib", "Enum",
         "Union", "deprecated", "torch", "Any", "blas_workspace_size")
_exclude("backends.mps", _VENDOR + " (Metal device queries)", "get_name", "get_core_count")
_exclude("utils.data", "DataPipes: deprecated in PyTorch (torchdata dropped them); not implemented",
         "*DataPipe", "DataChunk", "functional_datapipe", "guaranteed_datapipes_determinism", "non_deterministic",
         "runtime_validation*", "argument_validation")
_exclude("jit", _JIT_IR, "*")
_exclude("sparse", _SPARSE, "SparseSemiStructured*", "to_sparse_semi_structured")
_exclude("torch", _JIT_IR, "Capsule", "CompleteArgumentSpec", "ConcreteModuleTypeBuilder", "DeepCopyMemoTable",
         "ExecutionPlan", "Gradient", "JITException", "OperatorInfo", "ScriptModuleSerializer", "TracingState",
         "FatalError")
_exclude("torch", "sub-byte and raw-bit dtypes: no NumPy storage for them, and PyTorch itself runs almost no op "
         "on them (bit packing only)", "bit", "bits*", "int1", "int2", "int3", "int4", "int5", "int6", "int7",
         "uint1", "uint2", "uint3", "uint4", "uint5", "uint6", "uint7", "float4_e2m1fn_x2")
_exclude("torch", _VENDOR + " (IPU and XLA autocast state)", "*autocast_ipu*", "*autocast_xla*")
_exclude("torch", _INTERNAL + " (reduction enum of the C++ runtime, export's slice helper)", "SUM", "slice_inverse")
_exclude("Tensor", _SYM + " (export's slice helper)", "slice_inverse")
for name in ("trace", "script", "load", "save", "ScriptModule", "ScriptFunction", "ignore", "unused",
             "is_scripting", "is_tracing", "export", "annotate", "Final", "interface", "freeze", "optimize_for_inference",
             "trace_module", "fork", "wait", "enable_onednn_fusion", "onednn_fusion_enabled", "isinstance"):
    _ALWAYS_COUNTED.add(f"jit.{name}")


def excluded(namespace: str, name: str) -> str | None:
    if name in _ALWAYS_COUNTED and namespace in ("torch", "Tensor"):
        return None
    if f"{namespace}.{name}" in _ALWAYS_COUNTED:
        return None
    for (ns, pattern), reason in EXCLUDED.items():
        if ns == namespace and fnmatch.fnmatchcase(name, pattern):
            return reason
    return None


def _foreign(obj: object) -> bool:
    """Re-exported from outside PyTorch (typing.Optional, math.inf stays counted: it is a float)."""
    if isinstance(obj, types.ModuleType):
        return True
    module = getattr(obj, "__module__", None)
    if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)) and module:
        return not (module.startswith("torch") or module in ("builtins",)) or module.startswith("typing")
    return False


# Namespaces whose PyTorch module exposes its names as module properties (no __all__, not in dir()).
EXPLICIT_NAMES = {
    "torch.backends.cudnn": ["enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32",
                             "is_available", "version", "is_acceptable", "flags"],
}


# Public, documented functions of a namespace that its __all__ leaves out.
EXTRA_NAMES = {"torch.sparse": ["sampled_addmm", "spsolve", "spdiags"]}


def torch_names(path: str) -> list[str]:
    import torch

    if path in EXPLICIT_NAMES:
        return sorted(EXPLICIT_NAMES[path])

    if path == "torch.Tensor":
        return sorted(n for n in dir(torch.Tensor) if not n.startswith("_"))
    module = importlib.import_module(path)
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in dir(module) if not n.startswith("_")]
    # A name __all__ lists but the module lacks is not API (torch.sparse.__all__ names a "solve" that torch 2.13
    # does not define); documented functions missing from __all__ are (torch.sparse.sampled_addmm, spsolve, ...).
    names = [n for n in set(names) if hasattr(module, n)] + EXTRA_NAMES.get(path, [])
    return sorted(n for n in set(names) if not n.startswith("_") and not _foreign(getattr(module, n, None)))


def ember_object(path: str) -> object | None:
    from ember.run.alias import module_for

    import ember

    if path == "torch.Tensor":
        return ember.Tensor
    try:
        return module_for(path)
    except (ImportError, ValueError):
        return None


@dataclass
class Row:
    namespace: str
    counted: list[str] = field(default_factory=list)
    excluded: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    @property
    def coverage(self) -> float:
        return 1.0 - len(self.missing) / len(self.counted) if self.counted else 1.0


def _sparse_tensor_class() -> type | None:
    try:
        from ember.sparse.coo import SparseTensor
    except ImportError:
        return None
    return SparseTensor


def measure(namespace: str) -> Row:
    path = NAMESPACES[namespace]
    row = Row(namespace)
    target = ember_object(path)
    # torch.Tensor's sparse-only methods (coalesce, sparse_dim, ...) are methods of ember's SparseTensor, the
    # Tensor subclass every sparse COO tensor is: a name counts as present on either class.
    targets = [target] + ([_sparse_tensor_class()] if path == "torch.Tensor" else [])
    for name in torch_names(path):
        reason = excluded(namespace, name)
        if reason:
            row.excluded[name] = reason
            continue
        row.counted.append(name)
        if not any(t is not None and hasattr(t, name) for t in targets):
            row.missing.append(name)
    return row


def measure_module_paths() -> Row:
    from ember.run.alias import module_for

    row = Row("module paths")
    for path in MODULE_PATHS:
        row.counted.append(path)
        try:
            module_for(path)
        except ImportError:
            row.missing.append(path)
    return row


def measure_all() -> list[Row]:
    return [measure(ns) for ns in NAMESPACES] + [measure_module_paths()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--missing", help="print the names of this namespace ember lacks")
    parser.add_argument("--excluded", help="print the names of this namespace left out, with the reasons")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    if args.missing or args.excluded:
        ns = args.missing or args.excluded
        row = measure_module_paths() if ns == "module paths" else measure(ns)
        if args.missing:
            print("\n".join(row.missing))
        else:
            print("\n".join(f"{n}: {r}" for n, r in sorted(row.excluded.items())))
        return 0
    rows = measure_all()
    if args.markdown:
        print("| namespace | PyTorch names counted | left out | ember has | coverage |")
        print("| --- | --- | --- | --- | --- |")
        for r in rows:
            print(f"| {r.namespace} | {len(r.counted)} | {len(r.excluded)} | {len(r.counted) - len(r.missing)} "
                  f"| {100 * r.coverage:.0f}% |")
    else:
        for r in rows:
            print(f"{r.namespace:22s} {len(r.counted) - len(r.missing):5d}/{len(r.counted):<5d} "
                  f"{100 * r.coverage:5.1f}%  (left out {len(r.excluded)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
