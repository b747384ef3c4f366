"""The KV-cache decode loop of test_kv_cache_decode on the Triton target (issue 10):
the caches' `torch.cat` along their symbolic length is a concat in a runtime-size Triton
kernel, so after Dynamo's first, static graph one compile serves every later cache
length on route `triton`.

Without a GPU the backend is told the target is triton while tensors stay on the CPU,
and every Triton kernel runs in the bounds-checked TTIR interpreter (test_dynamic_gpu's
fixtures); with CUDA (skipped without) the same loop at real sizes (width 768, cache
lengths to 2048). Every step: the output and both caches against eager (values, shapes,
strides), one dynamic variant, route `triton`, one dynamic build."""
from __future__ import annotations

import os
import sys

import pytest
import torch

import stax.backend as B
from stax.dynamic_compile import DynamicShapes
from stax.runtime.triton_sized import SizedTritonKernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_dynamic_gpu as _gpu_fixtures  # noqa: E402
from test_kv_cache_decode import DecodeStep  # noqa: E402

counts = _gpu_fixtures.counts                          # the fixtures, shared
interpreted_triton = _gpu_fixtures.interpreted_triton

pytestmark = pytest.mark.usefixtures("stax_strict")


def _close(got, ref, tol):
    assert got.shape == ref.shape and got.dtype == ref.dtype
    assert got.stride() == ref.stride(), (got.stride(), ref.stride())
    torch.testing.assert_close(got, ref, rtol=tol, atol=tol)


def _decode(step, batch, start, lengths, dim, heads, device, tol):
    cf = torch.compile(step, backend="stax")
    hd = dim // heads
    k = torch.randn(batch, heads, start, hd, device=device)
    v = torch.randn(batch, heads, start, hd, device=device)
    kr, vr = k, v
    calls = 0
    with torch.no_grad():
        for i in range(lengths):
            x = torch.randn(batch, 1, dim, device=device)
            out, k, v = cf(x, k, v)
            ref, kr, vr = step(x, kr, vr)
            for g, r in ((out, ref), (k, kr), (v, vr)):
                _close(g, r, tol)
            if i:
                reps = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
                (rep,) = reps
                (var,) = rep.variants
                calls += 1
                assert var.dynamic and var.calls == calls, rep.summary()
                assert rep.route == "triton" and rep.fallback_reason is None, rep.summary()
                assert all(g.route == "triton" for g in rep.graphs)
    return rep, k


def test_decode_loop_one_compile_interpreted(counts, interpreted_triton):
    torch.manual_seed(0)
    step = DecodeStep(32, 2).eval()
    rep, k = _decode(step, 1, 1, 6, 32, 2, "cpu", 1e-4)   # cache lengths 1 .. 6
    assert k.shape[2] == 7
    assert counts["dynamic"] == 1
    g = rep.graphs[0]
    assert any(isinstance(kk, SizedTritonKernel) for kk in g.kernels)
    assert interpreted_triton["sized"] >= 5


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("start", [1, 2000], ids=["short", "to2048"])
def test_decode_loop_one_compile_cuda(counts, start):
    torch.manual_seed(0)
    step = DecodeStep(768, 12).eval().cuda()
    rep, k = _decode(step, 2, start, 48, 768, 12, "cuda", 2e-3)   # lengths start .. +47
    assert k.shape[2] == start + 48
    assert counts["dynamic"] == 1
    assert any(isinstance(kk, SizedTritonKernel) for kk in rep.graphs[0].kernels)
