"""One element of each row, picked from a reduction's domain (`x[:, 5]` beside
`x.amax(1)`, a column of a row sum's [1, C] result beside its max), fused into the
reduction kernel as a row output: read at the row index, not stored over the domain.

The static Triton generator refused such a kernel ("output 2 has shape [1], not the
reduction domain [1, 31]"; GPU fuzz program 4800014424): triton_configs._value_facts
counted a slice of a full-space value as full space. Each case runs forward and
backward on the CPU, under the TTIR interpreter (static and runtime-size kernels) and
on CUDA (skipped without a GPU), at row widths that reach the persistent, looped and
split strategies; and every kernel of the static graphs compiles to PTX."""
from __future__ import annotations

import pytest
import torch

import stax.backend as B
from grad_check import same_forward_and_backward
from ptx_check import training_kernels_to_ptx
from test_dynamic_gpu import counts, interpreted_triton  # noqa: F401
from test_dynamic_prefix_slices import _one_dynamic_report, _where

pytestmark = pytest.mark.usefixtures("stax_strict")
TOL = dict(rtol=1e-5, atol=1e-4)


def column_of_a_sum(x):
    """The fuzz program: a [1, C] column sum, its column 5 over its max."""
    v = x.sum(0, keepdim=True)
    return v.select(1, 5) / (v.amax(1).abs() + 1)


def pick_over_row_max(x):
    return x[:, 5] / (x.amax(1).abs() + 1)


def pick_of_softmax(x):
    """The pick reads the reductions (softmax's max and sum): evaluated after them."""
    return torch.softmax(x, 1)[:, 3] * x.sum(1)


def row_of_a_column_mean(x):
    """A column reduction (dim 0): its pick fixes the reduced dim, row 3 of x."""
    return x[3] - x.mean(0)


CASES = {f.__name__: f for f in (column_of_a_sum, pick_over_row_max, pick_of_softmax,
                                  row_of_a_column_mean)}
# persistent rows; few rows of long columns (split); rows of 5000 (looped)
STATIC_SIZES = [(256, 520), (4, 70000), (256, 5000)]


def _check(case, where, dynamic, request, sizes):
    fn = CASES[case]
    cf = torch.compile(fn, backend="stax", dynamic=dynamic)
    dev = "cuda" if where == "cuda" else "cpu"
    for n, s in sizes:
        x = torch.randn(n, s, device=dev, requires_grad=True)
        same_forward_and_backward(cf, fn, x, tol=TOL)
    route = "stax-cpu" if where == "stax-cpu" else "triton"
    reps = B.reports()
    assert reps and all(r.route == route and not r.fallback_ops for r in reps), \
        [r.summary() for r in reps]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("where", ["stax-cpu", "cuda"])
def test_row_pick_beside_a_reduction_static(case, where, counts, request):
    _where(where, request)
    _check(case, where, False, request, STATIC_SIZES)


@pytest.mark.parametrize("rows,cols,strategy", [
    (256, 520, "reduction-persistent"), (256, 5000, "reduction-looped"),
    (1, 70000, "reduction-split")])
def test_static_triton_kernel_stores_the_pick_per_row(rows, cols, strategy):
    """The fused kernel of pick_over_row_max (the static Triton generator, run in the
    bounds-checking TTIR interpreter): column 5 of each row over the row's max, and
    the max, at each strategy."""
    pytest.importorskip("triton")
    from kernel_harness import triton_kernel, ttype
    from ttir_interp import run_kernel
    x = torch.randn(rows, cols)
    T, R, P = (ttype(s, torch.float32) for s in ((rows, cols), (rows,), (rows, 1)))
    body = (f'    %m = "stax.reduce_max"(%a0) {{dims = array<i64: 1>, keepdim = false}} : '
            f'({T}) -> {R}\n'
            f'    %p = "stax.slice"(%a0) {{limit = array<i64: {rows}, 6>, '
            f'start = array<i64: 0, 5>, step = array<i64: 1, 1>}} : ({T}) -> {P}\n'
            f'    %q = "stax.reshape"(%p) : ({P}) -> {R}\n'
            f'    %d = "stax.div"(%q, %m) : ({R}, {R}) -> {R}\n'
            f'    "stax_graph.yield"(%m, %d) : ({R}, {R}) -> ()')
    k, outs = triton_kernel(body, [x], [((rows,), torch.float32)] * 2)
    assert k.ttir_kernel.kind.startswith(strategy), k.ttir_kernel.kind
    run_kernel(k.ttir_kernel, x, *outs)
    m, d = outs
    assert torch.equal(m, x.amax(1)) and torch.equal(d, x[:, 5] / x.amax(1))


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_row_pick_beside_a_reduction_dynamic(case, where, counts, request):
    _, sizes, route = _where(where, request)
    sizes = [(max(n, 4), max(s, 6)) for n, s in sizes]   # row 3 and column 5 exist
    _check(case, where, True, request, sizes)
    _one_dynamic_report(len(sizes), route, counts)


@pytest.mark.parametrize("case", sorted(CASES))
def test_row_pick_kernels_compile_to_ptx(case):
    """The static Triton generator: every forward and backward kernel compiles to PTX."""
    out, stats = training_kernels_to_ptx(CASES[case], torch.randn(31, 520, requires_grad=True))
    assert out.status == "pass" and stats["kernels"] >= 1, (out, stats)
