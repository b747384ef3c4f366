"""H200 fuzz seed 4405, program 4405013250 (shrunk): a bf16 layer_norm over a last dim of
1, selected by a bool mask, compiled once with dynamic=True on CUDA, was wrong at a later
size (got -1.18, eager 0.38). Prints each call's values against eager; with
STAX_DEBUG_DIR set, the MLIR and the Triton kernels are dumped there."""
import sys

import torch
import torch.nn.functional as F

import stax.backend as B


def fn(x2, x3, x5, x6, x1):
    v4 = F.layer_norm(x1, (1,), x2, x3)
    return torch.where(x5, v4, x6)


dev = sys.argv[1] if len(sys.argv) > 1 else "cuda"
torch.manual_seed(0)
c = torch.compile(fn, backend="stax", dynamic=True)
bad = 0
for n in (31, 4, 7, 62, 1, 300):
    args = (torch.randn(1).bfloat16(), torch.randn(1).bfloat16(), torch.randn(n, 1, 1) > 0,
            torch.randn(1, 1, 1).bfloat16(), torch.randn(n, 1, 1).bfloat16())
    args = [a.to(dev) for a in args]
    got, want = c(*args), fn(*args)
    ok = torch.equal(got, want)
    bad += not ok
    print(n, "ok" if ok else "WRONG", got.flatten()[:6].tolist(), want.flatten()[:6].tolist(),
          "bias", args[1].item(), "other", args[3].item(), "mask", args[2].flatten()[:6].tolist())
for r in B.reports():
    print(type(r.specializer).__name__, r.route)
    for g in r.graphs:
        print("\n".join(getattr(g, "notes", [])[:4]))
sys.exit(1 if bad else 0)
