"""A reduction kernel compiled once for every size that reads a tensor broadcast along
its rows: `where(cond, softmax(x), y)` with `y` of shape [1, 1], [1, s] or [n, 1], and
H200 fuzz seed 4405's program 4405013250 (a bf16 layer_norm over a last dim of 1,
selected by a bool mask against a [1, 1, 1] tensor).

On the Triton target, a [1, 1, 1] operand was read at offset `row` instead of 0: the
reduction generator evaluated it once per row block at the row index, as if it held one
value per row, and the runtime-size generator's index of it (all constants) was
remembered as that row index. Wrong values on the H200, out-of-bounds reads in the
interpreter. On the CPU, the Triton
target interpreted, and CUDA: values, shapes and strides against eager at every size.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from grad_check import same_forward
from test_dynamic_gpu import counts, interpreted_triton  # noqa: F401
from test_dynamic_prefix_slices import _one_dynamic_report, _where

pytestmark = pytest.mark.usefixtures("stax_strict")


def softmax_or_y(x, y):
    return torch.where(x.sum(-1, keepdim=True) > 0, torch.softmax(x, -1), y)


def layer_norm_of_one(w, b, mask, other, x):
    """Program 4405013250 (shrunk): the norm of one element is its bias."""
    return torch.where(mask, F.layer_norm(x, (1,), w, b), other)


Y_SHAPES = {"one": lambda n, s: (1, 1), "row_of_width": lambda n, s: (1, s),
            "column_of_rows": lambda n, s: (n, 1), "full": lambda n, s: (n, s)}


@pytest.mark.parametrize("y_shape", sorted(Y_SHAPES))
@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_reduction_reads_a_broadcast_operand(y_shape, where, counts, request):
    dev, sizes, route = _where(where, request)
    cf = torch.compile(softmax_or_y, backend="stax", dynamic=True)
    for n, s in sizes:
        y = torch.randn(*Y_SHAPES[y_shape](n, s), device=dev)
        same_forward(cf, softmax_or_y, torch.randn(n, s, device=dev), y,
                     tol=dict(rtol=1e-5, atol=1e-6))
    _one_dynamic_report(len(sizes), route, counts)


@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_fuzz_4405013250_layer_norm_of_one_element(where, counts, request):
    dev, sizes, route = _where(where, request)
    cf = torch.compile(layer_norm_of_one, backend="stax", dynamic=True)
    for n, _ in sizes:
        args = [torch.randn(1), torch.randn(1), torch.randn(n, 1, 1) > 0,
                torch.randn(1, 1, 1), torch.randn(n, 1, 1)]
        args = [a.to(dev) if a.dtype == torch.bool else a.to(dev, torch.bfloat16)
                for a in args]
        got, want = cf(*args), layer_norm_of_one(*args)
        assert got.shape == want.shape and got.stride() == want.stride()
        assert torch.equal(got, want)
    _one_dynamic_report(len(sizes), route, counts)
