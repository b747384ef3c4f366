"""Where a block's latency goes beyond its kernels: per call, the host time of the call
(no sync), the GPU time of its kernels (CUDA events, sync'd) and the throughput of
back-to-back calls, stax vs Inductor, and the top host functions of a stax call
(cProfile). For finding a gap, not for claims (claims come from gpu.py).

    python benchmarks/dispatch_gap.py [--cases llama_block,gpt2_block]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

if __name__ == "__main__":
    common.init_env(strict=True)

import torch  # noqa: E402

import gpu  # noqa: E402


def measure(call, iters=30):
    for _ in range(5):
        call()
    torch.cuda.synchronize()
    host, lat = [], []
    for _ in range(iters):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        e0.record()
        call()
        t1 = time.perf_counter()
        e1.record()
        torch.cuda.synchronize()
        host.append((t1 - t0) * 1e3)
        lat.append(e0.elapsed_time(e1))
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        call()
    torch.cuda.synchronize()
    thr = (time.perf_counter() - t0) * 1e3 / iters
    return statistics.median(host), statistics.median(lat), thr


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="llama_block,gpt2_block")
    args = ap.parse_args()
    want = args.cases.split(",")
    for case in gpu.cases(False):
        if case.name not in want:
            continue
        print(f"## {case.name}")
        for backend in ("inductor", "stax"):
            torch._dynamo.reset()
            fn = torch.compile(common.step_fn(case, case.model), backend=backend,
                               fullgraph=True)
            with torch.no_grad():
                def call(fn=fn):
                    return common.run_step(fn, case, case.model, case.args)
                h, lat, thr = measure(call)
                print(f"{backend:9s} host {h:.3f} ms/call, latency {lat:.3f} ms, "
                      f"back-to-back {thr:.3f} ms/call")
                if backend == "stax":
                    pr = cProfile.Profile()
                    pr.enable()
                    for _ in range(20):
                        call()
                    pr.disable()
                    torch.cuda.synchronize()
                    s = io.StringIO()
                    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(22)
                    print(s.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
