"""stax-fuse-attention on the CPU route: explicit attention, `softmax(q @ k^T * c) @ v`,
runs as one library call of scaled_dot_product_attention (`stax.attention`), which
reads q, k and v where they lie; with a mask (masked_fill or where with -inf, or an
added float mask), `stax.masked_attention`. Checked against eager: values (to rounding:
the library sums the scores in blocks), NaN rows where every key is masked, shape,
strides, route, and that the call is in the report, in static and dynamic graphs; and
what it leaves alone: a finite fill value, a training graph (the probabilities are
saved), `stax.fuse_attention="off"`."""
from __future__ import annotations

import math
import os

import pytest
import torch

import stax.backend as B

# the CPU route's pass (STAX_TEST_DEVICE=cuda makes the tensors CUDA ones: the triton
# route keeps its Triton kernels unless asked, see stax.driver.fused_pipeline)
pytestmark = [pytest.mark.usefixtures("stax_strict"), pytest.mark.skipif(
    os.environ.get("STAX_TEST_DEVICE", "cpu") != "cpu", reason="the CPU route's pass")]
ATTENTION_CALL = "scaled_dot_product_attention"


def qkv_heads(qkv):   # benchmarks/layout.py's attention: heads of one projection
    q, k, v = (z.transpose(1, 2) for z in qkv.unbind(2))
    att = torch.softmax((q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1])), dim=-1)
    return att @ v


def vit_heads(x, w):   # timm's ViT: q scaled first, heads by permute + unbind
    b, n, c = x.shape
    q, k, v = (x @ w).reshape(b, n, 3, 8, c // 8).permute(2, 0, 3, 1, 4).unbind(0)
    att = ((q * (c // 8) ** -0.5) @ k.transpose(-2, -1)).softmax(dim=-1)
    return (att @ v).transpose(1, 2).reshape(b, n, c)


def divided(q, k, v):
    return torch.softmax(q @ k.transpose(-1, -2) / 8.0, dim=-1) @ v


def masked(q, k, v, m):
    return torch.softmax(q @ k.transpose(-1, -2) * 0.125 + m, dim=-1) @ v


def _calls():
    return [c for r in B.reports() for g in r.graphs for c in g.library_calls]


def _same(got, want, tol):
    assert (got.shape, got.dtype, got.stride()) == (want.shape, want.dtype, want.stride())
    torch.testing.assert_close(got, want, **tol)


F32 = dict(rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("shape", [(2, 64, 3, 4, 32), (4, 512, 3, 8, 64)],
                         ids=["small", "users"])
def test_heads_of_a_projection(shape):
    x = torch.randn(*shape)
    _same(torch.compile(qkv_heads, backend="stax")(x), qkv_heads(x), F32)
    rep = B.last_report()
    assert rep.route == "stax-cpu" and not rep.fallback_ops
    assert rep.kernel_count == 0, rep.summary()   # no copy of q, k or v; no softmax kernel
    assert any(ATTENTION_CALL in c for c in _calls()), _calls()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_vit_attention(dtype):
    x, w = torch.randn(4, 197, 512).to(dtype), (torch.randn(512, 1536) / 23).to(dtype)
    tol = F32 if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    _same(torch.compile(vit_heads, backend="stax")(x, w), vit_heads(x, w), tol)
    assert any(ATTENTION_CALL in c for c in _calls()), _calls()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_scores_scaled_after_the_matmul(dtype):
    """The importer scales bf16/f16 scores in f32 between converts: still one call."""
    q, k, v = (torch.randn(2, 4, 128, 64, dtype=dtype) for _ in range(3))
    fn = lambda q, k, v: torch.softmax(q @ k.transpose(-1, -2) * 0.125, -1) @ v  # noqa: E731
    _same(torch.compile(fn, backend="stax")(q, k, v), fn(q, k, v),
          dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=2e-3, atol=2e-3))
    assert any(ATTENTION_CALL in c for c in _calls()), _calls()


def test_three_dim_operands_and_a_division():
    q, k, v = (torch.randn(16, 256, 64) for _ in range(3))
    _same(torch.compile(divided, backend="stax")(q, k, v), divided(q, k, v), F32)
    assert any(ATTENTION_CALL in c for c in _calls()), _calls()


MASKED_CALL = "(stax.masked_attention)"


def causal_fill(q, k, v, bias):   # GPT-2 (nanoGPT): masked_fill of a tril buffer
    t = q.shape[-2]
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    att = att.masked_fill(bias[:, :, :t, :t] == 0, float("-inf"))
    return torch.softmax(att, dim=-1) @ v


def where_keep(q, k, v, keep):
    att = torch.where(keep, q @ k.transpose(-1, -2), float("-inf"))
    return torch.softmax(att, dim=-1) @ v


def finite_fill(q, k, v, drop):   # not -inf: a fully masked row is uniform, not NaN
    att = (q @ k.transpose(-1, -2)).masked_fill(drop, -1e4)
    return torch.softmax(att, dim=-1) @ v


def _masked_calls():
    return [c for c in _calls() if MASKED_CALL in c]


@pytest.mark.parametrize("shape,dtype", [((1, 4, 64, 32), torch.float32),
                                         ((2, 12, 512, 64), torch.float32),
                                         ((2, 4, 256, 64), torch.bfloat16)],
                         ids=["small", "users", "bf16"])
def test_causal_masked_fill(shape, dtype):
    b, h, t, d = shape
    q, k, v = (torch.randn(b, t, h, d, dtype=dtype).transpose(1, 2) for _ in range(3))
    bias = torch.tril(torch.ones(t + 8, t + 8)).view(1, 1, t + 8, t + 8)
    _same(torch.compile(causal_fill, backend="stax")(q, k, v, bias),
          causal_fill(q, k, v, bias), F32 if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2))
    assert B.last_report().route == "stax-cpu" and _masked_calls(), _calls()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_additive_mask(dtype):
    q, k, v = (torch.randn(2, 4, 256, 64, dtype=dtype) for _ in range(3))
    m = torch.randn(256, 256, dtype=dtype)
    tol = F32 if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    _same(torch.compile(masked, backend="stax")(q, k, v, m), masked(q, k, v, m), tol)
    if dtype == torch.float32:   # (bf16: the importer adds in f32 between converts)
        assert _masked_calls(), _calls()


def test_where_keep_with_a_bool_input():
    q, k, v = (torch.randn(3, 128, 64) for _ in range(3))
    keep = torch.rand(128, 128) > 0.3
    _same(torch.compile(where_keep, backend="stax")(q, k, v, keep), where_keep(q, k, v, keep),
          F32)
    assert _masked_calls(), _calls()


def test_fully_masked_rows_are_nan_as_in_eager():
    """The library gives 0 for a query row with every key masked, the explicit form NaN:
    the compiled graph gives NaN there, and the other rows' values."""
    q, k, v = (torch.randn(2, 4, 64, 32) for _ in range(3))
    keep = torch.rand(64, 64) > 0.5
    keep[3] = False
    keep[40] = False
    want = where_keep(q, k, v, keep)
    assert want[:, :, 3].isnan().all() and not want[:, :, 2].isnan().any()
    got = torch.compile(where_keep, backend="stax")(q, k, v, keep)
    torch.testing.assert_close(got, want, equal_nan=True, **F32)
    assert _masked_calls(), _calls()
    m = torch.zeros(64, 64).masked_fill(~keep, float("-inf"))   # additive, -inf rows
    torch.testing.assert_close(torch.compile(masked, backend="stax")(q, k, v, m),
                               masked(q, k, v, m), equal_nan=True, **F32)
    assert _masked_calls(), _calls()


def bert_padding(x, w, attention_mask):
    """BERT's self-attention: heads of one projection, an additive mask made in the graph
    from the [B, S] padding mask (finfo.min where padded), broadcast over heads and
    queries."""
    b, t, c = x.shape
    q, k, v = (x @ w).view(b, t, 3, 8, c // 8).permute(2, 0, 3, 1, 4)
    ext = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
    att = (q @ k.transpose(-1, -2)) / math.sqrt(c // 8) + ext
    return (att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, c)


def test_bert_padding_mask():
    x, w = torch.randn(4, 128, 512), torch.randn(512, 1536) / 23
    attention_mask = torch.ones(4, 128, dtype=torch.long)
    attention_mask[1, 100:] = 0
    attention_mask[3, 7:] = 0
    _same(torch.compile(bert_padding, backend="stax")(x, w, attention_mask),
          bert_padding(x, w, attention_mask), F32)
    assert _masked_calls(), _calls()


@pytest.mark.parametrize("mask", ["where", "added", "none"])
@pytest.mark.parametrize("special", ["nan", "inf", "-inf"])
def test_non_finite_scores(special, mask):
    """where/masked_fill removes a NaN or infinite score where the mask drops it; the
    library adds -inf to it (NaN): with a non-finite q or k and an i1 mask the explicit
    form runs (stax-fuzz program 52360: a NaN key, masked). With an added mask or none
    the library's NaN rows are eager's (no check runs)."""
    q, k, v = (torch.randn(2, 4, 64, 32) for _ in range(3))
    keep = torch.rand(64, 64) > 0.5
    k[0, 1, 5, 3] = float(special)
    q[1, 2, 9, 0] = float(special)
    v[1, 3, 7, 1] = float(special)
    added = torch.randn(64, 64).masked_fill(~keep, float("-inf"))
    fn, args = {"where": (where_keep, (q, k, v, keep)), "added": (masked, (q, k, v, added)),
                "none": (divided, (q, k, v))}[mask]
    torch.testing.assert_close(torch.compile(fn, backend="stax")(*args), fn(*args),
                               equal_nan=True, **F32)
    assert any(ATTENTION_CALL in c for c in _calls()), _calls()


def _sdpa_spy(monkeypatch):
    """The keyword arguments of each library call runtime.attention makes."""
    import stax.runtime.attention as runtime_attention
    calls = []
    real = torch.nn.functional.scaled_dot_product_attention

    def spy(*args, **kw):
        calls.append(kw)
        return real(*args, **kw)
    monkeypatch.setattr(runtime_attention.torch.nn.functional,
                        "scaled_dot_product_attention", spy)
    return calls


@pytest.mark.parametrize("special", ["nan", "inf", "-inf", "finite"])
def test_causal_mask_runs_the_library_causal_form(special, monkeypatch):
    """GPT-2's tril buffer, equal at the call to the causal mask: the library's causal
    form (no mask tensor, no check); a non-finite key past a query is dropped for that
    query, as masked_fill drops it. A buffer that is no longer causal takes the mask."""
    calls = _sdpa_spy(monkeypatch)
    b, h, t, d = 2, 12, 512, 64
    q, k, v = (torch.randn(b, t, h, d).transpose(1, 2) for _ in range(3))
    if special != "finite":
        k[0, 1, 300, 5] = float(special)   # a key past queries 0..299: masked for them
        q[1, 3, 17, 2] = float(special)
    bias = torch.tril(torch.ones(t + 8, t + 8)).view(1, 1, t + 8, t + 8)
    cf = torch.compile(causal_fill, backend="stax")
    want = causal_fill(q, k, v, bias)
    torch.testing.assert_close(cf(q, k, v, bias), want, equal_nan=True, **F32)
    assert calls and calls[-1].get("is_causal") is True and "attn_mask" not in calls[-1]
    if special == "nan":
        assert want[0, 1, :300].isfinite().all() and want[0, 1, 300:].isnan().all()
    bias[0, 0, 5, 6] = 1.0   # the buffer changed: no longer the causal mask
    torch.testing.assert_close(cf(q, k, v, bias), causal_fill(q, k, v, bias),
                               equal_nan=True, **F32)
    assert calls[-1].get("attn_mask") is not None and not calls[-1].get("is_causal")
    assert B.last_report().route == "stax-cpu" and _masked_calls(), _calls()


@pytest.mark.parametrize("masked", [False, True], ids=["unmasked", "masked"])
def test_half_precision_scores_that_overflow(masked):
    """Eager rounds q @ k^T to f16: scores past 65504 are inf, their rows NaN; the
    library keeps the scores in f32. Where max|q| max|k| D could pass the range, the
    explicit form runs: eager's NaN rows."""
    q, k, v = (torch.randn(1, 2, 64, 64, dtype=torch.float16) for _ in range(3))
    q[0, 0, 3] = 40.0
    k[0, 0, 7] = 40.0
    keep = torch.rand(64, 64) > 0.3
    keep[3, 7] = True   # the inf score takes part
    fn = (lambda q, k, v: where_keep(q, k, v, keep)) if masked else \
        (lambda q, k, v: torch.softmax(q @ k.transpose(-1, -2) * 0.125, -1) @ v)
    want = fn(q, k, v)
    assert want.isnan().any()
    torch.testing.assert_close(torch.compile(fn, backend="stax")(q, k, v), want,
                               equal_nan=True, rtol=2e-3, atol=2e-3)
    assert any(ATTENTION_CALL in c for c in _calls()), _calls()


@pytest.mark.parametrize("t,s,d", [(0, 16, 8), (16, 0, 8), (16, 16, 0)],
                         ids=["no_query", "no_key", "no_head_dim"])
def test_empty_dims(t, s, d):
    """No key: eager's softmax over an empty dim and the matmul over it give 0 (not the
    NaN of a row whose keys are all masked); no query, no head dim (uniform weights):
    the explicit form runs (stax-fuzz: amax of an empty q raised)."""
    q, k, v = torch.randn(2, 3, t, d), torch.randn(2, 3, s, d), torch.randn(2, 3, s, 5)
    keep = torch.rand(t, s) > 0.5
    torch.testing.assert_close(torch.compile(where_keep, backend="stax")(q, k, v, keep),
                               where_keep(q, k, v, keep), equal_nan=True, **F32)


def llama_causal(q, k, v):   # an additive causal mask made in the graph, softmax in f32
    t = q.shape[-2]
    att = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + \
        torch.full((t, t), float("-inf")).triu(1)
    return torch.softmax(att.float(), -1).type_as(q) @ v


def gqa_causal(q, k, v):   # grouped-query heads: k and v repeated over query groups
    k, v = k.repeat_interleave(4, dim=1), v.repeat_interleave(4, dim=1)
    causal = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
    att = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    return att.masked_fill(~causal, float("-inf")).softmax(-1) @ v


def alibi(q, k, v):   # per-head linear biases, causal by -inf in the bias itself
    h, t = q.shape[1], q.shape[-2]
    slopes = torch.tensor([2 ** (-8 * (i + 1) / h) for i in range(h)]).view(1, h, 1, 1)
    pos = torch.arange(t)
    bias = (slopes * (pos.view(1, 1, 1, t) - pos.view(1, 1, t, 1)).float()).masked_fill(
        pos.view(1, 1, 1, t) > pos.view(1, 1, t, 1), float("-inf"))
    return torch.softmax(q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5 + bias, -1) @ v


def sliding_window(q, k, v):   # causal within 16 positions
    i = torch.arange(q.shape[-2])
    keep = (i.view(-1, 1) >= i.view(1, -1)) & (i.view(-1, 1) - i.view(1, -1) < 16)
    return torch.softmax(torch.where(keep, q @ k.transpose(-1, -2) * 0.125, float("-inf")),
                         -1) @ v


def cross_padding(q, k, v, padded):   # [B, S] padding of the keys; a batch all padding
    att = (q @ k.transpose(-1, -2) * 0.125).masked_fill(padded[:, None, None, :],
                                                         float("-inf"))
    return torch.softmax(att, -1) @ v


IDIOMS = {
    "llama_causal": (llama_causal, lambda: [torch.randn(2, 8, 256, 64) for _ in range(3)]),
    "gqa_causal": (gqa_causal, lambda: [torch.randn(2, 8, 128, 64), torch.randn(2, 2, 128, 64),
                                        torch.randn(2, 2, 128, 64)]),
    "alibi": (alibi, lambda: [torch.randn(2, 8, 200, 32) for _ in range(3)]),
    "sliding_window": (sliding_window, lambda: [torch.randn(4, 300, 64) for _ in range(3)]),
    "cross_padding": (cross_padding, lambda: [
        torch.randn(3, 4, 50, 32), torch.randn(3, 4, 77, 32), torch.randn(3, 4, 77, 32),
        torch.arange(77).expand(3, 77) >= torch.tensor([[77], [30], [0]])]),
}


@pytest.mark.parametrize("idiom", sorted(IDIOMS))
def test_model_masks(idiom):
    """Masks of real models, made in the graph: values (NaN where eager's are, a batch
    whose keys are all padding), shape, strides, one masked_attention call."""
    fn, make = IDIOMS[idiom]
    args = make()
    got, want = torch.compile(fn, backend="stax")(*args), fn(*args)
    assert (got.shape, got.dtype, got.stride()) == (want.shape, want.dtype, want.stride())
    torch.testing.assert_close(got, want, equal_nan=True, **F32)
    assert _masked_calls(), _calls()


def test_finite_fill_is_left_alone():
    q, k, v = (torch.randn(2, 4, 64, 32) for _ in range(3))
    drop = torch.rand(64, 64) > 0.5
    drop[5] = True
    _same(torch.compile(finite_fill, backend="stax")(q, k, v, drop), finite_fill(q, k, v, drop),
          F32)
    assert not any(ATTENTION_CALL in c for c in _calls()), _calls()


def test_training_is_left_alone():
    """The forward saves the probabilities for the backward: the explicit form stays, and
    the gradients match eager's."""
    x = torch.randn(2, 64, 3, 4, 32, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    seed = torch.randn(2, 4, 64, 32)
    qkv_heads(x).backward(seed)
    out = torch.compile(qkv_heads, backend="stax")(x2)
    out.backward(seed)
    torch.testing.assert_close(x2.grad, x.grad, rtol=1e-4, atol=1e-4)
    assert not any(ATTENTION_CALL in c for c in _calls()), _calls()


def test_dynamic_graphs_fuse_too():
    """A graph compiled once for every batch and sequence length calls the library with
    the sizes it meets (the heads read where they lie; GPT-2's mask buffer sliced to T).
    The head dim stays static (a model's weights fix it): a symbolic one makes the scale
    `1/sqrt(s)`, no constant, and the explicit form stays."""
    cf = torch.compile(qkv_heads, backend="stax")
    for b, t in ((2, 64), (3, 17), (5, 100), (4, 256)):
        x = torch.randn(b, t, 3, 4, 32)
        torch._dynamo.mark_dynamic(x, 0)
        torch._dynamo.mark_dynamic(x, 1)
        _same(cf(x), qkv_heads(x), F32)
    cm = torch.compile(causal_fill, backend="stax")
    bias = torch.tril(torch.ones(300, 300)).view(1, 1, 300, 300)
    for b, t in ((2, 64), (3, 17), (1, 200), (4, 129)):
        q, k, v = (torch.randn(b, t, 4, 32).transpose(1, 2) for _ in range(3))
        for z in (q, k, v):
            torch._dynamo.mark_dynamic(z, 0)
            torch._dynamo.mark_dynamic(z, 2)
        _same(cm(q, k, v, bias), causal_fill(q, k, v, bias), F32)
    dynamic = [c for c in _calls() if "sizes read at run time" in c]
    assert any("(stax.attention," in c for c in dynamic), _calls()
    assert any("(stax.masked_attention," in c for c in dynamic), _calls()


def test_option_off():
    x = torch.randn(2, 64, 3, 4, 32)
    cf = torch.compile(qkv_heads, backend="stax", options={"stax.fuse_attention": "off"})
    _same(cf(x), qkv_heads(x), F32)
    assert not any(ATTENTION_CALL in c for c in _calls()), _calls()
    assert B.last_report().kernel_count >= 1
