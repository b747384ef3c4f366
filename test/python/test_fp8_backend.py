"""fp8 through the real backend on the CPU: `torch.compile(backend="stax")` on
float8_e4m3fn / float8_e5m2 tensors (test_fp8.py drives the passes and kernels with a
test-local runner; this goes through Dynamo, aot_autograd, the importer, the driver's
legalization, the wrapper and its zero-copy uint8 views). Bit-exact against eager on the
CPU, route "stax-cpu", no fallback op.
"""
from __future__ import annotations

import pytest
import torch

import stax.backend as B
from test_fp8 import SWEEP, _bits

pytestmark = pytest.mark.usefixtures("stax_strict")

E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2
FP8 = [pytest.param(E4, id="e4m3fn"), pytest.param(E5, id="e5m2")]


def _compile(fn):
    return torch.compile(fn, backend="stax", fullgraph=True, dynamic=False)


def _route(n_graphs=1):
    assert len(B.compiled_callables) == n_graphs, len(B.compiled_callables)
    for c in B.compiled_callables:
        assert c.stax_route == "stax-cpu", c.stax_fallback_reason
        assert c.stax_fallback_ops == [], c.stax_fallback_ops
        assert c.stax_kernel_count >= 1


def _bit_equal(got, ref, what):
    assert got.dtype == ref.dtype and got.shape == ref.shape, (what, got.dtype, ref.dtype)
    assert got.stride() == ref.stride(), (what, got.stride(), ref.stride())
    if got.dtype in (E4, E5):
        g, r = got.view(torch.uint8), ref.view(torch.uint8)
    elif got.dtype.is_floating_point:
        g, r = _bits(got), _bits(ref)
    else:
        g, r = got, ref
    bad = (g.flatten() != r.flatten()).nonzero().flatten()
    assert bad.numel() == 0, (what, bad.numel(),
                              [(i.item(), g.flatten()[i].item(), r.flatten()[i].item())
                               for i in bad[:8]])


@pytest.mark.parametrize("fp8", FP8)
def test_encode_sweep(fp8):
    # every f32 case of the sweep (ties, subnormals, saturation, ±inf, NaNs, ±0), in a
    # random order so the kernel's vector lanes see them mixed
    x = SWEEP[torch.randperm(SWEEP.numel())]
    got = _compile(lambda t: t.to(fp8))(x)
    _bit_equal(got, x.to(fp8), f"f32->{fp8}")
    _route()


@pytest.mark.parametrize("fp8", FP8)
@pytest.mark.parametrize("dst", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_decode_all_codes(fp8, dst):
    # all 256 codes, shuffled and repeated, as a 2-D input; NaN payloads too (the decode
    # is bit math on the CPU, as torch's)
    codes = torch.randint(0, 256, (64, 40), dtype=torch.uint8)
    codes[0, :16] = torch.arange(256, dtype=torch.uint8).view(16, 16)[torch.randint(16, (1,))]
    codes.view(-1)[:256] = torch.arange(256, dtype=torch.uint8)[torch.randperm(256)]
    x = codes.view(fp8)
    got = _compile(lambda t: t.to(dst) * 1)(x)
    _bit_equal(got, x.to(dst), f"{fp8}->{dst}")
    _route()


@pytest.mark.parametrize("fp8", FP8)
def test_quantize_dequantize_graph(fp8):
    # per-row absmax scaling, quantize, dequantize, rescale: a graph with a reduction,
    # an fp8 output and an f32 output computed from the fp8 values
    fmax = torch.finfo(fp8).max

    def f(x):
        s = x.abs().amax(-1, keepdim=True).clamp(min=1e-6) / fmax
        q = (x / s).to(fp8)
        return q, q.to(torch.float32) * s

    cf = _compile(f)
    for _ in range(2):
        x = torch.randn(48, 96) * torch.rand(48, 1) * 100
        got, ref = cf(x), f(x)
        for i, (g, r) in enumerate(zip(got, ref)):
            _bit_equal(g, r, f"output {i}")
    _route()


@pytest.mark.parametrize("src, dst", [(E4, E5), (E5, E4)], ids=["e4_to_e5", "e5_to_e4"])
def test_fp8_to_fp8_and_views(src, dst):
    codes = torch.arange(256, dtype=torch.uint8)[torch.randperm(256)]
    x = codes.view(src)

    def f(t):
        return t.to(dst), (t.view(torch.uint8) ^ 0x80).view(src), (t.view(torch.int8) & 0x3F).to(torch.int32)

    got, ref = _compile(f)(x), f(x)
    for i, (g, r) in enumerate(zip(got, ref)):
        _bit_equal(g, r, f"output {i}")
    # the input went in as a zero-copy view and is untouched
    assert x.dtype == src and torch.equal(x.view(torch.uint8), codes)
    _route()


def test_fp8_input_strides_and_slices():
    # a transposed and a sliced fp8 input: the wrapper's uint8 views keep their strides
    base = (torch.randn(40, 64) * 20).to(E4)
    xt, xs = base.t(), base[3:35, 1::2]

    def f(a, b):
        return a.to(torch.float32) * 2, (b.to(torch.float32) + 1).to(E5)

    got, ref = _compile(f)(xt, xs), f(xt, xs)
    for i, (g, r) in enumerate(zip(got, ref)):
        _bit_equal(g, r, f"output {i}")
    _route()
