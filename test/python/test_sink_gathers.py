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
from test_dynamic_gpu import counts, interpreted_triton  # noqa: F401

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


def _kernel_outputs(dump_dir) -> list:
    """The dims (strings: ints or `?`) of every output of every kernel that the graphs
    dumped under `dump_dir` (STAX_DEBUG_DIR) write, from their stax-fuse dumps."""
    import glob
    import re
    outs = []
    for path in glob.glob(f"{dump_dir}/*/*_after_stax-fuse.mlir"):
        for line in open(path):
            if "stax_graph.yield" in line:
                outs += [t.split(",")[0].split("x")[:-1]
                         for t in re.findall(r"tensor<([^>]*)>", line.split(":")[-1])]
    assert outs, f"no stax-fuse dump under {dump_dir}"
    return outs


def _no_full_rows(dump_dir):
    """No kernel writes [n, C] (a 2-D output whose rows are not single row values)."""
    outs = _kernel_outputs(dump_dir)
    assert not [d for d in outs if len(d) == 2 and d[1] != "1"], outs


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", [picked_nll, picked_log_probs], ids=lambda f: f.__name__)
def test_picked_log_softmax_writes_no_full_rows(fn, device, monkeypatch, tmp_path):
    monkeypatch.setenv("STAX_DEBUG_DIR", str(tmp_path))
    x = torch.randn(1024, 1000, device=device)
    t = torch.randint(0, 1000, (1024,), device=device)
    same_forward(torch.compile(fn, backend="stax"), fn, x, t, tol=TOL)
    rep = B.last_report()
    assert rep.route == ("stax-cpu" if device == "cpu" else "triton"), rep.summary()
    assert rep.kernel_count == 2, rep.summary()
    # the softmax kernel writes its row values, the pick's kernel its picks: no [n, C]
    _no_full_rows(tmp_path)


@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
@pytest.mark.parametrize("classes", ["static", "symbolic"])
def test_picked_log_softmax_with_symbolic_batch(classes, where, monkeypatch, tmp_path,
                                                 request):
    """One compile for four batch sizes; the class dim static (as a model's vocabulary)
    or symbolic too (dynamic=True). On the CPU, under the TTIR interpreter (runtime-size
    Triton kernels on CPU tensors, small sizes) and on CUDA."""
    from stax.dynamic_compile import DynamicShapes
    from test_dynamic_prefix_slices import _where
    device, _, route = _where(where, request)
    monkeypatch.setenv("STAX_DEBUG_DIR", str(tmp_path))
    cf = torch.compile(picked_nll, backend="stax", dynamic=classes == "symbolic")
    c, batches = (37, (8, 5, 2, 13)) if where == "triton" else (1000, (512, 300, 7, 1031))
    for n in batches:
        x = torch.randn(n, c, device=device)
        t = torch.randint(0, c, (n,), device=device)
        if classes == "static":
            torch._dynamo.mark_dynamic(x, 0)
            torch._dynamo.mark_dynamic(t, 0)
        same_forward(cf, picked_nll, x, t, tol=TOL)
    (rep,) = B.reports()
    assert isinstance(rep.specializer, DynamicShapes) and rep.variants[0].calls == 4, \
        rep.summary()
    assert rep.route == route, rep.summary()
    _no_full_rows(tmp_path)


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
def test_rows_of_an_upcast_convert_only_the_picked_rows(device, monkeypatch, tmp_path):
    monkeypatch.setenv("STAX_DEBUG_DIR", str(tmp_path))
    x = torch.randn(4096, 512, device=device).to(torch.bfloat16)
    i = torch.randint(0, 4096, (300,), device=device)
    got = torch.compile(rows_of_an_upcast, backend="stax")(x, i)
    want = rows_of_an_upcast(x, i)
    assert got.stride() == want.stride() and torch.equal(got, want)   # exact: one rounding
    assert B.last_report().kernel_count == 1, B.last_report().summary()
    assert _kernel_outputs(tmp_path) == [["300", "512"]]


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
