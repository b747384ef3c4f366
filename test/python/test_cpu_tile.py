"""The CPU 2-D tile (tiling.cpu mode "tiled", passes/cpu_tiling.py): a pointwise kernel with
a transposed read is compiled as 16x16 tiles whose transposed loads are vector loads along
the input's own stride-1 dim, transposed in registers (vector.transpose), not per-lane
scalar loads; tails (rows and columns past the last full tile) take the vector and 1-lane
loops. Checked against eager: values (bit-exact for int32), shape, strides, dtype, and the
route and mode each kernel was compiled with."""
from __future__ import annotations

import pytest
import torch

import stax.backend as B


def _compile(fn, *args):
    torch._dynamo.reset()
    B.clear()
    got = torch.compile(fn, backend="stax")(*args)
    assert [r.route for r in B.reports()] == ["stax-cpu"], [r.route for r in B.reports()]
    (k,) = [k for r in B.reports() for g in r.graphs for k in g.kernels]
    return got, k


def _rand(shape, dtype, g):
    if dtype == torch.int32:
        return torch.randint(-1000, 1000, shape, generator=g, dtype=dtype)
    return torch.randn(shape, generator=g).to(dtype)


def _check(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.stride() == want.stride()
    if want.dtype == torch.int32:
        assert torch.equal(got, want)
    else:
        tol = 1e-2 if want.dtype == torch.bfloat16 else 1e-6
        torch.testing.assert_close(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
@pytest.mark.parametrize("m,n", [(512, 768), (1023, 257), (16, 16), (1, 512), (12, 40)])
def test_transpose_add(m, n, dtype):
    """x.t() + y at [m, n]: tiled when both dims hold a 16x16 tile, else the vector loop
    along n with per-lane loads of x."""
    g = torch.Generator().manual_seed(m * 7 + n)
    x, y = _rand((n, m), dtype, g), _rand((m, n), dtype, g)
    got, k = _compile(lambda x, y: x.t() + y, x, y)
    _check(got, x.t() + y)
    tiled = m >= 16 and n >= 16
    assert ("vector.transpose" in k.mlir) == tiled, (m, n)
    assert k.vector_width == 16


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
@pytest.mark.parametrize("b,m,n", [(4, 512, 768), (3, 257, 33)])
def test_permute_mul(b, m, n, dtype):
    """x.permute(0, 2, 1) * y: the tile over the last two dims, the batch an outer loop
    (the one threads split)."""
    g = torch.Generator().manual_seed(b + m + n)
    x, y = _rand((b, n, m), dtype, g), _rand((b, m, n), dtype, g)
    got, k = _compile(lambda x, y: x.permute(0, 2, 1) * y, x, y)
    _check(got, x.permute(0, 2, 1) * y)
    assert "vector.transpose" in k.mlir


def test_tiled_kernel_split_over_threads_is_right():
    """The tile loop is the one threads split (rank 2): parts of whole tiles, the last
    part's remainder rows on the vector loop; the same values with 2 parts as 1."""
    from stax.runtime import cpu_kernel
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(600, 1000, generator=g), torch.randn(1000, 600, generator=g)
    got, k = _compile(lambda x, y: torch.tanh(x.t() + y), x, y)
    assert k.splittable and k.work >= cpu_kernel.PARALLEL_MIN_ELEMENTS
    _check(got, torch.tanh(x.t() + y))
