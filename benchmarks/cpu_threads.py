"""Does splitting a stax CPU kernel over the second core pay? Times the same compiled
kernels (16M-element pointwise chain, [8192, 1024] softmax) with torch.set_num_threads(1)
and (2) interleaved, median of 15 runs each, outputs preallocated (so page faults of
fresh allocations, which every backend pays, do not hide the kernel's own time).

    python benchmarks/cpu_threads.py [--out benchmarks/results/cpu-threads-<label>.md]
"""
import argparse
import os
import platform
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "test", "python"))
from kernel_harness import run_kernel, ttype  # noqa: E402


def median_ms(f, n=15):
    f()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return sorted(ts)[n // 2] * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    n = 1 << 24
    x = torch.randn(n)
    T = ttype([n], torch.float32)
    pw = (f'    %t = "stax.tanh"(%a0) : ({T}) -> {T}\n'
          f'    %s = "stax.sigmoid"(%t) : ({T}) -> {T}\n'
          f'    %q = "stax.sqrt"(%s) : ({T}) -> {T}\n'
          f'    "stax_graph.yield"(%q) : ({T}) -> ()')
    (o,), k_pw = run_kernel(pw, [x], [((n,), torch.float32)])
    x2 = torch.randn(8192, 1024)
    S, R = ttype([8192, 1024], torch.float32), ttype([8192, 1], torch.float32)
    sm = (f'    %m = "stax.reduce_max"(%a0) {{dims = array<i64: 1>, keepdim = true}} : ({S}) -> {R}\n'
          f'    %mb = "stax.broadcast_in_dim"(%m) {{dims = array<i64: 0, 1>}} : ({R}) -> {S}\n'
          f'    %d = "stax.sub"(%a0, %mb) : ({S}, {S}) -> {S}\n'
          f'    %e = "stax.exp"(%d) : ({S}) -> {S}\n'
          f'    %s = "stax.reduce_sum"(%e) {{dims = array<i64: 1>, keepdim = true}} : ({S}) -> {R}\n'
          f'    %sb = "stax.broadcast_in_dim"(%s) {{dims = array<i64: 0, 1>}} : ({R}) -> {S}\n'
          f'    %o = "stax.div"(%e, %sb) : ({S}, {S}) -> {S}\n'
          f'    "stax_graph.yield"(%o) : ({S}) -> ()')
    (o2,), k_sm = run_kernel(sm, [x2], [((8192, 1024), torch.float32)])
    rows = {("pointwise 16M", 1): [], ("pointwise 16M", 2): [], ("softmax [8192,1024]", 1): [],
            ("softmax [8192,1024]", 2): []}
    for _ in range(3):
        for th in (1, 2):
            torch.set_num_threads(th)
            rows[("pointwise 16M", th)].append(median_ms(lambda: k_pw(x, o)))
            rows[("softmax [8192,1024]", th)].append(median_ms(lambda: k_sm(x2, o2)))
    lines = ["# stax CPU kernels: 1 vs 2 threads", "",
             f"Command: `python benchmarks/cpu_threads.py`; {platform.processor() or 'cpu'}, "
             f"{os.cpu_count()} cores, load average {os.getloadavg()}", "",
             "| kernel | 1 thread ms | 2 threads ms | speedup |", "| --- | --- | --- | --- |"]
    for case in ("pointwise 16M", "softmax [8192,1024]"):
        a = sorted(rows[(case, 1)])[1]
        b = sorted(rows[(case, 2)])[1]
        lines.append(f"| {case} | {a:.1f} | {b:.1f} | {a / b:.2f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
