"""Ops with no stax lowering whose result sizes follow from their operand's (prefix scans,
sorts, special functions, topk and order statistics; flip was one until it became a stax
gather, `test_flip.py`), in a graph compiled once for every size: PyTorch runs them inside
the dynamic graph, as it does inside a static one (`stax_graph.fallback`, each result's
shape checked against its type at run time).

Before, any of them sent the whole graph per size (`opinfo_sweep.py --dynamic`: flip,
cumsum, sort, lgamma, polygamma; `stax-fuzz --dynamic --backward` seed 4500: cumprod in
backward graphs). HF language models compute `position_ids = mask.cumsum(-1) - 1` over
the sequence. On the CPU, the Triton target interpreted and CUDA: values, shapes and
strides against eager, forward and backward; one dynamic build.
"""
from __future__ import annotations

import pytest
import torch

import stax.backend as B
from grad_check import same_forward, same_forward_and_backward
from test_dynamic_gpu import counts, interpreted_triton  # noqa: F401
from test_dynamic_prefix_slices import _one_dynamic_report, _where

pytestmark = pytest.mark.usefixtures("stax_strict")
TOL = dict(rtol=1e-4, atol=1e-4)


def position_ids(x, mask):
    """HF's position ids from an attention mask, then a gather of x by them."""
    pos = (mask.long().cumsum(-1) - 1).clamp_min(0)
    return torch.gather(x, 1, pos) * 2


def scan(x, mask):
    return torch.tanh(x.cumsum(1)) + torch.logcumsumexp(x, 1)


def sort_and_flip(x, mask):
    v, i = x.sort(-1)
    return v.flip(-1) * 2 + i


def special(x, mask):
    return torch.lgamma(x.abs() + 1) + torch.digamma(x.abs() + 1)


def running_product(x, mask):
    return (x * 0.01 + 1).cumprod(1).sum(1)


def top2_routing(x, mask):
    """MoE routing: the two largest gate probabilities, renormalized, and their experts."""
    w, experts = x.softmax(-1).topk(2, dim=-1)
    return w / w.sum(-1, keepdim=True) + experts * 3


def order_statistics(x, mask):
    return x.median(-1).values + x.kthvalue(1, -1).values * 2 + \
        x.masked_fill(~mask, float("nan")).nanmedian(-1).values.nan_to_num(0) + x.median()


def top_quarter(x, mask):
    """k a size: the largest quarter of each row."""
    return x.topk(x.shape[-1] // 4 + 1, dim=-1).values.sum(-1)


INFERENCE = {"position_ids": position_ids, "scan": scan, "sort_and_flip": sort_and_flip,
             "special": special, "running_product": running_product,
             "top2_routing": top2_routing, "order_statistics": order_statistics,
             "top_quarter": top_quarter}
#: (sort_and_flip's indices have no gradient; cumprod's backward specializes the scanned
#: dim in Dynamo's trace, so a new width is Dynamo's recompile: running_product trains
#: at one width below)
TRAINING = {"position_ids": position_ids, "scan": scan, "special": special,
            "top2_routing": top2_routing}


@pytest.mark.parametrize("case", sorted(INFERENCE))
@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_library_ops_compile_once(case, where, counts, request):
    dev, sizes, route = _where(where, request)
    fn = INFERENCE[case]
    cf = torch.compile(fn, backend="stax", dynamic=True)
    for n, s in sizes:
        x, mask = torch.randn(n, s, device=dev), torch.rand(n, s, device=dev) > 0.3
        same_forward(cf, fn, x, mask, tol=TOL)
    _one_dynamic_report(len(sizes), route, counts)
    assert counts["dynamic"] == 1, counts


@pytest.mark.parametrize("case", sorted(TRAINING))
@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_library_ops_train_with_one_compile(case, where, counts, request):
    dev, sizes, route = _where(where, request)
    fn = TRAINING[case]
    cf = torch.compile(fn, backend="stax", dynamic=True)
    for n, s in sizes:
        x = torch.randn(n, s, device=dev, requires_grad=True)
        same_forward_and_backward(cf, fn, x, torch.rand(n, s, device=dev) > 0.3, tol=TOL)
    _one_dynamic_report(len(sizes), route, counts)


@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_running_product_trains_over_batches_with_one_compile(where, counts, request):
    dev, sizes, route = _where(where, request)
    cf = torch.compile(running_product, backend="stax", dynamic=True)
    width = sizes[0][1]
    for n, _ in sizes:
        x = torch.randn(n, width, device=dev, requires_grad=True)
        same_forward_and_backward(cf, running_product, x, None, tol=TOL)
    _one_dynamic_report(len(sizes), route, counts)


class _ResnetBlock(torch.nn.Module):
    """A diffusion model's ResNet block: group norm, SiLU, conv, twice, and the skip."""

    def __init__(self, c=32, groups=8):
        super().__init__()
        self.n1, self.n2 = torch.nn.GroupNorm(groups, c), torch.nn.GroupNorm(groups, c)
        self.c1 = torch.nn.Conv2d(c, c, 3, padding=1)
        self.c2 = torch.nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        h = self.c1(torch.nn.functional.silu(self.n1(x)))
        return x + self.c2(torch.nn.functional.silu(self.n2(h)))


@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("where", ["stax-cpu", "cuda"])
def test_group_norm_takes_its_sizes_at_run_time(train, where, counts, request):
    """native_group_norm (and its backward) take N and H*W as arguments: recorded as
    size expressions and evaluated at each call, so batch and resolution change without a
    compile (before: per size)."""
    dev, _, route = _where(where, request)
    torch.manual_seed(0)
    block = _ResnetBlock().to(dev)
    ref = _ResnetBlock().to(dev)
    ref.load_state_dict(block.state_dict())
    cf = torch.compile(block, backend="stax", dynamic=True)
    sizes = [(2, 16, 16), (3, 8, 12), (1, 5, 7), (4, 16, 9)]
    for n, h, w in sizes:
        x = torch.randn(n, 32, h, w, device=dev)
        if train:
            same_forward_and_backward(cf, ref, x.requires_grad_(), tol=TOL)
        else:
            with torch.no_grad():
                same_forward(cf, ref, x, tol=TOL)
    reps = [r for r in B.reports()]
    assert reps and all(r.route == route for r in reps), [r.summary() for r in reps]
    assert counts["static"] == 0, (counts, [r.summary() for r in reps])
    assert any("native_group_norm" in f for r in reps for f in r.fallback_ops)
