"""stax-fold-view-copies on graphs compiled once for every size (passes/fold_view_copies.py).

A dynamic graph runs its top-level views as torch views, and a reshape that is no view
of its source copies there. Attention's head split made three such copies per block
(Q, K and K's transpose, V); the pass makes the QKV bias kernel write Q, K and V per
head, and the scores' matmul read K transposed as a view. Checked:

- on the CPU and on the Triton target (interpreted here, on the GPU where there is one),
  at widths of 512, sizes from one sequence of 7 to a batch of 256: every output against eager
  (values, shape, strides), one dynamic build, route stax-cpu / triton;
- the copies a call makes (aten.clone under a dispatch mode around the graph's steps):
  one per call, the heads' merge after attention (eager makes that one too: its
  `.contiguous()`), where there were four;
- a bf16 block keeps F.linear's bias add with its matmul (one torch.addmm).
"""
from __future__ import annotations

import re

import pytest
import torch
import torch.fx.experimental._config as fx_config
from torch.utils._python_dispatch import TorchDispatchMode

import stax.backend as B
from models import make_model
from stax.dynamic_compile import DynamicShapes
from test_dynamic_gpu import counts, interpreted_triton  # noqa: F401 - fixtures

pytestmark = pytest.mark.usefixtures("stax_strict", "fresh_stax")

SHAPES = [(2, 48), (3, 80), (1, 7), (256, 3), (5, 129), (2, 48)]


class _CountCopies(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.clones = 0
        self.addmm = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.clone.default:
            self.clones += 1
        if func is torch.ops.aten.addmm.default:
            self.addmm += 1
        return func(*args, **(kwargs or {}))


@pytest.fixture
def bound_calls(monkeypatch):
    """Every run of a dynamic graph's steps (graph, arguments, symbol values), on either
    target, to run the last one again under the dispatch mode (around the compiled call
    the mode would be a guard Dynamo fails, and eager would run)."""
    from stax.dynamic_graph import DynamicGraph
    seen = []
    real = DynamicGraph.run_bound

    def recording(self, args, env):
        seen.append((self, list(args), env))
        return real(self, args, env)
    monkeypatch.setattr(DynamicGraph, "run_bound", recording)
    return seen


def _run_block(dtype, device, tol, bound_calls):
    torch.manual_seed(0)
    model = make_model("gpt2", dtype, dim=512, n_heads=8, max_seq=256).to(device).eval()
    with fx_config.patch(backed_size_oblivious=True), torch.no_grad():
        cf = torch.compile(model, backend="stax", dynamic=True)
        for b, t in SHAPES:
            x = torch.randn(b, t, 512, dtype=dtype, device=device)
            got, want = cf(x), model(x)
            assert got.shape == want.shape and got.stride() == want.stride()
            torch.testing.assert_close(got.float(), want.float(), **tol)
    reps = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    assert len(reps) == 1 and len(reps[0].graphs) == 1, [r.summary() for r in B.reports()]
    g, args, env = bound_calls[-1]
    assert g is reps[0].graphs[0]
    with _CountCopies() as seen:
        g.run_bound(args, env)
    return g, seen


def test_head_copies_fold_on_the_cpu(counts, bound_calls, monkeypatch):  # noqa: F811
    monkeypatch.setenv("STAX_FUSE_ATTENTION", "off")   # the explicit form's bmm
    g, seen = _run_block(torch.float32, "cpu", dict(rtol=1e-4, atol=1e-4), bound_calls)
    assert counts["dynamic"] == 1 and counts["static"] == 0
    assert g.route == "stax-cpu"
    assert seen.clones == 1, f"{seen.clones} copies per call (the heads' merge is the one)"
    assert ".permute((0, 2, 1))" in g.runner_source   # K^T read by the matmul as a view


def test_fused_attention_copies_no_head(counts, bound_calls):  # noqa: F811
    """stax-fuse-attention (the default on the CPU): the library reads the heads where
    the QKV projection wrote them and writes the output in the query's order, so the
    head merge for the output projection is a view: no copy at all."""
    g, seen = _run_block(torch.float32, "cpu", dict(rtol=1e-4, atol=1e-4), bound_calls)
    assert counts["dynamic"] == 1 and counts["static"] == 0 and g.route == "stax-cpu"
    assert seen.clones == 0, f"{seen.clones} copies per call"
    assert any("scaled_dot_product_attention" in c for c in g.library_calls), g.library_calls


def test_head_copies_fold_on_triton_interpreted(counts, interpreted_triton, bound_calls,  # noqa: F811
                                                monkeypatch):
    # the interpreter's own tensor work is not the graph's: kernels run outside the mode
    from torch.utils._python_dispatch import _disable_current_modes
    from stax.runtime.triton_sized import SizedTritonKernel
    from stax.targets import triton as stt
    for cls in (SizedTritonKernel, stt.TritonKernel):
        def outside(self, *a, _call=cls.__call__, **k):
            with _disable_current_modes():
                return _call(self, *a, **k)
        monkeypatch.setattr(cls, "__call__", outside)
    g, seen = _run_block(torch.float32, "cpu", dict(rtol=2e-4, atol=2e-4), bound_calls)
    assert counts["dynamic"] == 1 and counts["static"] == 0
    assert g.route == "triton" and interpreted_triton["sized"] > 0
    assert seen.clones == 1, f"{seen.clones} copies per call"


def test_bf16_bias_add_stays_with_its_matmul(counts, bound_calls):  # noqa: F811
    g, seen = _run_block(torch.bfloat16, "cpu", dict(rtol=3e-2, atol=3e-2), bound_calls)
    assert counts["dynamic"] == 1
    assert seen.addmm >= 1, "F.linear's bias add of the QKV projection is one torch.addmm"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_head_copies_fold_on_cuda(counts, bound_calls):  # noqa: F811
    g, seen = _run_block(torch.float32, "cuda", dict(rtol=2e-3, atol=2e-3), bound_calls)
    assert counts["dynamic"] == 1 and counts["static"] == 0
    assert g.route == "triton"
    assert seen.clones == 1, f"{seen.clones} copies per call"


def test_a_folded_kernel_without_a_runtime_size_lowering_builds_unfolded(
        counts, bound_calls, monkeypatch):
    """When a kernel the fold made cannot be lowered with runtime sizes, the graph is
    built again without the fold: still one dynamic graph, the copies torch's."""
    from stax import dynamic_kernels
    from stax.targets.cpu_errors import KernelLoweringError
    real = dynamic_kernels.compile_kernel
    refused = []

    def refusing(op, name, target):
        if len(op.results) == 3:   # the QKV bias kernel writing Q, K and V per head
            refused.append(name)
            raise KernelLoweringError("refused by the test")
        return real(op, name, target)
    monkeypatch.setattr(dynamic_kernels, "compile_kernel", refusing)
    monkeypatch.setenv("STAX_FUSE_ATTENTION", "off")   # the explicit form's copies
    g, seen = _run_block(torch.float32, "cpu", dict(rtol=1e-4, atol=1e-4), bound_calls)
    assert refused and counts["dynamic"] == 1 and g.route == "stax-cpu"
    assert seen.clones == 4


def _exp_and_its_flat_transpose(x):
    y = torch.exp(x)
    return y, y.t().reshape(-1)


@pytest.mark.parametrize("where", ["stax-cpu", "triton"])
def test_copies_that_stay_torchs_are_reported(where, counts, request):  # noqa: F811
    """A reshape no view gives whose source kernel is also returned cannot be written by
    that kernel: torch's reshape copies it at run time, and the report says so; a
    repeat of an argument (broadcast, then merged) is a copy kernel."""
    if where == "triton":
        request.getfixturevalue("interpreted_triton")
    cf = torch.compile(_exp_and_its_flat_transpose, backend="stax", dynamic=True)
    for n, s in ((256, 64), (300, 17), (7, 5)):
        x = torch.randn(n, s)
        for got, want in zip(cf(x), _exp_and_its_flat_transpose(x)):
            assert got.shape == want.shape and got.stride() == want.stride()
            torch.testing.assert_close(got, want)
    (rep,) = B.reports()
    assert isinstance(rep.specializer, DynamicShapes) and rep.kernel_count == 1, rep.summary()
    assert re.search(r"1 reshape\(s\) that no view gives, to \[s\d+\*s\d+\]: torch's reshape "
                     "copies them at run time", rep.summary()), rep.summary()

    rep_fn = torch.compile(lambda x: x.repeat(2, 3), backend="stax", dynamic=True)
    for n, s in ((256, 64), (300, 17)):
        x = torch.randn(n, s)
        assert torch.equal(rep_fn(x), x.repeat(2, 3))
    last = B.last_report()
    assert last.kernel_count == 1 and "torch's reshape copies" not in last.summary(), \
        last.summary()
