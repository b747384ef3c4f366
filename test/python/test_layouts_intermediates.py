"""Intermediates written in the dim order their readers want (issue 9).

stax-assign-layouts gives a kernel intermediate a non-row-major dense order when that
removes a copy its readers need (`passes/intermediate_layouts.py`). Each model is
compiled with backend="stax" twice, with the choice on and off
(STAX_INTERMEDIATE_LAYOUTS=0), and compared with eager on fresh random inputs: values,
shapes, strides, storage offsets, output aliasing and (training) gradients. The copy
kernels (`stax.copy` after stax-assign-layouts) and `stax.bytes_moved` of each graph are
compared between the two runs: fewer where a copy is a layout the producer can write,
the same where none is (a layout change between two library calls, a saved tensor).
"""
from __future__ import annotations

import glob
import os
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import stax.backend as B
from test_fold_permutes import _check_wrapper_buffers, _copies_per_graph, _layouts_ir

pytestmark = pytest.mark.usefixtures("stax_strict")

DIM, HEADS, SEQ, BATCH = 768, 12, 128, 2


def _rms(x, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


class QKNormAttention(nn.Module):
    """Attention with per-head RMS norms of q and k (OLMo-2 / Qwen3): the norms are
    reduction kernels, and bmm's batch merge of their head permute reads them."""

    def __init__(self, dim=DIM, heads=HEADS, head_norm_out=False):
        super().__init__()
        self.heads, self.head_norm_out = heads, head_norm_out
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        d = c // self.heads
        q, k, v = self.qkv(x).split(c, dim=2)
        q = _rms(q.view(b, t, self.heads, d)).transpose(1, 2)
        k = _rms(k.view(b, t, self.heads, d)).transpose(1, 2)
        v = v.view(b, t, self.heads, d).transpose(1, 2)
        y = torch.softmax(q @ k.transpose(-2, -1) * d ** -0.5, dim=-1) @ v
        if self.head_norm_out:  # a per-head norm before the head merge (Diff Transformer)
            y = _rms(y)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Attention(nn.Module):
    """Plain attention: its one copy (the head merge of bmm's result) is between two
    library calls, which no order of an intermediate removes."""

    def __init__(self, dim=DIM, heads=HEADS):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        d = c // self.heads
        q, k, v = (z.view(b, t, self.heads, d).transpose(1, 2)
                   for z in self.qkv(x).split(c, dim=2))
        y = torch.softmax(q @ k.transpose(-2, -1) * d ** -0.5, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class ExpTransposeMatmul(nn.Module):
    """exp(x) read by a row sum and, transposed and flattened, by a matmul: exp and the
    sum are one reduction kernel (two results), so no fold removes the copy; written
    transposed, the flatten is a view."""

    def __init__(self, n=32):
        super().__init__()
        self.w = nn.Parameter(torch.randn(n, 32) / 8)

    def forward(self, x):
        y = torch.exp(x)
        return y.sum(-1), y.transpose(1, 2).reshape(-1, x.shape[1]) @ self.w


class ProbsHeadMerge(nn.Module):
    """Attention probabilities (a softmax kernel) merged over heads for a matmul."""

    def __init__(self, heads=4, seq=64):
        super().__init__()
        self.w = nn.Parameter(torch.randn(heads * seq, 16) / 16)

    def forward(self, s):
        p = torch.softmax(s, dim=-1)  # [B, H, T, T]
        b, h, t, _ = p.shape
        return p.transpose(1, 2).reshape(b * t, h * t) @ self.w


class ReturnedIntermediate(nn.Module):
    """exp(x) returned and read transposed: an output keeps eager's strides."""

    def forward(self, x):
        y = torch.exp(x)
        return y, y.sum(-1), y.transpose(1, 2).reshape(x.shape[0], -1) * 2


def _bytes_per_graph(debug_dir) -> dict:
    out = {}
    for d in sorted(glob.glob(os.path.join(str(debug_dir), "g*"))):
        m = re.search(r"stax.bytes_moved = \{copies = (\d+) : i64, kernels = (\d+) : i64, "
                      r"library = (\d+) : i64\}", _layouts_ir(d))
        out[os.path.basename(d).split("_")[1]] = tuple(int(x) for x in m.groups())
    return out


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _compile_and_check(make, inputs, train, debug_dir, monkeypatch, choose: bool):
    monkeypatch.setenv("STAX_DEBUG_DIR", str(debug_dir))
    monkeypatch.setenv("STAX_INTERMEDIATE_LAYOUTS", "1" if choose else "0")
    torch._dynamo.reset()
    torch.manual_seed(0)
    ref, mod = make(), make()
    mod.load_state_dict(ref.state_dict())
    if not train:
        ref.eval(), mod.eval()
    xe = [x.clone().requires_grad_(train) for x in inputs]
    xs = [x.clone().requires_grad_(train) for x in inputs]
    compiled = torch.compile(mod, backend="stax")
    with torch.set_grad_enabled(train):
        want, got = _flat(ref(*xe)), _flat(compiled(*xs))
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
        assert g.stride() == w.stride() and g.storage_offset() == w.storage_offset()
    # aliasing: outputs share storage with each other exactly as eager's do
    for i in range(len(got)):
        for j in range(i + 1, len(got)):
            assert (got[i].untyped_storage().data_ptr() == got[j].untyped_storage().data_ptr()) \
                == (want[i].untyped_storage().data_ptr() == want[j].untyped_storage().data_ptr())
    if train:
        gs = [torch.randn_like(w) for w in want]
        torch.autograd.backward(want, gs)
        torch.autograd.backward(got, gs)
        pairs = [(a.grad, b.grad) for a, b in zip(xs, xe)] + [
            (p.grad, rp.grad) for p, rp in zip(mod.parameters(), ref.parameters())]
        for a, b in pairs:
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
            assert a.stride() == b.stride()
    reports = B.reports()
    assert reports and all(g.route == "stax-cpu" for r in reports for g in r.graphs)
    _check_wrapper_buffers(debug_dir)
    return _copies_per_graph(debug_dir), _bytes_per_graph(debug_dir)


def _both(make, inputs, train, tmp_path, monkeypatch):
    off = _compile_and_check(make, inputs, train, tmp_path / "off", monkeypatch, False)
    on = _compile_and_check(make, [torch.randn_like(x) for x in inputs], train,
                            tmp_path / "on", monkeypatch, True)
    return off, on


def _x():
    return torch.randn(BATCH, SEQ, DIM)


@pytest.mark.parametrize("out_norm", [False, True], ids=["qk_norm", "qk_and_out_norm"])
def test_qk_norm_attention_inference(out_norm, tmp_path, monkeypatch):
    # the explicit attention's layouts (the triton route's path; on the CPU route
    # stax-fuse-attention makes it one library call: test_fuse_attention.py)
    monkeypatch.setenv("STAX_FUSE_ATTENTION", "off")
    (c_off, b_off), (c_on, b_on) = _both(lambda: QKNormAttention(head_norm_out=out_norm),
                                         [_x()], False, tmp_path, monkeypatch)
    # q's and k's head split for bmm's batch merge: the norm kernel writes [B, H, T, D]
    # (and with the out norm, the norm kernel writes the head merge [B, T, H, D])
    assert len(c_off["inference"]) == len(c_on["inference"]) + (3 if out_norm else 2), \
        (c_off, c_on)
    assert b_on["inference"][0] < b_off["inference"][0]
    assert b_on["inference"][1:] == b_off["inference"][1:]


def test_qk_norm_attention_training(tmp_path, monkeypatch):
    """In training bmm's operands are saved for the backward (graph outputs, eager's
    strides): their copies stay, nothing changes, values and gradients equal eager."""
    (c_off, b_off), (c_on, b_on) = _both(QKNormAttention, [_x()], True, tmp_path, monkeypatch)
    assert c_on["forward"] == c_off["forward"] and b_on["forward"] == b_off["forward"]
    assert len(c_on["backward"]) <= len(c_off["backward"])


def test_plain_attention_unchanged(tmp_path, monkeypatch):
    monkeypatch.setenv("STAX_FUSE_ATTENTION", "off")   # the explicit form's layouts
    (c_off, b_off), (c_on, b_on) = _both(Attention, [_x()], False, tmp_path, monkeypatch)
    assert c_on == c_off and len(c_on["inference"]) == 1 and b_on == b_off


def test_exp_transpose_matmul(tmp_path, monkeypatch):
    # 16 rows per batch: below layout_folds.BATCHED_MATMUL_LEAST_ROWS, so one GEMM reads
    # the flattened rows (with more, on the CPU a batched matmul reads the transposed exp
    # where it lies: test_layouts.py::test_flattened_transpose_is_a_batched_matmul)
    (c_off, b_off), (c_on, b_on) = _both(lambda: ExpTransposeMatmul(64),
                                         [torch.randn(4, 64, 16)], False,
                                         tmp_path, monkeypatch)
    assert len(c_off["inference"]) == 1 and not c_on["inference"], (c_off, c_on)
    assert b_on["inference"][0] == 0 < b_off["inference"][0]


def test_probs_head_merge(tmp_path, monkeypatch):
    (c_off, b_off), (c_on, b_on) = _both(ProbsHeadMerge, [torch.randn(2, 4, 64, 64)], False,
                                         tmp_path, monkeypatch)
    assert len(c_off["inference"]) == 1 and not c_on["inference"], (c_off, c_on)


def test_returned_intermediate_keeps_eager_strides(tmp_path, monkeypatch):
    (c_off, b_off), (c_on, b_on) = _both(ReturnedIntermediate, [torch.randn(4, 32, 64)], False,
                                         tmp_path, monkeypatch)
    assert c_on == c_off and b_on == b_off


def test_transpose_then_pointwise_training(tmp_path, monkeypatch):
    """x.transpose -> gelu -> transpose back: values, strides, gradients equal eager."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(SEQ, SEQ) / 16)

        def forward(self, x):
            h = F.gelu(x.transpose(1, 2)) @ self.w  # [B, C, T]
            return torch.tanh(h).transpose(1, 2).reshape(x.shape[0], -1)
    _both(M, [_x()], True, tmp_path, monkeypatch)


def test_triton_route_interpreted(tmp_path, monkeypatch):
    """The Triton route (kernels compiled for fake CUDA inputs, TTIR interpreted on the
    CPU, loads bounds-checked) writes the reordered intermediates too: the QK-norm and
    out-norm kernels of a small attention, forward and backward, equal eager's values
    and gradients; in inference the norms write the head layouts bmm and the output
    projection read (3 copies fewer than row-major)."""
    pytest.importorskip("triton")
    from test_gpu_training_sizes import _interpreted_step
    monkeypatch.setenv("STAX_TRITON_ARCH", "90")
    for choose in ("0", "1"):
        monkeypatch.setenv("STAX_INTERMEDIATE_LAYOUTS", choose)
        monkeypatch.setenv("STAX_DEBUG_DIR", str(tmp_path / choose))
        torch._dynamo.reset()
        torch.manual_seed(0)
        m = QKNormAttention(64, 4, head_norm_out=True)
        x = torch.randn(2, 32, 64, requires_grad=True)
        with torch.no_grad():
            y = _interpreted_step(m)(x)
            torch.testing.assert_close(y, m(x), rtol=1e-4, atol=1e-4)
            assert y.stride() == m(x).stride()
        torch._dynamo.reset()
        loss = _interpreted_step(lambda x: m(x).sum())(x)
        loss.backward()
        got = [x.grad.clone()] + [p.grad.clone() for p in m.parameters()]
        x.grad = None
        m.zero_grad()
        want = m(x).sum()
        want.backward()
        torch.testing.assert_close(loss, want, rtol=1e-4, atol=1e-4)
        for a, b in zip(got, [x.grad] + [p.grad for p in m.parameters()]):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    # (the graphs are g0000_graph (inference), g0001_graph, g0002_graph in compile order)
    off = list(_copies_per_graph(tmp_path / "0").values())
    on = list(_copies_per_graph(tmp_path / "1").values())
    assert len(off) == len(on) == 3, (off, on)
    assert len(off[0]) == len(on[0]) + 3, (off, on)
    # training: bmm's operands and the out norm's input are saved (eager's strides), so
    # the forward's copies stay; the backward's may only drop
    assert on[1] == off[1] and len(on[2]) <= len(off[2]), (off, on)
