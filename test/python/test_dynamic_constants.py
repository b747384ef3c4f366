"""Tensor literals in a graph compiled once for every size: `torch.tensor([...])` inside
a model's forward (aten's `lift_fresh_copy` of a `_tensor_constant`).

Before, the symbolic importer refused `lift_fresh_copy` and the dynamic graph ran no
top-level `stax.constant`, so any such graph was compiled per size (32 samples of
`opinfo_sweep.py --dynamic`). A small literal is a stax.constant the graph makes once on
its device; a large one (more than 64 elements) is an argument, as on the static path. A
literal the graph returns is a fresh tensor per call, as eager's is. On the CPU, the
Triton target interpreted and CUDA; forward and backward. The literals name the input's
device: under a `torch.device` context Dynamo (torch 2.11) traced them on the CPU.
"""
from __future__ import annotations

import pytest
import torch

from test_dynamic_gpu import counts, interpreted_triton  # noqa: F401
from test_dynamic_prefix_slices import _where, assert_dynamic_only, outputs_of

pytestmark = pytest.mark.usefixtures("stax_strict")
TOL = dict(rtol=1e-5, atol=1e-5)


def scale_rows(x):
    return x.unsqueeze(-1) * torch.tensor([0.5, -2.0, 3.0], device=x.device) + \
        torch.tensor(2.5, device=x.device)


def per_column(x):
    w = torch.tensor([float(i % 7) - 3.0 for i in range(96)],   # an argument (> 64)
                     device=x.device)
    return torch.softmax(x.unsqueeze(-1) * w, dim=-1) + torch.tensor([1.0], device=x.device)


def int_literal(x):
    return (x > 0).to(torch.int64) * torch.tensor([3], device=x.device) + \
        torch.tensor(-1, device=x.device)


def returns_literal(x):
    return torch.tensor([1.0, 2.0, 3.0], device=x.device) * 2, x.sum(-1)


CASES = {"scale_rows": scale_rows, "per_column": per_column, "int_literal": int_literal,
         "returns_literal": returns_literal}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_tensor_literals_compile_once(case, where, counts, request):
    dev, sizes, route = _where(where, request)
    fn = CASES[case]
    cf = torch.compile(fn, backend="stax", dynamic=True)
    seen = []
    for n, s in sizes:
        x = torch.randn(n, s, device=dev)
        got, want = outputs_of(cf(x)), outputs_of(fn(x))
        for a, e in zip(got, want):
            assert a.shape == e.shape and a.stride() == e.stride() and a.dtype == e.dtype
            assert a.device == e.device
            torch.testing.assert_close(a, e, **TOL)
        seen.append(got)
    # every output is a fresh tensor per call, a returned literal too
    ptrs = [o.data_ptr() for outs in seen for o in outs]
    assert len(set(ptrs)) == len(ptrs)
    (rep,) = assert_dynamic_only(route, counts)
    assert len(rep.variants) == 1 and rep.variants[0].dynamic


@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_tensor_literal_trains_with_one_compile(where, counts, request):
    dev, sizes, route = _where(where, request)

    def fn(x, w):
        return torch.tanh(x @ w) * torch.tensor([2.0], device=x.device) + \
            torch.tensor(0.25, device=x.device)

    cf = torch.compile(fn, backend="stax", dynamic=True)
    for n, _ in sizes:
        x = torch.randn(n, 64, device=dev, requires_grad=True)
        w = torch.randn(64, 32, device=dev, requires_grad=True)
        x2, w2 = (t.detach().clone().requires_grad_(True) for t in (x, w))
        got, want = cf(x, w), fn(x2, w2)
        torch.testing.assert_close(got, want, **TOL)
        g = torch.randn_like(want)
        got.backward(g)
        want.backward(g)
        torch.testing.assert_close(x.grad, x2.grad, **TOL)
        torch.testing.assert_close(w.grad, w2.grad, **TOL)
    assert_dynamic_only(route, counts)
