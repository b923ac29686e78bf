"""The two vision examples in reduced form: fine-tuning reports an accuracy; classification either says
where to put the weights or, with weights in a temporary cache, prints ImageNet class names."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

import ember
import ember.vision as torchvision

ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str], env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **env_extra)
    return subprocess.run([sys.executable, *args], cwd=ROOT / "examples", env=env, capture_output=True, text=True,
                          timeout=600)


def test_finetune_example_reports_accuracy(tmp_path: Path) -> None:
    result = _run(["finetune_resnet18_cifar.py", "--steps", "20", "--batch-size", "32", "--eval-images", "200", "--data",
                   str(tmp_path)], {"EMBER_HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "synthetic" in result.stdout and "backbone: random" in result.stdout
    accuracy = float(re.search(r"test accuracy ([0-9.]+)", result.stdout).group(1))
    assert accuracy > 0.3, result.stdout  # 10 classes: chance is 0.1


def test_classify_example_without_and_with_cached_weights(tmp_path: Path) -> None:
    result = _run(["classify_image.py", "--steps", "1"], {"EMBER_HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-3000:]
    expected_path = tmp_path / "hub" / "checkpoints" / "resnet18-f37072fd.pth"
    assert f"put it at {expected_path}" in result.stdout
    # a made-up "pretrained" ResNet-18 in the cache: the script loads it and prints class names
    ember.manual_seed(0)
    model = torchvision.models.resnet18()
    expected_path.parent.mkdir(parents=True)
    ember.save(model.state_dict(), expected_path)
    image = np.random.default_rng(0).integers(0, 256, (300, 280, 3), dtype=np.uint8)
    np.save(tmp_path / "image.npy", image)
    result = _run(["classify_image.py", str(tmp_path / "image.npy"), "--top", "3"], {"EMBER_HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 3
    categories = torchvision.models.ResNet18_Weights.DEFAULT.meta["categories"]
    preprocess = torchvision.models.ResNet18_Weights.DEFAULT.transforms()
    logits = model.eval()(preprocess(image).unsqueeze(0))
    best = categories[int(logits.argmax())]
    assert lines[0].strip().startswith(best)
