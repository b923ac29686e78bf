"""The lectures' starting point: a two-layer ReLU network on random data, in plain NumPy,
with the forward pass, the gradients and the update all written by hand."""
import numpy as np

from _args import steps

T = steps(500, __doc__)
N, D_in, H, D_out = 64, 1000, 100, 10
rng = np.random.default_rng(0)
x, y = rng.standard_normal((N, D_in)), rng.standard_normal((N, D_out))
w1, w2 = rng.standard_normal((D_in, H)), rng.standard_normal((H, D_out))

learning_rate = 1e-6
for t in range(T):
    h = x.dot(w1)
    h_relu = np.maximum(h, 0)
    y_pred = h_relu.dot(w2)
    loss = np.square(y_pred - y).sum()
    if t % 100 == 0 or t == T - 1:
        print(t, loss)

    grad_y_pred = 2.0 * (y_pred - y)
    grad_w2 = h_relu.T.dot(grad_y_pred)
    grad_h_relu = grad_y_pred.dot(w2.T)
    grad_h = grad_h_relu.copy()
    grad_h[h < 0] = 0
    grad_w1 = x.T.dot(grad_h)

    w1 -= learning_rate * grad_w1
    w2 -= learning_rate * grad_w2
