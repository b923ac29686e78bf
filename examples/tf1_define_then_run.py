"""The lectures' TensorFlow 1 example in ember's define-then-run API: build the graph once
(placeholders, Variables, symbolic gradients, assign, group), then run it many times. Fetching only
the loss does not run the updates: the lectures' gotcha, shown at the start."""
import numpy as np

import ember
import ember.graph as G

from _args import steps

T = steps(50, __doc__)
N, D, H = 64, 1000, 100
x = G.placeholder((N, D), ember.float32, name="x")
y = G.placeholder((N, D), ember.float32, name="y")
rng = np.random.default_rng(0)
w1 = G.Variable(rng.standard_normal((D, H)).astype(np.float32) * 0.01, name="w1")
w2 = G.Variable(rng.standard_normal((H, D)).astype(np.float32) * 0.01, name="w2")

h = ember.maximum(x @ w1, 0)
y_pred = h @ w2
diff = y_pred - y
loss = (diff ** 2).sum(dim=1).mean()
grad_w1, grad_w2 = G.gradients(loss, [w1, w2])
learning_rate = 2e-3
new_w1 = G.assign(w1, w1 - learning_rate * grad_w1)
new_w2 = G.assign(w2, w2 - learning_rate * grad_w2)
updates = G.group(new_w1, new_w2)

values = {x: rng.standard_normal((N, D)).astype(np.float32), y: rng.standard_normal((N, D)).astype(np.float32)}
sess = G.Session()
first = [float(sess.run(loss, feed_dict=values)) for _ in range(3)]
print("fetching only the loss, three times:", first, "(unchanged: the updates never ran)")
for t in range(T):
    loss_value, _ = sess.run([loss, updates], feed_dict=values)
    if t % 10 == 0 or t == T - 1:
        print(t, float(loss_value))
