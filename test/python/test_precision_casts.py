"""A bf16/f16 value a kernel stores is used rounded inside the kernel too (both
targets): one value, one precision.

A chain computed in f32 and rounded only at the store saw one value at two precisions:
a bf16 product stored rounded but normalized unrounded in the same kernel made
layer_norm's backward see x - mean != 0 over a row of one element, times rstd = 316:
input gradients off by 44 on the H200 (stax-fuzz --device cuda, program 103000377).
Here: a bf16 product is stored, and also converted to f32 and stored (as the forward
stored the product and layer_norm's f32 mean of it): eager's f32 copy is exactly the
stored product; it was the unrounded product before. The Triton kernel runs in the TTIR
interpreter (no GPU needed)."""
import os
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from kernel_harness import kernel_text, parse_kernel, run_kernel, ttype  # noqa: E402


def _body(dt):
    T, F = ttype((64, 1), dt), ttype((64, 1), torch.float32)
    return f'''    %p = "stax.mul"(%a0, %a1) : ({T}, {T}) -> {T}
    %f = "stax.convert"(%p) : ({T}) -> {F}
    %s = "stax.reduce_sum"(%f) {{dims = array<i64: 1>, keepdim = true}} : ({F}) -> {F}
    "stax_graph.yield"(%p, %s) : ({T}, {F}) -> ()'''


def _eager(a, b):
    p = a * b
    return p, p.float().sum(1, keepdim=True)


@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16])
def test_cpu_target_uses_stored_value_rounded(dt):
    a, b = torch.randn(64, 1).to(dt), torch.randn(64, 1).to(dt)
    (p, d), _ = run_kernel(_body(dt), [a, b], [((64, 1), dt), ((64, 1), torch.float32)])
    wp, wd = _eager(a, b)
    assert torch.equal(p, wp) and torch.equal(d, wd) and torch.equal(d, p.float())


@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16])
def test_triton_target_uses_stored_value_rounded(dt):
    pytest.importorskip("triton")
    from stax._mlir import ir, new_context
    from stax.targets.triton_ttir import emit_ttir
    from ttir_interp import run_kernel as interp
    a, b = torch.randn(64, 1).to(dt), torch.randn(64, 1).to(dt)
    T, F = ttype((64, 1), dt), ttype((64, 1), torch.float32)
    with new_context(), ir.Location.unknown():
        kop, _ = parse_kernel(kernel_text(_body(dt), [T, T], [T, F]))
        tk = emit_ttir(kop, [(1, 1), (1, 1)], [(1, 1), (1, 1)], "rounds")
    p, d = torch.empty(64, 1, dtype=dt), torch.empty(64, 1)
    interp(tk, a, b, p, d)
    wp, wd = _eager(a, b)
    assert torch.equal(p, wp) and torch.equal(d, wd) and torch.equal(d, p.float())


def test_triton_kernels_keep_denormals():
    """libdevice in flush-to-zero mode (Triton's default) made atan2 of two denormals 0
    where eager's CUDA kernel gives pi/4 (stax-fuzz --device cuda, program 104000505):
    stax compiles with enable_reflect_ftz=False, so libdevice's atan2 has no .ftz op.
    (Triton's own exp lowering is ex2.approx.ftz whatever the option: exp of a denormal
    is 1 either way.)"""
    pytest.importorskip("triton")
    from stax._mlir import ir, new_context
    from stax.targets import triton as stax_triton
    from stax.targets.triton_ttir import emit_ttir
    T = ttype((256,), torch.float32)
    body = (f'    %y = "stax.atan2"(%a0, %a0) : ({T}, {T}) -> {T}\n'
            f'    "stax_graph.yield"(%y) : ({T}) -> ()')
    with new_context(), ir.Location.unknown():
        kop, _ = parse_kernel(kernel_text(body, [T], [T]))
        tk = emit_ttir(kop, [(1,)], [(1,)], "denormals")
    assert "__nv_atan2f" in tk.text
    ptx = stax_triton.compile_ttir(tk, 90)[0].asm["ptx"]
    assert ".ftz" not in ptx


@pytest.mark.usefixtures("stax_strict")
@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16])
def test_scalar_operands_are_f32_values(dt):
    """bf16/f16 binary ops compute in f32 with the Python scalar as an f32 value, as
    eager does: f16 x / 65536 divided by f16(65536) = inf and gave 0, which zeroed every
    layer_norm input gradient over 64K elements (stax-fuzz, program 27183081712);
    bf16 x * 0.1 multiplied by bf16(0.1)."""
    import torch.nn.functional as F
    torch.manual_seed(0)
    x = torch.randn(64, 1024).to(dt)
    # (rsub is left out: eager's CPU kernel rounds a scalar in the first position to the
    # tensor's dtype, its CUDA kernel does not)
    for fn in (lambda x: x / 65536, lambda x: x * 0.1):
        torch._dynamo.reset()
        assert torch.equal(torch.compile(fn, backend="stax", fullgraph=True)(x), fn(x))
    w, b, g = (torch.randn(64, 1024).to(dt) for _ in range(3))
    xs, xe = x.clone().requires_grad_(), x.clone().requires_grad_()
    torch._dynamo.reset()
    f = lambda x: F.layer_norm(x, (64, 1024), w, b)  # noqa: E731
    (torch.compile(f, backend="stax")(xs) * g).sum().backward()
    (f(xe) * g).sum().backward()
    torch.testing.assert_close(xs.grad, xe.grad, rtol=2e-2, atol=2e-2 * xe.grad.abs().max().item())
