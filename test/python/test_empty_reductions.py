"""Reductions over a 0-size dim give the identity, as eager does (they raised
"reduction over an empty dim is not supported" at lowering: found by stax-fuzz)."""
import os

import pytest
import torch

import stax.backend as B

DEVICE = os.environ.get("STAX_TEST_DEVICE", "cpu")
ROUTE = "triton" if DEVICE.startswith("cuda") else "stax-cpu"
pytestmark = pytest.mark.usefixtures("stax_strict")

CASES = {
    "sum": lambda x: x.sum(0),
    "sum_keepdim_i64": lambda x: x.to(torch.int64).sum(0, keepdim=True),
    "mean": lambda x: x.mean(0),
    "prod": lambda x: x.prod(0),
    "var_mean": lambda x: torch.var_mean(x, [0]),
    "std": lambda x: x.std(0, correction=0),
    "all": lambda x: torch.all(x > 0, 0),
    "any": lambda x: torch.any(x > 0, 0),
    "sum_then_add": lambda x: x.sum(0) + torch.arange(5, device=x.device),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_reduction_over_empty_dim(case):
    fn = CASES[case]
    x = torch.randn(0, 5, device=DEVICE)
    want = fn(x)
    got = torch.compile(fn, backend="stax", fullgraph=True)(x)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for w, g in zip(want, got):
        assert g.dtype == w.dtype and g.shape == w.shape and g.stride() == w.stride()
        torch.testing.assert_close(g, w, equal_nan=True, rtol=0, atol=0)
    assert B.last_report().route == ROUTE
