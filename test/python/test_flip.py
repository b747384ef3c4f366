"""`torch.flip` (and `torch.rot90`, a flip of a transpose) as stax IR
(importer.ops_indexing._flip): along each flipped dim a gather at (size - 1 - i) from an
iota of the dim's static or symbolic size. Before, aten.flip was a stax_graph.fallback
(PyTorch ran it).

Checked against eager on the CPU, the Triton target interpreted, and CUDA: values
(bit-exact where only a flip and one rounding op touch them), shapes, strides, a fresh
output (flip is no view); static and dynamic (one compile for every size), forward and
backward; no fallback op.
"""
from __future__ import annotations

import pytest
import torch

import stax.backend as B
from grad_check import same_forward_and_backward
from ptx_check import training_kernels_to_ptx
from test_dynamic_gpu import counts, interpreted_triton  # noqa: F401
from test_dynamic_prefix_slices import _one_dynamic_report, _where
from test_repeat import EXACT, _check

pytestmark = pytest.mark.usefixtures("stax_strict")

CASES = {
    "last_dim": lambda x: x.flip(-1),
    "both_dims": lambda x: x.flip(0, 1) * 2,
    "rot90": lambda x: torch.rot90(x, 1, (0, 1)) + 1,
    "then_sum": lambda x: x.flip(0).sum(0),      # a column reduction of the flip
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dynamic,where", [
    (False, "stax-cpu"), (False, "cuda"),
    (True, "stax-cpu"), (True, "triton"), (True, "cuda")])
def test_flip_is_a_kernel(case, dynamic, where, counts, request):
    dev, sizes, route = _where(where, request)
    fn = CASES[case]
    cf = torch.compile(fn, backend="stax", dynamic=dynamic)
    for n, s in (sizes if dynamic else sizes[:1]):
        x = torch.randn(n, s, device=dev)
        _check(cf(x), fn(x), x, dict(rtol=1e-5, atol=1e-4) if case == "then_sum" else EXACT)
    reps = B.reports()
    assert reps and all(r.route == route and not r.fallback_ops and r.kernel_count >= 1
                        for r in reps), [r.summary() for r in reps]
    if dynamic:
        _one_dynamic_report(len(sizes), route, counts)


@pytest.mark.parametrize("dtype", [torch.int64, torch.bfloat16, torch.bool])
def test_flip_keeps_every_dtype_exact(dtype):
    def fn(x):
        return x.flip(0, 2)

    x = torch.randint(-1000, 1000, (3, 300, 520)).to(dtype)
    _check(torch.compile(fn, backend="stax")(x), fn(x), x)
    (rep,) = B.reports()
    assert rep.route == "stax-cpu" and not rep.fallback_ops, rep.summary()


def test_flip_of_one_element_dims_and_0d():
    """Dims of one element (and a 0-d tensor) flip to themselves: still a fresh tensor."""
    def fn(x, y):
        return x.flip(0, 1), y.flip(0)

    x, y = torch.randn(1, 1, 520), torch.randn(())
    got, want = torch.compile(fn, backend="stax")(x, y), fn(x, y)
    for g, w, i in zip(got, want, (x, y)):
        _check(g, w, i)


@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_flip_trains_with_one_compile(where, counts, request):
    """A flip's gradient is the flip of the output's gradient: a stax gather too."""
    dev, sizes, route = _where(where, request)

    def fn(x):
        return x.flip(1) * x.sigmoid()

    cf = torch.compile(fn, backend="stax", dynamic=True)
    for n, s in sizes:
        x = torch.randn(n, s, device=dev, requires_grad=True)
        same_forward_and_backward(cf, fn, x, tol=dict(rtol=1e-5, atol=1e-5))
    rep = _one_dynamic_report(len(sizes), route, counts)
    assert not rep.fallback_ops, rep.summary()


@pytest.mark.parametrize("case", sorted(CASES))
def test_flip_kernels_compile_to_ptx(case):
    """The static Triton generator (CUDA without a GPU here): every kernel of the forward
    and backward graphs compiles to PTX for sm_90."""
    out, stats = training_kernels_to_ptx(CASES[case], torch.randn(256, 520))
    assert out.status == "pass" and stats["kernels"] >= 2, (out, stats)
