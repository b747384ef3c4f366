"""Tensor indexing by several index tensors (`x[torch.arange(n), target]`, `x[:, i, j]`,
`x[i, :, j]`, `x[i[:, None], j]`) and by one index of several dims on an inner dim
(`x[:, idx2d]`): one stax.gather of a flat index into the indexed dims merged
(importer.ops_indexing._gather_flat), each index component wrapped and range-checked on
its own dim.

Before, these were a stax_graph.fallback (PyTorch ran `aten.index`), and a graph with a
symbolic size was compiled once per size ("more than one index tensor"). Checked
against eager on the CPU, the Triton target interpreted, and CUDA: values (bit-exact:
a gather moves values), shapes, strides; static and dynamic (one compile for every
size); the manual cross-entropy pick trained; and an index out of range on any of its
dims raises IndexError naming that dim's size, where a flat index alone would have read
the next row.
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
EXACT = dict(rtol=0, atol=0)   # a gather alone moves values


def pick(x, t):
    """The manual cross entropy's pick: row i's log-probability of its target."""
    return -x.log_softmax(-1)[torch.arange(x.shape[0], device=x.device), t]


def inner_pair(x, t):
    """x[:, i, j] of a 3-D x: adjacent inner dims, the result [n, k] keeps them in place."""
    i, j = t % x.shape[1], (7 * t + 3) % x.shape[2] - x.shape[2]   # negative j counts back
    return x[:, i, j] * 2


def apart(x, t):
    """x[i, :, j]: indexed dims not adjacent, so the broadcast index dims lead: [k, a]."""
    return x[t % x.shape[0], :, -(t % x.shape[2]) - 1] + 1


def grid(x, t):
    """x[i[:, None], j[None, :]]: the indices broadcast to an [n, n] grid (int32 rows)."""
    i = (t % x.shape[0]).to(torch.int32)
    j = (3 * t + 1) % x.shape[1]
    return x[i[:, None], j[None, :]].sum(1)


def inner_2d(x, t):
    """x[:, idx2d]: one index of two dims on the inner dim: [n, 2, n]."""
    return x[:, torch.stack([t, (7 * t + 3) % x.shape[1]])].sum(-1)


CASES3D = {"inner_pair": inner_pair, "apart": apart}
CASES2D = {"pick": pick, "grid": grid, "inner_2d": inner_2d}


def _inputs(case, n, s, dev):
    x = torch.randn(n, s, 6, device=dev) if case in CASES3D else \
        torch.randn(n, s, device=dev)
    return x, torch.randint(0, s, (n,), device=dev)


@pytest.mark.parametrize("case", sorted(CASES2D | CASES3D))
@pytest.mark.parametrize("dynamic,where", [
    (False, "stax-cpu"), (False, "cuda"),    # (static CPU graphs are stax-cpu's)
    (True, "stax-cpu"), (True, "triton"), (True, "cuda")])
def test_several_index_tensors_gather_natively(case, dynamic, where, counts, request):
    dev, sizes, route = _where(where, request)
    fn = (CASES2D | CASES3D)[case]
    cf = torch.compile(fn, backend="stax", dynamic=dynamic)
    for n, s in (sizes if dynamic else sizes[:1]):
        x, t = _inputs(case, n, s, dev)
        same_forward(cf, fn, x, t, tol=EXACT if case in CASES3D else dict(rtol=1e-5,
                                                                          atol=1e-5))
    reps = B.reports()
    assert reps and all(r.route == route and not r.fallback_ops for r in reps), \
        [r.summary() for r in reps]
    if dynamic:
        _one_dynamic_report(len(sizes), route, counts)


@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_the_manual_cross_entropy_trains_with_one_compile(where, counts, request):
    """The backward's accumulating index_put stays PyTorch's (a library op, reported)."""
    dev, sizes, route = _where(where, request)
    cf = torch.compile(pick, backend="stax", dynamic=True)
    for n, s in sizes:
        x, t = _inputs("pick", n, s, dev)
        same_forward_and_backward(cf, pick, x.requires_grad_(), t,
                                  tol=dict(rtol=1e-5, atol=1e-5))
    rep = _one_dynamic_report(len(sizes), route, counts)
    assert rep.fallback_ops == ["aten.index_put.default"], rep.summary()


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_component_out_of_range_raises_naming_its_dim(dynamic):
    """A column index of 520 in rows of 520 must raise, not read the next row's first
    element (in range of the merged 256 * 520 elements); likewise a row index."""
    def fn(x, i, j):
        return x[i, j]

    cf = torch.compile(fn, backend="stax", dynamic=dynamic)
    x = torch.randn(256, 520)
    i, j = torch.arange(256), torch.randint(0, 520, (256,))
    assert torch.equal(cf(x, i, j), fn(x, i, j))
    jn = j - 520                      # negative ones count from the end, as in eager
    assert torch.equal(cf(x, i, jn), fn(x, i, jn))
    for bad_i, bad_j, size in ((i, torch.full_like(j, 520), 520),
                               (torch.full_like(i, -257), j, 256)):
        with pytest.raises(IndexError, match="index"):
            fn(x, bad_i, bad_j)
        with pytest.raises(IndexError, match=f"out of bounds for a dimension of size {size}"):
            cf(x, bad_i, bad_j)
    assert all(not r.fallback_ops and r.route == "stax-cpu" for r in B.reports())


@pytest.mark.parametrize("case", sorted(CASES2D | CASES3D))
def test_static_triton_kernels_compile_to_ptx(case):
    """The static Triton generator (CUDA without a GPU here): every kernel of the
    forward and backward graphs, the gathers fused with their consumers, compiles to
    PTX for sm_90."""
    out, stats = training_kernels_to_ptx((CASES2D | CASES3D)[case],
                                         *_inputs(case, 256, 520, "cpu"))
    assert out.status == "pass" and stats["kernels"] >= 2, (out, stats)


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_gather_at_a_rows_argmax_is_one_kernel_with_the_reduction(dynamic):
    """x[arange(n), x.argmax(1)] * 2 + x.sum(1): the index is a reduction of the same
    kernel (its row values), the data is the kernel's input: one reduction kernel."""
    def fn(x):
        return x[torch.arange(x.shape[0]), x.argmax(1)] * 2 + x.sum(1)

    cf = torch.compile(fn, backend="stax", dynamic=dynamic)
    for n in ((256, 300) if dynamic else (256,)):
        x = torch.randn(n, 520)
        same_forward(cf, fn, x, tol=dict(rtol=1e-5, atol=1e-4))
    reps = B.reports()
    assert reps and all(r.route == "stax-cpu" and not r.fallback_ops for r in reps)
    assert reps[-1].kernel_count == 1, reps[-1].summary()
