"""Pads whose amounts are sizes, compiled once for every size: `F.pad(x, (0, 128 - T))`
(padding a sequence to a fixed length), `F.pad(x, (0, (-T) % 64))` (to a multiple of a
block) and a pad by an int argument.

Before, the symbolic importer refused `constant_pad_nd` reading a size ("reads the size
... as a value"; 20 samples of `opinfo_sweep.py --dynamic`) and the graph was compiled
per size. Now the fills of those sizes are concatenated on (`ops_views._pad_by_sizes`),
under the graph's check that every such amount is >= 0 at every call (a negative one
would be a crop); the backward reads the input's window back at a size-expression start
(a guarded window). CPU, interpreted Triton and CUDA; forward and backward.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from test_dynamic_gpu import counts, interpreted_triton  # noqa: F401
from test_dynamic_size_asserts import graph_calls  # noqa: F401
from stax.errors import StaxGuardError
from test_dynamic_prefix_slices import _where, assert_dynamic_only

pytestmark = pytest.mark.usefixtures("stax_strict")
TOL = dict(rtol=1e-5, atol=1e-5)
MOST = 1100   # the fixed length: above every width _where draws


def to_fixed_length(x):
    return F.pad(x, (0, MOST - x.shape[1])) * 2


def to_a_multiple(x):
    return F.pad(x, (0, (-x.shape[1]) % 64), value=-1.0).sum(-1)


def both_sides(x, n):   # a size before, static amounts after and on the other dim
    return torch.tanh(F.pad(x, (n, 1, 2, -1)))


CASES = {"to_fixed_length": lambda x, n: to_fixed_length(x),
         "to_a_multiple": lambda x, n: to_a_multiple(x), "both_sides": both_sides}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_pads_by_sizes_compile_once(case, where, counts, request):
    dev, sizes, route = _where(where, request)
    fn = CASES[case]
    cf = torch.compile(fn, backend="stax", dynamic=True)
    for k, (n, s) in enumerate(sizes):
        x = torch.randn(n, s, device=dev)
        got, want = cf(x, k + 2), fn(x, k + 2)
        assert got.shape == want.shape and got.stride() == want.stride()
        torch.testing.assert_close(got, want, **TOL)
    assert_dynamic_only(route, counts, most=2)


@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_pad_to_a_fixed_length_trains_with_one_compile(where, counts, request):
    dev, sizes, route = _where(where, request)
    cf = torch.compile(to_fixed_length, backend="stax", dynamic=True)
    for n, s in sizes:
        x = torch.randn(n, s, device=dev, requires_grad=True)
        x2 = x.detach().clone().requires_grad_(True)
        got, want = cf(x), to_fixed_length(x2)
        torch.testing.assert_close(got, want, **TOL)
        g = torch.randn_like(want)
        got.backward(g)
        want.backward(g)
        torch.testing.assert_close(x.grad, x2.grad, **TOL)
    assert_dynamic_only(route, counts, most=2)


def test_a_pad_that_would_crop_raises(graph_calls):
    """Through torch.compile Dynamo guards `T <= 1100`; the graph, called directly with a
    longer row, must raise and name the size, never compute a crop."""
    cf = torch.compile(to_fixed_length, backend="stax", dynamic=True)
    for s in (5, 9):
        x = torch.randn(3, s)
        torch.testing.assert_close(cf(x), to_fixed_length(x))
    graph, args = graph_calls[-1]
    assert any(a.kind == "bound" for a in graph.size_asserts)
    bad = [torch.randn(3, MOST + 5) if isinstance(a, torch.Tensor) else
           (MOST + 5 if a == 9 else a) for a in args]
    with pytest.raises(StaxGuardError) as e:
        graph(bad)
    assert "would be a crop" in str(e.value) and str(MOST + 5) in str(e.value), str(e.value)
