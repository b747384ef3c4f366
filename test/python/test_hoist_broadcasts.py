"""stax-hoist-broadcasts end to end (passes/hoist_broadcasts.py): elementwise ops on
parameters (BatchNorm's per-channel scale at inference, a causal mask's compare) are
computed in the kernel that reads their broadcast: one kernel fewer, values
bit-identical to the same compile without the pass, strides as eager's."""
from __future__ import annotations

import random

import pytest
import torch
from torch import nn

import stax.backend as B
import stax.passes.hoist_broadcasts as hb
from models import make_inputs, make_model

pytestmark = pytest.mark.usefixtures("stax_strict")


def _kernels() -> int:
    return sum(len(g.kernels) for r in B.reports() for g in r.graphs)


def _compiled(fn, args, monkeypatch, hoist: bool):
    """(outputs, kernels) of a fresh compile of `fn` with or without the pass."""
    torch._dynamo.reset()
    B.clear()
    with monkeypatch.context() as mp:
        if not hoist:
            mp.setattr(hb, "hoist_broadcasts", lambda func_op: 0)
        with torch.no_grad():
            out = torch.compile(fn, backend="stax")(*args)
    assert all(r.route == "stax-cpu" for r in B.reports())
    return out, _kernels()


def _bn_block(c, channels_last):
    m = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU())
    with torch.no_grad():
        m[1].running_mean.uniform_(-0.5, 0.5)
        m[1].running_var.uniform_(0.5, 1.5)
        m[1].weight.uniform_(0.5, 1.5)
        m[1].bias.uniform_(-0.5, 0.5)
    m = m.eval()
    if channels_last:
        m = m.to(memory_format=torch.channels_last)
    return m


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
def test_batch_norm_eval_is_one_kernel(monkeypatch, channels_last):
    torch.manual_seed(0)
    m = _bn_block(64, channels_last)
    x = torch.randn(8, 64, 28, 28)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    got, k = _compiled(m, (x,), monkeypatch, hoist=True)
    base, k0 = _compiled(m, (x,), monkeypatch, hoist=False)
    with torch.no_grad():
        ref = m(x)
    assert got.stride() == ref.stride()
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)
    assert torch.equal(got, base)   # bit-identical to the compile without the pass
    assert (k, k0) == (1, 2)


def test_gpt2_block_mask_compare_fuses(monkeypatch):
    # the explicit attention's softmax kernel (stax-fuse-attention would make the masked
    # softmax one library call: test_fuse_attention.py)
    monkeypatch.setenv("STAX_FUSE_ATTENTION", "off")
    torch.manual_seed(0)
    m = make_model("gpt2", dim=512, n_heads=8, max_seq=256).eval()
    (x,) = make_inputs("gpt2", 4, 200, dim=512)
    got, k = _compiled(m, (x,), monkeypatch, hoist=True)
    base, k0 = _compiled(m, (x,), monkeypatch, hoist=False)
    with torch.no_grad():
        ref = m(x)
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)
    assert torch.equal(got, base)
    assert k == k0 - 1   # the mask's `== 0` is no kernel of its own


_UNARY = [torch.neg, torch.exp, torch.tanh, torch.abs, torch.sqrt, torch.rsqrt,
          torch.sigmoid, lambda v: v * 3 + 1, lambda v: torch.clamp(v, -1, 1)]


@pytest.mark.parametrize("seed", range(8))
def test_random_parameter_chains(monkeypatch, seed):
    """A chain of elementwise ops on 1-3 parameter vectors (f32, bf16), broadcast along
    a random dim of a [B, C, W] activation of width >= 512 and combined with it:
    bit-identical with and without the pass; one kernel with it in f32, two in bf16."""
    rng = random.Random(seed)
    dtype = rng.choice([torch.float32, torch.bfloat16])
    shape = [rng.choice([3, 256, 257]), rng.choice([5, 64]), rng.choice([512, 520, 1031])]
    dim = rng.randrange(3)
    g = torch.Generator().manual_seed(seed)
    params = [torch.rand(shape[dim], generator=g).to(dtype) + 0.5
              for _ in range(rng.randint(1, 3))]
    ops = [rng.choice(_UNARY) for _ in range(rng.randint(1, 4))]
    view = [1, 1, 1]
    view[dim] = shape[dim]

    def f(x, *ps):
        v = ps[0]
        for i, op in enumerate(ops):
            v = op(v)
            if i + 1 < len(ps):
                v = v * ps[i + 1]
        return torch.relu(x * v.reshape(view) + 1)

    x = torch.randn(shape, generator=g).to(dtype)
    got, k = _compiled(f, (x, *params), monkeypatch, hoist=True)
    base, _ = _compiled(f, (x, *params), monkeypatch, hoist=False)
    ref = f(x, *params)
    assert got.shape == ref.shape and got.stride() == ref.stride()
    torch.testing.assert_close(got, ref, equal_nan=True, **(
        dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)))
    assert torch.equal(got.nan_to_num(), base.nan_to_num())
    # bf16 chains stay a kernel of their own (their stores round, as eager's ops do)
    assert k == (1 if dtype == torch.float32 else 2), (seed, k)
