"""What the torch.profiler labels of stax kernels cost: µs per call of a small compiled
graph (2 kernels) with no profiler, the same graph forced onto its labelled wrapper
(what a call pays while a profiler records, without the profiler's own cost), and the
wrapper's one `_profiler_enabled()` check alone.

    python benchmarks/profiler_overhead.py [--calls N]

Medians of interleaved rounds, machine state printed. The labelled wrapper runs only
while a profiler records; otherwise a call pays one C++ flag check.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import machine_state  # noqa: E402

import torch  # noqa: E402


def graph(x, y):
    a = torch.softmax(x, dim=-1)
    b = torch.tanh(a * y + 1.0)
    return b.sum(0), b.amax(1)


def per_call_us(fn, args, calls: int) -> float:
    t = time.perf_counter()
    for _ in range(calls):
        fn(args)
    return (time.perf_counter() - t) / calls * 1e6


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    import stax.backend as B
    from stax.compiled_graph import _profiler_on

    x, y = torch.randn(16, 32), torch.randn(16, 32)
    cf = torch.compile(graph, backend="stax")
    torch.testing.assert_close(cf(x, y), graph(x, y))
    (cg,) = B.last_report().graphs
    assert B.last_report().route == "stax-cpu", B.last_report().fallback_reason
    plain = cg._plain_call               # the wrapper without labels
    check = cg._call                     # what a call runs: the check, then plain
    labelled = cg._labelled_call         # what the check picks while a profiler records
    args = [x, y]
    times = {"plain wrapper": [], "with profiler check (default)": [],
             "labelled (profiler recording)": [], "check alone": []}
    for _ in range(a.rounds):
        times["plain wrapper"].append(per_call_us(plain, args, a.calls))
        times["with profiler check (default)"].append(per_call_us(check, args, a.calls))
        times["labelled (profiler recording)"].append(per_call_us(labelled, args, a.calls))
        t = time.perf_counter()
        for _ in range(a.calls):
            _profiler_on()
        times["check alone"].append((time.perf_counter() - t) / a.calls * 1e6)
    for k, v in machine_state():
        print(f"# {k}: {v}")
    print(f"# graph: softmax + mul/add/tanh + sum + amax on [16, 32] f32, "
          f"{cg.kernel_count} kernels; {a.calls} calls x {a.rounds} rounds, medians")
    med = {k: statistics.median(v) for k, v in times.items() if v}
    for k, v in med.items():
        print(f"{k:34s} {v:8.2f} us/call")
    base = med["plain wrapper"]
    print(f"check overhead: {med['with profiler check (default)'] - base:+.2f} us/call; "
          f"labelled overhead: {med['labelled (profiler recording)'] - base:+.2f} "
          f"us/call ({cg.kernel_count} record_function ranges)")
    return med


if __name__ == "__main__":
    main()
