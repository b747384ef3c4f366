"""The pointwise loop order (`kernel_schedule.loop_order`): the CPU generator walks a
kernel's domain in its output's storage order, so a channels-last or transposed output
is written with vector stores along its stride-1 dim instead of one scalar per lane."""
from __future__ import annotations

import re

import pytest
import torch

from stax.passes.kernel_schedule import loop_order


@pytest.mark.parametrize("shape,strides,order", [
    ((8, 64, 28, 28), (50176, 784, 28, 1), (0, 1, 2, 3)),     # contiguous: unchanged
    ((8, 64, 28, 28), (50176, 1, 1792, 64), (0, 2, 3, 1)),    # channels-last
    ((512, 768), (1, 512), (1, 0)),                           # transposed
    ((4, 1, 8), (8, 8, 1), (0, 1, 2)),                        # size-1 dim, row-major
    ((4, 1, 8), (1, 1, 4), (1, 2, 0)),                        # size-1 dim goes outermost
    ((3, 5), (0, 1), (0, 1)),                                 # expanded (stride 0) rows
    ((), (), ()),
])
def test_loop_order(shape, strides, order):
    assert loop_order(shape, strides) == order


def _kernel_texts(debug_dir):
    import glob
    return [open(p).read() for p in sorted(glob.glob(f"{debug_dir}/*/kernel_*.mlir"))]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_channels_last_pointwise_is_vectorized_along_channels(dtype, tmp_path, monkeypatch):
    """BN (eval) + ReLU on a channels-last [256, 64, 9, 13] activation: eager's values
    and strides, and the kernel's stores are vector stores (the innermost loop runs over
    C, stride 1), not scalar stores of a loop over W (stride 64)."""
    import stax.backend as B
    monkeypatch.setenv("STAX_DEBUG_DIR", str(tmp_path))
    B.clear()
    g = torch.Generator().manual_seed(7)
    x = torch.randn(256, 64, 9, 13, generator=g).to(dtype).to(
        memory_format=torch.channels_last)
    scale, shift = torch.randn(64, generator=g).to(dtype), torch.randn(64, generator=g).to(dtype)

    def f(x, scale, shift):
        return torch.relu(x * scale[:, None, None] + shift[:, None, None])
    torch._dynamo.reset()
    got = torch.compile(f, backend="stax")(x, scale, shift)
    want = f(x, scale, shift)
    assert [r.route for r in B.reports()] == ["stax-cpu"]
    assert got.stride() == want.stride() == x.stride()
    tol = 0 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(got, want, atol=tol, rtol=tol)
    (text,) = [t for t in _kernel_texts(tmp_path) if "vector" in t or "memref.store" in t]
    assert re.search(r"vector\.store .*%out0", text), text[:2000]


def _triton_cl_kernel(dtype):
    """relu(x * scale[c] + shift[c]) on a channels-last [256, 64, 9, 13] x, written
    channels-last, as a stax kernel compiled by the Triton target."""
    pytest.importorskip("triton")
    from stax._mlir import ir, new_context
    from stax.targets import triton as stt
    mem = {torch.float32: "f32", torch.bfloat16: "bf16"}[dtype]
    shape = (256, 64, 9, 13)
    t4 = "tensor<" + "x".join(map(str, shape)) + f"x{mem}>"
    t1 = f"tensor<64x{mem}>"
    text = f'''func.func @main(%x: {t4}, %s: {t1}, %b: {t1}) {{
  %r = "stax_graph.kernel"(%x, %s, %b) ({{
  ^bb0(%a0: {t4}, %a1: {t1}, %a2: {t1}):
    %0 = "stax.broadcast_in_dim"(%a1) {{dims = array<i64: 1>}} : ({t1}) -> {t4}
    %1 = "stax.mul"(%a0, %0) : ({t4}, {t4}) -> {t4}
    %2 = "stax.broadcast_in_dim"(%a2) {{dims = array<i64: 1>}} : ({t1}) -> {t4}
    %3 = "stax.add"(%1, %2) : ({t4}, {t4}) -> {t4}
    %4 = "stax.full"() {{value = 0.0 : {mem}}} : () -> {t4}
    %5 = "stax.maximum"(%3, %4) : ({t4}, {t4}) -> {t4}
    "stax_graph.yield"(%5) : ({t4}) -> ()
  }}) {{name = "k"}} : ({t4}, {t1}, {t1}) -> {t4}
  return
}}
'''
    g = torch.Generator().manual_seed(3)
    x = torch.randn(*shape, generator=g).to(dtype).to(memory_format=torch.channels_last)
    scale, shift = (torch.randn(64, generator=g).to(dtype) for _ in range(2))
    ctx = new_context()
    with ctx, ir.Location.unknown():
        m = ir.Module.parse(text)
        kop = [o for o in m.body.operations[0].regions[0].blocks[0].operations
               if o.operation.name == "stax_graph.kernel"][0]
        k = stt.compile_kernel(kop.operation, [x.stride(), (1,), (1,)], [x.stride()], "k",
                               arch=90)
    return k, (x, scale, shift)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_triton_channels_last_pointwise_walks_storage_order(dtype):
    """The Triton 1-D pointwise kernel's lanes walk the channels-last output's storage
    order: the store offset is the block's linear index itself (no div/rem: consecutive
    lanes store consecutive addresses), and the values are f32's rounded once: bit for
    bit in the bounds-checking TTIR interpreter (no GPU), within the FMA contraction's
    one rounding on the GPU."""
    import os
    import sys
    sys.path.insert(0, os.path.dirname(__file__))
    from ttir_interp import run_kernel
    k, (x, scale, shift) = _triton_cl_kernel(dtype)
    assert ".entry k" in k.ptx
    text = k.ttir_kernel.text if hasattr(k.ttir_kernel, "text") else str(k.ttir_kernel)
    store = [ln for ln in text.splitlines() if "tt.store" in ln]
    assert len(store) == 1
    ptr = store[0].split("tt.store")[1].split(",")[0].strip()
    # the pointer is out0 + offs: an addptr of the linear lane index, not of a div/rem sum
    (addptr,) = [ln for ln in text.splitlines() if ln.strip().startswith(f"{ptr} = tt.addptr")]
    assert "%offs" in addptr, addptr
    # the kernel computes in f32 and rounds once at the store (docs/triton.md)
    xf, sf, bf = x.float(), scale.float(), shift.float()
    want = torch.relu(xf * sf[:, None, None] + bf[:, None, None]).to(dtype)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    ins = [t.to(dev) for t in (x, scale, shift)]
    out = torch.full_like(ins[0], float("nan"))
    assert out.stride() == x.stride()
    if dev == "cuda":
        k(*ins, out)
        torch.cuda.synchronize()
        # ptxas contracts x * s + b into one FMA (one rounding fewer than the reference)
        tol = 2e-6 if dtype == torch.float32 else 8e-3
        torch.testing.assert_close(out.cpu(), want, rtol=tol, atol=tol)
    else:
        run_kernel(k.ttir_kernel, *ins, out)
        assert torch.equal(out.cpu(), want)
