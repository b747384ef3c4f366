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


def _fuzz_16570049768(x0, x7):
    """stax-fuzz seed 16570049768 (`--backward`): exp of a transposed input, expanded
    along a new batch dim and concatenated with itself along it."""
    v2 = x0.flatten(0)[0:4128]
    v6 = torch.exp(x0).expand(4, 65, 127)
    return torch.cat([v6, v6, x7], 0), v2 / (v2.abs() + 1)


def _fuzz_inputs(dtype, g):
    return (torch.randn(127, 65, generator=g).to(dtype).transpose(-1, -2),
            torch.randn(4, 1, 1, generator=g).to(dtype).expand(4, 65, 127))


def _cat_mid_permuted(x, z):
    """The middle piece's read (z at d0 - 2) is out of bounds where its branch is not
    taken: its tile is loaded under the piece's condition."""
    v = x.t().expand(2, x.shape[1], x.shape[0])
    return (torch.cat([v, z.permute(0, 2, 1) * 2, torch.tanh(v)], 0),)


def _cat_mid_inputs(dtype, g):
    return (torch.randn(520, 48, generator=g).to(dtype),
            torch.randn(3, 520, 48, generator=g).to(dtype))


def _pad_batch(x):
    return (torch.nn.functional.pad(torch.exp(x.permute(0, 2, 1)), (0, 0, 0, 0, 1, 2)),)


def _pad_inputs(dtype, g):
    return (torch.randn(3, 40, 33, generator=g).to(dtype),)


@pytest.mark.usefixtures("stax_strict")
@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("fn,inputs", [(_fuzz_16570049768, _fuzz_inputs),
                                       (_cat_mid_permuted, _cat_mid_inputs),
                                       (_pad_batch, _pad_inputs)],
                         ids=["fuzz_16570049768", "cat_mid_permuted", "pad_batch"])
def test_tiled_concat_along_an_outer_dim(fn, inputs, dtype, backward):
    """A concat or pad along a dim outside the tile, of pieces with a transposed read: each
    row of a tile evaluates the concat in its own scf.if, and a tile loaded in one row's
    branch was reused by the next rows, outside that branch: the kernel's MLIR did not
    parse ("use of undeclared SSA value name"). A tile is now scoped as every other
    value, and a branch-guarded read's tile loaded once per tile, at the tile's scope
    (guarded by its conditions where it may be out of bounds elsewhere): one transpose
    per transposed read. Values, shape and strides against eager, forward and backward."""
    g = torch.Generator().manual_seed(16570)
    args = inputs(dtype, g)
    eager = [a.detach().clone().requires_grad_(backward) for a in args]
    mine = [a.detach().clone().requires_grad_(backward) for a in args]
    torch._dynamo.reset()
    B.clear()
    got = torch.compile(fn, backend="stax")(*mine)
    want = fn(*eager)
    for o, w in zip(got, want):
        _check(o.detach(), w.detach())
    kernels = [k for r in B.reports() for gr in r.graphs for k in gr.kernels]
    tiled = [k for k in kernels if "vector.transpose" in k.mlir]
    assert tiled, [k.name for k in kernels]
    for k in tiled:   # one tile per transposed read (not one per row)
        n = k.mlir.count("vector.transpose")
        assert n <= k.n_args, (k.name, n)
    if backward:
        ws = [torch.randn(w.shape, generator=g).to(dtype) for w in want]
        gw = torch.autograd.grad(want, eager, ws)
        gg = torch.autograd.grad(got, mine, ws)
        for a, b in zip(gg, gw):
            assert a.shape == b.shape and a.stride() == b.stride() and a.dtype == b.dtype
            tol = 5e-2 if dtype == torch.bfloat16 else 1e-5
            torch.testing.assert_close(a, b, rtol=tol, atol=tol)
    assert {r.route for r in B.reports()} == {"stax-cpu"}, [r.route for r in B.reports()]
