"""The models of bench_workloads.py, written once against a library ``lib`` (``ember`` or ``torch``):
the same code builds both, so both do identical work and weights copy by state_dict keys.

Example:
    >>> import ember
    >>> model = gpt(ember, layers=1, d=32, heads=2, context=8)
    >>> tuple(model(ember.zeros(2, 8, dtype=ember.int64)).shape)
    (2, 8, 65)
"""
from __future__ import annotations

from typing import Any


def mnist_cnn(lib: Any) -> Any:
    """conv 1->32, pool, conv 32->64, pool, linear: the README's MNIST CNN (and W3)."""
    nn = lib.nn
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 10),
    )


def resnet18(lib: Any, num_classes: int = 10) -> Any:
    """torchvision's ResNet-18 layout (7x7 stem, max pool, four stages of two basic blocks), so its
    state_dict keys are torchvision's."""
    nn = lib.nn

    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU()
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x: Any) -> Any:
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            return self.relu(self.bn2(self.conv2(out)) + identity)

    class ResNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU()
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            widths, cin = (64, 128, 256, 512), 64
            for i, width in enumerate(widths):
                stride = 1 if i == 0 else 2
                setattr(self, f"layer{i + 1}", nn.Sequential(BasicBlock(cin, width, stride), BasicBlock(width, width, 1)))
                cin = width
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(512, num_classes)

        def forward(self, x: Any) -> Any:
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(lib.flatten(self.avgpool(x), 1))

    return ResNet()


def gpt(lib: Any, layers: int = 6, d: int = 384, heads: int = 6, context: int = 256, vocab: int = 65) -> Any:
    """A nanoGPT-style character model: pre-LN blocks with causal attention and a 4x GELU MLP."""
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x: Any) -> Any:
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(context, d)
            self.blocks = nn.Sequential(*[Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, idx: Any) -> Any:
            positions = lib.arange(idx.shape[1], device=idx.device)
            return self.head(self.ln_f(self.blocks(self.tok(idx) + self.pos(positions))))

    return GPT()


def two_layer_step(lib: Any, w1: Any, w2: Any, lr: float = 1e-6) -> Any:
    """W1: the lectures' two-layer-net step (autograd + manual SGD), the same code as
    ``ember.graph.showcase.two_layer_step``, kept here so the torch process of bench_workloads.py need not
    import ember (tests/benchmarks/test_bench_workloads_rounds.py checks the two stay the same)."""

    def step(x: Any, y: Any) -> Any:
        y_pred = x.mm(w1).clamp(min=0).mm(w2)
        loss = (y_pred - y).pow(2).sum()
        loss.backward()
        with lib.no_grad():
            w1.sub_(lr * w1.grad)  # the lectures' `w1 -= ...`, spelled for a closure
            w2.sub_(lr * w2.grad)
            w1.grad.zero_()
            w2.grad.zero_()
        return loss

    return step


def copy_weights(source: Any, target: Any) -> None:
    """Load ``source``'s (a torch module) weights and buffers into ``target`` (an ember module)."""
    import ember

    target.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in source.state_dict().items()})
