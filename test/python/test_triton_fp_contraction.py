"""The Triton kernels do not contract a multiply and an add into an FMA
(`targets/triton.COMPILE_OPTIONS`: enable_fp_fusion=False).

A fused kernel holds what were several eager kernels; contracting across them rounds a
product once where eager rounds it twice. A one-element layer norm's input gradient,
rstd * (g*w - mean(g*w)) with rstd = 1/sqrt(eps) = 316, came out 4.9e-4 on the H200 where
eager's (and the true value) is exactly 0 (stax-fuzz --device cuda --backward seed 3704,
program 3704011115; `benchmarks/data/fuzz_gpu_repro_3704011115.py`). No GPU needed for the PTX check;
the gradient check runs with CUDA."""
import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("triton")

from stax._mlir import ir, new_context  # noqa: E402
from stax.targets import triton as stax_triton  # noqa: E402
from stax.targets.kernel_ir import kernel_ops  # noqa: E402
from stax.targets.triton_ttir import emit_ttir  # noqa: E402

MUL_ADD = """
func.func @main(%a: tensor<4096xf32>, %b: tensor<4096xf32>, %c: tensor<4096xf32>) -> tensor<4096xf32> {
  %r = "stax_graph.kernel"(%a, %b, %c) ({
  ^bb0(%x: tensor<4096xf32>, %y: tensor<4096xf32>, %z: tensor<4096xf32>):
    %p = "stax.mul"(%x, %y) : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
    %s = "stax.sub"(%p, %z) : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
    "stax_graph.yield"(%s) : (tensor<4096xf32>) -> ()
  }) {kind = "pointwise", name = "k0_mul_sub"} : (tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
  return %r : tensor<4096xf32>
}
"""


def test_mul_sub_is_not_contracted_in_ptx():
    assert stax_triton.COMPILE_OPTIONS.get("enable_fp_fusion") is False
    with new_context():
        m = ir.Module.parse(MUL_ADD)
        (k,) = kernel_ops(m)
        t = emit_ttir(k, [[1]] * 3, [[1]], "k0_mul_sub")
    compiled, _ = stax_triton.compile_ttir(t, arch=90)
    ptx = compiled.asm["ptx"]
    assert "mul.f32" in ptx or "mul.rn.f32" in ptx, ptx[-2000:]
    assert "fma.rn.f32" not in ptx, [ln for ln in ptx.splitlines() if "fma" in ln][:5]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_one_element_layer_norm_input_gradient_is_zero_as_eager():
    torch.manual_seed(0)
    w = (torch.randn(1, device="cuda") * 0.3 + 100).requires_grad_()
    b = torch.randn(1, device="cuda").requires_grad_()
    cf = torch.compile(lambda x, w, b: F.layer_norm(x, (1,), w, b), backend="stax")
    for _ in range(3):
        x = torch.randn(1, device="cuda", requires_grad=True)
        g = torch.randn(1, device="cuda")
        (gx,) = torch.autograd.grad(cf(x, w, b), [x], g)
        (ex,) = torch.autograd.grad(F.layer_norm(x, (1,), w, b), [x], g)
        assert torch.equal(gx, ex), (gx, ex)
