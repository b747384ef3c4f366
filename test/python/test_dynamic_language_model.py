"""A language model trained with dynamic batch and sequence length: one compile.

Token and position embeddings (a gather of a symbolic number of rows; its backward an
accumulating `index_put` PyTorch runs), a block, the LM head and the shifted
next-token loss (`logits[:, :-1]` against `tokens[:, 1:]`, with ignored positions). Its
backward scatters into a slice of the symbolic sequence dim (`slice_scatter`), which
imports as a pad by static amounts. Every call: loss, logits and every parameter
gradient against eager and a float64 copy; the one dynamic variant, never a per-size
compile, route `stax-cpu` / `triton`.
"""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import stax.backend as B
from stax.dynamic_compile import DynamicShapes
from test_dynamic_gpu import HAS_CUDA, _close_to_oracle, counts, interpreted_triton  # noqa: F401

pytestmark = pytest.mark.usefixtures("stax_strict")


class TinyLM(torch.nn.Module):
    def __init__(self, vocab=96, width=32, max_len=80):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, width)
        self.pos = torch.nn.Embedding(max_len, width)
        self.norm = torch.nn.LayerNorm(width)
        self.fc = torch.nn.Linear(width, width)
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, tokens, labels):
        t = tokens.shape[1]
        h = self.tok(tokens) + self.pos(torch.arange(t, device=tokens.device))
        h = h + F.gelu(self.fc(self.norm(h)))
        logits = self.head(h)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                               labels[:, 1:].reshape(-1), ignore_index=-100)
        return loss, logits


def _batch(b, t, vocab, device):
    tokens = torch.randint(0, vocab, (b, t), device=device)
    labels = tokens.clone()
    labels[torch.rand(b, t, device=device) < 0.1] = -100   # padding the loss ignores
    return tokens, labels


def _train(shapes, route, device="cpu", vocab=96, width=32):
    torch.manual_seed(0)
    ref = TinyLM(vocab, width).to(device)
    mine, m64 = copy.deepcopy(ref), copy.deepcopy(ref).double()
    cf = torch.compile(mine, backend="stax", dynamic=True)
    for b, t in shapes:
        tokens, labels = _batch(b, t, vocab, device)
        loss_r, logits_r = ref(tokens, labels)
        loss_m, logits_m = cf(tokens, labels)
        loss64, logits64 = m64(tokens, labels)
        _close_to_oracle(loss_m, loss_r.detach(), loss64.detach(), ("loss", b, t))
        _close_to_oracle(logits_m, logits_r.detach(), logits64.detach(), ("logits", b, t))
        g = torch.randn_like(logits_r)
        (loss_r + (logits_r * g).sum()).backward()
        (loss_m + (logits_m * g).sum()).backward()
        (loss64 + (logits64 * g.double()).sum()).backward()
        for (name, pr), pm, p64 in zip(ref.named_parameters(), mine.parameters(),
                                       m64.parameters()):
            _close_to_oracle(pm.grad, pr.grad, p64.grad, (f"{name}.grad", b, t))
            pr.grad = pm.grad = p64.grad = None
    return _one_compile_per_dynamo_graph(len(shapes), route)


def _one_compile_per_dynamo_graph(calls, route):
    """Every Dynamo graph (a batch of 1 and a loss over 1 position are Dynamo's own 0/1
    recompiles) is one dynamic stax compile, route `route`; together they served every
    call, none of them per size."""
    reps = B.reports()
    assert all(isinstance(r.specializer, DynamicShapes) for r in reps), \
        [r.summary() for r in reps]
    assert len(reps) <= 3, [r.summary() for r in reps]
    served = 0
    for rep in reps:
        (v,) = rep.variants
        assert v.dynamic, rep.summary()
        assert rep.route == route and rep.fallback_reason is None, rep.summary()
        assert all(g.route == route for g in rep.graphs), rep.summary()
        served += v.calls
    assert served == calls
    return reps


# (batch, sequence) under dynamic=True: one dynamic compile serves them all;
# a sequence of 2 leaves one predicted position, 1 and primes included
SHAPES = [(4, 8), (3, 13), (1, 17), (5, 2), (2, 31), (7, 64), (11, 5)]


def test_language_model_trains_with_one_compile(counts):
    reps = _train(SHAPES, "stax-cpu")
    # its forward and its backward, once per Dynamo graph
    assert counts == {"static": 0, "dynamic": 2 * len(reps)}, counts
    # the embeddings' backward is PyTorch's accumulating index_put, in the one compile
    assert all(any("aten.index_put.default" in g.fallback_ops for g in rep.graphs)
               for rep in reps)


def test_language_model_trains_with_one_compile_triton(counts, interpreted_triton):
    reps = _train(SHAPES[:4], "triton")
    assert counts == {"static": 0, "dynamic": 2 * len(reps)}, counts
    assert interpreted_triton["sized"] > 0


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_language_model_trains_with_one_compile_cuda(counts):
    # real sizes: a vocabulary of 4096, width 512, up to 256 x 64 tokens
    reps = _train([(8, 64), (16, 37), (256, 17), (3, 2), (64, 64), (1, 61)], "triton",
                  device="cuda", vocab=4096, width=512)
    assert counts == {"static": 0, "dynamic": 2 * len(reps)}, counts


def test_language_model_inference_at_width_512(counts):
    """Logits of a 4096-word model of width 512 over 256 x 24 tokens and other shapes,
    equal to eager in value, shape and strides."""
    torch.manual_seed(0)
    model = TinyLM(4096, 512).eval()
    cf = torch.compile(model, backend="stax", dynamic=True)
    with torch.no_grad():
        for b, t in [(2, 8), (256, 24), (3, 7), (1, 40)]:
            tokens, labels = _batch(b, t, 4096, "cpu")
            (loss, logits), (loss_r, logits_r) = cf(tokens, labels), model(tokens, labels)
            assert logits.stride() == logits_r.stride()
            torch.testing.assert_close(logits, logits_r, rtol=2e-4, atol=2e-4)
            torch.testing.assert_close(loss, loss_r, rtol=2e-4, atol=2e-4)
    reps = _one_compile_per_dynamo_graph(4, "stax-cpu")
    assert counts == {"static": 0, "dynamic": len(reps)}, counts


SCATTERS = {
    # the backward of a slice from the start / to the end, as aot_autograd writes it,
    # and over a base that is not a zero fill (a padded mask picks)
    "from_1": lambda x: torch.slice_scatter(x, torch.tanh(x[:, 1:]), 1, 1),
    "to_minus_2": lambda x: torch.slice_scatter(x * 3, x[:, 2:] - 1, 1, 0, -2),
    "middle": lambda x: torch.slice_scatter(x, x[:, 3:] * 2, 1, 1, -2),
    "zeros": lambda x: torch.slice_scatter(torch.zeros_like(x), x[:, :-1].exp(), 1, 1),
}


@pytest.mark.parametrize("case", sorted(SCATTERS))
def test_slice_scatter_along_a_symbolic_dim(case, counts):
    fn = SCATTERS[case]
    cf = torch.compile(fn, backend="stax", dynamic=True)
    for n in [9, 16, 37, 5, 100]:
        x = torch.randn(3, n, 520)
        got, want = cf(x), fn(x)
        assert got.shape == want.shape and got.stride() == want.stride(), (case, n)
        torch.testing.assert_close(got, want, rtol=2e-4, atol=2e-4)
    (rep,) = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    assert rep.route == "stax-cpu" and rep.fallback_reason is None, rep.summary()
    assert counts == {"static": 0, "dynamic": 1}, counts
