"""fp8 in a graph compiled once for every size: values carried as float8_e4m3fn /
float8_e5m2 tensors (the Triton target holds fp8; the CPU carries it as 8-bit integers,
stax-legalize-fp8). Each call must be bit-exact against eager, with eager's shape,
strides and dtype, from one dynamic build on route stax-cpu / triton (the GPU target on
CPU tensors, its kernels interpreted, as in test_dynamic_gpu.py; and on CUDA).

Before, on the GPU target a dynamic graph with an fp8 value was compiled per size
("element type f8E4M3FN has no runtime-size support": H200 fuzz seed 4402).
"""
from __future__ import annotations

import pytest
import torch

import stax.backend as B
from stax.dynamic_compile import DynamicShapes
from test_dynamic_gpu import counts, interpreted_triton  # noqa: F401

pytestmark = pytest.mark.usefixtures("stax_strict")
HAS_CUDA = torch.cuda.is_available()
FP8 = [torch.float8_e4m3fn, torch.float8_e5m2]


def _scale_shift(x, y):
    return (x.float() * 2.0 + y).to(x.dtype)


def _amax_rows(x, y):
    z = x.float().abs().amax(-1, keepdim=True) + y
    return z.to(x.dtype), (x.float() / z).to(x.dtype)


def _check(fn, dtype, device, sizes=(256, 1, 257, 300, 7, 512)):
    torch._dynamo.reset()
    B.clear()
    c = torch.compile(fn, backend="stax", dynamic=True)
    g = torch.Generator().manual_seed(0)
    for n in sizes:
        x = torch.randn(n, 520, generator=g).to(dtype).to(device)
        y = torch.randn(n, 1, generator=g).abs().add(1.0).to(device)
        got, ref = c(x, y), fn(x, y)
        for a, b in zip(got if isinstance(got, tuple) else (got,),
                        ref if isinstance(ref, tuple) else (ref,)):
            assert a.shape == b.shape and a.dtype == b.dtype and a.stride() == b.stride()
            assert torch.equal(a.view(torch.uint8), b.view(torch.uint8)), (n, dtype)
    reps = B.reports()
    assert all(isinstance(r.specializer, DynamicShapes) for r in reps), \
        [getattr(r.specializer, "not_dynamic_reason", None) for r in reps]
    return reps


@pytest.mark.parametrize("fn", [_scale_shift, _amax_rows], ids=["scale_shift", "amax_rows"])
@pytest.mark.parametrize("dtype", FP8, ids=["e4m3fn", "e5m2"])
def test_fp8_dynamic_cpu(counts, fn, dtype):
    reps = _check(fn, dtype, "cpu")
    assert {r.route for r in reps} == {"stax-cpu"} and counts["dynamic"] == len(reps) <= 2
    assert counts["static"] == 0


@pytest.mark.parametrize("fn", [_scale_shift, _amax_rows], ids=["scale_shift", "amax_rows"])
@pytest.mark.parametrize("dtype", FP8, ids=["e4m3fn", "e5m2"])
def test_fp8_dynamic_interpreted(counts, interpreted_triton, fn, dtype):
    reps = _check(fn, dtype, "cpu", sizes=(5, 1, 17, 9))
    assert {r.route for r in reps} == {"triton"} and counts["dynamic"] == len(reps) <= 2
    assert counts["static"] == 0 and interpreted_triton["sized"] > 0


@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
@pytest.mark.parametrize("fn", [_scale_shift, _amax_rows], ids=["scale_shift", "amax_rows"])
@pytest.mark.parametrize("dtype", FP8, ids=["e4m3fn", "e5m2"])
def test_fp8_dynamic_cuda(counts, fn, dtype):
    reps = _check(fn, dtype, "cuda")
    assert {r.route for r in reps} == {"triton"} and counts["dynamic"] == len(reps) <= 2
    assert counts["static"] == 0
