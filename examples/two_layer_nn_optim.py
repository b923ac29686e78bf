"""The lectures' nn + optim version: nn.Sequential, mse_loss and Adam."""
import ember as torch

from _args import steps

T = steps(500, __doc__)
N, D_in, H, D_out = 64, 1000, 100, 10
x = torch.randn(N, D_in)
y = torch.randn(N, D_out)

model = torch.nn.Sequential(
    torch.nn.Linear(D_in, H),
    torch.nn.ReLU(),
    torch.nn.Linear(H, D_out))

learning_rate = 1e-4
optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)

for t in range(T):
    y_pred = model(x)
    loss = torch.nn.functional.mse_loss(y_pred, y)
    if t % 100 == 0 or t == T - 1:
        print(t, loss.item())

    loss.backward()

    optimizer.step()
    optimizer.zero_grad()
