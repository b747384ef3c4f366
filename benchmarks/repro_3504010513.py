"""stax-fuzz --device cuda --dynamic --backward seed 3504, program 3504010513 (shrunk):
F.pad of a [s0, 1] f32 input then a cast to float8_e4m3fn. Prints which elements
differ from eager, the report's route and notes, and the TTIR of every runtime-size
Triton kernel it launches (for finding the cause; run on a GPU)."""
import torch
import torch.nn.functional as F

import stax.backend as B
from stax.runtime.triton_sized import SizedTritonKernel

real = SizedTritonKernel.__call__
seen = set()


def traced(self, *tensors, sizes=None, check=True):
    p = self.plan(*tensors, sizes=sizes, check=True)
    if self.name not in seen:
        seen.add(self.name)
        print(f"=== {self.name} grid {p.grid} scalars {p.scalars}\n{p.ttir.text}")
    return real(self, *tensors, sizes=sizes, check=check)


SizedTritonKernel.__call__ = traced


def fn(x):
    return F.pad(x, (0, 5, 3, 0), value=-1.5).to(torch.float8_e4m3fn)


cf = torch.compile(fn, backend="stax", dynamic=True)
for shape in [(1, 1), (31, 1), (17, 3), (64, 8)]:
    x = torch.randn(*shape, device="cuda")
    got, want = cf(x).view(torch.uint8).cpu(), fn(x).view(torch.uint8).cpu()
    bad = (got != want).nonzero().tolist()
    print(shape, f"{len(bad)} of {got.numel()} differ", bad[:12],
          [(got[i, j].item(), want[i, j].item()) for i, j in bad[:6]])
for r in B.reports():
    print(r.summary())
