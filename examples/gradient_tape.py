"""The lectures' TensorFlow 2 example in ember: GradientTape over the same autograd recording."""
import numpy as np

import ember

from _args import steps

T = steps(50, __doc__)
N, D, H = 64, 1000, 100
rng = np.random.default_rng(0)
x = ember.tensor(rng.standard_normal((N, D)), dtype=ember.float32)
y = ember.tensor(rng.standard_normal((N, D)), dtype=ember.float32)
w1 = ember.rand(D, H, requires_grad=True)  # weights (TF's tf.Variable(tf.random.uniform(...)))
w2 = ember.rand(H, D, requires_grad=True)

learning_rate = 1e-6
for t in range(T):
    with ember.GradientTape() as tape:
        h = ember.maximum(ember.matmul(x, w1), ember.tensor(0.0))
        y_pred = ember.matmul(h, w2)
        diff = y_pred - y
        loss = ember.mean(ember.sum(diff ** 2, dim=1))
    gradients = tape.gradient(loss, [w1, w2])
    with ember.no_grad():
        w1 -= learning_rate * gradients[0]
        w2 -= learning_rate * gradients[1]
    if t % 10 == 0 or t == T - 1:
        print(t, loss.item())
