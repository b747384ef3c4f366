"""`x.repeat(...)` and `torch.tile` as stax IR (importer.ops_views._repeat): x broadcast
to [r0, d0, r1, d1, ..] and merged pairwise, a kernel that writes the fresh tensor eager
returns. Before, aten.repeat was a stax_graph.fallback (PyTorch ran it), a graph of it
alone ran no stax code, and under dynamic shapes it was one library call per graph.

Checked against eager on the CPU, the Triton target interpreted, and CUDA: values
(bit-exact where a repeat and one rounding op follow it; a sum of it is
summed in its own order), shapes,
strides, a fresh output (never the input's storage); static and dynamic (one compile for
every size), forward and backward; no fallback op.
"""
from __future__ import annotations

import pytest
import torch

import stax.backend as B
from grad_check import same_forward_and_backward
from ptx_check import training_kernels_to_ptx
from test_dynamic_gpu import counts, interpreted_triton  # noqa: F401
from test_dynamic_prefix_slices import _one_dynamic_report, _where

pytestmark = pytest.mark.usefixtures("stax_strict")
EXACT = dict(rtol=0, atol=0)

CASES = {
    # the output is the repeat itself: a fresh, contiguous tensor
    "rows_and_columns": lambda x: x.repeat(2, 3),
    # more counts than dims: 1s in front of x's dims
    "new_leading_dim": lambda x: x.repeat(3, 1, 2) * 2,
    # a transposed input, and tile's counts padded with 1s in front
    "tile_transposed": lambda x: torch.tile(x.t(), (2,)) + 1,
    # grouped-query attention's key repeat, then a reduction over it
    "heads": lambda x: x.unsqueeze(1).repeat(1, 4, 1).sum(-1),
    # a count of 0: an empty result
    "zero": lambda x: x.repeat(0, 2) + 1,
}


def _check(got, want, x, tol=EXACT):
    assert got.shape == want.shape and got.stride() == want.stride()
    assert got.untyped_storage().data_ptr() != x.untyped_storage().data_ptr() or \
        got.numel() == 0
    torch.testing.assert_close(got, want, **tol)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dynamic,where", [
    (False, "stax-cpu"), (False, "cuda"),
    (True, "stax-cpu"), (True, "triton"), (True, "cuda")])
def test_repeat_is_a_kernel(case, dynamic, where, counts, request):
    dev, sizes, route = _where(where, request)
    fn = CASES[case]
    cf = torch.compile(fn, backend="stax", dynamic=dynamic)
    for n, s in (sizes if dynamic else sizes[:1]):
        x = torch.randn(n, s, device=dev)
        _check(cf(x), fn(x), x, dict(rtol=1e-5, atol=1e-5) if case == "heads" else EXACT)
    reps = B.reports()
    assert reps and all(r.route == route and not r.fallback_ops for r in reps), \
        [r.summary() for r in reps]
    # a kernel computes it, also a bare repeat compiled for every size (a copy kernel of
    # x's broadcast: stax-fold-view-copies; it was torch's reshape at run time before)
    assert all(r.kernel_count == 1 for r in reps), [r.summary() for r in reps]
    if dynamic:
        _one_dynamic_report(len(sizes), route, counts)


@pytest.mark.parametrize("dtype", [torch.int64, torch.bfloat16, torch.bool])
def test_repeat_keeps_every_dtype_exact(dtype):
    def fn(x):
        return x.repeat(2, 1, 3)

    x = torch.randint(-1000, 1000, (300, 520)).to(dtype)
    _check(torch.compile(fn, backend="stax")(x), fn(x), x)
    (rep,) = B.reports()
    assert rep.route == "stax-cpu" and not rep.fallback_ops, rep.summary()


@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_repeat_trains_with_one_compile(where, counts, request):
    """The gradient of a repeat sums the copies: reshape and sum, stax kernels too."""
    dev, sizes, route = _where(where, request)

    def fn(x):
        return (x.repeat(2, 3) * x.repeat(2, 3).sigmoid()).sum(0)

    cf = torch.compile(fn, backend="stax", dynamic=True)
    for n, s in sizes:
        x = torch.randn(n, s, device=dev, requires_grad=True)
        same_forward_and_backward(cf, fn, x, tol=dict(rtol=1e-5, atol=1e-5))
    rep = _one_dynamic_report(len(sizes), route, counts)
    assert not rep.fallback_ops, rep.summary()


@pytest.mark.parametrize("case", sorted(CASES))
def test_repeat_kernels_compile_to_ptx(case):
    """The static Triton generator (CUDA without a GPU here): every kernel of the forward
    and backward graphs compiles to PTX for sm_90."""
    out, stats = training_kernels_to_ptx(CASES[case], torch.randn(256, 520))
    # forward and backward kernels; the zero case's forward is empty, and a bare repeat
    # is a top-level reshape in the fused pipeline (stax-assign-layouts, not run here,
    # makes it the copy kernel test_repeat_is_a_kernel runs)
    least = 1 if case in ("zero", "rows_and_columns") else 2
    assert out.status == "pass" and stats["kernels"] >= least, (out, stats)
