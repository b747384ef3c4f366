"""A slice of a symbolic dim to a size expression that provably stays in it compiles
once: the backward of a concat of width s + 3 slices its gradient `grad[:, :s]`, and
`cat([x, y], 1)[:, :s]` of width 2*s, as top-level views and inside kernels,
on the CPU and the Triton target (interpreted here; on CUDA where there is one), at
batches of 256 and widths to 1031. It was refused ("a slice of part of the symbolic
dim"), so such graphs were compiled per size (GPU fuzz seeds 4200 and 4202). A prefix
that may not fit (`[:s + 1]` of 2*s is longer than the dim at s = 0) is still refused:
the graph is specialized per size, never wrong. A window from a size expression
(`grad[:, s:2*s]`, the second half of a doubled concat's gradient, `x[:, s:]`) is a
stax.gather of `iota + s` (a slice's start is a static attribute), and the backward of a
window scatters it into the fill's pieces around it, so these train with one compile
too; so does `torch.split` into pieces whose sizes are such polynomials."""
from __future__ import annotations

import pytest
import torch

import stax.backend as B
from stax.dynamic_compile import DynamicShapes
from grad_check import same_forward_and_backward
from test_dynamic_size_asserts import graph_calls  # noqa: F401
from test_dynamic_gpu import counts, interpreted_triton  # noqa: F401

pytestmark = pytest.mark.usefixtures("stax_strict")

def concat_then_kernel(x, c):
    """The concat's backward slices the gradient: grad[:, :s] and grad[:, -3:]."""
    return torch.tanh(torch.cat([x, c.expand(x.shape[0], 3)], 1)).sum(1)


def concat_doubled(x, c):
    """Its backward slices the gradient into [:s] and [s:2*s]."""
    return torch.tanh(torch.cat([x, x * 3], 1)).sum(1)


def second_half(x, c):
    return torch.cat([x, x.exp()], 1)[:, x.shape[1]:] * 2


def middle_window(x, c):
    return torch.cat([x, x, x], 1).exp()[:, x.shape[1]: 2 * x.shape[1]].sum(1)


def split_by_sizes(x, c):
    """torch.split into pieces of size polynomials: [s, s, 3] of 2*s + 3."""
    h = torch.cat([x, x * 2, c.expand(x.shape[0], 3)], 1)
    a, b, d = torch.split(h, [x.shape[1], x.shape[1], 3], 1)
    return torch.tanh(a) * b + d.sum(1, keepdim=True)


INFERENCE = {
    "split_by_sizes": split_by_sizes,
    "concat_doubled": concat_doubled,
    "second_half": second_half,
    "middle_window": middle_window,
    "concat_then_kernel": concat_then_kernel,
    "prefix_of_a_doubled_dim": lambda x, c: torch.cat([x, x * 3], 1)[:, : x.shape[1]] * 2,
    "prefix_then_a_row_sum": lambda x, c: torch.cat([x, x], 1).exp()[:, : x.shape[1]].sum(1),
}


def _where(where, request):
    if where == "triton":
        request.getfixturevalue("interpreted_triton")
    if where == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    dev = "cuda" if where == "cuda" else "cpu"
    sizes = [(5, 9), (2, 7), (4, 13)] if where == "triton" else \
        [(256, 512), (300, 17), (257, 100), (2, 5), (256, 1031)]
    return dev, sizes, "stax-cpu" if where == "stax-cpu" else "triton"


def assert_dynamic_only(route, counts, most=1):
    """Every stax report of the test is a graph compiled once for every size (at most
    `most` of them: Dynamo may compile a size or value it specializes, 0/1, apart), on
    `route`, and nothing was compiled static; the reports."""
    reps = B.reports()
    assert 1 <= len(reps) <= most and all(isinstance(r.specializer, DynamicShapes)
                                          for r in reps), [r.summary() for r in reps]
    assert {r.route for r in reps} == {route} and counts["static"] == 0, \
        [r.summary() for r in reps]
    return reps


def outputs_of(o):
    """A function's result as a tuple of its outputs."""
    return o if isinstance(o, tuple) else (o,)


def _one_dynamic_report(n_calls, route, counts):
    reps = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    assert len(reps) == 1, [r.summary() for r in B.reports()]
    (rep,) = reps
    assert rep.route == route and rep.fallback_reason is None, rep.summary()
    (v,) = rep.variants
    assert v.dynamic and v.calls == n_calls, rep.summary()
    assert counts["static"] == 0, counts
    return rep


@pytest.mark.parametrize("case", sorted(INFERENCE))
@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_prefix_slices_compile_once(case, where, counts, request):
    dev, sizes, route = _where(where, request)
    fn = INFERENCE[case]
    cf = torch.compile(fn, backend="stax", dynamic=True)
    c = torch.randn(1, 3, device=dev)
    for n, s in sizes:
        x = torch.randn(n, s, device=dev)
        got, want = cf(x, c), fn(x, c)
        assert got.shape == want.shape and got.stride() == want.stride()
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    _one_dynamic_report(len(sizes), route, counts)
    assert counts["dynamic"] == 1, counts


TRAINING = {"concat_then_kernel": concat_then_kernel, "concat_doubled": concat_doubled,
            "second_half": second_half, "middle_window": middle_window,
            "split_by_sizes": split_by_sizes}


@pytest.mark.parametrize("case", sorted(TRAINING))
@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_windows_train_with_one_compile(case, where, counts, request):
    """A concat's backward slices the gradient to each input's width (`grad[:, :s]`,
    `grad[:, s:2*s]`); a window's backward scatters into zeros around it."""
    dev, sizes, route = _where(where, request)
    fn = TRAINING[case]
    cf = torch.compile(fn, backend="stax", dynamic=True)
    c = torch.randn(1, 3, device=dev)
    for n, s in sizes:
        x = torch.randn(n, s, device=dev, requires_grad=True)
        same_forward_and_backward(cf, fn, x, c, tol=dict(rtol=1e-4, atol=1e-4))
    _one_dynamic_report(len(sizes), route, counts)
    assert counts["dynamic"] == 2, counts   # the forward and the backward, built once


def test_a_prefix_that_may_not_fit_is_guarded(counts, graph_calls):
    """`[:s + 1]` of a dim of 2*s: longer than the dim at s = 0, so not provably in it;
    read under the graph's check that s + 1 <= 2*s (ops_views._guard_window), one
    compile for every s (Dynamo's s >= 2 meets it)."""
    fn = lambda x: torch.cat([x, x * 3], 1)[:, : x.shape[1] + 1] * 2  # noqa: E731
    cf = torch.compile(fn, backend="stax", dynamic=True)
    for s in (5, 9, 2, 257):
        x = torch.randn(4, s)
        torch.testing.assert_close(cf(x), fn(x))
    _one_dynamic_report(4, "stax-cpu", counts)
    graph, _ = graph_calls[-1]
    assert [a.kind for a in graph.size_asserts] == ["window"], graph.size_asserts
