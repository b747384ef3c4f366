"""A CPU matmul whose one consumer only adds a bias over the last dim runs as
`torch.addmm(bias, a, b, out=)` (stax.matmul_epilogues), as eager's F.linear does:
bit-identical to eager, with no bias kernel. Any other consumer (a GELU after the bias,
a bias along the rows, a matmul result that is also an output) keeps the matmul and its
kernel, and is right too.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import stax.backend as B


@pytest.fixture(autouse=True)
def _env(monkeypatch, fresh_stax):
    monkeypatch.setenv("STAX_STRICT", "1")


def _graph():
    (cg,) = B.last_report().graphs
    return cg


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows,k,n", [(256, 512, 768), (7, 33, 5), (300, 768, 2304)])
def test_linear_with_bias_is_one_addmm_bit_identical(dtype, rows, k, n):
    torch.manual_seed(0)
    lin = torch.nn.Linear(k, n).to(dtype)
    f = torch.compile(lin, backend="stax", fullgraph=True)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(rows, k, dtype=dtype)
            got, want = f(x), lin(x)
            assert got.shape == want.shape and got.stride() == want.stride()
            assert torch.equal(got, want)
    cg = _graph()
    assert "torch.addmm(" in cg.source and cg.kernel_count == 0, cg.source
    assert any(c.startswith("torch.addmm") for c in cg.library_calls)


CASES = {
    # the bias then a GELU: one fused kernel after a plain matmul
    "bias_gelu": lambda x, w, b, c: F.gelu(x @ w.t() + b),
    # a bias along the rows is no F.linear bias
    "row_bias": lambda x, w, b, c: x @ w.t() + c[:, None],
    # the matmul result is an output too
    "mm_also_output": lambda x, w, b, c: (x @ w.t() + b, x @ w.t()),
    # the bias first (b + mm): the same addmm
    "bias_first": lambda x, w, b, c: b + x @ w.t(),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_other_consumers_stay_kernels(name):
    fn = CASES[name]
    torch.manual_seed(1)
    x, w, b, c = torch.randn(256, 512), torch.randn(640, 512), torch.randn(640), \
        torch.randn(256)
    got, want = torch.compile(fn, backend="stax", fullgraph=True)(x, w, b, c), fn(x, w, b, c)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, e in zip(got, want):
        assert g.shape == e.shape and g.stride() == e.stride()
        torch.testing.assert_close(g, e, rtol=2e-5, atol=2e-4)
    fused = "torch.addmm(" in _graph().source
    assert fused == (name == "bias_first"), _graph().source
