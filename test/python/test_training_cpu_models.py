"""Training on the CPU target: a Llama-style block (random RMSNorm weights) and a
conv + BatchNorm (train mode, batch statistics) + ReLU block, f32 and bf16. One
forward + backward through `torch.compile(backend="stax")`, against eager on a deep
copy, fresh random inputs and upstream gradient: the output, the gradient of every
parameter and of the input, and (conv block) the BatchNorm running statistics.

Tolerances are relative to each tensor's magnitude (max |eager|), per dtype: a
gradient of 1e-4 is not "close" to 0 under an absolute 1e-2. The bf16 tolerance is
also checked against eager's own distance to a float64 run, so it is not looser than
what bf16 arithmetic itself gives. Both graphs must be native stax-cpu graphs; conv
and its backward are the only ops PyTorch may run.
"""
from __future__ import annotations

import copy

import pytest
import torch

import stax.backend as B
from stax.driver import CompiledGraph
from models import RMSNorm, make_inputs, make_model

pytestmark = pytest.mark.usefixtures("stax_strict")

F32, BF16 = torch.float32, torch.bfloat16
# max |stax - eager| <= REL * max |eager|, per dtype
REL = {F32: 5e-6, BF16: 2e-2}
CONV_OPS = {"aten.convolution.default", "aten.convolution_backward.default"}


def _randomize(model, seed=7):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (RMSNorm, torch.nn.LayerNorm, torch.nn.BatchNorm2d)):
                m.weight.copy_(1.0 + 0.5 * torch.randn(m.weight.shape, generator=g))
                if getattr(m, "bias", None) is not None:
                    m.bias.copy_(0.5 * torch.randn(m.bias.shape, generator=g))
    return model


def _close(got, ref, dtype, what, ref64=None):
    assert got.shape == ref.shape and got.dtype == ref.dtype, (what, got.shape, got.dtype)
    assert got.stride() == ref.stride(), (what, got.stride(), ref.stride())
    r = ref.double()
    scale = r.abs().max().item()
    assert scale > 0 and torch.isfinite(r).all(), f"{what}: eager is all zero or not finite"
    err = (got.double() - r).abs().max().item()
    tol = REL[dtype] * scale
    if ref64 is not None and dtype is BF16:
        # eager bf16 vs float64: the tolerance is no looser than 8x bf16's own error
        own = (r - ref64.double()).abs().max().item()
        tol = min(tol, max(8 * own, 4e-3 * scale))
    assert err <= tol, f"{what}: max |stax - eager| = {err:.3g} > {tol:.3g} " \
                       f"(max |eager| = {scale:.3g})"


def _step(model, x, gy):
    y = model(x)
    y.backward(gy)
    return y


def _train_check(model, x, dtype, allowed_ops=frozenset()):
    ref = copy.deepcopy(model)
    ref64 = copy.deepcopy(model).double()
    cm = torch.compile(model, backend="stax", fullgraph=True)
    xs = x.clone().requires_grad_(True)
    xr = x.clone().requires_grad_(True)
    x64 = x.double().requires_grad_(True)
    y = cm(xs)
    gy = torch.randn_like(y)
    y.backward(gy)
    yr = _step(ref, xr, gy)
    y64 = _step(ref64, x64, gy.double())
    _close(y, yr, dtype, "output", y64)
    _close(xs.grad, xr.grad, dtype, "input grad", x64.grad)
    named64 = dict(ref64.named_parameters())
    for (n, p), (_, rp) in zip(model.named_parameters(), ref.named_parameters()):
        assert p.grad is not None, f"no gradient for {n}"
        _close(p.grad, rp.grad, dtype, f"grad of {n}", named64[n].grad)
    for (n, b), (_, rb) in zip(model.named_buffers(), ref.named_buffers()):
        if b.dtype.is_floating_point:
            _close(b, rb, dtype, f"buffer {n}")
        else:
            assert torch.equal(b, rb), n
    assert len(B.compiled_callables) == 1, "one Dynamo graph expected"
    c = B.compiled_callables[0]
    assert c.stax_route == "stax-cpu", c.stax_fallback_reason
    assert all(isinstance(g, CompiledGraph) for g in c.stax_graphs)
    kinds = sorted(g.graph_id.split("_")[1] for g in c.stax_graphs)
    assert kinds == ["backward", "forward"], kinds
    assert set(c.stax_fallback_ops) <= set(allowed_ops), c.stax_fallback_ops
    return c


@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_llama_block_training(dtype):
    model = _randomize(make_model("llama", dtype))
    (x,) = make_inputs("llama", 2, 16, dtype)
    c = _train_check(model, x, dtype)
    assert c.stax_library_calls


@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_conv_bn_relu_training(dtype):
    model = _randomize(make_model("conv_bn_relu", dtype)).train()
    (x,) = make_inputs("conv_bn_relu", 4, 12, dtype)
    c = _train_check(model, x, dtype, allowed_ops=CONV_OPS)
    assert "aten.convolution_backward.default" in c.stax_fallback_ops
