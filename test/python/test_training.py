"""One training step through `torch.compile(backend="stax")`: forward, loss, backward,
compared with eager on the same initial weights (deepcopy) and the same fresh random
batch: the loss and every parameter gradient, float32 tolerances.

Both the forward and the backward graph must have compiled natively (the report of the
one StaxCompiled lists both; no FallbackRecord), with STAX_STRICT=1 so a lowering
failure raises.
Device switch: STAX_TEST_DEVICE=cuda (default cpu) runs the same tests on the GPU: the
fixture makes it torch's default device (inputs, models and factory calls inside the
compiled functions land there) and the expected route becomes "triton".
"""
from __future__ import annotations

import copy
import os

import pytest
import torch
import torch.nn.functional as F

import stax.backend as B
from stax.driver import CompiledGraph
from models import make_inputs, make_model

# STAX_TEST_DEVICE=cuda re-runs this file on the GPU (the triton target)
DEVICE = os.environ.get("STAX_TEST_DEVICE", "cpu")
ROUTE = "triton" if DEVICE.startswith("cuda") else "stax-cpu"

F32 = torch.float32
RTOL = ATOL = 1e-5


pytestmark = pytest.mark.usefixtures("stax_strict")


def _loss(model, x, target):
    return F.mse_loss(model(x), target)


def _train_step_check(name, batch, seq, *, input_grad=False, steps=2, tol=(RTOL, ATOL),
                      fallback_ops=(), model_kwargs=None):
    """`fallback_ops`: the ATen ops the graphs may run through PyTorch (CPU flash
    attention has no stax lowering); any other fallback op fails the test."""
    model = make_model(name, F32, **(model_kwargs or {}))
    ref = copy.deepcopy(model)
    step = torch.compile(_loss, backend="stax", fullgraph=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for i in range(steps):  # step 2 runs the same compiled graphs on updated weights
        (x,) = make_inputs(name, batch, seq, F32)
        with torch.no_grad():
            target = torch.randn_like(ref(x))
        x_ref = x.clone().requires_grad_(input_grad)
        x = x.clone().requires_grad_(input_grad)
        opt.zero_grad()
        ref_opt.zero_grad()

        loss = step(model, x, target)
        loss.backward()
        ref_loss = _loss(ref, x_ref, target)
        ref_loss.backward()

        rtol, atol = tol
        torch.testing.assert_close(loss, ref_loss, rtol=rtol, atol=atol,
                                   msg=lambda m: f"step {i} loss: {m}")
        for (pn, p), (_, rp) in zip(model.named_parameters(), ref.named_parameters()):
            assert p.grad is not None, f"step {i}: no gradient for {pn}"
            torch.testing.assert_close(p.grad, rp.grad, rtol=rtol, atol=atol,
                                       msg=lambda m: f"step {i} grad of {pn}: {m}")
        if input_grad:
            torch.testing.assert_close(x.grad, x_ref.grad, rtol=rtol, atol=atol,
                                       msg=lambda m: f"step {i} input grad: {m}")
        opt.step()
        ref_opt.step()

    assert len(B.compiled_callables) == 1, "expected one Dynamo graph (graph break/recompile?)"
    c = B.compiled_callables[0]
    assert c.stax_route == ROUTE, f"route {c.stax_route}: {c.stax_fallback_reason}"
    assert set(c.stax_fallback_ops) <= set(fallback_ops), c.stax_fallback_ops
    kinds = [g.graph_id for g in c.stax_graphs]
    assert all(isinstance(g, CompiledGraph) for g in c.stax_graphs), kinds
    assert any("forward" in k for k in kinds) and any("backward" in k for k in kinds), kinds
    assert len(kinds) == 2, kinds
    assert c.stax_library_calls, "linear layers (and their gradients) should be library matmuls"
    return c


def test_mlp_train_step():
    _train_step_check("mlp", 4, 8, input_grad=True)


def test_gpt2_block_train_step():
    _train_step_check("gpt2", 2, 16)


# sdpa on the CPU runs as aten._scaled_dot_product_flash_attention_for_cpu (+ backward)
_SDPA_OPS = ("aten._scaled_dot_product_flash_attention_for_cpu.default",
             "aten._scaled_dot_product_flash_attention_for_cpu_backward.default",
             "aten._scaled_dot_product_efficient_attention.default",
             "aten._scaled_dot_product_efficient_attention_backward.default",
             "aten._scaled_dot_product_flash_attention.default",
             "aten._scaled_dot_product_flash_attention_backward.default",
             "aten._scaled_dot_product_cudnn_attention.default",
             "aten._scaled_dot_product_cudnn_attention_backward.default")


def test_gpt2_sdpa_block_train_step():
    """Training through F.scaled_dot_product_attention: the tensors saved for the
    backward have the strides Dynamo promised (a StaxGuardError on 'alias' before) and
    the gradients are right (the CPU op's decomposition put probabilities where the
    backward reads logsumexp)."""
    _train_step_check("gpt2_sdpa", 2, 16, input_grad=True, fallback_ops=_SDPA_OPS)


@pytest.mark.parametrize("use_sdpa", [False, True])
def test_llama_block_train_step(use_sdpa):
    """RMSNorm, rotary embeddings, SwiGLU: every gradient (it failed in training with a
    stride guard error in the backward)."""
    _train_step_check("llama", 2, 16, input_grad=True, fallback_ops=_SDPA_OPS,
                      model_kwargs=dict(use_sdpa=use_sdpa))


def test_classifier_cross_entropy_train_step():
    """A classifier head trained with cross-entropy (ignore_index rows included): the
    forward fuses log_softmax with the nll pick, the backward nll_loss_backward with
    log_softmax's backward; loss and gradients match eager."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 500))
    ref = copy.deepcopy(model)

    def loss_fn(m, x, t):
        return F.cross_entropy(m(x), t)

    step = torch.compile(loss_fn, backend="stax", fullgraph=True)
    for i in range(2):
        x = torch.randn(48, 32)
        t = torch.randint(0, 500, (48,))
        t[::5] = -100
        loss = step(model, x, t)
        loss.backward()
        ref_loss = loss_fn(ref, x, t)
        ref_loss.backward()
        torch.testing.assert_close(loss, ref_loss, rtol=RTOL, atol=ATOL)
        for (pn, p), (_, rp) in zip(model.named_parameters(), ref.named_parameters()):
            torch.testing.assert_close(p.grad, rp.grad, rtol=RTOL, atol=ATOL,
                                       msg=lambda m: f"step {i} grad of {pn}: {m}")
            p.grad = None
            rp.grad = None
    c = B.compiled_callables[0]
    assert c.stax_route == ROUTE, f"route {c.stax_route}: {c.stax_fallback_reason}"
    assert c.stax_fallback_ops == [], c.stax_fallback_ops
    assert len(c.stax_graphs) == 2
