"""Tensor indexing along a symbolic dim, compiled once for every size: `x[idx]` and
`x[:, idx]` with one index tensor (negative indices count from the dim's runtime end),
and the pads PyTorch decomposes into them (`reflect`, `replicate`: an `arange` from a
size expression, clamped to `s - 1`, then an index).

Before, each of these graphs was compiled per size ("node index (aten.index.Tensor)
cannot be imported symbolically", the most frequent per-size reason of the H200 fuzz
seeds 4400-4403 and of `opinfo_sweep.py --dynamic`; a reflect pad's `arange(s - 1, ...)`
raised a TypeError in the importer). On the CPU, the Triton target interpreted, and
CUDA: values, shapes and strides against eager, forward and backward, at batches >= 256
and widths >= 512; one dynamic build; an index out of range raises, naming it.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import stax.backend as B
from grad_check import same_forward, same_forward_and_backward
from test_dynamic_gpu import counts, interpreted_triton  # noqa: F401
from test_dynamic_prefix_slices import _one_dynamic_report, _where

pytestmark = pytest.mark.usefixtures("stax_strict")
TOL = dict(rtol=1e-4, atol=1e-4)


def reflect_pad(x, i):
    return F.pad(x, (3, 2), mode="reflect") * 2


def replicate_pad(x, i):
    return torch.tanh(F.pad(x, (1, 4), mode="replicate"))


def rows(x, i):
    """x[idx] along the symbolic batch dim (idx in [-n, n), more indices than rows)."""
    return x[i] + 1


def columns(x, i):
    """x[:, idx] along the symbolic width (idx in [-s, s))."""
    return (x[:, i] * 3).sum(1)


CASES = {"reflect_pad": reflect_pad, "replicate_pad": replicate_pad, "rows": rows,
         "columns": columns}


def _index(case, n, s, dev):
    """Indices into the dim `case` gathers along, negative ones included, repeated."""
    size = s if case == "columns" else n
    return torch.randint(-size, size, (n + 5,), device=dev)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_indexing_compiles_once(case, where, counts, request):
    dev, sizes, route = _where(where, request)
    fn = CASES[case]
    cf = torch.compile(fn, backend="stax", dynamic=True)
    for n, s in sizes:
        same_forward(cf, fn, torch.randn(n, s, device=dev), _index(case, n, s, dev),
                     tol=TOL)
    _one_dynamic_report(len(sizes), route, counts)
    assert counts["dynamic"] == 1, counts


#: (a reflect pad's backward indexes with two index tensors: test_multi_index.py's
#: flat gather; it was compiled per size before)
TRAINING = sorted(CASES)


@pytest.mark.parametrize("case", TRAINING)
@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_indexing_trains_with_one_compile(case, where, counts, request):
    """The backward accumulates the gradient at the indices (repeated ones add up); a
    replicate pad's backward is PyTorch's (a library op, as on the static path)."""
    dev, sizes, route = _where(where, request)
    fn = CASES[case]
    cf = torch.compile(fn, backend="stax", dynamic=True)
    for n, s in sizes:
        x = torch.randn(n, s, device=dev, requires_grad=True)
        same_forward_and_backward(cf, fn, x, _index(case, n, s, dev), tol=TOL)
    _one_dynamic_report(len(sizes), route, counts)


def test_an_index_out_of_range_raises():
    cf = torch.compile(rows, backend="stax", dynamic=True)
    for n in (5, 9):
        x, i = torch.randn(n, 8), torch.tensor([0, -n, n - 1])
        assert torch.equal(cf(x, i), rows(x, i))
    for bad in ([0, 9], [-10, 1]):
        with pytest.raises(IndexError, match="out of bounds for a dimension of size 9"):
            cf(torch.randn(9, 8), torch.tensor(bad))
