"""stax-fuzz 107000487 on the H200: bf16 prod over dim 0 of a [2, 2**30 + 17] input, with
backward, gave a wrong forward element and then `CUDA error: misaligned address`.
Runs the steps one at a time (run with CUDA_LAUNCH_BLOCKING=1) and says which fails.
    python benchmarks/gpu_huge_prod_repro.py [N]
"""
import os
import sys

import torch

os.environ.setdefault("STAX_STRICT", "1")
import stax.backend as B  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else (1 << 30) + 17
dev = "cuda"


def step(name, f):
    try:
        r = f()
        torch.cuda.synchronize()
        print(f"{name}: ok", flush=True)
        return r
    except Exception as e:  # noqa: BLE001
        print(f"{name}: FAILED {type(e).__name__}: {str(e)[:400]}", flush=True)
        raise SystemExit(1)


g = torch.Generator(device=dev).manual_seed(0)
x = torch.randn((2, N), generator=g, device=dev).to(torch.bfloat16)
want = torch.prod(x, -2)
# the product of two bf16 values is exact in f32: this is the correctly rounded answer
truth = (x[0].float() * x[1].float()).to(torch.bfloat16)


def differ(a, b):
    return (a.float() != b.float()) & ~(a.isnan() & b.isnan())


d = differ(want, truth)
print(f"eager vs exact: {int(d.sum())} of {want.numel()} differ"
      + (f"; first at {int(d.nonzero()[0])}: eager {want[int(d.nonzero()[0])].item()}, "
         f"exact {truth[int(d.nonzero()[0])].item()}" if d.any() else ""), flush=True)
for backward in (False, True):
    torch._dynamo.reset()
    B.clear()
    f = torch.compile(lambda x: (torch.prod(x, -2), x), backend="stax", fullgraph=True)
    xi = x.detach().requires_grad_(backward)
    out = step(f"forward (backward={backward})", lambda: f(xi))
    bad = differ(out[0], want)
    ex = differ(out[0], truth)
    print(f"  stax vs exact: {int(ex.sum())} differ", flush=True)
    print(f"  forward value mismatches: {int(bad.sum())} of {want.numel()}"
          + (f"; first at {int(bad.nonzero()[0])}" if bad.any() else ""), flush=True)
    for r in B.reports():
        print("  route", r.route, "kernels", r.stax_kernel_count, "fallback_ops",
              r.fallback_ops, flush=True)
    if backward:
        w = torch.randn(N, generator=g, device=dev).to(torch.bfloat16)
        gx = step("backward", lambda: torch.autograd.grad((out[0].double() * w.double()).sum(), xi)[0])
        xe = x.detach().requires_grad_(True)
        ge = torch.autograd.grad((torch.prod(xe, -2).double() * w.double()).sum(), xe)[0]
        d = (gx.float() - ge.float()).abs()
        print(f"  grad max abs diff {float(d.max()):.4g}", flush=True)
print("done")
