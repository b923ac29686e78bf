"""JAX versions of bench_workloads.py's training steps (pure functions, jax.jit over the whole step).

Imported only when JAX is installed. Each ``step(name, x, y)`` returns a callable that runs one
jitted training step on fixed data and blocks until it is done.

Example:
    >>> fn = step("mlp", np.zeros((4, 784), np.float32), np.zeros(4, np.int64))   # doctest: +SKIP
"""
from __future__ import annotations

import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

_KEY = jax.random.PRNGKey(0)


def _dense(key: Any, fan_in: int, fan_out: int, bias: bool = True) -> dict:
    bound = 1.0 / math.sqrt(fan_in)
    k1, k2 = jax.random.split(key)
    layer = {"w": jax.random.uniform(k1, (fan_in, fan_out), jnp.float32, -bound, bound)}
    if bias:
        layer["b"] = jax.random.uniform(k2, (fan_out,), jnp.float32, -bound, bound)
    return layer


def _conv_param(key: Any, cin: int, cout: int, k: int, bias: bool = True) -> dict:
    bound = 1.0 / math.sqrt(cin * k * k)
    k1, k2 = jax.random.split(key)
    layer = {"w": jax.random.uniform(k1, (cout, cin, k, k), jnp.float32, -bound, bound)}
    if bias:
        layer["b"] = jax.random.uniform(k2, (cout,), jnp.float32, -bound, bound)
    return layer


def _conv(p: dict, x: Any, stride: int = 1, pad: int = 1) -> Any:
    y = jax.lax.conv_general_dilated(x, p["w"], (stride, stride), [(pad, pad), (pad, pad)],
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return y + p["b"][None, :, None, None] if "b" in p else y


def _max_pool(x: Any, k: int, s: int, pad: int = 0) -> Any:
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, k, k), (1, 1, s, s),
                                 [(0, 0), (0, 0), (pad, pad), (pad, pad)])


def _xent(logits: Any, y: Any) -> Any:
    logp = jax.nn.log_softmax(logits.reshape(-1, logits.shape[-1]))
    return -jnp.mean(jnp.take_along_axis(logp, y.reshape(-1, 1), axis=1))


def _layer_norm(p: dict, x: Any) -> Any:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + 1e-5) * p["g"] + p["b"]


def _ln_param(d: int) -> dict:
    return {"g": jnp.ones(d, jnp.float32), "b": jnp.zeros(d, jnp.float32)}


# ---- optimizers -------------------------------------------------------------------------------------
def _sgd(lr: float, momentum: float = 0.0, wd: float = 0.0):
    def init(params):
        return jax.tree_util.tree_map(jnp.zeros_like, params)

    def update(params, grads, state):
        grads = jax.tree_util.tree_map(lambda g, p: g + wd * p, grads, params) if wd else grads
        state = jax.tree_util.tree_map(lambda m, g: momentum * m + g, state, grads) if momentum else grads
        return jax.tree_util.tree_map(lambda p, m: p - lr * m, params, state), state

    return init, update


def _adam(lr: float, wd: float = 0.0, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8):
    def init(params):
        zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
        return (zeros, zeros, jnp.zeros((), jnp.float32))

    def update(params, grads, state):
        m, v, t = state
        t = t + 1
        m = jax.tree_util.tree_map(lambda a, g: b1 * a + (1 - b1) * g, m, grads)
        v = jax.tree_util.tree_map(lambda a, g: b2 * a + (1 - b2) * g * g, v, grads)
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t

        def apply(p, a, b):
            p = p * (1 - lr * wd) if wd else p
            return p - lr * (a / c1) / (jnp.sqrt(b / c2) + eps)

        return jax.tree_util.tree_map(apply, params, m, v), (m, v, t)

    return init, update


# ---- models -----------------------------------------------------------------------------------------
def _cnn():
    k = jax.random.split(_KEY, 3)
    params = {"c1": _conv_param(k[0], 1, 32, 3), "c2": _conv_param(k[1], 32, 64, 3), "fc": _dense(k[2], 3136, 10)}

    def forward(p, x):
        x = _max_pool(jax.nn.relu(_conv(p["c1"], x)), 2, 2)
        x = _max_pool(jax.nn.relu(_conv(p["c2"], x)), 2, 2)
        return x.reshape(x.shape[0], -1) @ p["fc"]["w"] + p["fc"]["b"]

    return params, forward


def _mlp():
    k = jax.random.split(_KEY, 2)
    params = {"l1": _dense(k[0], 784, 512), "l2": _dense(k[1], 512, 10)}

    def forward(p, x):
        h = jax.nn.relu(x @ p["l1"]["w"] + p["l1"]["b"])
        return h @ p["l2"]["w"] + p["l2"]["b"]

    return params, forward


def _batch_norm(p: dict, x: Any) -> Any:
    """Training-mode batch norm (batch statistics; running statistics do not change the step's cost
    much and are left out)."""
    mean = x.mean((0, 2, 3), keepdims=True)
    var = x.var((0, 2, 3), keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * p["g"][None, :, None, None] + p["b"][None, :, None, None]


def _resnet18():
    keys = iter(jax.random.split(_KEY, 64))
    params: dict = {"conv1": _conv_param(next(keys), 3, 64, 7, bias=False), "bn1": _ln_param(64)}
    cin = 64
    for stage, width in enumerate((64, 128, 256, 512)):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            p = {"c1": _conv_param(next(keys), cin, width, 3, bias=False), "b1": _ln_param(width),
                 "c2": _conv_param(next(keys), width, width, 3, bias=False), "b2": _ln_param(width)}
            if stride != 1 or cin != width:
                p["down"] = _conv_param(next(keys), cin, width, 1, bias=False)
                p["bd"] = _ln_param(width)
            params[f"s{stage}b{block}"] = (p, stride)
            cin = width
    params["fc"] = _dense(next(keys), 512, 10)
    strides = {k: v[1] for k, v in params.items() if isinstance(v, tuple)}
    params = {k: (v[0] if isinstance(v, tuple) else v) for k, v in params.items()}

    def forward(p, x):
        x = _max_pool(jax.nn.relu(_batch_norm(p["bn1"], _conv(p["conv1"], x, 2, 3))), 3, 2, 1)
        for name, stride in strides.items():
            b = p[name]
            identity = _batch_norm(b["bd"], _conv(b["down"], x, stride, 0)) if "down" in b else x
            out = jax.nn.relu(_batch_norm(b["b1"], _conv(b["c1"], x, stride, 1)))
            x = jax.nn.relu(_batch_norm(b["b2"], _conv(b["c2"], out, 1, 1)) + identity)
        return x.mean((2, 3)) @ p["fc"]["w"] + p["fc"]["b"]

    return params, forward


def _attention_block(p: dict, x: Any, heads: int, causal: bool) -> Any:
    b, t, c = x.shape
    h = _layer_norm(p["ln1"], x)
    qkv = (h @ p["qkv"]["w"] + p["qkv"]["b"]).reshape(b, t, 3, heads, c // heads).transpose(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(c // heads)
    if causal:
        scores = jnp.where(jnp.tril(jnp.ones((t, t), bool)), scores, -jnp.inf)
    y = (jax.nn.softmax(scores, -1) @ v).transpose(0, 2, 1, 3).reshape(b, t, c)
    x = x + y @ p["proj"]["w"] + p["proj"]["b"]
    h = _layer_norm(p["ln2"], x)
    h = jax.nn.gelu(h @ p["fc1"]["w"] + p["fc1"]["b"], approximate=False)
    return x + h @ p["fc2"]["w"] + p["fc2"]["b"]


def _block_params(key: Any, d: int, hidden: int) -> dict:
    k = jax.random.split(key, 4)
    return {"ln1": _ln_param(d), "ln2": _ln_param(d), "qkv": _dense(k[0], d, 3 * d), "proj": _dense(k[1], d, d),
            "fc1": _dense(k[2], d, hidden), "fc2": _dense(k[3], hidden, d)}


def _gpt(layers: int = 6, d: int = 384, heads: int = 6, context: int = 256, vocab: int = 65):
    keys = jax.random.split(_KEY, layers + 3)
    params = {"tok": jax.random.normal(keys[0], (vocab, d)), "pos": jax.random.normal(keys[1], (context, d)),
              "blocks": [_block_params(keys[3 + i], d, 4 * d) for i in range(layers)], "ln_f": _ln_param(d),
              "head": _dense(keys[2], d, vocab, bias=False)}

    def forward(p, idx):
        x = p["tok"][idx] + p["pos"][: idx.shape[1]]
        for block in p["blocks"]:
            x = _attention_block(block, x, heads, causal=True)
        return _layer_norm(p["ln_f"], x) @ p["head"]["w"]

    return params, forward


def _encoder():
    params = _block_params(_KEY, 256, 1024)

    def forward(p, x):
        return _attention_block(p, x, 4, causal=False)

    return params, forward


# ---- steps ------------------------------------------------------------------------------------------
def _jit_step(params: dict, forward: Callable, loss: Callable, opt) -> Callable:
    init, update = opt

    @jax.jit
    def train(params, state, x, y):
        value, grads = jax.value_and_grad(lambda p: loss(forward(p, x), y))(params)
        params, state = update(params, grads, state)
        return params, state, value

    holder = {"params": params, "state": init(params)}

    def run(x, y):
        holder["params"], holder["state"], value = train(holder["params"], holder["state"], x, y)
        return value

    return run


def _w1(arrays: list) -> Callable:
    x, y, w1, w2 = (jnp.asarray(a) for a in arrays)

    @jax.jit
    def train(w, x, y):
        def loss(w):
            return jnp.sum((jnp.maximum(x @ w[0], 0) @ w[1] - y) ** 2)

        value, g = jax.value_and_grad(loss)(w)
        return (w[0] - 1e-6 * g[0], w[1] - 1e-6 * g[1]), value

    holder = {"w": (w1, w2)}

    def run():
        holder["w"], value = train(holder["w"], x, y)
        return float(value)

    return run


def step(name: str, x: Any, y: Any) -> Callable:
    """A callable running one jitted training step of workload ``name`` on fixed data."""
    if name == "w1":
        return _w1(x)
    square = lambda out, _y: jnp.mean(out * out)
    table = {"mlp": (_mlp, _xent, _adam(1e-3)), "cnn": (_cnn, _xent, _sgd(0.01)),
             "resnet18": (_resnet18, _xent, _sgd(0.1, 0.9, 5e-4)), "gpt": (_gpt, _xent, _adam(3e-4, wd=0.01)),
             "encoder": (_encoder, square, _adam(1e-3))}
    build, loss, opt = table[name]
    params, forward = build()
    run = _jit_step(params, forward, loss, opt)
    jx, jy = jnp.asarray(x), jnp.asarray(y if y is not None else x)
    return lambda: float(run(jx, jy))


def mnist_segment(images: np.ndarray, labels: np.ndarray, order: np.ndarray, steps: int) -> Callable:
    """``steps`` shuffled MNIST batches through a jitted SGD-momentum step, with the same data
    pipeline and per-step loss read as the other modes."""
    params, forward = _cnn()
    run = _jit_step(params, forward, _xent, _sgd(0.01, 0.9))
    state = {"offset": 0}

    def segment() -> None:
        for _ in range(steps):
            start = state["offset"] if state["offset"] + 64 <= len(order) else 0
            state["offset"] = start + 64
            idx = order[start:start + 64]
            x = (images[idx].astype(np.float32) / 255.0 - 0.1307) / 0.3081
            float(run(jnp.asarray(x.reshape(64, 1, 28, 28)), jnp.asarray(labels[idx])))

    return segment
