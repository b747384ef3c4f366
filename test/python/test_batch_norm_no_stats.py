"""`F.batch_norm(x, None, None, weight, bias, training=True)` (aten's
`_native_batch_norm_legit.no_stats`: batch statistics, no running stats): a stax kernel,
static and compiled once for every size, forward and backward.

Before, PyTorch ran the op inside stax's graphs (a fallback op), and a dynamic graph
holding it was compiled per size (the `--dynamic` fuzz seeds 4404 and 4500). On the
CPU, the Triton target interpreted and CUDA: values (against eager, float64-close),
shapes and strides, and the input and parameter gradients.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import stax.backend as B
from test_dynamic_gpu import counts, interpreted_triton  # noqa: F401
from stax.dynamic_compile import DynamicShapes
from test_dynamic_prefix_slices import _where

pytestmark = pytest.mark.usefixtures("stax_strict")
TOL = dict(rtol=1e-4, atol=1e-4)


def bn(x, w, b):
    return torch.relu(F.batch_norm(x, None, None, w, b, training=True, eps=1e-3))


def _check_call(cf, n, c, dev):
    x = torch.randn(n, c, 6, 5, device=dev) * 3 + 1
    w, b = torch.randn(c, device=dev), torch.randn(c, device=dev)
    leaves = [t.requires_grad_(True) for t in (x, w, b)]
    twins = [t.detach().clone().requires_grad_(True) for t in leaves]
    got, want = cf(*leaves), bn(*twins)
    assert got.shape == want.shape and got.stride() == want.stride()
    torch.testing.assert_close(got, want, **TOL)
    g = torch.randn_like(want)
    got.backward(g)
    want.backward(g)
    for a, e in zip(leaves, twins):
        torch.testing.assert_close(a.grad, e.grad, **TOL)


@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_no_stats_batch_norm_trains_with_one_compile(where, counts, request):
    dev, sizes, route = _where(where, request)
    cf = torch.compile(bn, backend="stax", dynamic=True)
    for n, s in sizes:
        _check_call(cf, n, 16, dev)
    reps = B.reports()
    # (Dynamo may recompile once for a small batch: its batch-norm meta guards the
    # element count per channel; every compile stays dynamic)
    assert 1 <= len(reps) <= 2 and all(isinstance(r.specializer, DynamicShapes)
                                       for r in reps), [r.summary() for r in reps]
    assert {r.route for r in reps} == {route} and counts["static"] == 0
    assert not [o for r in reps for g in r.graphs for o in getattr(g, "fallback_ops", ())]


def test_no_stats_batch_norm_is_a_kernel_static():
    cf = torch.compile(bn, backend="stax")
    _check_call(cf, 256, 64, "cpu")
    graphs = [g for r in B.reports() for g in r.graphs]
    assert graphs and not [o for g in graphs for o in getattr(g, "fallback_ops", ())]
    assert {r.route for r in B.reports()} == {"stax-cpu"}
