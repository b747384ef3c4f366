"""GPU regressions found on the H200 by the OpInfo sweep and stax-fuzz (skipped without
CUDA). Each compares with eager: values, shape, strides, device, and the stax route."""
import pytest
import torch

import stax.backend as B

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _compile(fn):
    torch._dynamo.reset()
    B.clear()
    return torch.compile(fn, backend="stax", fullgraph=True, dynamic=False)


def _routes():
    return {r.route for r in B.reports()}


def test_factories_without_inputs_return_cuda_tensors():
    # torch.full / arange / linspace with device="cuda" and no tensor input compiled for
    # the CPU and came back on the CPU
    def fn():
        a = torch.full((3, 5), 2.5, device="cuda")
        b = torch.arange(15, device="cuda", dtype=torch.float32).reshape(3, 5)
        return a * b + torch.linspace(0, 1, 5, device="cuda")
    got, want = _compile(fn)(), fn()
    assert _routes() == {"triton"}
    assert got.device == want.device and got.stride() == want.stride()
    torch.testing.assert_close(got, want)


def test_eval_batch_norm_returns_cudas_save_mean_and_invstd():
    # CUDA's native_batch_norm in eval mode returns the running mean and the running
    # invstd as outputs 1 and 2 (the CPU returns 0-element tensors); stax returned zeros
    x = torch.randn(256, 64, 8, 8, device="cuda")
    w, b, rm = (torch.randn(64, device="cuda") for _ in range(3))
    rv = torch.rand(64, device="cuda") + 0.1

    def fn(x, w, b, rm, rv):
        return torch.native_batch_norm(x, w, b, rm, rv, False, 0.1, 1e-5)
    got, want = _compile(fn)(x, w, b, rm, rv), fn(x, w, b, rm, rv)
    assert _routes() == {"triton"}
    for g, e in zip(got, want):
        assert g.shape == e.shape and g.dtype == e.dtype
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
