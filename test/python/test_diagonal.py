"""torch.diagonal (`torch.diag` of a matrix, `trace`) and torch.diagonal_scatter (the
diagonal's backward) as stax IR (importer.ops_views._diagonal, _diagonal_scatter):
a diagonal is views only (dims moved last, merged, every (m + 1)-th element from the
offset's start), a diagonal_scatter one select over x's shape. Before, both were
`stax_graph.fallback` ops PyTorch ran. Checked on the CPU and on CUDA (skipped without
a GPU): bit-exact values, shapes and strides; an output eager returns as a view of the
input is that view; forward and backward; every kernel to PTX."""
from __future__ import annotations

import pytest
import torch

import stax.backend as B
from grad_check import same_forward_and_backward
from ptx_check import training_kernels_to_ptx

pytestmark = pytest.mark.usefixtures("stax_strict")
EXACT = dict(rtol=0, atol=0)
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU"))]

CASES = {
    # name: (function, input shape); eager returns the first, fourth and last as views
    "square": (lambda x: x.diagonal(), (600, 600)),
    "above": (lambda x: x.diagonal(3) * 2, (520, 700)),
    "below": (lambda x: x.diagonal(-5) + 1, (700, 520)),
    "batched_last_dims": (lambda x: torch.diagonal(x, 0, -2, -1), (4, 300, 300)),
    "outer_dims": (lambda x: torch.diagonal(x, 1, 0, 2).exp(), (64, 7, 80)),
    "swapped_dims": (lambda x: torch.diagonal(x, -2, 2, 0) * 3, (64, 7, 80)),
    "trace": (lambda x: torch.trace(x), (512, 512)),
    "diag_of_a_matrix": (lambda x: torch.diag(x, 2), (512, 600)),
    "past_the_end": (lambda x: x.diagonal(900), (512, 600)),
}


def _same(got, want, x, tol):
    assert got.shape == want.shape and got.stride() == want.stride()
    assert got.storage_offset() == want.storage_offset()
    # a view of x exactly when eager's is
    assert (got.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()) == \
        (want.untyped_storage().data_ptr() == x.untyped_storage().data_ptr())
    torch.testing.assert_close(got, want, **tol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_diagonal_is_native(case, device):
    fn, shape = CASES[case]
    x = torch.randn(*shape, device=device)
    # exact but for exp (stax's and eager's vectorized exp differ in the last bit)
    tol = dict(rtol=1e-6, atol=0) if case == "outer_dims" else EXACT
    _same(torch.compile(fn, backend="stax")(x), fn(x), x, tol)
    rep = B.last_report()
    assert rep.route == ("stax-cpu" if device == "cpu" else "triton") and \
        not rep.fallback_ops, rep.summary()


def _both_diagonals(x):
    return (x.diagonal(2) * x.diagonal(2)).sum() + torch.diagonal(x, -3).exp().sum()


@pytest.mark.parametrize("device", DEVICES)
def test_diagonal_trains_without_pytorch_ops(device):
    """The backward's diagonal_scatter (into zeros, then summed) is a stax kernel."""
    x = torch.randn(520, 600, device=device, requires_grad=True)
    same_forward_and_backward(torch.compile(_both_diagonals, backend="stax"), _both_diagonals,
                              x, tol=dict(rtol=1e-5, atol=1e-5))
    assert all(not r.fallback_ops for r in B.reports()), [r.summary() for r in B.reports()]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("offset,dims,shape", [
    (0, (0, 1), (512, 512)), (7, (0, 1), (520, 600)), (-9, (1, 0), (600, 520)),
    (2, (-1, 0), (40, 3, 33)), (600, (0, 1), (512, 600))])
def test_diagonal_scatter_is_exact(offset, dims, shape, device):
    x = torch.randn(*shape, device=device)
    src = x.diagonal(offset, *dims).clone().normal_()
    fn = lambda x, s: torch.diagonal_scatter(x, s, offset, *dims)   # noqa: E731
    got, want = torch.compile(fn, backend="stax")(x, src), fn(x, src)
    assert got.stride() == want.stride() and torch.equal(got, want)
    rep = B.last_report()
    # one select kernel; past the end no element is on the diagonal: x, copied (reported)
    assert not rep.fallback_ops and rep.kernel_count == (0 if src.numel() == 0 else 1), \
        rep.summary()


def test_diagonal_kernels_compile_to_ptx():
    out, stats = training_kernels_to_ptx(_both_diagonals, torch.randn(520, 600, requires_grad=True))
    assert out.status == "pass" and stats["kernels"] >= 1, (out, stats)
