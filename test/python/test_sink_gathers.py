"""stax-sink-gathers end to end (passes/sink_gathers.py): a pick of few elements of an
elementwise result (a manual cross-entropy's `log_softmax(x)[arange(n), t]`, rows of an
upcast) computes the ops on the picked elements only, so no kernel writes the whole
result for the pick to read back. Values, shapes and strides against eager, forward and
backward, on the CPU and on CUDA (skipped without a GPU); every kernel to PTX; an index
out of range still raises."""
from __future__ import annotations

import pytest
import torch

import stax.backend as B
from grad_check import same_forward, same_forward_and_backward
from ptx_check import training_kernels_to_ptx

pytestmark = pytest.mark.usefixtures("stax_strict")
TOL = dict(rtol=1e-5, atol=1e-5)
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU"))]


def picked_nll(x, t):
    return -x.log_softmax(-1)[torch.arange(x.shape[0], device=x.device), t].mean()


def picked_log_probs(x, t):
    """The picks themselves, one per row (no mean over them)."""
    return x.log_softmax(-1)[torch.arange(x.shape[0], device=x.device), t] * 2


def rows_of_an_upcast(x, i):
    """index_select of 300 of 4096 rows of a bf16 tensor's f32 upcast times 2."""
    return torch.index_select(x.float() * 2, 0, i)


def _largest_buffer(report) -> int:
    """The most elements of any tensor the compiled graphs allocate (outputs and the
    intermediates between kernels), read from their generated wrappers."""
    import re
    most = 0
    for g in report.graphs:
        src = g.source
        found = re.findall(r"empty_strided\(\(([\d, ]*)\), \([\d, ]*\), dtype=torch\.(\w+)", src)
        found += re.findall(r"_slot_tensor\(\w+, \(([\d, ]*)\), \([\d, ]*\), torch\.(\w+)\)", src)
        for dims, dtype in found:
            if dtype == "uint8":   # an arena's raw bytes, viewed by the slots above
                continue
            n = 1
            for d in filter(None, (t.strip() for t in dims.split(","))):
                n *= int(d)
            most = max(most, n)
    return most


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", [picked_nll, picked_log_probs], ids=lambda f: f.__name__)
def test_picked_log_softmax_writes_no_full_rows(fn, device):
    x = torch.randn(1024, 1000, device=device)
    t = torch.randint(0, 1000, (1024,), device=device)
    same_forward(torch.compile(fn, backend="stax"), fn, x, t, tol=TOL)
    rep = B.last_report()
    assert rep.route == ("stax-cpu" if device == "cpu" else "triton"), rep.summary()
    assert rep.kernel_count == 2, rep.summary()
    # the softmax kernel writes its row values, the pick's kernel its picks: no [n, C]
    assert _largest_buffer(rep) == 1024, (rep.summary(), rep.graphs[0].source)


@pytest.mark.parametrize("device", DEVICES)
def test_picked_nll_trains(device):
    x = torch.randn(512, 1000, device=device, requires_grad=True)
    t = torch.randint(0, 1000, (512,), device=device)
    same_forward_and_backward(torch.compile(picked_nll, backend="stax"), picked_nll, x, t,
                              tol=TOL)
    # the pick's backward, a scatter-add into zeros (index_put), is PyTorch's op
    assert all(r.fallback_ops in ([], ["aten.index_put.default"]) for r in B.reports()), \
        [r.summary() for r in B.reports()]


@pytest.mark.parametrize("device", DEVICES)
def test_rows_of_an_upcast_convert_only_the_picked_rows(device):
    x = torch.randn(4096, 512, device=device).to(torch.bfloat16)
    i = torch.randint(0, 4096, (300,), device=device)
    got = torch.compile(rows_of_an_upcast, backend="stax")(x, i)
    want = rows_of_an_upcast(x, i)
    assert got.stride() == want.stride() and torch.equal(got, want)   # exact: one rounding
    rep = B.last_report()
    assert rep.kernel_count == 1 and _largest_buffer(rep) == 300 * 512, rep.summary()


def test_an_index_out_of_range_still_raises():
    cf = torch.compile(picked_log_probs, backend="stax")
    x, t = torch.randn(256, 600), torch.randint(0, 600, (256,))
    same_forward(cf, picked_log_probs, x, t, tol=TOL)
    t[17] = 600
    with pytest.raises(IndexError, match="index 600 is out of bounds"):
        cf(x, t)


@pytest.mark.parametrize("fn", [picked_nll, rows_of_an_upcast], ids=lambda f: f.__name__)
def test_kernels_compile_to_ptx(fn):
    """The static Triton generator: every forward and backward kernel compiles to PTX."""
    if fn is picked_nll:
        args = (torch.randn(512, 1000, requires_grad=True), torch.randint(0, 1000, (512,)))
    else:
        args = (torch.randn(4096, 512).to(torch.bfloat16).requires_grad_(),
                torch.randint(0, 4096, (300,)))
    out, stats = training_kernels_to_ptx(fn, *args)
    assert out.status == "pass" and stats["kernels"] >= 1, (out, stats)
