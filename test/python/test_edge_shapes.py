"""Ops at the edges of their shapes. Reductions over a 0-size dim (the identity, as eager; they raised
"reduction over an empty dim is not supported" at lowering), and moments of values far
from their spread (equal values, values near 100); gathers from a 0-d tensor. Found by
stax-fuzz and the OpInfo sweep."""
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


def test_layer_norm_of_equal_values_is_exact():
    """A long row (70001: the looped reduction) of equal values: its mean is that value,
    so layer_norm gives the bias exactly, as eager (the plain f32 mean was off by 1e-4
    relative and rstd amplified it to 4e-4; found by stax-fuzz)."""
    import torch.nn.functional as F
    g = torch.Generator().manual_seed(154355767)
    x = torch.randn((1,), generator=g, device="cpu").expand(70001).to(DEVICE)
    w, b = (torch.randn(70001, generator=g, device="cpu").to(DEVICE) for _ in range(2))
    fn = lambda x, w, b: F.layer_norm(x, (70001,), w, b)  # noqa: E731
    got = torch.compile(fn, backend="stax", fullgraph=True)(x, w, b)
    torch.testing.assert_close(got, fn(x, w, b), rtol=1e-6, atol=1e-6)
    assert B.last_report().route == ROUTE


def test_batch_norm_training_far_from_zero():
    """Batch statistics over 256x32x32 values near 100: the corrected two-pass moments."""
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(8).to(DEVICE)
    x = torch.rand(256, 8, 32, 32, device=DEVICE) + 100
    ref = torch.nn.BatchNorm2d(8).to(DEVICE)
    got = torch.compile(bn, backend="stax", fullgraph=True)(x)
    want = ref(x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(bn.running_var, ref.running_var, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(bn.running_mean, ref.running_mean, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("index", [[0], 0])
def test_index_select_of_0d_tensor(index):
    """index_select on a 0-d tensor indexes it as 1-element 1-d (an IndexError in the
    importer before: OpInfo sweep)."""
    x = torch.tensor(1.5, device=DEVICE)
    i = torch.tensor(index, device=DEVICE)
    fn = lambda x, i: torch.index_select(x, 0, i)  # noqa: E731
    got = torch.compile(fn, backend="stax", fullgraph=True)(x, i)
    want = fn(x, i)
    assert got.shape == want.shape and torch.equal(got, want)
    assert B.last_report().route == ROUTE and B.last_report().fallback_ops == []


def test_bf16_batch_norm_running_stats_as_eager():
    """CPU bf16 batch norm in training: torch's meta kernel says the new running stats
    are f32, its eager kernel returns bf16; the wrapper read the bf16 bytes as f32 and
    wrote garbage (-1.46e17) into the user's buffers (OpInfo sweep). A fallback result is
    now converted to the traced dtype."""
    torch.manual_seed(0)
    x = torch.randn(3, 4, 5, dtype=torch.bfloat16, device=DEVICE)
    w, b = (torch.randn(4, dtype=torch.bfloat16, device=DEVICE) for _ in range(2))
    rm, rv = torch.randn(4, dtype=torch.bfloat16, device=DEVICE), torch.rand(
        4, dtype=torch.bfloat16, device=DEVICE)
    f = lambda x, w, b, rm, rv: torch.ops.aten._batch_norm_with_update(  # noqa: E731
        x, w, b, rm, rv, 0.1, 1e-5)
    rm_e, rv_e = rm.clone(), rv.clone()
    want = f(x, w, b, rm_e, rv_e)
    rm_s, rv_s = rm.clone(), rv.clone()
    got = torch.compile(f, backend="stax", fullgraph=True)(x, w, b, rm_s, rv_s)
    torch.testing.assert_close(got[0], want[0])
    assert torch.equal(rm_s, rm_e) and torch.equal(rv_s, rv_e)
    assert B.last_report().route == ROUTE
