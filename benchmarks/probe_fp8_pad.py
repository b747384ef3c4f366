"""Which fp8-cast kernels disagree with eager on the H200 (static compiles at [31, 1]
and other shapes), to localize fuzz failure 3504010513; prints the PTX around the
first cvt of the failing kernel."""
import glob
import os

import torch
import torch.nn.functional as F

F8 = torch.float8_e4m3fn
CASES = {
    "pad_-1.5": lambda x: F.pad(x, (0, 5, 3, 0), value=-1.5).to(F8),
    "pad_0": lambda x: F.pad(x, (0, 5, 3, 0)).to(F8),
    "pad_cols_only": lambda x: F.pad(x, (0, 5)).to(F8),
    "where_const": lambda x: torch.where(x > 0, x, torch.full_like(x, -1.5)).to(F8),
    "plain_cast": lambda x: x.to(F8),
    "pad_-1.5_f16": lambda x: F.pad(x, (0, 5, 3, 0), value=-1.5).to(torch.float16),
}
OPTS = {"fused": {}, "unfused": {"stax.fusion": False}}
for shape in [(31, 1), (15, 1), (31, 2), (7, 3)]:
    for (name, fn), (oname, opts) in [(c, o) for c in CASES.items() for o in OPTS.items()]:
        if name not in ("pad_-1.5", "pad_0", "pad_-1.5_f16"):
            continue
        name = f"{name} {oname}"
        torch._dynamo.reset()
        x = torch.randn(*shape, device="cuda")
        got = torch.compile(fn, backend="stax", dynamic=False, options=opts)(x)
        want = fn(x)
        g = got.view(torch.uint8) if got.dtype == F8 else got.view(torch.int16)
        w = want.view(torch.uint8) if want.dtype == F8 else want.view(torch.int16)
        bad = (g != w).nonzero().tolist()
        print(shape, name, f"{len(bad)} of {g.numel()} differ", bad[:4],
              [(g[tuple(i)].item(), w[tuple(i)].item()) for i in bad[:3]], flush=True)
d = os.environ.get("STAX_DEBUG_DIR")
if d:
    for f in sorted(glob.glob(f"{d}/*/*.ptx"))[:1]:
        ptx = open(f).read()
        i = ptx.find("cvt.rn.satfinite")
        print(f, ptx[max(0, i - 2500):i + 1200])
