"""Slices of a symbolic dim with a static length compile once: from its end
(`logits[:, -1]` of a growing sequence, `x[:, -3:]`, `x[:, -4:-1:2]`) and to a static
limit (a CLS token's `x[:, 0]`, `x[:, :4]`), as top-level views and inside kernels, on
the CPU and the Triton target (interpreted here). The dim must hold what the slice
reads: the dynamic graph guards it before anything runs (StaxGuardError naming the
argument, the symbol, the size and the bound)."""
from __future__ import annotations

import pytest
import torch

import stax.backend as B
from stax.dynamic_compile import DynamicShapes
from stax.errors import StaxGuardError
from grad_check import same_forward_and_backward
from test_dynamic_gpu import counts, interpreted_triton  # noqa: F401

pytestmark = pytest.mark.usefixtures("stax_strict")

CASES = {
    "last": lambda x: x[:, -1] * 2,                       # a view, then a kernel
    "last_three": lambda x: torch.tanh(x[:, -3:]) + 1,
    "from_the_end_by_2": lambda x: x[:, -4:-1:2].sum(1),
    "first_and_last": lambda x: x[:, 0] + x[:, -1],
    "first_four": lambda x: x[:, :4].softmax(-1),
    "inside_a_kernel": lambda x: x.exp()[:, 1] + x.exp()[:, -2],
    "last_of_last_dim": lambda x: x[..., -1:] * x,        # broadcast back over the dim
    "window_from_start": lambda x: x[:, 1:3] * 3,
    "window_from_end": lambda x: x[:, -4:-1].exp(),
}


def _target(where, request):
    """(sizes to call with, the expected route) for `where`; the interpreted Triton route
    takes small sizes; `cuda` is skipped without a GPU."""
    if where == "triton":
        request.getfixturevalue("interpreted_triton")
    if where == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    sizes = [9, 5, 13] if where == "triton" else [9, 16, 37, 5, 100, 1031]
    return sizes, "stax-cpu" if where == "stax-cpu" else "triton"


def _compiles_once(fn, sizes, where, route, counts):
    """`fn` compiled with dynamic=True and called at `sizes` of dim 1 (values and strides
    against eager): one dynamic compile on `route` serves them all. Its report."""
    cf = torch.compile(fn, backend="stax", dynamic=True)
    for n in sizes:
        x = torch.randn(3, n, 40) if where == "triton" else \
            torch.randn(257 if where == "cuda" else 3, n, 520,
                        device="cuda" if where == "cuda" else "cpu")
        got, want = cf(x), fn(x)
        assert got.shape == want.shape and got.stride() == want.stride(), n
        torch.testing.assert_close(got, want, rtol=2e-4, atol=2e-4)
    (rep,) = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    assert rep.route == route and rep.fallback_reason is None, rep.summary()
    assert counts == {"static": 0, "dynamic": 1}, rep.summary()
    return rep


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_fixed_length_slices_of_a_symbolic_dim(case, where, counts, request):
    sizes, route = _target(where, request)
    rep = _compiles_once(CASES[case], sizes, where, route, counts)
    (v,) = rep.variants
    assert v.dynamic and v.calls == len(sizes)


@pytest.mark.parametrize("case", ["last", "first_and_last", "inside_a_kernel", "last_three",
                                  "first_four", "window_from_start", "window_from_end"])
@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_their_backward_compiles_once_too(case, where, counts, request):
    """The backward of `x[:, -1]` (select_backward: `where(eq(iota, s - 1), grad, 0)`)
    reads the size `s - 1` as a value: a sum of stax.size_value terms. It was refused
    ("reads the size ... as a value"), so a CLS or last-token head trained per size. The
    backward of a window of static length at either end (`x[:, -3:]`, `x[:, :4]`,
    `x[:, 1:3]`, `x[:, -4:-1]`) is a slice_scatter: the pieces of the gradient's zeros
    around it, concatenated (it was refused too)."""
    sizes, route = _target(where, request)
    dev = "cuda" if where == "cuda" else "cpu"
    fn = CASES[case]
    cf = torch.compile(fn, backend="stax", dynamic=True)
    for n in sizes:
        x = torch.randn(3 if where == "triton" else 257, n, 40 if where == "triton" else 520,
                        device=dev, requires_grad=True)
        same_forward_and_backward(cf, fn, x, tol=dict(rtol=2e-4, atol=2e-4))
    (rep,) = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    assert rep.route == route and rep.fallback_reason is None, rep.summary()
    (v,) = rep.variants
    assert v.dynamic and v.calls == len(sizes), rep.summary()
    assert counts["static"] == 0, counts


@pytest.mark.parametrize("case", ["last_three", "first_four"])
def test_a_dim_too_short_for_the_slice_is_refused_before_anything_runs(case, dynamic_calls):
    """Dynamo guards the bound (a shorter dim is a recompile); called straight, the
    graph refuses it too, naming the argument, its symbol, the size and the bound."""
    fn = CASES[case]
    cf = torch.compile(fn, backend="stax", dynamic=True)
    for n in (9, 16):
        x = torch.randn(3, n, 8)
        torch.testing.assert_close(cf(x), fn(x))
    g, args = dynamic_calls[-1]
    x_check = next(c for c in g.checks if c.kind == "tensor" and len(c.dims) == 3)
    sym = x_check.dims[1]
    bad = [2 if c.kind == "symbol" and c.symbol == sym else
           torch.randn(3, 2, 8) if c.index == x_check.index else a
           for c, a in zip(g.checks, args)]
    need = 3 if case == "last_three" else 4
    with pytest.raises(StaxGuardError, match=rf"\(symbol {sym}\) is 2.*expected {sym} >= "
                                             rf"{need}"):
        g(bad)


class Decoder(torch.nn.Module):
    """Greedy decoding without a cache: the whole prefix each step, the next token from
    the last position's logits (`logits[:, -1]`)."""

    def __init__(self, vocab=64, width=32):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, width)
        self.fc = torch.nn.Linear(width, width)
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, tokens):
        h = self.emb(tokens)
        h = h + torch.tanh(self.fc(h))
        return self.head(h)[:, -1].argmax(-1)


@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_greedy_decoding_over_a_growing_sequence_compiles_once(where, counts, request):
    """The argmax of the last position's logits is a runtime-size kernel on both targets
    (on the GPU it went per size before the Triton generator took argmax)."""
    if where == "triton":
        request.getfixturevalue("interpreted_triton")
    if where == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    dev = "cuda" if where == "cuda" else "cpu"
    torch.manual_seed(0)
    vocab, batch, steps = (2048, 64, 10) if where == "cuda" else (64, 4, 8)
    model = Decoder(vocab=vocab).eval().to(dev)
    cf = torch.compile(model, backend="stax")   # automatic dynamic: the second length
    tokens = torch.randint(0, vocab, (batch, 3), device=dev)
    with torch.no_grad():
        for _ in range(steps):
            nxt = cf(tokens)
            assert torch.equal(nxt, model(tokens)), tokens.shape[1]
            tokens = torch.cat([tokens, nxt[:, None]], 1)
    reps = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    assert len(reps) == 1, [r.summary() for r in B.reports()]
    route = "stax-cpu" if where == "stax-cpu" else "triton"
    (v,) = reps[0].variants
    assert v.dynamic and v.calls == steps - 1 and reps[0].route == route, reps[0].summary()
    assert counts == {"static": 1, "dynamic": 1}, counts   # the first length was static


#: bounds written from the dim's own size (session 33): `T - 1` is `-1`, `T - 3` is `-3`
SIZE_RELATIVE = {
    "to_size_minus_one": lambda x: x[:, :x.shape[1] - 1] * 2,
    "from_size_minus_three": lambda x: x[:, x.shape[1] - 3:] + 1,
    "one_to_size": lambda x: torch.tanh(x[:, 1:x.shape[1]]),
    "two_to_size_minus_two": lambda x: x[:, 2:x.shape[1] - 2] * 3,
}


@pytest.mark.parametrize("case", sorted(SIZE_RELATIVE))
@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_bounds_written_from_the_size_compile_once(case, where, counts, request):
    # they were refused ("a slice [0:s27 - 1:1] of part of the symbolic dim", "a slice
    # with the start s27 - 3"): per size
    sizes, route = _target(where, request)
    if case == "two_to_size_minus_two":   # (T - 4 = 1 at T = 5: Dynamo's 0/1 graph)
        sizes = [n for n in sizes if n != 5]
    _compiles_once(SIZE_RELATIVE[case], sizes, where, route, counts)


def test_a_bound_from_the_size_trains_with_one_compile(counts):
    """The shifted-sequence form `h[:, :T - 1]` in training: forward and backward once."""
    w = torch.randn(520, 520, requires_grad=True)

    def f(x):
        h = torch.tanh(x @ w)
        return h[:, :h.shape[1] - 1] * h[:, 1:]

    cf = torch.compile(f, backend="stax", dynamic=True)
    for n in (9, 16, 37, 5, 100):
        x = torch.randn(3, n, 520, requires_grad=True)
        xr = x.detach().clone().requires_grad_(True)
        got, want = cf(x), f(xr)
        g = torch.randn_like(want)
        got.backward(g)
        gw = w.grad.clone()
        w.grad = None
        want.backward(g)
        torch.testing.assert_close(got, want, rtol=2e-4, atol=2e-4)
        torch.testing.assert_close(x.grad, xr.grad, rtol=2e-4, atol=2e-4)
        torch.testing.assert_close(gw, w.grad, rtol=2e-3, atol=2e-3)
        w.grad = None
    (rep,) = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    assert rep.route == "stax-cpu" and rep.specializer.training, rep.summary()
    assert counts == {"static": 0, "dynamic": 2}, rep.summary()
