"""Trace a whole training step (forward, backward, optimizer update) into a static graph with
`ember.compile`, like the lectures' @tf.function slide, and compare its speed with eager."""
import time

import ember as torch

from _args import steps

T = steps(300, __doc__)
N, D_in, H, D_out = 64, 1000, 100, 10
torch.manual_seed(0)
x, y = torch.randn(N, D_in), torch.randn(N, D_out)


def make_step():
    """A fresh model and optimizer (same seed), and the training step that uses them."""
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(D_in, H), torch.nn.ReLU(), torch.nn.Linear(H, D_out))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)

    def train_step(inputs, targets):
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return train_step


compiled_step = torch.compile(make_step())
for name, step in (("eager", make_step()), ("compiled", compiled_step)):
    start = time.perf_counter()
    for t in range(T):
        loss = step(x, y)
    elapsed = time.perf_counter() - start
    print(f"{name:9s} {T} steps in {elapsed:.3f}s, final loss {loss.item():.6f}")
print(compiled_step.explain().splitlines()[0])
