"""Fine-tune the head of a ResNet-18 on CIFAR-10-shaped data (32x32 RGB, 10 classes) and report accuracy.

Data: the real CIFAR-10 python batches when found (--data DIR holding cifar-10-batches-py/, or
../shared/data, or $EMBER_DATA), else a synthetic stand-in: 10 classes of coloured, textured
32x32 images with noise, so the script runs offline. Backbone: torchvision's ImageNet ResNet-18
weights when they are in the ember cache (see docs/vision.md), else a random backbone; either way
only the new 10-class `fc` is trained, on features the frozen backbone computes without autograd.

    python examples/finetune_resnet18_cifar.py --steps 300
"""
import argparse
import os
import sys
from pathlib import Path

import numpy as np

import ember
import ember.nn as nn
import ember.nn.functional as F
import ember.vision as torchvision
from ember.data import DataLoader, Dataset
from ember.vision import transforms as T

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--steps", type=int, default=300, help="training steps of the head (default 300)")
parser.add_argument("--data", default=None, help="folder holding cifar-10-batches-py/")
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--eval-images", type=int, default=1000, help="test images to score (default 1000)")
args = parser.parse_args()
ember.manual_seed(0)

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
train_tf = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])
test_tf = T.Compose([T.ToTensor(), T.Normalize(MEAN, STD)])


class SyntheticCIFAR(Dataset):
    """10 classes: a class colour, a class stripe frequency/direction, and per-image noise and shift."""

    def __init__(self, n: int, seed: int, transform) -> None:
        rng = np.random.default_rng(seed)
        self.targets = rng.integers(0, 10, n).tolist()
        colours = np.random.default_rng(123).integers(40, 216, (10, 3))
        yy, xx = np.mgrid[0:32, 0:32]
        self.data = np.empty((n, 32, 32, 3), np.uint8)
        for i, c in enumerate(self.targets):
            phase = rng.uniform(0, 2 * np.pi)
            wave = np.sin((xx if c % 2 else yy) * (0.3 + 0.12 * c) + phase)[..., None] * 50
            image = colours[c] + wave + rng.normal(0, 25, (32, 32, 3))
            self.data[i] = np.clip(image, 0, 255).astype(np.uint8)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, i):
        return self.transform(self.data[i]), self.targets[i]


def cifar_root():
    for candidate in (args.data, os.environ.get("EMBER_DATA"), Path(__file__).resolve().parents[2] / "shared" / "data"):
        if candidate and (Path(candidate) / "cifar-10-batches-py").is_dir():
            return candidate
    return None


root = cifar_root()
if root is not None:
    train_set = torchvision.datasets.CIFAR10(root, train=True, transform=train_tf)
    test_set = torchvision.datasets.CIFAR10(root, train=False, transform=test_tf)
    print(f"data: CIFAR-10 from {root}")
else:
    train_set, test_set = SyntheticCIFAR(min(5000, max(640, args.steps * args.batch_size)), 1, train_tf), SyntheticCIFAR(args.eval_images, 2, test_tf)
    print("data: synthetic CIFAR-10-shaped images (no cifar-10-batches-py found; pass --data DIR for the real one)")

weights = torchvision.models.ResNet18_Weights.IMAGENET1K_V1
cached = Path(ember.hub.get_dir()) / "checkpoints" / os.path.basename(weights.url)
if cached.is_file():
    model = torchvision.models.resnet18(weights=weights)
    print(f"backbone: ImageNet weights from {cached}")
else:
    model = torchvision.models.resnet18()
    print(f"backbone: random (put {os.path.basename(weights.url)} in {cached.parent} for the ImageNet weights)")
model.fc = nn.Linear(model.fc.in_features, 10)  # the new head: the only trained layer
for name, p in model.named_parameters():
    p.requires_grad_(name.startswith("fc."))
model.eval()  # frozen backbone: batch norm uses its running statistics


def features(images):
    with ember.no_grad():
        x = model.maxpool(model.relu(model.bn1(model.conv1(images))))
        x = model.layer4(model.layer3(model.layer2(model.layer1(x))))
        return ember.flatten(model.avgpool(x), 1)


optimizer = ember.optim.Adam(model.fc.parameters(), lr=3e-3)
loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, num_workers=2)
step = 0
while step < args.steps:
    for images, labels in loader:
        loss = F.cross_entropy(model.fc(features(images)), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0 or step == args.steps - 1:
            print(f"step {step:4d} loss {loss.item():.4f}")
        step += 1
        if step >= args.steps:
            break

correct = total = 0
for images, labels in DataLoader(test_set, batch_size=250):
    correct += (model.fc(features(images)).argmax(dim=1) == labels).sum().item()
    total += labels.shape[0]
    if total >= args.eval_images:
        break
print(f"test accuracy {correct / total:.4f} on {total} images")
sys.exit(0)
