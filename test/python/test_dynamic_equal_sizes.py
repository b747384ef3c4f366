"""Sizes that Dynamo's guards make equal are one dim (importer/equal_sizes.py): the
halves of a chunk of a symbolic dim, combined elementwise, compile once for every size.

`a, b = x.chunk(2, -1)` gives `a` the width `(s + 1)//2` and `b` the width
`s - (s + 1)//2`; `a * b` needs them equal, so Dynamo guards that they are (an even `s`).
Before, the two expressions were different dims to the importer ("the recorded sizes
disagree"), and each width was a compile of its own. Real models do this: a GLU written
out, classifier-free guidance's `uncond, cond = out.chunk(2)` over the batch, a fused
QKV projection chunked in three. The dynamic graph checks the guard again at every call,
so a direct call with an odd width raises StaxGuardError, never reads out of bounds.
CPU, interpreted Triton and CUDA.
"""
from __future__ import annotations

import pytest
import torch

from test_dynamic_gpu import counts, interpreted_triton  # noqa: F401
from test_dynamic_size_asserts import graph_calls  # noqa: F401
from stax.errors import StaxGuardError
from test_dynamic_prefix_slices import _where, assert_dynamic_only

pytestmark = pytest.mark.usefixtures("stax_strict")
TOL = dict(rtol=1e-5, atol=1e-5)


def glu_written_out(x):
    a, b = x.chunk(2, dim=-1)
    return a * torch.sigmoid(b)


def guidance(x, w):   # classifier-free guidance over a batch of [uncond; cond]
    u, c = (x @ w).chunk(2)
    return u + 7.5 * (c - u)


def qkv_thirds(x):
    q, k, v = x.chunk(3, dim=1)
    return q * k + v


def _args(case, n, s, dev):
    if case == "glu_written_out":
        return (torch.randn(n, 2 * s, device=dev),)
    if case == "guidance":
        return torch.randn(2 * n, 64, device=dev), torch.randn(64, 48, device=dev)
    return (torch.randn(n, 3 * s, 6, device=dev),)


CASES = {"glu_written_out": glu_written_out, "guidance": guidance, "qkv_thirds": qkv_thirds}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_chunks_combined_compile_once(case, where, counts, request):
    dev, sizes, route = _where(where, request)
    fn = CASES[case]
    cf = torch.compile(fn, backend="stax", dynamic=True)
    for n, s in sizes:
        args = _args(case, n, s, dev)
        got, want = cf(*args), fn(*args)
        assert got.shape == want.shape and got.stride() == want.stride()
        assert got.data_ptr() not in {a.data_ptr() for a in args}
        torch.testing.assert_close(got, want, **TOL)
    reps = assert_dynamic_only(route, counts, most=2)
    assert "Dynamo guarded equal" not in " ".join(n for r in reps for n in r.notes)


def test_an_odd_width_called_directly_raises(graph_calls):
    """Through torch.compile Dynamo guards the even width; the graph, called directly
    with an odd one, raises and names the sizes, never reads."""
    cf = torch.compile(glu_written_out, backend="stax", dynamic=True)
    for s in (256, 300):
        x = torch.randn(4, 2 * s)
        torch.testing.assert_close(cf(x), glu_written_out(x), **TOL)
    graph, args = graph_calls[-1]
    assert any(a.kind == "equal" for a in graph.size_asserts), graph.size_asserts
    with pytest.raises(StaxGuardError) as e:
        graph([torch.randn(4, 601) if isinstance(a, torch.Tensor) else
               601 if isinstance(a, int) and a == 600 else a for a in args])
    msg = str(e.value)   # the second half's window past the end, or the guard itself
    assert "is 601" in msg and ("would be read outside the dim" in msg or
                                "which Dynamo guarded equal" in msg), msg
    torch.testing.assert_close(graph(args)[0], glu_written_out(args[-1]), **TOL)
