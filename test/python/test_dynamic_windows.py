"""Slices whose bounds the symbols cannot prove, compiled once under the graph's own
check: a start that is an int argument (`freqs[pos:pos + T]`, a decode step's rotary
table; `x[n:n + 4]`; `x[:, n:]`) and the halves of a chunk of an odd size (pieces of
`(s + 1)//2` and the rest: `a, b = x.chunk(2)` over a symbolic dim).

Before, the symbolic importer refused them ("a static start is needed", "cannot be proved
to fit at every size") and each graph was compiled per size. Now such a window is a
gather of `iota(length) + start`, and the dynamic graph checks `0 <= start`, `0 <=
length` and `start + length <= size` with every call's sizes before anything runs
(`ops_views._guard_window`): Dynamo guards the same bounds, so a call through
torch.compile meets them; a direct call that does not raises StaxGuardError, never
reads outside. CPU, interpreted Triton and CUDA; forward and backward.
"""
from __future__ import annotations

import pytest
import torch

import stax.backend as B
from test_dynamic_gpu import counts, interpreted_triton  # noqa: F401
from test_dynamic_size_asserts import graph_calls  # noqa: F401
from stax.dynamic_compile import DynamicShapes
from stax.errors import StaxGuardError
from test_dynamic_prefix_slices import _where, assert_dynamic_only, outputs_of

pytestmark = pytest.mark.usefixtures("stax_strict")
TOL = dict(rtol=1e-5, atol=1e-5)


def rotary_window(x, table, pos):   # the decode step's rows of a rotary table
    return x * table[pos:pos + x.shape[0]]


def rows_from(x, n):
    return x[n:n + 4] * 2


def columns_from(x, n):
    return torch.tanh(x[:, n:])


def glu_halves(x):   # F.glu: x.chunk(2, -1), a symbolic last dim, odd or even
    a, b = x.chunk(2, dim=-1)
    return a.sum(-1) + b.sum(-1) * 0.5


def row_halves(x):
    a, b = x.chunk(2, dim=0)
    return a * 2, b + 1


def _args(case, n, s, dev):
    if case == "rotary_window":
        return torch.randn(n, s, device=dev), torch.randn(n + 40, s, device=dev), n % 37
    if case == "rows_from":
        return torch.randn(n + 8, s, device=dev), n % 5
    if case == "columns_from":
        return torch.randn(n, s + 4, device=dev), s % 4
    return (torch.randn(n + 2, s + 2, device=dev),)   # chunks of 2 and more


CASES = {"rotary_window": rotary_window, "rows_from": rows_from,
         "columns_from": columns_from, "glu_halves": glu_halves, "row_halves": row_halves}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_windows_compile_once(case, where, counts, request):
    dev, sizes, route = _where(where, request)
    fn = CASES[case]
    cf = torch.compile(fn, backend="stax", dynamic=True)
    for n, s in sizes:
        args = _args(case, n, s, dev)
        for got, want in zip(outputs_of(cf(*args)), outputs_of(fn(*args))):
            assert got.shape == want.shape and got.stride() == want.stride()
            torch.testing.assert_close(got, want, **TOL)
    assert_dynamic_only(route, counts, most=2)


@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_odd_halves_train_with_one_compile(where, counts, request):
    """A chunk of an odd width in training: the backward concatenates the halves'
    gradients ([n, (s + 1)//2] and [n, s - (s + 1)//2], provably [n, s]).

    Not F.glu: its backward writes the width as `2*(s//2)`, equal to `s` only under
    Dynamo's guard that it is even, which the symbols cannot show; it compiles per size."""
    dev, sizes, route = _where(where, request)

    def fn(x, w):
        a, b = (x @ w).chunk(2, dim=-1)
        return torch.sigmoid(b.sum(-1, keepdim=True)) * a

    cf = torch.compile(fn, backend="stax", dynamic=True)
    for n, s in sizes:
        x = torch.randn(n, 32, device=dev, requires_grad=True)
        w = torch.randn(32, 2 * s + 1, device=dev, requires_grad=True)   # odd widths
        # eager in float32 and in float64: stax's error against float64 is at most a
        # few times eager's own (fp32 matmul sums over 32 and over the rows)
        x2, w2 = (t.detach().clone().requires_grad_(True) for t in (x, w))
        x3, w3 = (t.detach().clone().double().requires_grad_(True) for t in (x, w))
        got, want, exact = cf(x, w), fn(x2, w2), fn(x3, w3)
        g = torch.randn_like(want)
        for t, gg in ((got, g), (want, g), (exact, g.double())):
            t.backward(gg)
        for a, e, r in ((got, want, exact), (x.grad, x2.grad, x3.grad),
                        (w.grad, w2.grad, w3.grad)):
            assert a.shape == e.shape and a.stride() == e.stride()
            err, eager_err = ((t.double() - r).abs().max().item() for t in (a, e))
            assert err <= 4 * eager_err + 1e-6 * r.abs().max().item(), (err, eager_err)
    assert_dynamic_only(route, counts, most=2)


def test_a_window_past_the_dim_raises(graph_calls):
    """Through torch.compile Dynamo guards `pos + T <= rows`; the graph, called directly
    with a position past the table, must raise and name the sizes, never read."""
    cf = torch.compile(rotary_window, backend="stax", dynamic=True)
    x, table = torch.randn(6, 16), torch.randn(50, 16)
    torch.testing.assert_close(cf(x, table, 3), rotary_window(x, table, 3))
    torch.testing.assert_close(cf(x, table, 7), rotary_window(x, table, 7))
    graph, args = graph_calls[-1]
    assert any(a.kind == "window" for a in graph.size_asserts)
    bad = [47 if isinstance(a, int) and a == 7 else a for a in args]   # rows 47..52 of 50
    with pytest.raises(StaxGuardError) as e:
        graph(bad)
    msg = str(e.value)
    assert "is 47" in msg and "would be read outside the dim" in msg, msg
    torch.testing.assert_close(graph(args)[0], rotary_window(x, table, 7))


class DecodeAttention(torch.nn.Module):
    """A reference-Llama-style decode step: an int `start_pos`, a rotary table sliced at
    it, the new keys and values written into preallocated caches in place at it, and
    attention over the cache up to `start_pos + T`."""

    def __init__(self, dim=64, most=128, batch=2):
        super().__init__()
        self.wq, self.wk, self.wv = (torch.nn.Linear(dim, dim) for _ in range(3))
        self.register_buffer("cache_k", torch.zeros(batch, most, dim))
        self.register_buffer("cache_v", torch.zeros(batch, most, dim))
        self.register_buffer("freqs", torch.randn(most, dim))

    def forward(self, x, start_pos: int):
        b, t, _ = x.shape
        f = self.freqs[start_pos:start_pos + t]
        q, k, v = self.wq(x) * f, self.wk(x) * f, self.wv(x)
        self.cache_k[:b, start_pos:start_pos + t] = k
        self.cache_v[:b, start_pos:start_pos + t] = v
        keys, values = self.cache_k[:b, :start_pos + t], self.cache_v[:b, :start_pos + t]
        return torch.softmax(q @ keys.transpose(1, 2) * 0.125, dim=-1) @ values


@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_decode_loop_with_an_int_position_compiles_once(where, counts, request):
    """A prefill of 5 tokens, then one token per step at positions 5, 6, ...: after
    Dynamo's first (static) graph and its second (the position made symbolic), one
    dynamic compile serves every step; outputs and both caches match eager's at every
    step. Before, every position was a compile, and past stax's cap of 8 variants the
    steps ran as written by PyTorch."""
    dev, _, route = _where(where, request)
    torch.manual_seed(0)
    model = DecodeAttention().to(dev).eval()
    ref = DecodeAttention().to(dev).eval()
    ref.load_state_dict(model.state_dict())
    cf = torch.compile(model, backend="stax")
    steps = 12 if where != "triton" else 5
    with torch.no_grad():
        x = torch.randn(2, 5, 64, device=dev)
        torch.testing.assert_close(cf(x, 0), ref(x, 0), rtol=1e-4, atol=1e-4)
        for pos in range(5, 5 + steps):
            x = torch.randn(2, 1, 64, device=dev)
            torch.testing.assert_close(cf(x, pos), ref(x, pos), rtol=1e-4, atol=1e-4)
            torch.testing.assert_close(model.cache_k, ref.cache_k)
            torch.testing.assert_close(model.cache_v, ref.cache_v)
    reps = B.reports()
    dynamic = [r for r in reps if isinstance(r.specializer, DynamicShapes)]
    assert len(dynamic) == 1, [r.summary() for r in reps]
    (v,) = dynamic[0].variants
    assert v.dynamic and v.calls >= steps - 1 and dynamic[0].route == route, \
        dynamic[0].summary()
    assert counts["dynamic"] == 1


def test_glu_backward_says_why_it_is_per_size():
    """F.glu's backward writes the width as `2*(s//2)`, equal to `s` only under Dynamo's
    guard that s is even: the importer refuses the matmul with that reason (it used to
    build IR that failed to verify), and the sizes run compiled per size, right."""
    import torch.nn.functional as F

    def fn(x, w):
        return F.glu(x @ w, dim=-1)

    cf = torch.compile(fn, backend="stax", dynamic=True)
    for n, s in [(256, 256), (300, 17), (7, 50)]:
        x = torch.randn(n, 32, requires_grad=True)
        w = torch.randn(32, 2 * s, requires_grad=True)
        x2, w2 = (t.detach().clone().requires_grad_(True) for t in (x, w))
        got, want = cf(x, w), fn(x2, w2)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        got.sum().backward()
        want.sum().backward()
        torch.testing.assert_close(w.grad, w2.grad, rtol=1e-3, atol=1e-3)
    text = " ".join(n for r in B.reports() for n in r.notes)
    assert "contraction sizes 2*fdiv2_" in text and "invalid IR" not in text, text
