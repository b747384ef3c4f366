"""fp8 in CPU kernels with runtime sizes (issue 10): a dynamic graph that holds fp8 runs
stax-legalize-fp8 as a static one does (the CPU target holds no fp8: values ride as
uint8 bytes, arithmetic on the decoded values), so one compile serves every size.
Before, the runtime-size generator refused the fp8 element type and every size was a
static compile of its own. fp8 outputs are bit-exact to eager and come back as fp8
views of their bytes; float outputs within float tolerance; strides as eager's.

The triton target that holds fp8 (sm_89 and later, its default) keeps float8_e4m3fn /
float8_e5m2 buffers in the dynamic graph: before, such a graph was compiled per size
("element type f8E4M3FN has no runtime-size support": H200 fuzz seed 4402). Checked on
its kernels interpreted and on CUDA (`test_native_fp8_on_the_triton_route`)."""
from __future__ import annotations

import os
import sys

import pytest
import torch

import stax.backend as B
from stax.dynamic_compile import DynamicShapes

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_dynamic_gpu as _gpu_fixtures  # noqa: E402

interpreted_triton = _gpu_fixtures.interpreted_triton   # the fixtures, shared
counts = _gpu_fixtures.counts

pytestmark = pytest.mark.usefixtures("stax_strict")

FP8 = [torch.float8_e4m3fn, torch.float8_e5m2]
ROWS = [1, 7, 257, 300]          # 1, a prime, sizes above the first


def _dynamic_compiles_only():
    """Every graph compiled once for every size (Dynamo's own graph for size 1, its 0/1
    specialization, is one more such graph), none per size, route stax-cpu."""
    reps = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    assert reps and len(reps) == len(B.reports()), [r.summary() for r in B.reports()]
    for r in reps:
        assert all(v.dynamic for v in r.variants) and r.fallback_reason is None, r.summary()
        assert all(g.route == "stax-cpu" for g in r.graphs), r.summary()
        assert "stax-legalize-fp8" in r.summary()
    return reps


def _same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    assert got.stride() == want.stride()
    if want.dtype in FP8:
        assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))
    else:
        # a 512-term f32 row sum of values in the hundreds: summation order. NaN where
        # eager's is: torch 2.11 casts a value past e4m3fn's 448 to NaN (2.13 saturates)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-3, equal_nan=True)


@pytest.mark.parametrize("fp8", FP8, ids=["e4m3fn", "e5m2"])
def test_quantize_and_dequantize_rows_one_compile(fp8):
    def f(x, scale, w):
        q = (x.float() * scale).to(fp8)              # fp8 in, fp8 out
        return q, (q.float() / scale * w).sum(-1)     # and a float row sum of the decoded
    cf = torch.compile(f, backend="stax", dynamic=True)
    w = torch.randn(512)
    for rows in ROWS:
        x = (torch.randn(rows, 512) * 30).to(fp8)    # some saturate, some are subnormal
        scale = torch.rand(512) * 4
        for got, want in zip(cf(x, scale, w), f(x, scale, w)):
            _same(got, want)
    reps = _dynamic_compiles_only()
    assert len(reps) <= 2      # rows 1, and every other size in one graph


def test_fp8_kv_cache_grows_along_a_symbolic_dim():
    """A decode step's cache append: cat of the fp8 cache and the new fp8 rows along the
    (growing) length, and the keys decoded for a dot with the query."""
    def step(cache, new, q):
        cache = torch.cat([cache, new], dim=1)                # [heads, len + 1, 64] fp8
        return cache, (cache.float() * q).sum(-1)
    cf = torch.compile(step, backend="stax", dynamic=True)
    cache = (torch.randn(8, 5, 64) * 8).to(torch.float8_e4m3fn)
    ref = cache
    for _ in range(6):
        new = (torch.randn(8, 1, 64) * 8).to(torch.float8_e4m3fn)
        q = torch.randn(8, 1, 64)
        (cache, s), (ref, s_ref) = cf(cache, new, q), step(ref, new, q)
        _same(cache, ref)
        _same(s, s_ref)
    assert cache.shape[1] == 11
    _dynamic_compiles_only()


def test_triton_route_with_fp8_carried_as_bytes_interpreted(interpreted_triton):
    """The triton target where fp8 is carried as bytes (`stax.legalize_fp8`, as on GPUs
    before sm_89): one dynamic compile, its runtime-size Triton kernels run in the
    bounds-checked TTIR interpreter, fp8 outputs bit-exact."""
    def f(x, scale):
        q = (x.float() * scale).to(torch.float8_e4m3fn)
        return q, q.float().sum(-1)
    cf = torch.compile(f, backend="stax", dynamic=True, options={"stax.legalize_fp8": True})
    for rows in (3, 17, 40):
        x = (torch.randn(rows, 64) * 30).to(torch.float8_e4m3fn)
        scale = torch.rand(64) * 4
        for got, want in zip(cf(x, scale), f(x, scale)):
            _same(got, want)
    reps = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    assert len(reps) == 1 and all(v.dynamic for v in reps[0].variants), \
        [r.summary() for r in B.reports()]
    assert all(g.route == "triton" for g in reps[0].graphs)
    assert "stax-legalize-fp8" in reps[0].summary()
    assert interpreted_triton["sized"] >= 2


def _scale_shift(x, y):
    return (x.float() * 2.0 + y).to(x.dtype)


def _amax_rows(x, y):
    z = x.float().abs().amax(-1, keepdim=True) + y
    return z.to(x.dtype), (x.float() / z).to(x.dtype)


@pytest.mark.parametrize("fn", [_scale_shift, _amax_rows], ids=["scale_shift", "amax_rows"])
@pytest.mark.parametrize("fp8", FP8, ids=["e4m3fn", "e5m2"])
@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_native_fp8_on_the_triton_route(fn, fp8, where, counts, request):
    """fp8 in and out of one dynamic build, bit-exact at every size; on the triton
    route fp8 stays fp8 (no stax.legalize_fp8), its kernels interpreted or on CUDA."""
    if where == "triton":
        request.getfixturevalue("interpreted_triton")
    if where == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    dev = "cuda" if where == "cuda" else "cpu"
    sizes = (5, 1, 17, 9) if where == "triton" else (256, 1, 257, 300, 7, 512)
    cf = torch.compile(fn, backend="stax", dynamic=True)
    g = torch.Generator().manual_seed(0)
    for n in sizes:
        x = torch.randn(n, 520, generator=g).to(fp8).to(dev)
        y = torch.randn(n, 1, generator=g).abs().add(1.0).to(dev)
        got, want = cf(x, y), fn(x, y)
        for a, b in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,)):
            _same(a, b)
    reps = B.reports()
    assert all(isinstance(r.specializer, DynamicShapes) for r in reps), \
        [getattr(r.specializer, "not_dynamic_reason", None) for r in reps]
    route = "stax-cpu" if where == "stax-cpu" else "triton"
    assert {r.route for r in reps} == {route}
    assert counts["dynamic"] == len(reps) <= 2 and counts["static"] == 0
