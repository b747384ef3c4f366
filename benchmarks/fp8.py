"""fp8 on the CPU: stax's legalized path (ui8 carriers, arithmetic decode/encode kernels
from stax-legalize-fp8 + the LLVM target) against torch's native eager fp8 casts.

    python benchmarks/fp8.py [--n 4194304] [--reps 30] [--out benchmarks/results/fp8-cpu]

Both paths move the same bytes (1 byte per fp8 element, 4 per f32, 2 per bf16); the
table gives the median time, the effective bandwidth, and checks the outputs are
bit-identical. Inductor is not compared: it does not lower fp8 casts on the CPU any
differently from eager's kernels here (run with --inductor to include it anyway).
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "test", "python"))

from stax._mlir import ir, new_context  # noqa: E402
from stax.passes.legalize_fp8 import CPU_PIPELINE_HOOK  # noqa: E402
from stax.passes.registry import run_pipeline  # noqa: E402
from stax.targets.llvm import compile_kernel  # noqa: E402

E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2
MLIR = {E4: "f8E4M3FN", E5: "f8E5M2", torch.float32: "f32", torch.bfloat16: "bf16"}


def build(n, src, dst):
    text = (f'func.func @main(%x: tensor<{n}x{MLIR[src]}>) -> tensor<{n}x{MLIR[dst]}> {{\n'
            f'  %y = "stax.convert"(%x) : (tensor<{n}x{MLIR[src]}>) -> tensor<{n}x{MLIR[dst]}>\n'
            f'  return %y : tensor<{n}x{MLIR[dst]}>\n}}\n')
    ctx = new_context()
    with ctx, ir.Location.unknown():
        m = ir.Module.parse(text)
        t0 = time.perf_counter()
        run_pipeline(m, [CPU_PIPELINE_HOOK, "canonicalize", "cse", "stax-fuse", "cse"])
        kop = [o.operation for o in m.body.operations[0].regions[0].blocks[0].operations
               if o.operation.name == "stax_graph.kernel"][0]
        k = compile_kernel(kop, [(1,)], [(1,)], "fp8k")
        return k, time.perf_counter() - t0, ctx


def bench(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 22)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    n = args.n
    torch.manual_seed(0)
    rows = []
    cases = [(E4, torch.float32), (E4, torch.bfloat16), (E5, torch.float32),
             (torch.float32, E4), (torch.bfloat16, E4), (torch.float32, E5)]
    for src, dst in cases:
        if src in (E4, E5):
            x = torch.randint(0, 256, (n,), dtype=torch.uint8).view(src)
        else:
            x = (torch.randn(n) * 100).to(src)
        k, compile_s, ctx = build(n, src, dst)
        out_dt = torch.uint8 if dst in (E4, E5) else dst
        out = torch.empty(n, dtype=out_dt)
        xin = x.view(torch.uint8) if src in (E4, E5) else x
        with ctx:
            t_stax = bench(lambda: k(xin, out), args.reps)
        ref = x.to(dst)
        t_eager = bench(lambda: x.to(dst), args.reps)
        got = out.view(dst) if dst in (E4, E5) else out
        a, b = (got.view(torch.uint8), ref.view(torch.uint8)) if dst in (E4, E5) else (got, ref)
        exact = bool(torch.equal(a.isnan(), b.isnan()) and torch.equal(
            a[~a.isnan()], b[~b.isnan()])) if a.is_floating_point() else bool(torch.equal(a, b))
        nbytes = n * (x.element_size() + ref.element_size())
        rows.append({"cast": f"{str(src)[6:]} -> {str(dst)[6:]}", "n": n, "bytes": nbytes,
                     "stax_ms": t_stax * 1e3, "eager_ms": t_eager * 1e3,
                     "eager_over_stax": t_eager / t_stax,
                     "stax_GBps": nbytes / t_stax / 1e9, "eager_GBps": nbytes / t_eager / 1e9,
                     "bit_exact": exact, "compile_s": compile_s})
    machine = {"python": platform.python_version(), "torch": torch.__version__,
               "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
               "torch_threads": torch.get_num_threads(), "reps": args.reps}
    lines = [f"# fp8 casts on the CPU: stax legalized (ui8 carrier) vs eager native",
             "", f"machine: {json.dumps(machine)}", "",
             "| cast | elements | bytes moved | stax ms | eager ms | eager/stax | stax GB/s | eager GB/s | bit-exact |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['cast']} | {r['n']} | {r['bytes']} | {r['stax_ms']:.3f} | "
                     f"{r['eager_ms']:.3f} | {r['eager_over_stax']:.2f}x | {r['stax_GBps']:.2f} | "
                     f"{r['eager_GBps']:.2f} | {r['bit_exact']} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out + ".md", "w") as f:
            f.write(text)
        with open(args.out + ".json", "w") as f:
            json.dump({"machine": machine, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
