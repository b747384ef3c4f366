"""The test models stay dynamic on the CPU (issue 10, inference): each model of
test/python/models.py, compiled with `dynamic=True` under torch.no_grad(), is compiled
ONCE (stax.dynamic_compile) and serves every (batch, sequence) size natively.

Every call is compared with eager on fresh random inputs (values with a float32
tolerance, shape, strides, dtype) and must have run the one dynamic variant on route
stax-cpu; the compiles are counted (static graphs through driver.compile_graph, dynamic
builds, runtime-size kernel lowerings). Batch and sequence 1 reach the one compile under
`backed_size_oblivious` (otherwise Dynamo compiles a static graph of its own for them).
The causal mask's slice of a static buffer to the sequence length is guarded: a
sequence above the buffer is an error (Dynamo's, and the dynamic graph's own).
"""
from __future__ import annotations

import pytest
import torch
import torch.fx.experimental._config as fx_config
import torch.nn.functional as F
from torch._dynamo.utils import counters

import stax.backend as B
from models import GPT2Block, LlamaBlock, make_inputs, make_model
from stax import driver, dynamic_compile
from stax.dynamic_compile import DynamicGraph, DynamicShapes
from stax.errors import StaxGuardError
from stax.targets import cpu_symbolic

_TORCH = torch.torch_version.TorchVersion(torch.__version__)

pytestmark = pytest.mark.usefixtures("stax_strict")

TOL = dict(rtol=2e-4, atol=2e-4)

# (batch, seq): 6+ distinct pairs with 1, primes (17 for the batch; 13, 31 for the
# sequence) and sizes above the first; the sequence stays within max_seq (128). A
# sequence of 1 is Dynamo's own recompile for the attention blocks (its matmul
# decomposition guards `x.size()[1] != 1`), so they take batch 1 with longer sequences
SHAPES = [(2, 8), (1, 2), (17, 13), (3, 31), (1, 64), (4, 5), (2, 8)]
# SDPA's decomposition makes Dynamo guard the batch too (`64*s0 != 64`): batch 1 is a
# Dynamo graph of its own there, so these take batches >= 2 (and still two primes)
SDPA_SHAPES = [(2, 8), (17, 13), (3, 31), (2, 64), (4, 5), (5, 2), (2, 8)]


@pytest.fixture
def counts(monkeypatch):
    got = {"static": 0, "dynamic": 0, "lowered": 0}

    def counting(key, fn):
        def wrapped(*a, **k):
            got[key] += 1
            return fn(*a, **k)
        return wrapped
    monkeypatch.setattr(driver, "compile_graph", counting("static", driver.compile_graph))
    monkeypatch.setattr(B, "compile_graph", counting("static", B.compile_graph))
    monkeypatch.setattr(dynamic_compile, "_build", counting("dynamic", dynamic_compile._build))
    monkeypatch.setattr(cpu_symbolic._RuntimeSizeLowering, "lower",
                        counting("lowered", cpu_symbolic._RuntimeSizeLowering.lower))
    return got


def _close(got, ref):
    assert got.shape == ref.shape and got.dtype == ref.dtype, (got.shape, ref.shape)
    assert got.stride() == ref.stride(), (got.stride(), ref.stride())
    torch.testing.assert_close(got, ref, **TOL)


def _dynamic_reports():
    reps = B.reports()
    assert all(isinstance(r.specializer, DynamicShapes) for r in reps), \
        [r.summary() for r in reps]
    return reps


def _run(model, shapes, make, counts, graphs=1):
    """Compile `model` with dynamic=True and run it at every shape against eager: every
    call runs a dynamic variant (route stax-cpu, never per size, never a fallback), and
    there are `graphs` Dynamo graphs, each compiled once. Returns the first report."""
    model = model.eval()
    cf = torch.compile(model, backend="stax", dynamic=True)
    counters.clear()
    with fx_config.patch(backed_size_oblivious=True), torch.no_grad():
        for i, shape in enumerate(shapes):
            ins = make(*shape)
            got = cf(*ins)
            _close(got, model(*ins))
            reps = _dynamic_reports()
            assert sum(v.calls for r in reps for v in r.variants) == i + 1
            for r in reps:
                (v,) = r.variants
                assert v.dynamic and v.route == "stax-cpu", r.summary()
                assert r.route == "stax-cpu" and r.fallback_reason is None, r.summary()
    reps = _dynamic_reports()
    # stax compiles each Dynamo graph once. How many graphs Dynamo makes is its own: on
    # torch 2.11 the CPU convolution's fake kernel guards the batch where 2.13's does not
    assert len(reps) == counters["stats"]["unique_graphs"], [r.summary() for r in reps]
    if _TORCH >= (2, 13):
        assert len(reps) == graphs, [r.summary() for r in reps]
    assert counts["static"] == 0 and counts["dynamic"] == len(reps), counts
    gs = [r.graphs[0] for r in reps]
    assert all(isinstance(g, DynamicGraph) for g in gs)
    assert sum(g.calls for g in gs) == len(shapes)
    assert counts["lowered"] == sum(1 for g in gs for k in g.kernels
                                    if hasattr(k, "symbols")) >= 1
    return reps[0]


def _seq_model_inputs(name, dim):
    return lambda b, t: make_inputs(name, b, t, dim=dim)


@pytest.mark.parametrize("use_sdpa", [False, True], ids=["written_out", "sdpa"])
def test_gpt2_block_one_compile(counts, use_sdpa):
    # qkv split, the causal mask bias[:, :, :T, :T] (a static buffer sliced to the
    # sequence length) or SDPA's decomposition (arange, logical ops, any), softmax over
    # the symbolic last dim, bmm with symbolic dims, transpose + view
    # (the written-out block at GPT-2's width, 768)
    dim, heads = (64, 4) if use_sdpa else (768, 12)
    r = _run(GPT2Block(dim=dim, n_heads=heads, use_sdpa=use_sdpa),
             SDPA_SHAPES if use_sdpa else SHAPES, _seq_model_inputs("gpt2", dim), counts)
    assert len(r.variants[0].sizes) == 2   # batch and sequence
    g = r.graphs[0]
    # 4 projections and the attention: sdpa's decomposition is 2 bmm, the written-out
    # masked softmax one stax.masked_attention (stax-fuse-attention)
    assert not g.fallback_ops and len(g.library_calls) == (6 if use_sdpa else 5), \
        g.library_calls
    if not use_sdpa:
        assert sum("(stax.masked_attention," in c for c in g.library_calls) == 1
    if not use_sdpa:   # the mask's slice is guarded: s1 <= 128
        assert [(x.most, x.size) for x in g.length_guards] == [(128, 128)] * 2


@pytest.mark.parametrize("use_sdpa", [False, True], ids=["written_out", "sdpa"])
def test_llama_block_one_compile(counts, use_sdpa):
    # RMSNorm, cos_cached[:T], rotate_half (slices + cat along the static head dim),
    # arange(T) and the i >= j mask with finfo.min, or SDPA
    r = _run(LlamaBlock(dim=64, n_heads=4, use_sdpa=use_sdpa),
             SDPA_SHAPES if use_sdpa else SHAPES, _seq_model_inputs("llama", 64), counts)
    g = r.graphs[0]
    assert not g.fallback_ops
    assert {(x.most, x.size) for x in g.length_guards} == {(128, 128)}   # cos/sin[:T]


def test_conv_bn_relu_eval_one_compile(counts):
    # dynamic batch and image size: the convolution runs through PyTorch (a fallback op,
    # as in the static path), batch_norm (eval) and relu in a runtime-size kernel. The
    # CPU convolution's fake kernel makes Dynamo guard the batch <= 15 (a larger batch
    # is a Dynamo graph of its own), so the primes here are 13 and 11, and 17 for H, W
    model = make_model("conv_bn_relu")
    shapes = [(2, 8), (1, 5), (13, 9), (3, 17), (11, 7), (2, 8)]
    r = _run(model, shapes, lambda b, hw: make_inputs("conv_bn_relu", b, hw), counts)
    assert r.graphs[0].fallback_ops == ["aten.convolution.default"]


def test_mlp_realistic_batch(counts):
    shapes = [(256, 1), (1, 1), (257, 3), (17, 2), (300, 1), (512, 1)]
    model = make_model("mlp", in_features=512, hidden=1024, out_features=512)
    r = _run(model, shapes, _seq_model_inputs("mlp", 512), counts)
    assert len(r.graphs[0].library_calls) == 3


def test_cross_entropy_head_one_compile(counts):
    # log_softmax + nll_loss_forward (mean over the symbolic batch: sum of the picked
    # log-probabilities over the sum of the weights)
    class Head(torch.nn.Module):
        def forward(self, logits, target):
            return F.cross_entropy(logits, target)

    def make(b, _):
        return torch.randn(b, 1000), torch.randint(0, 1000, (b,))
    _run(Head(), [(8, 0), (1, 0), (257, 0), (17, 0), (300, 0), (3, 0)], make, counts)


# ----------------------------------------------------------------------------- guards

def test_sequence_above_the_causal_mask_is_an_error(counts, dynamic_calls):
    # bias[:, :, :T, :T] of a 128-long buffer: eager cannot take T = 200 (the mask
    # stops at 128); Dynamo's guard s1 <= 128 fails, it traces again and raises the
    # same error. The dynamic graph guards the slice too, before any kernel runs
    model = GPT2Block(dim=32, n_heads=2, max_seq=128).eval()
    cf = torch.compile(model, backend="stax", dynamic=True)
    with fx_config.patch(backed_size_oblivious=True), torch.no_grad():
        for b, t in ((2, 8), (3, 13)):
            x = torch.randn(b, t, 32)
            _close(cf(x), model(x))
        big = torch.randn(2, 200, 32)
        with pytest.raises(RuntimeError):
            model(big)
        with pytest.raises(Exception, match="size|broadcast|match"):
            cf(big)
    # the graph's own guard: the same call straight into the compiled graph, with
    # the sequence symbol at 200
    g, args = dynamic_calls[-1]
    x_check = next(c for c in g.checks if c.kind == "tensor" and len(c.dims) == 3
                   and isinstance(c.dims[1], str))
    seq_sym, x_index = x_check.dims[1], x_check.index
    bad = []
    for c, a in zip(g.checks, args):
        if c.kind == "symbol" and c.symbol == seq_sym:
            bad.append(200)
        elif c.index == x_index:   # the recorded call's batch, a longer sequence
            bad.append(torch.randn(args[x_index].shape[0], 200, 32))
        else:
            bad.append(a)
    # torch 2.13 bounds the symbol by the buffer; 2.11 leaves Dynamo a runtime assertion
    with pytest.raises(StaxGuardError, match=rf"\(symbol {seq_sym}\) is 200.*(size 128"
                       rf".*expected {seq_sym} in \[0, 128\]|assertion {seq_sym} <= 128)"):
        g(bad)
    assert counts["dynamic"] == 1
