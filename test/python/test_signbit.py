"""torch.signbit as stax IR (importer.ops_elementwise._signbit): a float's bits as the
signed integer of its width, compared with 0, so -0.0 and a NaN whose sign bit is set
are True (`x < 0` would say False). Before, aten.signbit was a stax_graph.fallback.
Bit-exact against eager on the CPU, the Triton target interpreted and CUDA, static and
dynamic; the static Triton kernel compiles to PTX."""
from __future__ import annotations

import pytest
import torch

import stax.backend as B
from ptx_check import training_kernels_to_ptx
from test_dynamic_gpu import counts, interpreted_triton  # noqa: F401
from test_dynamic_prefix_slices import _one_dynamic_report, _where

pytestmark = pytest.mark.usefixtures("stax_strict")

SPECIAL = [0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), -float("nan"),
           1e-40, -1e-40]
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
          torch.int8, torch.uint8, torch.bool]


def fn(x):
    return torch.signbit(x) & (x == x)     # (fused with a consumer)


def _input(n, s, dtype, dev):
    if dtype.is_floating_point:
        x = torch.randn(n * s, device=dev)
        x[: len(SPECIAL)] = torch.tensor(SPECIAL, device=dev)
        return x.reshape(n, s).to(dtype)
    return torch.randint(-5, 5, (n, s), device=dev).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("dynamic,where", [
    (False, "stax-cpu"), (False, "cuda"), (True, "stax-cpu"), (True, "triton"), (True, "cuda")])
def test_signbit_matches_eager_bit_for_bit(dtype, dynamic, where, counts, request):
    dev, sizes, route = _where(where, request)
    cf = torch.compile(fn, backend="stax", dynamic=dynamic)
    for n, s in (sizes if dynamic else sizes[:1]):
        x = _input(n, s, dtype, dev)
        got, want = cf(x), fn(x)
        assert got.dtype == want.dtype and got.stride() == want.stride()
        assert torch.equal(got, want)
    reps = B.reports()
    assert reps and all(r.route == route and not r.fallback_ops for r in reps), \
        [r.summary() for r in reps]
    if dynamic:
        _one_dynamic_report(len(sizes), route, counts)


def test_signbit_kernel_compiles_to_ptx():
    out, stats = training_kernels_to_ptx(lambda x: torch.signbit(x) * x,
                                         _input(256, 520, torch.float32, "cpu"))
    assert out.status == "pass" and stats["kernels"] >= 1, (out, stats)
