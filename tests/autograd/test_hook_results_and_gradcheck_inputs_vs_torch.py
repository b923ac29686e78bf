"""What a hook may return, and gradcheck's refusals, against torch 2.13 (autograd audit, func24): a post-accumulate
grad hook must return None, a Node pre-/post-hook must return one gradient per slot, gradcheck/gradgradcheck need an
input that requires grad; the leaf's hooks then post-accumulate hooks run in torch's order."""
from __future__ import annotations

import pytest

import ember

torch = pytest.importorskip("torch")


def _x(lib):
    return lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)


def _post_accumulate_returns(lib):
    x = _x(lib)
    x.register_post_accumulate_grad_hook(lambda p: p.grad * 0)
    (x * x).sum().backward()


def _node_prehook_two_for_one(lib):
    y = _x(lib).exp()
    y.grad_fn.register_prehook(lambda go: (go[0], go[0]))
    y.sum().backward()


def _node_posthook_two_for_one(lib):
    y = _x(lib).exp()
    y.grad_fn.register_hook(lambda gi, go: (gi[0], gi[0]))
    y.sum().backward()


def _gradcheck_nothing_requires_grad(lib):
    lib.autograd.gradcheck(lambda v: v * 2, (lib.ones(3, dtype=lib.float64),))


def _gradgradcheck_nothing_requires_grad(lib):
    lib.autograd.gradgradcheck(lambda v: v * 2, (lib.ones(3, dtype=lib.float64),))


@pytest.mark.parametrize("case,message", [
    (_post_accumulate_returns, "Tensor post accumulate grad hooks should return None."),
    (_node_prehook_two_for_one, r"hook '<lambda>' has returned an incorrect number of values \(got 2, but expected 1\)"),
    (_node_posthook_two_for_one, r"hook '<lambda>' has returned an incorrect number of values \(got 2, but expected 1\)"),
    (_gradcheck_nothing_requires_grad, "gradcheck expects at least one input tensor to require gradient"),
    (_gradgradcheck_nothing_requires_grad, "gradcheck expects at least one input tensor to require gradient"),
])
def test_errors_as_torch(case, message: str) -> None:
    with pytest.raises(Exception, match=message) as want:
        case(torch)
    with pytest.raises(want.type, match=message):
        case(ember)


def test_leaf_hook_then_post_accumulate_order_and_values() -> None:
    def run(lib):
        x = _x(lib)
        seen = []
        x.register_hook(lambda g: (seen.append(("pre", g.tolist())), g * 2)[1])
        x.register_post_accumulate_grad_hook(lambda p: seen.append(("post", p.grad.tolist())))
        (x * x).sum().backward()
        (x * x).sum().backward()
        return seen
    assert run(ember) == run(torch) == [("pre", [2.0, 4.0, 6.0]), ("post", [4.0, 8.0, 12.0]),
                                        ("pre", [2.0, 4.0, 6.0]), ("post", [8.0, 16.0, 24.0])]
