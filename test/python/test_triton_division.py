"""f32 division in Triton kernels is IEEE division, like eager's, bit for bit, including
the zero numerators that take a separate path (a zero over a finite nonzero divisor is
the signed zero A * B, not the division's slow path: masked softmax rows ran at half
speed on the H200), and 0/0, 0/inf, x/0, infinities and NaNs. Run in the bounds-checking
TTIR interpreter (no GPU)."""
from __future__ import annotations

import math
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))

pytest.importorskip("triton")

from kernel_harness import triton_kernel, ttype  # noqa: E402
from ttir_interp import run_kernel  # noqa: E402

SPECIAL = [0.0, -0.0, 1.0, -1.0, 3.0, 1e-38, 1e-45, -2.5e38, math.inf, -math.inf, math.nan]


def _operands():
    a = torch.tensor(SPECIAL, dtype=torch.float32)
    grid_a, grid_b = torch.meshgrid(a, a, indexing="ij")
    g = torch.Generator().manual_seed(5)
    rand_a, rand_b = torch.randn(1024, generator=g), torch.randn(1024, generator=g)
    rand_a[::3] = 0.0        # zero numerators among ordinary ones, as in a masked softmax
    rand_a[1::7] = -0.0
    return (torch.cat([grid_a.flatten(), rand_a]), torch.cat([grid_b.flatten(), rand_b]))


def test_division_is_ieee_bit_for_bit():
    a, b = _operands()
    T = ttype(a.shape, torch.float32)
    body = (f'    %0 = "stax.div"(%a0, %a1) : ({T}, {T}) -> {T}\n'
            f'    "stax_graph.yield"(%0) : ({T}) -> ()')
    k, (out,) = triton_kernel(body, [a, b], [(a.shape, torch.float32)])
    assert "tt.precise_divf" in k.ttir_kernel.text
    run_kernel(k.ttir_kernel, a, b, out)
    want = a / b
    same = (out.view(torch.int32) == want.view(torch.int32)) | (out.isnan() & want.isnan())
    bad = (~same).nonzero().flatten()[:5].tolist()
    assert not bad, [(a[i].item(), b[i].item(), out[i].item(), want[i].item()) for i in bad]


def _bits_equal(out, want):
    same = (out.view(torch.int32) == want.view(torch.int32)) | (out.isnan() & want.isnan())
    return (~same).nonzero().flatten().tolist()


@pytest.mark.parametrize("divisor", [3.0, 11.313708305358887, -0.7, 1e-39, 0.0, math.inf])
def test_scalar_divisor_is_eager_cuda_reciprocal(divisor):
    """x / c for a constant c is x * f32(1 / c), the product eager's CUDA kernel computes
    for a scalar divisor; a divisor whose reciprocal is not a normal f32 divides."""
    a, _ = _operands()
    T = ttype(a.shape, torch.float32)
    lit = "0x7F800000" if divisor == math.inf else f"{divisor:.9e}"
    body = (f'    %0 = "stax.full"() {{value = {lit} : f32}} : () -> {T}\n' +
            f'    %1 = "stax.div"(%a0, %0) : ({T}, {T}) -> {T}\n'
            f'    "stax_graph.yield"(%1) : ({T}) -> ()')
    k, (out,) = triton_kernel(body, [a], [(a.shape, torch.float32)])
    run_kernel(k.ttir_kernel, a, out)
    c = torch.tensor(divisor, dtype=torch.float32)
    normal = 2.0 ** -126 <= abs(divisor) <= 2.0 ** 126
    want = a * (1.0 / c) if normal else a / c
    assert ("tt.precise_divf" in k.ttir_kernel.text) == (not normal)
    bad = _bits_equal(out, want)
    assert not bad, [(a[i].item(), out[i].item(), want[i].item()) for i in bad[:5]]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_divisions_match_eager_cuda_bit_for_bit():
    """On the GPU, through torch.compile at a real size: a scalar divisor and a per-row
    divisor give eager CUDA's bits (route triton)."""
    import stax.backend

    def f(x, y):
        return x / 11.313708305358887, x / y.amax(-1, keepdim=True)

    g = torch.Generator(device="cuda").manual_seed(3)
    x = torch.randn(512, 2048, device="cuda", generator=g) * 30
    x[:, ::3] = 0.0
    x[7, 5] = 1e-38
    y = torch.rand(512, 2048, device="cuda", generator=g) * 5 + 0.5
    y[11] = 1e-39          # a subnormal divisor row takes IEEE division
    torch._dynamo.reset()
    got = torch.compile(f, backend="stax")(x, y)
    assert stax.backend.last_report().route == "triton"
    for o, w in zip(got, f(x, y)):
        bad = _bits_equal(o.flatten(), w.flatten())
        assert not bad, bad[:5]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_matmul_epilogue_scalar_division_on_the_gpu():
    """A matmul whose epilogue divides by a scalar (attention's scores / sqrt(d)) takes
    the reciprocal there too; values as eager's within f32 matmul tolerance."""
    import stax.backend

    def f(q, k):
        return (q @ k.transpose(-1, -2)) / 11.313708305358887

    g = torch.Generator(device="cuda").manual_seed(4)
    q = torch.randn(4, 512, 128, device="cuda", generator=g)
    k = torch.randn(4, 512, 128, device="cuda", generator=g)
    torch._dynamo.reset()
    got = torch.compile(f, backend="stax")(q, k)
    assert stax.backend.last_report().route == "triton"
    torch.testing.assert_close(got, f(q, k), rtol=1e-4, atol=1e-4)
