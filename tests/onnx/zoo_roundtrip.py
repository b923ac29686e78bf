"""Round trips of model-zoo models: ``ember.onnx.export`` -> onnxruntime, and ember's saved static graph
(``ember.compile(model).save(dir)`` -> ``ember.graph.load(dir)`` in a fresh process that never imports the
building code) against the model's eager result. Used by tests/onnx/test_zoo_export_roundtrips.py and runnable
as a script (``python tests/onnx/zoo_roundtrip.py resnet18 ...``) for the full sweep's counts.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

# builder name -> input shape (small: 2 cores). Models whose builders fix the image size get it as a keyword.
VISION = {
    "alexnet": (1, 3, 64, 64), "convnext_tiny": (1, 3, 64, 64), "densenet121": (1, 3, 64, 64),
    "efficientnet_b0": (1, 3, 64, 64), "efficientnet_v2_s": (1, 3, 64, 64), "googlenet": (1, 3, 64, 64),
    "inception_v3": (1, 3, 80, 80), "maxvit_t": (1, 3, 224, 224), "mnasnet0_5": (1, 3, 64, 64),
    "mobilenet_v2": (1, 3, 64, 64), "mobilenet_v3_small": (1, 3, 64, 64), "mobilenet_v3_large": (1, 3, 64, 64),
    "regnet_x_400mf": (1, 3, 64, 64), "regnet_y_400mf": (1, 3, 64, 64), "resnet18": (1, 3, 64, 64),
    "resnet50": (1, 3, 64, 64), "resnext50_32x4d": (1, 3, 64, 64), "wide_resnet50_2": (1, 3, 64, 64),
    "shufflenet_v2_x0_5": (1, 3, 64, 64), "squeezenet1_0": (1, 3, 64, 64), "squeezenet1_1": (1, 3, 64, 64),
    "swin_t": (1, 3, 64, 64), "swin_v2_t": (1, 3, 64, 64), "vgg11": (1, 3, 64, 64), "vgg11_bn": (1, 3, 64, 64),
    "vit_b_32": (1, 3, 64, 64), "r3d_18": (1, 3, 4, 32, 32), "mc3_18": (1, 3, 4, 32, 32),
    "r2plus1d_18": (1, 3, 4, 32, 32), "fcn_resnet50": (1, 3, 64, 64), "deeplabv3_mobilenet_v3_large": (1, 3, 64, 64),
    "lraspp_mobilenet_v3_large": (1, 3, 64, 64),
}
BUILD_KWARGS = {"vit_b_32": {"image_size": 64}, "maxvit_t": {"input_size": (224, 224)},  # (7x7 windows)
                # (segmentation builders load ImageNet backbone weights by default: none here, no network)
                "fcn_resnet50": {"weights_backbone": None}, "deeplabv3_mobilenet_v3_large": {"weights_backbone": None},
                "lraspp_mobilenet_v3_large": {"weights_backbone": None},
                "inception_v3": {"init_weights": True, "aux_logits": False}, "googlenet": {"aux_logits": False, "init_weights": True}}
MODULES = ("transformer", "lstm", "gru", "transformer_encoder")


def build(name: str):
    """(model in eval mode, example inputs as ember tensors)."""
    import ember

    ember.manual_seed(0)
    rng = np.random.default_rng(0)
    if name in VISION:
        from ember.vision import models

        model = models.get_model(name, weights=None, **BUILD_KWARGS.get(name, {}))
        if name.startswith("vit"):  # torchvision zero-initializes ViT's head: its logits would all be 0
            with ember.no_grad():
                model.heads.head.weight.normal_(0, 0.02)
        inputs = (ember.tensor(rng.standard_normal(VISION[name]).astype(np.float32)),)
    elif name == "transformer":
        model = ember.nn.Transformer(d_model=16, nhead=2, num_encoder_layers=2, num_decoder_layers=2,
                                     dim_feedforward=32, batch_first=True)
        inputs = (ember.tensor(rng.standard_normal((2, 5, 16)).astype(np.float32)),
                  ember.tensor(rng.standard_normal((2, 4, 16)).astype(np.float32)))
    elif name == "transformer_encoder":
        layer = ember.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, norm_first=True)
        model = ember.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        inputs = (ember.tensor(rng.standard_normal((2, 5, 16)).astype(np.float32)),)
    elif name in ("lstm", "gru"):
        cls = ember.nn.LSTM if name == "lstm" else ember.nn.GRU
        model = cls(8, 12, num_layers=2, batch_first=True, bidirectional=True)
        inputs = (ember.tensor(rng.standard_normal((2, 6, 8)).astype(np.float32)),)
    else:
        raise KeyError(name)
    _calibrate(model, inputs)
    return model.eval(), inputs


def _calibrate(model, inputs) -> None:
    """Batch-norm statistics of random inputs (momentum 1, one train-mode pass on a batch of 2): with the
    initial statistics the activations of a randomly initialized deep net shrink to ~1e-9, which hides errors."""
    import ember

    norms = [m for m in model.modules() if isinstance(m, ember.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for m in norms:
        m.momentum = 1.0
    batch = [ember.cat([x, ember.randn(*x.shape)]) if x.dim() >= 4 else x for x in inputs]
    model.train()
    with ember.no_grad():
        model(*batch)
    for m in norms:
        m.momentum = 0.1


def _flat(out) -> list:
    import ember

    if isinstance(out, ember.Tensor):
        return [out.detach().numpy()]
    if isinstance(out, dict):
        return [v for k in sorted(out) for v in _flat(out[k])]
    if isinstance(out, (list, tuple)):
        return [v for o in out for v in _flat(o)]
    return []


def _err(got: list, want: list) -> float:
    if len(got) != len(want) or any(g.shape != w.shape for g, w in zip(got, want)):
        raise AssertionError(f"outputs differ in number or shape: {[g.shape for g in got]} vs {[w.shape for w in want]}")
    # relative to each output's scale (randomly initialized classifiers give logits of ~1e-3)
    return max(float(np.max(np.abs(g.astype(np.float64) - w)) / max(float(np.max(np.abs(w))), 1e-30)) if w.size
               else 0.0 for g, w in zip(got, want))


LOADER = r"""
import sys, numpy as np
sys.modules["torch"] = None  # the fresh process may not use torch, nor the model's building code
import ember.graph
d = sys.argv[1]
data = np.load(d + "/io.npz")
n = int(data["n_inputs"])
outs = ember.graph.load(d + "/graph")(*[data[f"in{k}"] for k in range(n)])
np.savez(d + "/loaded.npz", *[o.numpy() for o in outs])
"""


def roundtrip(name: str, which: tuple = ("onnx", "graph")) -> dict:
    """{'onnx': onnxruntime's error against the float64 eager result, 'f32_noise': ember float32's error against it,
    'graph': the saved graph's error against the float32 eager result} (errors relative to each output's largest
    magnitude), or the failure's message."""
    import ember

    model, inputs = build(name)
    with ember.no_grad():
        want = [w.astype(np.float64) for w in _flat(model(*inputs))]
    result: dict = {"name": name}
    if "onnx" in which:
        # the exact answer (float64) and ember's own float32 distance from it: float32 through another runtime is
        # judged against that rounding noise (a 50-layer float32 net is ~1e-4 of its output scale from float64)
        import copy

        with ember.no_grad():
            exact = _flat(copy.deepcopy(model).double()(*[i.double() for i in inputs]))
        result["f32_noise"] = _err(want, exact)
    with tempfile.TemporaryDirectory(prefix="ember-zoo-") as d:
        if "onnx" in which:
            start = time.perf_counter()
            try:
                import ember.onnx as eonnx

                path = os.path.join(d, "m.onnx")
                eonnx.export(model, inputs, path)
                result["onnx"] = _err(eonnx.run(path, [i.numpy() for i in inputs]), exact)
            except Exception as e:  # noqa: BLE001 - reported
                result["onnx"] = f"{type(e).__name__}: {e}"[:300]
            result["onnx_s"] = round(time.perf_counter() - start, 1)
        if "graph" in which:
            start = time.perf_counter()
            try:
                compiled = ember.compile(model, measure=False)
                with ember.no_grad():
                    for _ in range(2):
                        got = _flat(compiled(*inputs))
                compiled_err = _err(got, want)
                compiled.save(os.path.join(d, "graph"))
                np.savez(os.path.join(d, "io.npz"), n_inputs=len(inputs),
                         **{f"in{k}": i.numpy() for k, i in enumerate(inputs)})
                env = {k: v for k, v in os.environ.items()}
                proc = subprocess.run([sys.executable, "-c", LOADER, d], capture_output=True, text=True, env=env,
                                      timeout=600, cwd=d)
                if proc.returncode:
                    raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "loader failed")
                loaded = np.load(os.path.join(d, "loaded.npz"))
                result["graph"] = max(compiled_err, _err([loaded[f"arr_{k}"] for k in range(len(loaded.files))], want))
            except Exception as e:  # noqa: BLE001 - reported
                result["graph"] = f"{type(e).__name__}: {e}"[:300]
            result["graph_s"] = round(time.perf_counter() - start, 1)
    return result


if __name__ == "__main__":
    for model_name in sys.argv[1:] or list(VISION) + list(MODULES):
        print(json.dumps(roundtrip(model_name)), flush=True)
