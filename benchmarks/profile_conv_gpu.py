"""Where conv + BatchNorm (eval) + ReLU spends its time on CUDA: per-kernel CUDA time of
eager, Inductor and stax (`stax.channels_last` off and on), NCHW and channels-last, at
benchmarks/layout.py's GPU sizes (batch 32, 128 channels, 56x56), from torch.profiler.

    python benchmarks/profile_conv_gpu.py [--top 8]

Numbers are for finding a gap, not for claims (benchmarks/layout.py makes those).
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

if __name__ == "__main__":
    common.init_env(strict=True)

import torch  # noqa: E402
from torch import nn  # noqa: E402

import stax.backend as B  # noqa: E402
from profile_gpu import kernel_table  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args(argv)
    c, hw, bs = 128, 56, 32
    torch.manual_seed(0)
    for cl in (False, True):
        m = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU())
        with torch.no_grad():
            m[1].running_mean.uniform_(-0.5, 0.5)
            m[1].running_var.uniform_(0.5, 1.5)
        m = m.eval().cuda()
        x = torch.randn(bs, c, hw, hw, device="cuda")
        if cl:
            m = m.to(memory_format=torch.channels_last)
            x = x.contiguous(memory_format=torch.channels_last)
        variants = [("eager", m), ("inductor", torch.compile(m, backend="inductor"))]
        for mode in ("off", "on"):
            variants.append((f"stax channels_last={mode}",
                             torch.compile(m, backend="stax",
                                           options={"stax.channels_last": mode})))
        with torch.no_grad():
            ref = m(x)
            for name, fn in variants:
                out = fn(x)
                err = (out - ref).abs().max().item()
                rows = kernel_table(lambda fn=fn: fn(x), 10)
                total = sum(r[0] for r in rows)
                print(f"== {'channels-last' if cl else 'NCHW'} input, {name}: {total:.0f} us "
                      f"of kernels per call, {sum(r[1] for r in rows):.0f} launches; "
                      f"max |err| {err:.2e}; output strides {tuple(out.stride())}")
                for us, calls, kname in rows[:args.top]:
                    print(f"  {us:9.1f} us  x{calls:4.1f}  {kname[:110]}")
                if name.startswith("stax"):   # its notes: CUDA graph status, restrides
                    for line in B.reports()[-1].explain().splitlines():
                        if line.startswith("note") or "cuda graph" in line.lower():
                            print("    " + line[:300])
    return 0


if __name__ == "__main__":
    sys.exit(main())
