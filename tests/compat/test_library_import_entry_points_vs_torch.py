"""Entry points libraries touch at import or construction time (torchvision, timm), against torch 2.13.

torchvision's model files stopped at import under ember one after another: ``torch.hub._get_torch_home``,
``torch.onnx.symbolic_opset11`` / ``symbolic_helper.parse_args`` / ``register_custom_op_symbolic`` (ops
registers ONNX symbolics), ``torch.jit._script_if_tracing`` / ``_overload_method`` /
``torch.jit.annotations.BroadcastingList2``, ``torch._dynamo.utils.is_compile_supported``, and
``torch._C._log_api_usage_once`` (every model constructor). timm calls ``torch.compiler.is_compiling`` and
``torch._C._jit_set_*``. Each family is compared with torch's behaviour: values, errors, return values.
"""
import os

import pytest
import torch

import ember


# ---- torch.hub ------------------------------------------------------------------------------------------
def test_get_torch_home_follows_torch_home(monkeypatch, tmp_path):
    monkeypatch.delenv("EMBER_HOME", raising=False)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "th"))
    assert ember.hub._get_torch_home() == torch.hub._get_torch_home() == str(tmp_path / "th")
    assert ember.hub.get_dir() == os.path.join(ember.hub._get_torch_home(), "hub")


# ---- torch.onnx: TorchScript-era registration ------------------------------------------------------------
def test_tensor_proto_data_type_numbers_equal_torch():
    ours = {k: int(v) for k, v in ember.onnx.TensorProtoDataType.__members__.items()}
    theirs = {k: int(v) for k, v in torch.onnx.TensorProtoDataType.__members__.items()}
    assert ours == theirs
    assert ember.onnx.TensorProtoDataType.FLOAT == torch.onnx.TensorProtoDataType.FLOAT == 1


@pytest.mark.parametrize("name", ["mylib::op", "::relu_custom", "my-lib::op_2", "a1::b"])
def test_register_custom_op_symbolic_accepts_what_torch_accepts(name):
    fn = lambda g, x: x  # noqa: E731
    torch.onnx.register_custom_op_symbolic(name, fn, 11)
    torch.onnx.unregister_custom_op_symbolic(name, 11)
    ember.onnx.register_custom_op_symbolic(name, fn, 11)
    full = "aten" + name if name.startswith("::") else name
    assert ember.onnx.symbolic_registry.registered_symbolic(full, 13) is fn
    assert ember.onnx.symbolic_registry.registered_symbolic(full, 9) is None  # registered from opset 11 on
    ember.onnx.unregister_custom_op_symbolic(name, 11)
    assert ember.onnx.symbolic_registry.registered_symbolic(full, 13) is None


@pytest.mark.parametrize("name, error", [("noseparator", "OnnxExporterError"), ("lib::1abc", "OnnxExporterError"),
                                         ("onnx::Relu", "ValueError"), ("lib::a b", "OnnxExporterError")])
def test_register_custom_op_symbolic_refuses_what_torch_refuses(name, error):
    with pytest.raises(Exception) as t_err:
        torch.onnx.register_custom_op_symbolic(name, lambda g: None, 11)
    with pytest.raises(Exception) as e_err:
        ember.onnx.register_custom_op_symbolic(name, lambda g: None, 11)
    assert type(t_err.value).__name__ == type(e_err.value).__name__ == error
    assert str(e_err.value) == str(t_err.value)


def test_parse_args_marks_and_calls_through_like_torch():
    for lib in (torch, ember):
        @lib.onnx.symbolic_helper.parse_args("v", "i", "fs")
        def symbolic(g, x, dim, scales):
            return ("called", x, dim, scales)

        assert symbolic.__name__ == "symbolic"
        with pytest.raises(AssertionError, match="mismatch between the number of arguments"):
            symbolic(None, 1, 2, 3, 4)
    assert symbolic(None, "x", 1, [2.0]) == ("called", "x", 1, [2.0])
    with pytest.raises(ValueError, match="unknown descriptor"):
        ember.onnx.symbolic_helper.parse_args("q")


def test_symbolic_opset_modules_import_and_refuse_to_run():
    from ember.onnx import symbolic_opset11 as opset11
    from ember.onnx import symbolic_opset9 as opset9  # noqa: F401
    import ember.onnx.symbolic_opset16  # noqa: F401

    with pytest.raises(AttributeError, match="TorchScript-exporter symbolics are not in ember"):
        opset11.unsqueeze(None, None, 0)
    assert not hasattr(opset11, "pytest_plugins")
    assert not ember.onnx.is_in_onnx_export() and not torch.onnx.is_in_onnx_export()


# ---- torch.jit decorators applied at import time -----------------------------------------------------------
def test_script_if_tracing_runs_eagerly_and_keeps_the_function():
    for lib in (torch, ember):
        calls = []

        @lib.jit._script_if_tracing
        def double(x):
            calls.append(1)
            return x * 2

        assert double(lib.tensor([1.5])).tolist() == [3.0] and calls == [1]
        assert double.__name__ == "double" and double.__wrapped__ is not None
    assert ember.jit.script_if_tracing is ember.jit._script_if_tracing


def test_overload_method_declarations_leave_the_real_method():
    for lib in (torch, ember):
        class M(lib.nn.Module):
            @lib.jit._overload_method  # noqa: F811
            def forward(self, x: int) -> int:
                pass

            @lib.jit._overload_method  # noqa: F811
            def forward(self, x: float) -> float:
                pass

            def forward(self, x):  # noqa: F811
                return x + 1

        assert M()(lib.tensor(1.0)).item() == 2.0


def test_jit_annotations_and_small_helpers_like_torch():
    from ember.jit.annotations import BroadcastingList2, List, Optional, Tuple  # noqa: F401

    assert BroadcastingList2[int] == List[int]
    assert ember.jit._unwrap_optional(3) == torch.jit._unwrap_optional(3) == 3
    for lib in (torch, ember):
        with pytest.raises(AssertionError, match="Unwrapping null optional"):
            lib.jit._unwrap_optional(None)
    assert ember.jit.Error.__mro__[1:] == torch.jit.Error.__mro__[1:] == (Exception, BaseException, object)


# ---- torch._C entries called from Python -----------------------------------------------------------------
def test_c_entries_called_by_libraries():
    for lib in (torch, ember):
        assert lib._C._log_api_usage_once("torchvision.models.resnet.ResNet") is None
        assert lib._C._get_tracing_state() is None
        with pytest.raises(TypeError):
            lib._C._log_api_usage_once(3)
    ember._C._set_grad_enabled(False)
    try:
        assert not ember.is_grad_enabled()
    finally:
        ember._C._set_grad_enabled(True)
    assert ember.is_grad_enabled()


def test_jit_executor_switches_return_the_previous_value():
    old = ember._C._jit_set_profiling_executor(False)
    assert old is True and ember._C._jit_set_profiling_executor(True) is False
    ember._C._jit_override_can_fuse_on_cpu(False)
    assert ember._C._jit_can_fuse_on_cpu() is False
    ember._C._jit_override_can_fuse_on_cpu(True)
    ember._C._jit_set_texpr_fuser_enabled(True)
    assert ember._C._jit_texpr_fuser_enabled() is True


# ---- torch.compiler and torch._dynamo --------------------------------------------------------------------
def test_is_compiling_is_true_only_while_compile_traces():
    # (read through the result: a Python side effect such as ``seen.append(...)`` would make ember.compile run the
    # function eagerly, since a graph cannot replay it: ember/graph/guards.py)
    def f(x):
        return x * 2 + ember.compiler.is_compiling()

    assert ember.compiler.is_compiling() is torch.compiler.is_compiling() is False
    compiled = ember.compile(f)
    seen = [compiled(ember.ones(2)).tolist() for _ in range(3)]
    assert seen == [[2.0, 2.0], [3.0, 3.0], [3.0, 3.0]]  # the first call runs eagerly (warm-up), the trace sees True
    assert ember._dynamo.is_compiling is ember.compiler.is_compiling


def test_disable_and_friends_return_the_function_like_torch_in_eager():
    def f(x):
        return x + 1

    for lib in (torch, ember):
        assert lib.compiler.disable(f)(lib.ones(1)).item() == 2.0
        assert lib.compiler.disable()(f)(lib.ones(1)).item() == 2.0
        assert lib._dynamo.disable(f)(lib.ones(1)).item() == 2.0
        assert lib.compiler.allow_in_graph(f) is not None
        assert lib.compiler.reset() is None and lib._dynamo.reset() is None
        assert lib.compiler.cudagraph_mark_step_begin() is None
        assert lib._dynamo.mark_dynamic(lib.ones(2, 3), 0) is None
        with lib.compiler.set_stance("force_eager"):
            pass
    with pytest.raises(RuntimeError, match="invalid stance"):
        ember.compiler.set_stance("sideways")


@pytest.mark.parametrize("device, expected", [("cpu", True), ("meta", False)])
def test_is_compile_supported_like_torch(device, expected):
    assert torch._dynamo.utils.is_compile_supported(device) is expected
    assert ember._dynamo.utils.is_compile_supported(device) is expected


def test_dynamo_config_values_are_torchs_defaults_and_assignable():
    import torch._dynamo.config as t_config

    for name in ("suppress_errors", "cache_size_limit", "recompile_limit", "capture_scalar_outputs"):
        assert getattr(ember._dynamo.config, name) == getattr(t_config, name)
    old = ember._dynamo.config.cache_size_limit
    ember._dynamo.config.cache_size_limit = 64
    assert ember._dynamo.config.cache_size_limit == 64
    ember._dynamo.config.cache_size_limit = old
