"""Whole small models (test/python/models.py) through `torch.compile(backend="stax")`,
inference, compared with eager on fresh random inputs, float32 and bfloat16.

Every test asserts the route: the graph compiled natively (`stax_route == "stax-cpu"`),
no op ran through PyTorch except the expected ones (conv runs as a fallback op), and
STAX_STRICT=1 turns a lowering failure into an error.
Device switch: STAX_TEST_DEVICE=cuda (default cpu) runs the same tests on the GPU: the
fixture makes it torch's default device (inputs, models and factory calls inside the
compiled functions land there) and the expected route becomes "triton".
"""
from __future__ import annotations

import copy
import os

import pytest
import torch

import stax.backend as B
from models import MODEL_NAMES, make_inputs, make_model

# STAX_TEST_DEVICE=cuda re-runs this file on the GPU (the triton target)
DEVICE = os.environ.get("STAX_TEST_DEVICE", "cpu")
ROUTE = "triton" if DEVICE.startswith("cuda") else "stax-cpu"

F32, BF16 = torch.float32, torch.bfloat16
TOL = {F32: dict(rtol=1e-5, atol=1e-5), BF16: dict(rtol=2e-2, atol=2e-2)}

# (batch, seq) per model: small enough that the file runs in well under a minute
SIZES = {"mlp": (2, 16), "gpt2": (2, 32), "gpt2_sdpa": (2, 32), "llama": (2, 32),
         "conv_bn_relu": (2, 12)}
# ops stax leaves to PyTorch inside an otherwise native graph
EXPECTED_FALLBACK = {"conv_bn_relu": ["aten.convolution.default"]}
# On CUDA, scaled_dot_product_attention dispatches to a fused attention kernel (flash /
# efficient / cuDNN, by dtype) that stax runs through PyTorch, as Inductor does.
SDPA_KERNELS = ("aten._scaled_dot_product_flash_attention.default",
                "aten._scaled_dot_product_efficient_attention.default",
                "aten._scaled_dot_product_cudnn_attention.default")
if DEVICE.startswith("cuda"):
    EXPECTED_FALLBACK["gpt2_sdpa"] = list(SDPA_KERNELS)


pytestmark = pytest.mark.usefixtures("stax_strict")


def _check_route(name):
    assert len(B.compiled_callables) == 1, (
        f"expected one compiled graph, got {len(B.compiled_callables)} (graph break or "
        "recompile)")
    c = B.compiled_callables[0]
    assert c.stax_route == ROUTE, f"route {c.stax_route}: {c.stax_fallback_reason}"
    assert c.stax_fallback_reason is None
    expected = EXPECTED_FALLBACK.get(name, [])
    if name == "gpt2_sdpa" and expected:  # one of the fused attention kernels
        assert c.stax_fallback_ops and set(c.stax_fallback_ops) <= set(expected), \
            c.stax_fallback_ops
    elif expected:
        for op in expected:
            assert op in c.stax_fallback_ops, c.stax_fallback_ops
        assert set(c.stax_fallback_ops) <= set(expected), c.stax_fallback_ops
    else:
        assert c.stax_fallback_ops == [], c.stax_fallback_ops
    assert c.stax_kernel_count >= 1
    return c


@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
@pytest.mark.parametrize("name", MODEL_NAMES)
def test_model_inference(name, dtype):
    model = make_model(name, dtype)
    ref_model = copy.deepcopy(model)
    batch, seq = SIZES[name]
    cm = torch.compile(model, backend="stax", fullgraph=True)
    with torch.no_grad():
        for which in ("A", "B"):
            (x,) = make_inputs(name, batch, seq, dtype)
            ref = ref_model(x.clone())
            out = cm(x)
            assert out.dtype == ref.dtype and out.shape == ref.shape
            assert torch.isfinite(ref).all()
            torch.testing.assert_close(out, ref, **TOL[dtype],
                                       msg=lambda m: f"{name} {dtype} inputs {which}: {m}")
    c = _check_route(name)
    if name != "conv_bn_relu":
        assert c.stax_library_calls, "the linear layers should run as library matmuls"


def test_model_with_grad_enabled_forward():
    # parameters require grad and autograd is on: aot_autograd compiles a forward graph
    # (the backward is compiled lazily and not needed here)
    model = make_model("gpt2", F32)
    ref_model = copy.deepcopy(model)
    cm = torch.compile(model, backend="stax", fullgraph=True)
    (x,) = make_inputs("gpt2", 2, 16, F32)
    out = cm(x)
    torch.testing.assert_close(out, ref_model(x), **TOL[F32])
    c = _check_route("gpt2")
    assert any("forward" in g.graph_id for g in c.stax_graphs), [g.graph_id for g in c.stax_graphs]


def test_gpt2_sdpa_matches_explicit_attention():
    # the two attention formulations of the same weights, each through stax, against eager
    # (this compared stax with stax, so an error common to both passed)
    m1 = make_model("gpt2", F32)
    m2 = make_model("gpt2_sdpa", F32)
    m2.load_state_dict(m1.state_dict())
    _randomize_norms(m1)
    m2.load_state_dict(m1.state_dict())
    (x,) = make_inputs("gpt2", 2, 24, F32)
    with torch.no_grad():
        ref = copy.deepcopy(m1)(x)
        a = torch.compile(m1, backend="stax", fullgraph=True)(x)
        b = torch.compile(m2, backend="stax", fullgraph=True)(x)
    for got in (a, b):
        assert got.shape == ref.shape and got.stride() == ref.stride() and got.dtype == ref.dtype
        torch.testing.assert_close(got, ref, **TOL[F32])
    allowed = set(EXPECTED_FALLBACK.get("gpt2_sdpa", []))
    assert len(B.compiled_callables) == 2
    for c in B.compiled_callables:
        assert c.stax_route == ROUTE and set(c.stax_fallback_ops) <= allowed


# ----------------------------------------------------------------------------- norm weights

def _norms(model):
    """(name, module) of every LayerNorm / RMSNorm of the model."""
    from models import RMSNorm
    return [(n, m) for n, m in model.named_modules()
            if isinstance(m, (torch.nn.LayerNorm, RMSNorm))]


def _randomize_norms(model, seed=123):
    """Random (not identity) norm weights and biases: make_model leaves them at 1 / 0,
    where a dropped or swapped norm weight computes the same thing."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, m in _norms(model):
            # drawn on the CPU (the generator's device) whatever the default device is
            m.weight.copy_(1.0 + 0.5 * torch.randn(m.weight.shape, generator=g, device="cpu"))
            if getattr(m, "bias", None) is not None:
                m.bias.copy_(0.5 * torch.randn(m.bias.shape, generator=g, device="cpu"))
    return model


@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
@pytest.mark.parametrize("name", ["gpt2", "gpt2_sdpa", "llama"])
def test_model_inference_random_norm_weights(name, dtype):
    model = _randomize_norms(make_model(name, dtype))
    norms = _norms(model)
    assert len(norms) == 2, norms
    ref_model = copy.deepcopy(model)
    batch, seq = SIZES[name]
    (x,) = make_inputs(name, batch, seq, dtype)
    with torch.no_grad():
        ref = ref_model(x.clone())
        # the test can see a swapped or dropped norm weight: eager itself moves past the
        # tolerance when the two norms' weights are swapped or the first is dropped
        (_, n1), (_, n2) = _norms(ref_model)
        w1, w2 = n1.weight.clone(), n2.weight.clone()
        n1.weight.copy_(w2), n2.weight.copy_(w1)
        swapped = ref_model(x.clone())
        n1.weight.fill_(1.0), n2.weight.copy_(w2)
        dropped = ref_model(x.clone())
        n1.weight.copy_(w1)
        for other in (swapped, dropped):
            assert not torch.allclose(other.float(), ref.float(), **TOL[dtype])
        out = torch.compile(model, backend="stax", fullgraph=True)(x)
    assert out.dtype == ref.dtype and out.shape == ref.shape and out.stride() == ref.stride()
    assert torch.isfinite(ref).all()
    torch.testing.assert_close(out, ref, **TOL[dtype])
    _check_route(name)


def test_model_api_sizes():
    # the constructor kwargs and make_inputs are the API the benchmarks rely on
    m = make_model("llama", F32, dim=32, n_heads=2, hidden=48, max_seq=16)
    (x,) = make_inputs("llama", 3, 8, F32, dim=32)
    assert x.shape == (3, 8, 32) and m(x).shape == (3, 8, 32)
    m = make_model("mlp", BF16, in_features=16, hidden=24, out_features=8)
    (x,) = make_inputs("mlp", 2, 4, BF16, dim=16)
    assert m(x).shape == (2, 4, 8) and m(x).dtype == BF16
    (x,) = make_inputs("conv_bn_relu", 2, 10, F32)
    assert x.shape == (2, 3, 10, 10)
