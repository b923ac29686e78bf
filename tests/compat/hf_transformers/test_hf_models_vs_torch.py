"""Hugging Face ``transformers`` models run under ember (``import torch`` is ember, nothing else changed) and
agree with real torch 2.13 on the same weights.

``hf_side.py`` runs once with torch (random weights from a tiny config, written with ``save_pretrained``) and once
with ember (read back with ``from_pretrained``); each run is a subprocess, since one process cannot hold both
bindings of ``transformers``. Compared per family: logits, the loss with labels, every parameter's gradient, the
``sdpa`` attention path, gradient checkpointing, greedy ``generate`` with and without the KV cache, seeded
sampling (ember against itself: the two libraries' random streams differ), and three ``Trainer`` steps.

Tolerances: the models run in float64, but several compute parts in float32 by design (the rotary tables of
Llama/Mistral/Qwen2, ``softmax(..., dtype=float32)`` in eager attention, T5's relative-position log, the causal-LM
loss's ``logits.float()``), where the two libraries' float32 ``cos``/``exp``/``log`` differ in the last bit; those
families agree to float32 rounding (rtol 2e-6). BERT, DistilBERT and Whisper stay in float64 and agree to 1e-10.
Slow (two imports of torch/transformers: about a minute on an idle 2-core machine).
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")

pytestmark = pytest.mark.slow

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
FAMILIES = ["gpt2", "llama", "mistral", "qwen2", "bert", "distilbert", "t5", "vit", "whisper", "clip"]
GENERATES = {"gpt2", "llama", "mistral", "qwen2", "t5"}
SDPA = {"gpt2", "llama", "mistral", "qwen2", "bert", "vit", "whisper", "clip"}
FLOAT64_THROUGHOUT = {"bert", "distilbert", "whisper"}
EXTRAS = ["trainer", "pipelines", "helpers"]  # runs on the folders the families wrote


def _run_side(side: str, workdir: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run([sys.executable, os.path.join(HERE, "hf_side.py"), side, workdir, *FAMILIES, *EXTRAS],
                          env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("hf"))
    _run_side("torch", workdir)
    _run_side("ember", workdir)

    def load(family: str, side: str) -> dict:
        with np.load(os.path.join(workdir, f"{family}.{side}.npz")) as data:
            found = {k: data[k] for k in data.files}
        assert "error" not in found, f"{family} under {side}:\n{found.get('error')}"
        return found
    return {f: (load(f, "torch"), load(f, "ember")) for f in [*FAMILIES, *EXTRAS]}


def _tol(family: str) -> float:
    return 1e-10 if family in FLOAT64_THROUGHOUT else 2e-6


def _compare_forward(torch_side: dict, ember_side: dict, tag: str, tol: float) -> None:
    want, got = torch_side[f"{tag}logits"], ember_side[f"{tag}logits"]
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())
    np.testing.assert_allclose(ember_side[f"{tag}loss"], torch_side[f"{tag}loss"], rtol=tol)
    grads = sorted(k for k in torch_side if k.startswith(f"{tag}grad."))
    assert grads and grads == sorted(k for k in ember_side if k.startswith(f"{tag}grad."))
    scale = max(np.abs(torch_side[k]).max() for k in grads)
    for key in grads:  # atol on the model's gradient scale: some gradients are exactly 0 (key biases) up to noise
        np.testing.assert_allclose(ember_side[key], torch_side[key], rtol=tol, atol=tol * scale, err_msg=key)


@pytest.mark.parametrize("family", FAMILIES)
def test_from_pretrained_logits_loss_and_every_gradient(results, family):
    torch_side, ember_side = results[family]
    assert list(ember_side["files"]) == list(torch_side["files"])  # the folder torch's save_pretrained wrote
    _compare_forward(torch_side, ember_side, "", _tol(family))


@pytest.mark.parametrize("family", sorted(SDPA))
def test_sdpa_attention_like_torch(results, family):
    torch_side, ember_side = results[family]
    _compare_forward(torch_side, ember_side, "sdpa.", _tol(family))


@pytest.mark.parametrize("family", FAMILIES)
def test_gradient_checkpointing_like_torch(results, family):
    torch_side, ember_side = results[family]
    _compare_forward(torch_side, ember_side, "ckpt.", _tol(family))
    for key in (k for k in ember_side if k.startswith("grad.")):  # recomputation changes nothing
        np.testing.assert_allclose(ember_side["ckpt." + key], ember_side[key], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("family", sorted(GENERATES))
def test_generate_greedy_with_and_without_cache_like_torch(results, family):
    torch_side, ember_side = results[family]
    for key in ("generate.greedy.cache1", "generate.greedy.cache0"):
        np.testing.assert_array_equal(ember_side[key], torch_side[key], err_msg=key)


@pytest.mark.parametrize("family", sorted(GENERATES))
def test_generate_sampling_is_seeded(results, family):
    torch_side, ember_side = results[family]
    sample = ember_side["generate.sample"]
    np.testing.assert_array_equal(sample, ember_side["generate.sample_again"])  # same seed, same tokens
    assert sample.shape == torch_side["generate.sample"].shape
    assert sample.min() >= 0 and sample.max() < 96
    prompt_length = 1 if family == "t5" else 5  # decoder-only outputs start with the prompt
    np.testing.assert_array_equal(sample[:, :prompt_length], torch_side["generate.sample"][:, :prompt_length])


def test_trainer_three_steps_like_torch(results):
    torch_side, ember_side = results["trainer"]
    np.testing.assert_array_equal(ember_side["learning_rates"], torch_side["learning_rates"])  # warm-up, then decay
    np.testing.assert_allclose(ember_side["losses"], torch_side["losses"], rtol=1e-6)
    np.testing.assert_allclose(ember_side["train_loss"], torch_side["train_loss"], rtol=1e-6)
    params = sorted(k for k in torch_side if k.startswith("param."))
    assert params == sorted(k for k in ember_side if k.startswith("param."))
    for key in params:  # AdamW moved every weight the same way (the loss runs in float32: rounding-level drift)
        np.testing.assert_allclose(ember_side[key], torch_side[key], rtol=2e-6, atol=2e-6, err_msg=key)


def test_flex_attention_implementation_like_torch(results):
    torch_side, ember_side = results["llama"]  # float32: torch's inductor-compiled flex_attention, ember's dense one
    want = torch_side["flex.logits"]
    np.testing.assert_allclose(ember_side["flex.logits"], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    np.testing.assert_allclose(ember_side["flex.logits"], ember_side["logits"], rtol=1e-5,
                               atol=1e-5 * np.abs(want).max())  # and the float64 eager logits, to float32 rounding


def test_pipelines_like_torch(results):
    torch_side, ember_side = results["pipelines"]
    assert str(ember_side["generated_text"]) == str(torch_side["generated_text"])  # greedy: the same words
    np.testing.assert_array_equal(ember_side["labels"], torch_side["labels"])
    np.testing.assert_allclose(ember_side["scores"], torch_side["scores"], rtol=1e-10)


def test_is_torch_helpers_answer_like_torch(results):
    torch_side, ember_side = results["helpers"]
    assert len(torch_side["names"]) > 20
    assert dict(zip(ember_side["names"], ember_side["answers"])) == dict(zip(torch_side["names"],
                                                                                 torch_side["answers"]))
