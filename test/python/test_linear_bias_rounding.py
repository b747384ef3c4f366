"""A bf16/f16 linear with a bias is eager's addmm: the product and the bias summed and
rounded once. stax-fuse keeps such a bias add a kernel of its own and the wrapper (static
and dynamic graphs, CPU and GPU) runs matmul and bias as one `torch.addmm`.

Before, the matmul was rounded to bf16 and the bias added in the next kernel: a sum that
cancels (`x @ w.t()` close to `-b`) came out 0 instead of a small number, and what reads
its sign (abs' gradient, relu's mask) was wrong. Found by `stax-fuzz --dynamic
--backward` (CPU, seed 2901, program 2901008746): input gradients 1.6 away from eager's.
Checked here: forward outputs bit for bit equal to eager's (the same library call), and
every gradient, at the fuzz case's K = 1 and at real sizes."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import stax.backend as B

pytestmark = pytest.mark.usefixtures("stax_strict")

CUDA = torch.cuda.is_available()


def _linear_abs(x, w, b):
    return F.linear(x, w, b).abs()


def _mlp_relu(x, w, b):
    return torch.relu(F.linear(x, w, b)) * 2.0


SIZES = {"k1": [(64, 1, 64), (131, 1, 3), (256, 1, 512)],     # (rows, K, out)
         "real": [(256, 512, 512), (300, 768, 640)]}


@pytest.mark.parametrize("fn", [_linear_abs, _mlp_relu])
@pytest.mark.parametrize("sizes", sorted(SIZES))
@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_linear_bias_rounds_once(fn, sizes, dynamic, device, dtype):
    if device == "cuda" and not CUDA:
        pytest.skip("needs a CUDA GPU")
    torch._dynamo.reset()
    cf = torch.compile(fn, backend="stax", dynamic=dynamic)
    for n, k, m in SIZES[sizes]:
        g = torch.Generator(device=device).manual_seed(n * 7 + k)
        xs = [torch.randn(n, k, generator=g, device=device).to(dtype),
              torch.randn(m, k, generator=g, device=device).to(dtype),
              torch.randn(m, generator=g, device=device).to(dtype)]
        if sizes == "k1":   # make x * w cancel the bias often, as the fuzz case did
            xs[2] = -(xs[0][: m % n or 1, 0].repeat(m)[:m] * xs[1][:, 0])
        got_in = [t.clone().requires_grad_() for t in xs]
        want_in = [t.clone().requires_grad_() for t in xs]
        got, want = cf(*got_in), fn(*want_in)
        assert torch.equal(got, want), (n, k, m)   # eager's addmm, bit for bit
        gout = torch.randn(got.shape, generator=g, device=device).to(dtype)
        got.backward(gout)
        want.backward(gout)
        for a, e in zip(got_in, want_in):
            # the backward's own sums (the bias gradient over rows) round in another
            # order: bf16 tolerance, far below the 1.6 the double rounding caused
            torch.testing.assert_close(a.grad, e.grad, rtol=2e-2, atol=2e-2 * max(1, n / 64))
    rep = B.last_report()
    assert rep.route in ("stax-cpu", "triton") and rep.fallback_reason is None
    assert any("addmm" in c for r in B.reports() for c in r.library_calls), \
        [r.library_calls for r in B.reports()]


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_linear_on_3d_activations_rounds_once(device):
    """nn.Linear on [B, T, C] is addmm on [B*T, C] and a view: stax-hoist-reshapes leaves
    the bf16 bias add at the matmul's shape, so it is torch.addmm too, and the GELU after
    the view is another kernel."""
    if device == "cuda" and not CUDA:
        pytest.skip("needs a CUDA GPU")
    torch.manual_seed(0)
    lin = torch.nn.Linear(512, 768).to(device, torch.bfloat16)

    def block(x):
        return F.gelu(lin(x), approximate="tanh")

    torch._dynamo.reset()
    cf = torch.compile(block, backend="stax")
    x = torch.randn(8, 64, 512, device=device, dtype=torch.bfloat16)
    xg, xe = x.clone().requires_grad_(), x.clone().requires_grad_()
    got, want = cf(xg), block(xe)
    torch.testing.assert_close(got, want, rtol=0, atol=0) if device == "cpu" else \
        torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)
    calls = [c for r in B.reports() for c in r.library_calls]
    assert any(c.startswith("torch.addmm") for c in calls), calls
    got.sum().backward()
    want.sum().backward()
    torch.testing.assert_close(xg.grad, xe.grad, rtol=2e-2, atol=2e-2)
