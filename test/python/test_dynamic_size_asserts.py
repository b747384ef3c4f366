"""Dynamo's runtime assertions on sizes (importer.size_asserts) in graphs that stay dynamic.

A graph with an unbacked size (`mark_unbacked`), or one traced under
`backed_size_oblivious` on torch 2.11, carries `aten._assert_scalar(ge(u0, 0))` and the
like: before this, the symbolic importer refused `ge` and every such graph was compiled per
size (on the H200, the GPT-2 block under `dynamic.py --size-oblivious` failed outright).
Now each assertion is checked with the call's sizes before anything runs, and a call that
breaks one raises, as eager does.
"""
from __future__ import annotations

import pytest
import torch
import torch.fx.experimental._config as fx_config

import stax.backend as B
from stax.dynamic_compile import DynamicShapes
from stax.errors import StaxGuardError
from stax.importer.size_asserts import SizeAssert

pytestmark = pytest.mark.usefixtures("stax_strict")


def _dynamic_report():
    reps = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    assert len(reps) == 1, [r.summary() for r in B.reports()]
    return reps[0]


def _close(got, ref):
    assert got.shape == ref.shape and got.stride() == ref.stride()
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)


class CheckedLength(torch.nn.Module):
    """A model whose own size check Dynamo turns into a runtime assertion when the length
    is unbacked, and a buffer sliced to that length."""

    def __init__(self, most=640, width=512):
        super().__init__()
        self.most = most
        # longer than the check allows: the slice alone would not stop a longer input
        self.register_buffer("pos", torch.randn(most + 64, width))
        self.proj = torch.nn.Linear(width, width)

    def forward(self, x):
        t = x.shape[1]
        torch._check(t <= self.most)
        return torch.softmax(self.proj(x) + self.pos[:t], dim=-1)


@pytest.fixture
def graph_calls(monkeypatch):
    """(DynamicGraph, its arguments) of every call, to call a graph directly."""
    from stax.dynamic_graph import DynamicGraph
    seen = []
    real_call = DynamicGraph.__call__
    monkeypatch.setattr(DynamicGraph, "__call__",
                        lambda self, args: seen.append((self, list(args))) or
                        real_call(self, args))
    return seen


def _unbacked(x):
    torch._dynamo.decorators.mark_unbacked(x, 1)
    return x


def test_unbacked_length_with_a_size_check_stays_dynamic():
    m = CheckedLength().eval()
    cf = torch.compile(m, backend="stax")
    calls = 0
    with torch.no_grad():
        for t in (8, 1, 257, 640, 3, 600, 2):   # 1, a prime, above the first, the bound
            x = _unbacked(torch.randn(4, t, 512))
            _close(cf(x), m(x))
            calls += 1
            r = _dynamic_report()
            (v,) = r.variants
            assert v.dynamic and v.calls == calls and r.route == "stax-cpu", r.summary()
    text = r.summary()
    assert "runtime assertion(s) of Dynamo on the sizes, checked at every call" in text
    assert "<= 640" in text, text


def test_a_call_that_breaks_the_assertion_raises_as_eager_does(graph_calls):
    """Through torch.compile Dynamo guards this bound itself (its guard on the unbacked
    length reads the model's torch._check); the graph is called here with arguments
    past it, as a caller without that guard would (a size-oblivious graph on torch
    2.11 has no such guard): it must raise, never compute."""
    m = CheckedLength(most=64, width=32).eval()
    cf = torch.compile(m, backend="stax")
    with torch.no_grad():
        x = _unbacked(torch.randn(2, 16, 32))
        _close(cf(x), m(x))
        bad_x = torch.randn(2, 70, 32)
        with pytest.raises(RuntimeError):
            m(bad_x)   # eager's own check
    graph, args = graph_calls[-1]
    assert graph.size_asserts, "the graph carries the model's size check"
    bad = [70 if isinstance(a, int) and a == 16 else
           bad_x if isinstance(a, torch.Tensor) and a.shape == x.shape else a for a in args]
    with pytest.raises(StaxGuardError) as e:
        graph(bad)
    msg = str(e.value)
    # names the argument that gave the size, the value and the failed condition
    assert "is 70" in msg and "<= 64" in msg, msg
    assert "runtime assertion" in msg and "Eager raises here too" in msg, msg
    torch.testing.assert_close(graph(args)[0], m(x), rtol=1e-4, atol=1e-4)
    with pytest.raises(StaxGuardError):   # a size's checks are remembered only once passed
        graph(bad)


def test_size_oblivious_buffer_slice_stays_dynamic():
    """The GPT-2 pattern (a causal mask buffer sliced to the sequence length) under
    backed_size_oblivious: one dynamic compile for every size."""
    class Masked(torch.nn.Module):
        def __init__(self, most=64):
            super().__init__()
            self.register_buffer("mask", torch.tril(torch.ones(most, most)))

        def forward(self, x):
            t = x.shape[1]
            s = x @ x.transpose(1, 2)
            s = s.masked_fill(self.mask[:t, :t] == 0, float("-inf"))
            return torch.softmax(s, dim=-1)

    m = Masked().eval()
    with fx_config.patch(backed_size_oblivious=True), torch.no_grad():
        cf = torch.compile(m, backend="stax", dynamic=True)
        for b, t in ((2, 8), (3, 13), (1, 64), (5, 1), (4, 40)):
            x = torch.randn(b, t, 16)
            _close(cf(x), m(x))
    assert all(r.route == "stax-cpu" for r in B.reports()), [r.summary() for r in B.reports()]
    (v,) = _dynamic_report().variants   # one compile served every size
    assert v.dynamic and v.calls >= 4   # (a length of 1 may be a graph of its own)


def test_size_assert_evaluates_torch_size_functions():
    import sympy
    from torch.utils._sympy.functions import FloorDiv
    u0, s1 = sympy.symbols("u0 s1", integer=True, positive=True)
    a = SizeAssert(sympy.Eq(s1, sympy.Min(64, u0)), "m")
    assert a.symbols == ["s1", "u0"]
    assert a.holds({"u0": 80, "s1": 64}) and not a.holds({"u0": 8, "s1": 64})
    assert a.holds({"u0": 8, "s1": 8})
    b = SizeAssert(sympy.Le(FloorDiv(u0 + 3, 4), s1), "m")
    assert b.holds({"u0": 13, "s1": 4}) and not b.holds({"u0": 13, "s1": 3})


def test_unbacked_length_of_zero_keeps_eager_strides(graph_calls):
    """Torch writes the strides of a contiguous [4, u0, 512] as [512*Max(1, u0), 512, 1];
    the graph reads them as 512*u0, which differs only when the output is empty: there
    the output still has eager's strides."""
    m = CheckedLength(most=64, width=32).eval()
    cf = torch.compile(m, backend="stax")
    with torch.no_grad():
        x = _unbacked(torch.randn(4, 16, 32))
        _close(cf(x), m(x))
        graph, args = graph_calls[-1]
        empty = torch.randn(4, 0, 32)
        zero = [0 if isinstance(a, int) and a == 16 else
                empty if isinstance(a, torch.Tensor) and a.shape == x.shape else a
                for a in args]
        (got,) = graph(zero)
    want = m(empty)
    assert got.shape == want.shape == (4, 0, 32)
    assert got.stride() == want.stride() == (32, 32, 1), (got.stride(), want.stride())


def test_mark_unbacked_sizes_including_0_and_1_compile_once():
    """An unbacked batch has no 0/1 specialization: 0 and 1 reach the one dynamic graph,
    which checks Dynamo's `u0 >= 0` and gives eager's values and strides at each (an
    empty batch included: the sum over it is zeros)."""
    def f(x):
        return torch.tanh(x) * 2 + x.sum(0)

    cf = torch.compile(f, backend="stax")
    for n in (3, 1, 6, 0, 3, 600):
        x = torch.randn(n, 512)
        torch._dynamo.decorators.mark_unbacked(x, 0)
        _close(cf(x), f(x))
    (v,) = _dynamic_report().variants
    assert v.dynamic and v.calls == 6 and v.route == "stax-cpu"
