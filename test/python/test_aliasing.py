"""Outputs as eager has them: values, and also size, strides, storage offset and aliasing.

An output of the compiled graph is a view of an input exactly when eager's is (and then
the same view of the same storage); otherwise it is a fresh tensor, sharing a storage
with exactly the outputs eager's shares one with. `clone`, `contiguous`, `copy` and
`memory_format=` are honoured; `as_strided` reads the storage eager's operand views;
fallback ops get their operands with eager's strides.

Each case failed before stax.aliasing existed (clone returned its input, `.t().contiguous()`
came back with strides (1, 6), as_strided read the logical view, and sdpa/MHA training
gave wrong gradients or a stride guard error in the backward).
STAX_TEST_DEVICE=cuda runs the same cases on the GPU.
"""
from __future__ import annotations

import copy
import os

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import stax.backend as B

DEVICE = os.environ.get("STAX_TEST_DEVICE", "cpu")
ROUTE = "triton" if DEVICE.startswith("cuda") else "stax-cpu"

pytestmark = pytest.mark.usefixtures("stax_strict")


def _storage(t):
    return t.untyped_storage().data_ptr()


def _flat(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def check_like_eager(fn, *inputs, exact=True, strides=True):
    """Run fn eagerly and compiled on clones of `inputs`; compare every output's value,
    shape, dtype, strides, storage offset, and which input or earlier output its storage
    is (aliasing). Returns the compiled outputs."""
    eager_in = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    stax_in = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    # clones lose a non-contiguous layout: re-create it
    eager_in = [_like(a, x) for a, x in zip(eager_in, inputs)]
    stax_in = [_like(a, x) for a, x in zip(stax_in, inputs)]
    ref = _flat(fn(*eager_in))
    compiled = torch.compile(fn, backend="stax", fullgraph=True)
    out = _flat(compiled(*stax_in))
    for r in B.reports():
        assert r.route == ROUTE, (r.route, r.fallback_reason)
    assert len(out) == len(ref)

    def origin(t, ins, outs_before):
        for i, x in enumerate(ins):
            if isinstance(x, torch.Tensor) and _storage(x) == _storage(t):
                return ("input", i)
        for j, o in enumerate(outs_before):
            if _storage(o) == _storage(t) and o.numel() and t.numel():
                return ("output", j)
        return ("fresh",)

    for i, (o, e) in enumerate(zip(out, ref)):
        assert o.shape == e.shape and o.dtype == e.dtype, (i, o.shape, e.shape, o.dtype, e.dtype)
        if exact:
            assert torch.equal(o, e), f"output {i}: values differ"
        else:
            torch.testing.assert_close(o, e, msg=lambda m: f"output {i}: {m}")
        if strides:
            assert o.stride() == e.stride(), \
                f"output {i}: strides {o.stride()} vs eager {e.stride()}"
        assert o.storage_offset() == e.storage_offset(), \
            f"output {i}: storage offset {o.storage_offset()} vs eager {e.storage_offset()}"
        assert origin(o, stax_in, out[:i]) == origin(e, eager_in, ref[:i]), \
            f"output {i}: storage {origin(o, stax_in, out[:i])} vs eager {origin(e, eager_in, ref[:i])}"
    return out


def _like(copy_, orig):
    if not isinstance(orig, torch.Tensor) or copy_.stride() == orig.stride():
        return copy_
    base = torch.empty(orig.untyped_storage().nbytes() // orig.element_size(),
                       dtype=orig.dtype, device=orig.device)
    base.copy_(torch.as_strided(orig, (base.numel(),), (1,), 0))
    return base.as_strided(orig.shape, orig.stride(), orig.storage_offset())


def rand(*shape, dtype=torch.float32):
    return torch.randn(*shape, device=DEVICE, dtype=dtype)


def test_clone_is_a_fresh_tensor():
    x = rand(512, 64)
    f = torch.compile(lambda x: x.clone(), backend="stax", fullgraph=True)
    keep = x.clone()
    y = f(x)
    y.zero_()
    assert torch.equal(x, keep), "zeroing the clone changed the input"
    check_like_eager(lambda x: x.clone(), x)


def test_contiguous_after_transpose_is_contiguous():
    out = check_like_eager(lambda x: (x + 1).t().contiguous(), rand(4, 6))
    out[0].view(-1)  # raised "view size is not compatible" before


@pytest.mark.parametrize("case", ["t", "slice", "view", "itself_and_clone", "select",
                                  "contiguous_noncontig", "dtype_view"])
def test_views_of_inputs_alias_them(case):
    fns = {
        "t": lambda x: x.t(),
        "slice": lambda x: (x[1:], x[:, 2:]),
        "view": lambda x: x.view(-1),
        "itself_and_clone": lambda x: (x.clone(), x * 2, x.view(6, -1)),
        "select": lambda x: x[2],
        "contiguous_noncontig": lambda x: (x.t().contiguous(), x.t()),
        "dtype_view": lambda x: x.view(torch.int32),
    }
    check_like_eager(fns[case], rand(6, 8))


def test_outputs_share_storage_as_eager():
    def f(x):
        y = x + 1
        return y, y.t(), y[2:], (x + 1).clone()
    check_like_eager(f, rand(8, 16))


def test_output_with_storage_offset():
    check_like_eager(lambda x: ((x * 2)[3:], (x - 1).t()[1:]), rand(8, 16))


@pytest.mark.parametrize("fmt", ["channels_last_out", "contiguous_of_channels_last",
                                 "clone_preserve"])
def test_memory_format_is_honoured(fmt):
    x = rand(2, 3, 8, 5)
    if fmt == "channels_last_out":
        check_like_eager(lambda x: (x * 2).to(memory_format=torch.channels_last), x)
    elif fmt == "contiguous_of_channels_last":
        check_like_eager(lambda x: x.contiguous(), x.to(memory_format=torch.channels_last))
    else:
        check_like_eager(lambda x: x.clone(memory_format=torch.preserve_format),
                         x.to(memory_format=torch.channels_last))


@pytest.mark.parametrize("case", ["after_contiguous", "after_channels_last", "cl_input",
                                  "of_result", "of_input_offset", "of_multi_result"])
def test_as_strided_reads_the_storage(case):
    x = rand(2, 3, 4, 5)
    fns = {
        "after_contiguous": (lambda x: torch.as_strided(x.contiguous(), (5, 3), (1, 7), 2),
                             rand(6, 4).t()),
        "after_channels_last": (lambda x: torch.as_strided(
            x.to(memory_format=torch.channels_last), (5, 3), (1, 7), 2), x),
        "cl_input": (lambda x: torch.as_strided(x, (5, 3), (1, 7), 2),
                     x.to(memory_format=torch.channels_last)),
        "of_result": (lambda x: torch.as_strided(x + 1, (5, 3), (1, 7), 2), rand(6, 4).t()),
        "of_input_offset": (lambda x: torch.as_strided(x[1:], (5, 3), (1, 7), 2), rand(6, 4)),
        # a result of a multi-result op (native_layer_norm): refused before (stax-fuzz)
        "of_multi_result": (lambda x: torch.as_strided(F.layer_norm(x, (4,)), (4, 3), (1, 4), 2),
                            rand(6, 4)),
    }
    fn, inp = fns[case]
    check_like_eager(fn, inp, exact=case != "of_multi_result")


def test_fallback_op_gets_eager_strides():
    """An LSTM (a fallback op) after `.transpose(0, 1).contiguous()`: it ran on the
    transposed view and gave answers off by 0.59."""
    torch._dynamo.config.allow_rnn = True
    try:
        torch.manual_seed(0)
        lstm = nn.LSTM(16, 32, batch_first=True).to(DEVICE)

        def f(x):
            return lstm((x + 1).transpose(0, 1).contiguous())[0]

        with torch.no_grad():
            if DEVICE.startswith("cuda"):
                # cuDNN's LSTM runs in TF32 by default (torch.backends.cudnn.allow_tf32):
                # compared in f32 (it differed from eager by 2e-4 on the H200 with TF32)
                prev = torch.backends.cudnn.allow_tf32
                torch.backends.cudnn.allow_tf32 = False
            try:
                check_like_eager(f, rand(5, 7, 16), exact=False)
            finally:
                if DEVICE.startswith("cuda"):
                    torch.backends.cudnn.allow_tf32 = prev
    finally:
        torch._dynamo.config.allow_rnn = False


class _SdpaAttention(nn.Module):
    def __init__(self, d=64, h=4):
        super().__init__()
        self.qkv, self.o, self.h = nn.Linear(d, 3 * d), nn.Linear(d, d), h

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(b, t, d))


class _Mha(nn.Module):
    def __init__(self, d=64, h=4):
        super().__init__()
        self.m = nn.MultiheadAttention(d, h, batch_first=True)

    def forward(self, x):
        return self.m(x, x, x, need_weights=False)[0]


@pytest.mark.parametrize("model", ["sdpa", "mha"])
def test_attention_training_gradients(model):
    """sdpa and nn.MultiheadAttention in training: the backward's saved tensors have the
    strides Dynamo promised (a StaxGuardError before), and every gradient is right (the
    CPU flash-attention decomposition returned probabilities as logsumexp)."""
    torch.manual_seed(0)
    m = (_SdpaAttention() if model == "sdpa" else _Mha()).to(DEVICE)
    ref = copy.deepcopy(m)
    x = rand(8, 32, 64)
    w = rand(8, 32, 64)
    xs, xe = x.clone().requires_grad_(), x.clone().requires_grad_()
    out = torch.compile(m, backend="stax")(xs)
    (out * w).sum().backward()
    (ref(xe) * w).sum().backward()
    for r in B.reports():
        assert r.route == ROUTE, (r.route, r.fallback_reason)
    assert len(B.reports()[-1].graphs) == 2
    torch.testing.assert_close(xs.grad, xe.grad, rtol=1e-4, atol=1e-4)
    assert xe.grad.abs().max() > 1e-2  # a check that can fail
    for (n, p), (_, rp) in zip(m.named_parameters(), ref.named_parameters()):
        torch.testing.assert_close(p.grad, rp.grad, rtol=1e-4, atol=1e-4,
                                   msg=lambda s: f"grad of {n}: {s}")


def test_reshape_of_channels_last_input_is_no_view():
    """max_unpool2d on channels-last inputs decomposes to clone(contiguous) -> view ->
    index_put; the wrapper took the view of the channels-last buffer (torch's meta view
    under Dynamo's fake mode accepted it) and the values were off by 1.54."""
    torch.manual_seed(0)
    x = rand(1, 2, 2, 6)
    out, idx = F.max_pool2d(x, 2, return_indices=True)
    out = out.contiguous(memory_format=torch.channels_last)
    idx = idx.contiguous(memory_format=torch.channels_last)
    # eager's kernel returns channels-last here, its decomposition (hence Dynamo's fake
    # tensor, which is what stax follows) contiguous: compare values and aliasing only
    check_like_eager(lambda o, i: F.max_unpool2d(o, i, 2, output_size=(2, 6)), out, idx,
                     strides=False)


def test_view_strides_match_torch():
    from stax.passes.layout_algebra import view_strides
    cases = [((1, 2, 1, 3), (6, 1, 6, 2), (6,)), ((4, 6), (6, 1), (2, 12)),
             ((4, 6), (1, 4), (24,)), ((4, 6), (1, 4), (4, 2, 3)), ((2, 3, 4), (12, 1, 3), (2, 12)),
             ((2, 1, 4), (4, 99, 1), (8,)), ((3, 4), (8, 2), (12,)), ((3, 4), (8, 2), (3, 2, 2))]
    for shape, st, new in cases:
        t = torch.empty(200).as_strided(shape, st)
        try:
            want = list(t.view(new).stride())
        except RuntimeError:
            want = None
        assert view_strides(shape, st, new) == want, (shape, st, new)


@pytest.mark.parametrize("case", ["expand_of_where", "expand_slice", "overlapping_as_strided"])
def test_overlapping_outputs(case):
    """An output whose eager layout overlaps (an expand: stride 0) was allocated with
    that layout and written by a kernel: 'more than one element of the written-to tensor
    refers to a single memory location'. Found by stax-fuzz."""
    if case == "expand_of_where":
        c = torch.rand(1, 1, 1, device=DEVICE) > 0.5
        a = torch.randint(-60, 60, (1, 4, 7), device=DEVICE).transpose(-1, -2)
        b = torch.randint(-60, 60, (1, 1, 4), device=DEVICE)
        check_like_eager(lambda c, a, b: torch.where(c, a, b).expand(4, 3, 7, 4), c, a, b)
    elif case == "expand_slice":
        check_like_eager(lambda x: (x * 2).expand(4, 512, 4)[:, :, 1:4:3], rand(1, 1))
    else:
        check_like_eager(lambda x: torch.as_strided(x + 1, (3, 3), (1, 1), 0), rand(6))


def test_clone_exact_keeps_layout():
    """The CUDA graph runner clones training outputs on replay: with Tensor.clone a
    sliced or overlapping output lost its strides / offset (the backward's guards, and
    aot_autograd's regeneration of aliased outputs, read them)."""
    from stax.aliasing import clone_exact
    x = rand(8, 16)
    for t in [x, x.t(), x[2:, 1:], x[:, ::2], x[:1].expand(5, 16), x.t()[3:]]:
        c = clone_exact(t)
        assert (c.shape, c.stride(), c.storage_offset()) == (t.shape, t.stride(),
                                                             t.storage_offset())
        assert torch.equal(c, t) and _storage(c) != _storage(t)
