"""`torch.linalg.vector_norm` (and what calls it: `F.normalize`, `Tensor.norm`,
cosine similarity) as stax reductions, static and compiled once for every size, forward
and backward.

Before, core ATen kept the op whole and PyTorch ran it inside stax's graphs (a fallback
op), and a dynamic graph holding it was compiled per size (the most frequent per-size
reason of `opinfo_sweep.py --dynamic`, 55 samples). stax_decompositions now writes it as
pow/abs, a sum or max and a root; the backward stays the op's own formula (a decomposition
applies below autograd), so a zero row gets eager's zero gradient, not the NaN a root's
derivative would give. On the CPU, the Triton target interpreted and CUDA: values, shapes
and strides, and gradients, with a zero row in every input.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import stax.backend as B
from test_dynamic_gpu import counts, interpreted_triton  # noqa: F401
from test_dynamic_prefix_slices import _where, assert_dynamic_only

pytestmark = pytest.mark.usefixtures("stax_strict")
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}

CASES = {
    "normalize": lambda x: F.normalize(x, dim=-1) * 3.0,
    "l2_rows": lambda x: torch.linalg.vector_norm(x, dim=1),
    "l2_all": lambda x: torch.linalg.vector_norm(x) + x,
    "l1_keepdim": lambda x: x / (torch.linalg.vector_norm(x, ord=1, dim=-1, keepdim=True) + 1),
    "linf_cols": lambda x: torch.linalg.vector_norm(x, ord=float("inf"), dim=0),
    "lminus_inf": lambda x: torch.linalg.vector_norm(x, ord=float("-inf"), dim=-1),
    "l0": lambda x: torch.linalg.vector_norm(x, ord=0, dim=-1),
    "l3": lambda x: torch.linalg.vector_norm(x, ord=3, dim=(0, 1)),
    "cosine": lambda x: F.cosine_similarity(x, x.tanh() + 1, dim=-1),
    "tensor_norm": lambda x: x.norm(dim=-1, keepdim=True) * x,
}


def _fallback_ops(reps):
    return [o for r in reps for g in r.graphs for o in getattr(g, "fallback_ops", ())]


def _check_call(cf, fn, x, tol):
    leaf = x.clone().requires_grad_(True)
    twin = x.clone().requires_grad_(True)
    got, want = cf(leaf), fn(twin)
    assert got.shape == want.shape and got.stride() == want.stride()
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, **tol)
    g = torch.randn_like(want)
    got.backward(g)
    want.backward(g)
    if twin.grad is None:   # the 0-"norm" counts nonzeros: eager gives no gradient
        assert leaf.grad is None
        return
    torch.testing.assert_close(leaf.grad, twin.grad, **tol)
    assert not leaf.grad.isnan().any()


def _input(n, s, dev, dtype=torch.float32):
    x = torch.randn(n, s, device=dev, dtype=dtype)
    x[n // 2] = 0   # a zero row: the norm's gradient there is 0 in eager
    return x


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_vector_norm_trains_with_one_compile(case, where, counts, request):
    dev, sizes, route = _where(where, request)
    fn = CASES[case]
    cf = torch.compile(fn, backend="stax", dynamic=True)
    for n, s in sizes:
        _check_call(cf, fn, _input(n, s, dev), TOL[torch.float32])
    assert not _fallback_ops(assert_dynamic_only(route, counts))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", ["normalize", "l2_rows", "linf_cols", "l1_keepdim"])
def test_vector_norm_is_a_kernel_static(case, dtype):
    fn = CASES[case]
    cf = torch.compile(fn, backend="stax")
    _check_call(cf, fn, _input(256, 1031, "cpu", dtype), TOL[dtype])
    reps = B.reports()
    assert reps and {r.route for r in reps} == {"stax-cpu"}
    assert not _fallback_ops(reps)


def test_vector_norm_keeps_the_result_dtype():
    """`dtype=` and a bf16 input: the sum is in float32 (reduction_dtypes), the result
    in the asked dtype, as eager's."""
    def fn(x):
        return torch.linalg.vector_norm(x, dim=-1, dtype=torch.float64)
    x = torch.randn(300, 512, dtype=torch.float32)
    cf = torch.compile(fn, backend="stax")
    got = cf(x)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, fn(x))
