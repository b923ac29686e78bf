"""Seeded case generators for the trust fuzzer's seventh wave (trust21): result layouts and higher-order gradients.

``layouts`` draws an input in one of nine layouts (contiguous, transposed, a 3-d permutation, channels-last 4-d, a
stepped slice, an expanded row, an unsqueezed view, a channels-last empty tensor, 0-d), runs one op on it (unary and
binary elementwise ops against numbers, 0-d tensors and tensors of another layout, in-place forms, casts, clones and
the ``*_like`` factories, reductions with ``dim``/``keepdim``, scans, softmax, sorts, ``where``) and returns the
result with its ``stride()`` and ``is_contiguous()`` (in both memory formats for 4-d results): torch's
TensorIterator gives an elementwise result its input's layout, so a program that calls ``.view`` or reads
``.stride()`` after the op sees the difference.

``grad2`` draws a differentiable expression (the activations, losses, normalizations, reductions, products and
indexing functions programs use in gradient penalties and Hessian-vector products) at special points (0, -0, kinks,
ties, +-large) and compares the first and second derivatives taken with ``create_graph=True`` (the second of a
weighted functional of the first, so analytic zeros do not hide a missing term), also through a view written in
place.

Example:
    >>> case = layouts_case(np.random.default_rng(3)); print(case.code)
"""
from __future__ import annotations

import numpy as np

from trust_cases import GENERATORS
from trust_diff import Case

# layout name -> (code turning the contiguous input ``x`` into the layout, the input shape)
LAYOUTS = {
    "contig": ("x", (3, 4)),
    "t": ("x.t()", (3, 4)),
    "perm3": ("x.permute(2, 0, 1)", (2, 3, 4)),
    "cl4": ("x.contiguous(memory_format=L.channels_last)", (2, 3, 2, 2)),
    "step": ("x[:, ::2]", (3, 6)),
    "expand": ("x.expand(3, 4)", (1, 4)),
    "unsq": ("x.t().unsqueeze(1)", (3, 4)),
    "cl4_empty": ("x.contiguous(memory_format=L.channels_last)", (0, 3, 2, 2)),
    "zero_d": ("x", ()),
}

UNARY = ["y.neg()", "y.abs()", "y.exp()", "y.sin()", "L.relu(y)", "y.sigmoid()", "y.sign()", "y * 2", "y + 1",
         "2 - y", "y / 3", "y ** 2", "y.clamp(-1, 1)", "y > 0", "y.float()", "y.double()", "y.to(L.float16)",
         "y.clone()", "L.empty_like(y).zero_()", "L.zeros_like(y)", "L.ones_like(y)", "_seeded(L).rand_like(y)",
         "L.full_like(y, 7)",
         "y.contiguous()", "y.detach()", "y.nan_to_num()", "L.where(y > 0, y, 0.)", "y.bool()", "y.int()",
         "L.nn.functional.silu(y)", "L.nn.functional.leaky_relu(y, 0.1)", "y.round()",
         "L.isnan(y)", "y.clone(memory_format=L.contiguous_format)", "y.reciprocal()", "y.square()", "y.type_as(z0)"]
# (gelu is left out: its float32 `1 + erf` cancels to within one ulp of 1.0 below -5, where torch gives -0.0)
BINARY = ["y + z", "y * z", "y - z", "L.maximum(y, z)", "L.where(y > z, y, z)", "L.atan2(y, z)", "y == z",
          "L.lerp(y, z, 0.5)", "y + z0", "z0 * y", "L.add(y, z, alpha=2)", "L.addcmul(y, y, z)"]
INPLACE = ["y.add_(1)", "y.mul_(z)", "y.copy_(z)", "y.zero_()", "y.exp_()", "y.clamp_(min=0)", "y.fill_(2)"]
REDUCE = ["y.sum({d})", "y.sum({d}, keepdim=True)", "y.mean({d})", "y.amax({d}, keepdim=True)",
          "y.max({d}).values", "y.max({d}).indices", "y.argmax({d})", "y.cumsum({d})", "y.softmax({d})",
          "y.log_softmax({d})", "y.sort({d}).values", "y.sort({d}).indices", "y.cumprod({d})", "y.flip({d})",
          "y.std({d})", "y.prod({d})", "y.logsumexp({d})", "y.norm(dim={d})", "y.topk(1, {d}).values", "y.roll(1, {d})",
          "L.cat([y, y], {d})", "L.stack([y, y], {d})", "y.unsqueeze({d})", "y.narrow({d}, 0, 1)",
          "y.diff(dim={d})", "y.cummax({d}).values", "y.var_mean({d})[0]"]


def _report(expr: str, ndim4: bool) -> str:
    cl = ", r.is_contiguous(memory_format=L.channels_last)" if ndim4 else ""
    seeded = "def _seeded(L):\n    L.manual_seed(0)\n    return L\n"
    return f"{seeded}r = {expr}\nout = (r, r.stride(), r.is_contiguous(){cl})"


def layouts_case(rng: np.random.Generator) -> Case:
    """One op on an input in a drawn layout; the result with its strides and contiguity."""
    name = list(LAYOUTS)[int(rng.integers(len(LAYOUTS)))]
    make, shape = LAYOUTS[name]
    x = rng.standard_normal(shape).round(2) * 3
    if x.size:
        x.flat[int(rng.integers(x.size))] = -0.0
    dtype = str(rng.choice(["float32", "float32", "float64", "int64"]))
    inputs = {"x": (x, dtype), "z0": (np.array(1.5), "float32")}
    code = f"y = {make}\n"
    u = rng.random()
    if u < 0.45:
        expr = UNARY[int(rng.integers(len(UNARY)))]
    elif u < 0.65:
        expr = BINARY[int(rng.integers(len(BINARY)))]
        zkind = str(rng.choice(["same", "contig", "bcast"]))
        # z: the result's shape in another (or the same) layout, or a broadcast row
        code += {"same": f"z = ({make}).flip(0) if y.dim() else y * 2\n",
                 "contig": "z = y.contiguous() * 0.5\n",
                 "bcast": "z = y.sum(0, keepdim=True) if y.dim() else y\n"}[zkind]
    elif u < 0.75:
        expr = INPLACE[int(rng.integers(len(INPLACE)))]
        code = f"x = x.clone()\ny = {make}\n" + ("y = y.clone()\n" if name == "expand" else "")
        code += "z = y.flip(0).contiguous() if y.dim() else y.clone()\n"
        if dtype == "int64" and expr in ("y.exp_()",):
            expr = "y.neg_()"
    else:
        ndim = len(shape) + (1 if name == "unsq" else 0)
        d = int(rng.integers(-max(ndim, 1), max(ndim, 1))) if ndim else 0
        expr = REDUCE[int(rng.integers(len(REDUCE)))].format(d=d)
        if dtype == "int64" and any(k in expr for k in ("softmax", "std", "mean", "logsumexp", "norm", "var")):
            dtype = "float64"
            inputs["x"] = (x, dtype)
    if dtype == "int64" and any(k in expr for k in ("lerp", "leaky_relu", "gelu", "silu", "rand_like", "addcmul")):
        dtype = "float32"
        inputs["x"] = (x, dtype)
    four = name.startswith("cl4")
    return Case(code + _report(expr, four), inputs, zero_sign=False)


# differentiable expressions over x (3, 4) in float64; w a fixed weighting
GRAD2 = [
    "L.tanh(x)", "L.sigmoid(x)", "L.exp(x * 0.5)", "L.log(x.abs() + 0.5)", "x ** 3", "(x.abs() + 0.5) ** x",
    "L.sqrt(x.abs() + 0.1)", "x / (x * x + 1)", "x.abs() * x", "L.relu(x) * x", "L.nn.functional.gelu(x)",
    "L.nn.functional.gelu(x, approximate='tanh')", "L.nn.functional.silu(x)", "L.nn.functional.softplus(x)",
    "L.nn.functional.elu(x)", "L.nn.functional.selu(x)", "L.nn.functional.celu(x, 0.5)", "L.nn.functional.mish(x)",
    "L.nn.functional.logsigmoid(x)", "L.softmax(x, -1)", "L.log_softmax(x, 0)", "L.logsumexp(x, -1)",
    "x.norm(dim=-1)", "L.linalg.vector_norm(x, 3, dim=-1)", "x.std(-1)", "x.var(0)",
    "L.nn.functional.layer_norm(x, (4,), L.linspace(0.5, 2, 4), L.linspace(-1, 1, 4))",
    "L.nn.functional.mse_loss(x, x.flip(-1) * 0.5)", "L.nn.functional.cross_entropy(x, L.tensor([1, 0, 3]))",
    "L.nn.functional.cross_entropy(x, L.tensor([1, 0, 3]), label_smoothing=0.1)",
    "L.nn.functional.binary_cross_entropy_with_logits(x, L.sigmoid(x.flip(0)).detach())",
    "L.nn.functional.smooth_l1_loss(x ** 2, x.flip(0) * 0.3)", "L.nn.functional.huber_loss(x ** 2, x.flip(0) * 0.3)",
    "x @ x.t()", "x.prod(-1)", "x.cumprod(-1)", "(x * x).cumsum(-1)", "L.atan2(x, x.flip(0) + 0.1)", "L.erf(x)",
    "L.erfinv(x.tanh() * 0.9)", "L.lgamma(x.abs() + 0.5)", "L.digamma(x.abs() + 0.5)", "x.amax(-1) ** 2",
    "x.sort(-1).values * L.arange(4.)", "x.topk(2, -1).values ** 2", "L.where(x > 0, x ** 2, x ** 3)",
    "x.clamp(-0.5, 0.5) * x", "L.nn.functional.hardtanh(x) * x", "L.xlogy(x, x.abs() + 1)",
    "L.lerp(x, x ** 2, x.sigmoid())", "L.addcmul(x, x, x, value=0.5)", "L.addcdiv(x, x, x * x + 1, value=0.5)",
    "L.hypot(x, x.flip(0))", "L.sinc(x)", "L.asinh(x)", "L.logaddexp(x, x.flip(0))",
    "L.nn.functional.cosine_similarity(x, x.flip(0))", "L.nn.functional.normalize(x)", "L.nn.functional.glu(x, -1)",
    "L.nn.functional.softsign(x)", "L.nn.functional.group_norm(x.reshape(1, 3, 4) * 2, 3)",
    "L.nn.functional.scaled_dot_product_attention(x[None], x[None], x[None])",
    "L.nn.functional.scaled_dot_product_attention(x[None], x[None], x[None], is_causal=True)",
    "L.nn.functional.conv1d(x[None], x[:, :2].reshape(3, 3, 2) * 0.5, padding=1)",
    "L.linalg.det(x[:, :3])", "L.linalg.inv(x[:, :3] + 3 * L.eye(3))", "L.logdet(x[:, :3] @ x[:, :3].t() + L.eye(3))",
    "L.expm1(x)", "L.log1p(x.abs())", "L.trace(x @ x.t())", "L.einsum('ij,kj->ik', x, x)",
    "L.nn.functional.kl_div(L.log_softmax(x, -1), L.softmax(x.flip(0), -1), reduction='batchmean')",
    "L.nn.functional.avg_pool1d(x[None] ** 2, 2)", "L.nn.functional.interpolate(x[None] ** 2, scale_factor=2, mode='linear')",
    "L.nn.functional.pad(x ** 2, (1, 1), mode='reflect')", "L.fmod(x ** 2, 0.7)", "L.polygamma(1, x.abs() + 0.5)",
    "L.special.ndtr(x)", "L.special.log_ndtr(x)", "(x ** 3).mean()", "L.dist(x, x.flip(0), 3)",
    "L.logit(x.sigmoid())", "L.nn.functional.softmin(x, -1)", "L.nn.functional.rms_norm(x, (4,))",
    "L.nn.functional.pairwise_distance(x, x.flip(0))", "L.linalg.matrix_norm(x)", "L.linalg.svdvals(x)",
    "L.linalg.cholesky(x @ x.t() + L.eye(3))", "L.linalg.solve(x[:, :3] + 3 * L.eye(3), x)", "x[[0, 0, 2]] ** 2",
    "x.gather(1, L.tensor([[0, 0], [1, 3], [2, 2]])) ** 2", "x.unfold(1, 2, 1) ** 2", "L.roll(x ** 2, 1, 1)",
    "x.flip(1) * x", "L.diagonal(x @ x.t()) ** 2", "_through_view(x)", "L.nn.functional.hardswish(x) * x",
    "L.nn.functional.leaky_relu(x, 0.1) * x", "x.max(-1).values * x.sum()", "L.cosh(x) * L.tan(x * 0.3)",
    "L.nn.functional.tanhshrink(x)", "L.nn.functional.triplet_margin_loss(x, x.flip(0), x * 0.5)",
    "L.nn.functional.multi_margin_loss(x, L.tensor([1, 0, 3]))", "L.nn.functional.poisson_nll_loss(x, x.abs())",
    "L.nn.functional.gaussian_nll_loss(x, x.flip(0), x.abs() + 0.5)", "L.cdist(x, x.flip(0) * 0.7 + 0.1)",
    # small networks with fixed weights (gradient penalties, Hessian-vector products)
    "L.tanh(x @ _W(L, 4, 5)) @ _W(L, 5, 2)", "L.nn.functional.gelu(x @ _W(L, 4, 6)) @ _W(L, 6, 3)",
    "L.nn.functional.silu(L.nn.functional.layer_norm(x @ _W(L, 4, 6), (6,))) @ _W(L, 6, 2)",
    "L.softmax((x @ _W(L, 4, 4)) @ x.t(), -1) @ x", "L.nn.functional.softplus(x @ _W(L, 4, 3), beta=2) ** 2",
    "L.nn.functional.conv2d(x.reshape(1, 1, 3, 4), _W(L, 1, 4).reshape(2, 1, 2, 1) * 0.5, padding=1).tanh()",
    "L.nn.functional.avg_pool2d(L.nn.functional.conv2d(x.reshape(1, 1, 3, 4) ** 2, _W(L, 1, 4).reshape(1, 1, 2, 2)), 2, 1)",
    "L.nn.functional.batch_norm(x @ _W(L, 4, 3), None, None, training=True).sigmoid()",
    "L.nn.functional.elu(x @ _W(L, 4, 5)).logsumexp(-1)", "L.sigmoid(x @ _W(L, 4, 1)).log()",
    "L.nn.functional.mse_loss(L.tanh(x @ _W(L, 4, 2)), L.zeros(3, 2, dtype=L.float64))",
    "L.nn.functional.cross_entropy(x @ _W(L, 4, 5), L.tensor([4, 0, 2]))",
    "L.nn.functional.leaky_relu(x @ _W(L, 4, 5), 0.2) @ _W(L, 5, 2) * x.sum()",
]

_VIEW_HELPER = (
    "def _W(L, n, m):\n"
    "    return L.tensor(np.sin(np.arange(n * m) * 0.7 + 0.3).reshape(n, m), dtype=L.float64)\n"
    "def _through_view(x):\n"
    "    y = x * 1.0\n"
    "    y[:, 1:].mul_(x[:, :3])\n"
    "    y.t()[0].exp_()\n"
    "    return y\n"
)

_POINTS = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, 1e-3, 0.25, -0.75, 1.5, -1.5])


def grad2_case(rng: np.random.Generator) -> Case:
    """First and second derivatives (create_graph) of a drawn expression at drawn points, in float64."""
    expr = GRAD2[int(rng.integers(len(GRAD2)))]
    u = rng.random()
    if u < 0.4:
        x = rng.standard_normal((3, 4))
    elif u < 0.8:
        x = rng.choice(_POINTS, (3, 4)) + rng.choice([0.0, 0.0, 0.1], (3, 4))
    else:
        x = np.tile(rng.choice(_POINTS, (1, 4)), (3, 1))  # ties down the columns
    code = (_VIEW_HELPER
            + "x = x_g\n"
            + f"y = {expr}\n"
            + "w = L.tensor(1 + 0.25 * (np.arange(y.numel()).reshape(tuple(y.shape)) % 7), dtype=y.dtype)\n"
            + "g, = L.autograd.grad((y * w).sum(), x, create_graph=True)\n"
            + "c = L.tensor(np.cos(np.arange(12.)).reshape(3, 4))\n"
            + "s = (g * g).sum() * 0.5 + (g * c).sum()\n"
            + "g2 = L.autograd.grad(s, x, allow_unused=True)[0] if s.requires_grad else None\n"
            + "out = (y, g, L.zeros(3, 4, dtype=L.float64) if g2 is None else g2)")
    return Case(code, {"x_g": (x, "float64")}, zero_sign=False, rtol=1e-9)


GENERATORS["layouts"] = layouts_case
GENERATORS["grad2"] = grad2_case
