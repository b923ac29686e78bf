"""ONNX export of ember models and functions, built from ember's static-graph IR.

``export(model_or_fn, example_inputs, path)`` traces with :mod:`ember.graph`'s tracer, walks the
graph (:mod:`ember.onnx.exporter`), maps each op through its record's ``onnx`` name or an emitter in
:mod:`ember.onnx.emitters`, checks the model with ``onnx.checker`` and saves it. ``run`` executes a
saved model in onnxruntime, and ``verify`` compares that with ember.

``onnx`` and ``onnxruntime`` are optional: ``pip install 'ember[onnx]'``.

Example:
    >>> import ember, ember.onnx, tempfile, os
    >>> w1, w2 = ember.randn(3, 5), ember.randn(5, 2)
    >>> path = os.path.join(tempfile.mkdtemp(), "net.onnx")
    >>> _ = ember.onnx.export(lambda x: x.mm(w1).clamp(min=0).mm(w2), (ember.randn(4, 3),), path,
    ...                       input_names=["x"], dynamic_axes={"x": {0: "batch"}})  # doctest: +SKIP
    >>> ember.onnx.run(path, {"x": ember.randn(7, 3)})[0].shape  # doctest: +SKIP
    (7, 2)
"""
from ember.onnx.exporter import MIN_OPSET, export  # noqa: F401
from ember.onnx.runtime import run, verify  # noqa: F401
from ember.onnx import symbolic_helper, symbolic_opset  # noqa: F401
from ember.onnx.symbolic_opset import install_opset_paths as _install_opset_paths
from ember.onnx.symbolic_registry import (  # noqa: F401
    OnnxExporterError, TensorProtoDataType, is_in_onnx_export, register_custom_op_symbolic,
    unregister_custom_op_symbolic)

__all__ = ["export", "run", "verify", "MIN_OPSET"]

_install_opset_paths()  # ember.onnx.symbolic_opset7 ... symbolic_opset20 (torchvision imports symbolic_opset11)
