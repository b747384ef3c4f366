"""Where the time goes: per-kernel CUDA time of one benchmarks/gpu.py case, eager vs
Inductor vs stax, from torch.profiler, in one process.

    python benchmarks/profile_gpu.py [--cases gpt2_train_step,llama_block] [--quick] [--top 25]

For each case and backend it compiles the case's callable (fullgraph=True, as gpu.py
does), warms it up, profiles `--iters` calls and prints the kernels sorted by total CUDA
time (name truncated, calls per step, µs per step), the step's total and the number of
launches per step. Numbers are for finding a gap, not for claims: claims come from
gpu.py (median latency, correctness checked).
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
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import gpu  # noqa: E402


def kernel_table(fn, iters: int):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    rows = []
    for ev in prof.key_averages():
        us = ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time_total
        if us <= 0 or ev.count == 0:
            continue
        rows.append((us / iters, ev.count / iters, ev.key))
    rows.sort(reverse=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="gpt2_train_step,llama_block,gpt2_block")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)
    wanted = args.cases.split(",")
    for case in [c for c in gpu.cases(args.quick) if c.name in wanted]:
        print(f"\n#### {case.name}: {case.desc}")
        for label, backend in (("eager", None), ("inductor", "inductor"), ("stax", "stax")):
            torch._dynamo.reset()
            fn = common.step_fn(case, case.model)
            if backend:
                fn = torch.compile(fn, backend=backend, fullgraph=True)

            def call(fn=fn):
                return common.run_step(fn, case, case.model, case.args)
            rows = kernel_table(call, args.iters)
            total = sum(r[0] for r in rows)
            launches = sum(r[1] for r in rows)
            print(f"\n== {label}: {total:.0f} us of kernels per step, {launches:.0f} launches")
            for us, calls, name in rows[:args.top]:
                print(f"  {us:9.1f} us  x{calls:4.1f}  {name[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
