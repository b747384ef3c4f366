"""The pointwise loop order (`kernel_schedule.loop_order`): the CPU generator walks a
kernel's domain in its output's storage order, so a channels-last or transposed output
is written with vector stores along its stride-1 dim instead of one scalar per lane."""
from __future__ import annotations

import re

import pytest
import torch

from stax.passes.kernel_schedule import loop_order


@pytest.mark.parametrize("shape,strides,order", [
    ((8, 64, 28, 28), (50176, 784, 28, 1), (0, 1, 2, 3)),     # contiguous: unchanged
    ((8, 64, 28, 28), (50176, 1, 1792, 64), (0, 2, 3, 1)),    # channels-last
    ((512, 768), (1, 512), (1, 0)),                           # transposed
    ((4, 1, 8), (8, 8, 1), (0, 1, 2)),                        # size-1 dim, row-major
    ((4, 1, 8), (1, 1, 4), (1, 2, 0)),                        # size-1 dim goes outermost
    ((3, 5), (0, 1), (0, 1)),                                 # expanded (stride 0) rows
    ((), (), ()),
])
def test_loop_order(shape, strides, order):
    assert loop_order(shape, strides) == order


def _kernel_texts(debug_dir):
    import glob
    return [open(p).read() for p in sorted(glob.glob(f"{debug_dir}/*/kernel_*.mlir"))]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_channels_last_pointwise_is_vectorized_along_channels(dtype, tmp_path, monkeypatch):
    """BN (eval) + ReLU on a channels-last [256, 64, 9, 13] activation: eager's values
    and strides, and the kernel's stores are vector stores (the innermost loop runs over
    C, stride 1), not scalar stores of a loop over W (stride 64)."""
    import stax.backend as B
    monkeypatch.setenv("STAX_DEBUG_DIR", str(tmp_path))
    B.clear()
    g = torch.Generator().manual_seed(7)
    x = torch.randn(256, 64, 9, 13, generator=g).to(dtype).to(
        memory_format=torch.channels_last)
    scale, shift = torch.randn(64, generator=g).to(dtype), torch.randn(64, generator=g).to(dtype)

    def f(x, scale, shift):
        return torch.relu(x * scale[:, None, None] + shift[:, None, None])
    torch._dynamo.reset()
    got = torch.compile(f, backend="stax")(x, scale, shift)
    want = f(x, scale, shift)
    assert [r.route for r in B.reports()] == ["stax-cpu"]
    assert got.stride() == want.stride() == x.stride()
    tol = 0 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(got, want, atol=tol, rtol=tol)
    (text,) = [t for t in _kernel_texts(tmp_path) if "vector" in t or "memref.store" in t]
    assert re.search(r"vector\.store .*%out0", text), text[:2000]
