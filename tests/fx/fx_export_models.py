"""The small CNN the torch.export tests run under torch and ember (conv, batch norm, linear, a default
keyword argument)."""
from __future__ import annotations


def export_test_model(lib):
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = lib.nn.Conv2d(1, 2, 3)
            self.bn = lib.nn.BatchNorm2d(2)
            self.head = lib.nn.Linear(2 * 4 * 4, 3)

        def forward(self, x, scale=1.0):
            h = lib.relu(self.bn(self.conv(x)))
            return self.head(h.flatten(1)) * scale

    return Net().eval()
