"""An MNIST CNN written the PyTorch way (Dataset, DataLoader, nn.Module, optimizer loop) on the MNIST
subset carried inside ember, so it runs offline. `ember demo` trains the same network through the
Keras-style `ember.train.Model` instead."""
import ember as torch
import ember.nn as nn
import ember.nn.functional as F
from ember.data import DataLoader
from ember.data.datasets import MNIST
from ember.data import transforms

from _args import steps

T = steps(600, __doc__)
torch.manual_seed(0)
transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
train_set = MNIST.carried(train=True, transform=transform)
test_set = MNIST.carried(train=False, transform=transform)
train_loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=2)
test_loader = DataLoader(test_set, batch_size=500)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc = nn.Linear(64 * 7 * 7, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(torch.flatten(x, 1))


model = Net()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
step = 0
while step < T:
    for images, labels in train_loader:
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 0 or step == T - 1:
            print(f"step {step:4d} loss {loss.item():.4f}")
        step += 1
        if step >= T:
            break

model.eval()
correct = total = 0
with torch.no_grad():
    for images, labels in test_loader:
        correct += (model(images).argmax(dim=1) == labels).sum().item()
        total += labels.shape[0]
print(f"test accuracy {correct / total:.4f}")
