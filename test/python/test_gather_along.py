"""torch.gather (and torch.take_along_dim) as stax IR (importer.ops_indexing._gather_along):
one stax.gather of a flat index into x flattened, the index range-checked on x's dim.
Before, aten.gather was a stax_graph.fallback (PyTorch ran it), and a graph with a
symbolic size compiled once per size.

Checked against eager on the CPU, the Triton target interpreted, and CUDA: values
(bit-exact: a gather moves values), shapes, strides; static and dynamic (one compile for
every size); forward and backward (the backward's scatter_add stays PyTorch's, a library
op, reported); an index out of range raises naming the dim's size, as eager raises.
"""
from __future__ import annotations

import pytest
import torch

import stax.backend as B
from grad_check import same_forward, same_forward_and_backward
from ptx_check import training_kernels_to_ptx
from test_dynamic_gpu import counts, interpreted_triton  # noqa: F401
from test_dynamic_prefix_slices import _one_dynamic_report, _where

pytestmark = pytest.mark.usefixtures("stax_strict")
EXACT = dict(rtol=0, atol=0)


def along_rows(x, i):
    """Each row picks 3 of its own columns (top-k's values, an RL policy's actions)."""
    return torch.gather(x, 1, i % x.shape[1])


def along_columns(x, i):
    """Each column picks rows; the index has fewer columns than x (5 of them)."""
    return torch.gather(x, 0, (i % x.shape[0])[:, :2]).t() * 2


def three_d(x, i):
    """A 3-D x (expanded: stride 0) with a negative dim, then a sum of the picks."""
    x3 = x.unsqueeze(-1).expand(-1, -1, 4)
    j = (i % x.shape[1]).unsqueeze(-1).expand(-1, -1, 4)
    return torch.gather(x3, -2, j).sum(1)


def at_row_argmax(x, i):
    """Each row's element at its argmax (a row value as the index) with the row's sum:
    one reduction kernel, the gather's result a row value (cumprod's backward picks the
    first zero so)."""
    return torch.gather(x, 1, x.argmax(1, keepdim=True)) + x.sum(1, keepdim=True)


def take_along(x, i):
    """take_along_dim (static only: Dynamo specializes its broadcast's sizes, and
    recompiles per size with backend="eager" too)."""
    return torch.take_along_dim(x, i % x.shape[1], dim=1) + 1


CASES = {"along_rows": along_rows, "along_columns": along_columns, "three_d": three_d,
         "at_row_argmax": at_row_argmax}


def _inputs(n, s, dev):
    return torch.randn(n, s, device=dev), torch.randint(0, 1 << 20, (n, 3), device=dev)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dynamic,where", [
    (False, "stax-cpu"), (False, "cuda"),
    (True, "stax-cpu"), (True, "triton"), (True, "cuda")])
def test_gather_along_a_dim_is_native(case, dynamic, where, counts, request):
    dev, sizes, route = _where(where, request)
    fn = CASES[case]
    cf = torch.compile(fn, backend="stax", dynamic=dynamic)
    for n, s in (sizes if dynamic else sizes[:1]):
        same_forward(cf, fn, *_inputs(n, s, dev),
                     tol=EXACT if case.startswith("along") else dict(rtol=1e-5, atol=1e-4))
    reps = B.reports()
    assert reps and all(r.route == route and not r.fallback_ops for r in reps), \
        [r.summary() for r in reps]
    if dynamic:
        _one_dynamic_report(len(sizes), route, counts)


def test_take_along_dim_is_native():
    cf = torch.compile(take_along, backend="stax")
    same_forward(cf, take_along, *_inputs(300, 520, "cpu"), tol=EXACT)
    (rep,) = B.reports()
    assert rep.route == "stax-cpu" and not rep.fallback_ops, rep.summary()


@pytest.mark.parametrize("dtype", [torch.int64, torch.bfloat16, torch.bool])
def test_gather_along_keeps_every_dtype_exact(dtype):
    def fn(x, i):
        return torch.gather(x, 1, i)

    x = torch.randint(-1000, 1000, (300, 520)).to(dtype)
    i = torch.randint(0, 520, (300, 600)).to(torch.int64)   # more picks than columns
    got, want = torch.compile(fn, backend="stax")(x, i), fn(x, i)
    assert got.dtype == want.dtype and got.stride() == want.stride() and torch.equal(got, want)
    (rep,) = B.reports()
    assert rep.route == "stax-cpu" and not rep.fallback_ops, rep.summary()


@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_gather_along_trains_with_one_compile(where, counts, request):
    dev, sizes, route = _where(where, request)
    cf = torch.compile(along_rows, backend="stax", dynamic=True)
    for n, s in sizes:
        x, i = _inputs(n, s, dev)
        same_forward_and_backward(cf, along_rows, x.requires_grad_(), i, tol=EXACT)
    rep = _one_dynamic_report(len(sizes), route, counts)
    assert rep.fallback_ops == ["aten.scatter_add.default"], rep.summary()


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("bad", [520, -1])
def test_an_index_out_of_range_raises_naming_the_size(dynamic, bad):
    """Column 520 of rows of 520 must raise, not read the next row (in range of the
    flattened x); torch.gather counts no index from the end, so -1 raises too."""
    cf = torch.compile(lambda x, i: torch.gather(x, 1, i), backend="stax", dynamic=dynamic)
    x, i = torch.randn(256, 520), torch.randint(0, 520, (256, 3))
    assert torch.equal(cf(x, i), torch.gather(x, 1, i))
    i[7, 1] = bad
    with pytest.raises(RuntimeError, match="out of bounds"):
        torch.gather(x, 1, i)
    with pytest.raises(IndexError, match=f"index {bad} is out of bounds for a dimension of "
                                         "size 520"):
        cf(x, i)
    assert all(not r.fallback_ops and r.route == "stax-cpu" for r in B.reports())


@pytest.mark.parametrize("case", sorted(CASES))
def test_gather_along_kernels_compile_to_ptx(case):
    """The static Triton generator (CUDA without a GPU here): every kernel of the forward
    and backward graphs compiles to PTX for sm_90."""
    out, stats = training_kernels_to_ptx(CASES[case], *_inputs(256, 520, "cpu"))
    assert out.status == "pass" and stats["kernels"] >= 1, (out, stats)
