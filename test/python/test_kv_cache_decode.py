"""A KV-cache decode loop whose cache grows by one every step (issue 10): after Dynamo's
first, static graph, one compile serves every later cache length, natively.

Each step appends the new token's keys and values to the caches (`torch.cat` along the
cache length: a concat along a symbolic dim, `s0 + 1`, in a runtime-size CPU kernel),
attends over the whole cache and returns the output and the grown caches, which the next
step takes. Every step is compared with eager (the output and both caches: values,
shapes, strides), and every step after the first runs the one dynamic variant on route
stax-cpu.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import stax.backend as B
from stax import dynamic_compile
from stax.dynamic_compile import DynamicShapes

pytestmark = pytest.mark.usefixtures("stax_strict")


class DecodeStep(torch.nn.Module):
    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.qkv, self.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)

    def forward(self, x, k_cache, v_cache):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (y.view(b, t, self.heads, self.hd).transpose(1, 2) for y in (q, k, v))
        k_all = torch.cat([k_cache, k], dim=2)
        v_all = torch.cat([v_cache, v], dim=2)
        att = F.softmax((q @ k_all.transpose(-1, -2)) / math.sqrt(self.hd), dim=-1)
        y = (att @ v_all).transpose(1, 2).reshape(b, t, c)
        return self.proj(y), k_all, v_all


def _close(got, ref):
    assert got.shape == ref.shape and got.dtype == ref.dtype
    assert got.stride() == ref.stride(), (got.stride(), ref.stride())
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("batch", [1, 3])
def test_decode_loop_one_compile_for_every_cache_length(monkeypatch, batch):
    builds = []
    real = dynamic_compile._build
    monkeypatch.setattr(dynamic_compile, "_build",
                        lambda *a, **k: builds.append(1) or real(*a, **k))
    torch.manual_seed(0)
    step = DecodeStep().eval()
    cf = torch.compile(step, backend="stax")
    k = torch.randn(batch, 4, 5, 16)
    v = torch.randn(batch, 4, 5, 16)
    kr, vr = k, v
    with torch.no_grad():
        for i in range(10):      # cache lengths 5 .. 14
            x = torch.randn(batch, 1, 64)
            out, k, v = cf(x, k, v)
            ref, kr, vr = step(x, kr, vr)
            _close(out, ref)
            _close(k, kr)
            _close(v, vr)
            if i:
                (rep,) = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
                (var,) = rep.variants
                assert var.dynamic and var.calls == i and rep.route == "stax-cpu", rep.summary()
    assert k.shape[2] == 15
    assert len(builds) == 1      # the one dynamic compile (the first step is Dynamo's static graph)
    g = rep.graphs[0]
    assert any(hasattr(kk, "symbols") for kk in g.kernels)   # runtime-size kernels
