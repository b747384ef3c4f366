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
