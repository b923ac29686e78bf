"""Classify an image with an ImageNet-pretrained ResNet (torchvision's weights, read from ember's cache).

    python examples/classify_image.py photo.jpg                 # ResNet-18, top 5 classes
    python examples/classify_image.py photo.jpg --model resnet50

The weights are looked up in ember's hub cache (<EMBER_HOME or ~/.cache/ember>/hub/checkpoints);
with --download they are fetched from download.pytorch.org on first use. Without them the script
says where to put the file. Reading .jpg/.png needs Pillow (`pip install 'ember[vision]'`); a
.npy file holding an HxWx3 uint8 array works without it.
"""
import argparse
import os
import sys
from pathlib import Path

import numpy as np

import ember
import ember.vision as torchvision

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("image", nargs="?", help="an image file (.jpg, .png, ... or .npy HxWx3 uint8)")
parser.add_argument("--model", default="resnet18", help="resnet18, resnet34, resnet50, resnet101 or resnet152")
parser.add_argument("--download", action="store_true", help="download the weights if they are not cached")
parser.add_argument("--top", type=int, default=5)
parser.add_argument("--steps", type=int, default=None, help=argparse.SUPPRESS)  # CI's common flag; unused
args = parser.parse_args()

weights = torchvision.models.get_model_weights(args.model).DEFAULT
cached = Path(ember.hub.get_dir()) / "checkpoints" / os.path.basename(weights.url)
if not cached.is_file() and not args.download:
    print(f"No pretrained weights for {args.model} in the cache. Download {weights.url}\n"
          f"and put it at {cached} (or run again with --download).")
    sys.exit(0)

if args.image is None:
    image = np.zeros((256, 256, 3), np.uint8)
    image[..., 0] = np.linspace(0, 255, 256)[None, :]
    print("no image given: classifying a red gradient")
elif args.image.endswith(".npy"):
    image = np.load(args.image, allow_pickle=False)
else:
    from PIL import Image
    image = Image.open(args.image).convert("RGB")

model = torchvision.models.get_model(args.model, weights=weights).eval()
batch = weights.transforms()(image).unsqueeze(0)
with ember.no_grad():
    probabilities = ember.softmax(model(batch), dim=1)[0]
top = probabilities.topk(args.top)
for p, index in zip(top.values.tolist(), top.indices.tolist()):
    print(f"{weights.meta['categories'][index]:>30s}  {p:.4f}")
