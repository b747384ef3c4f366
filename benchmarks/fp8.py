"""fp8: stax's legalized path (ui8 carriers, arithmetic decode/encode kernels from
stax-legalize-fp8) against native fp8, on the CPU or on the GPU.

    python benchmarks/fp8.py [--n 4194304] [--reps 30] [--out benchmarks/results/fp8-cpu]
    python benchmarks/fp8.py --device cuda [--n 268435456] [--reps 50]
                                            # writes benchmarks/results/fp8-h200.{md,json}

CPU mode: the LLVM target's legalized kernels against torch's eager casts.

CUDA mode (`--device cuda`): each fp8 cast and a decode-step graph (fp8 KV-cache append
+ exact decode + bf16 attention scores + softmax) through `torch.compile(backend=stax)`
twice: legalized (`stax.legalize_fp8=True`: ui8 carriers, arithmetic decode/encode in
the Triton kernels, what a GPU before sm_89 runs) and native (Triton `tt.fp_to_fp`,
hardware cvt on sm_89+), plus eager. Times are the median of CUDA-event timings;
"bytes moved" is the minimum traffic (every input read once, every output written
once) and GB/s is that over the time; the device-to-device copy bandwidth of a tensor
of the same size is measured for scale. Each path's output is compared bit for bit
with eager (mismatching elements counted: the native path saturates on overflow where
torch's CUDA cast gives NaN/inf, see test_fp8_triton.py).

Both paths move the same bytes (1 byte per fp8 element, 4 per f32, 2 per bf16); the
table gives the median time, the effective bandwidth, and checks the outputs are
bit-identical. A row (CPU) or a path (CUDA) whose output is not what eager gives is
FAILED: its time, bandwidth and ratios are not reported. In CUDA mode every compiled
graph must also report the route "triton" with no fallback op (fullgraph=True), as
benchmarks/checks.py requires. Inductor is not compared: it does not lower fp8 casts on
the CPU any differently from eager's kernels here. Both results files (.md, .json)
record the commit, torch, triton and the device.
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import torch

import stax.backend

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "test", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checks  # noqa: E402
import common  # noqa: E402

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
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--n", type=int, default=None,
                    help="elements per cast (default 4Mi on the CPU, 256Mi on the GPU)")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("benchmarks/fp8.py --device cuda: this torch sees no CUDA device")
        return main_cuda(args)
    args.n = args.n or 1 << 22
    args.reps = args.reps or 30
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
        row = {"cast": f"{str(src)[6:]} -> {str(dst)[6:]}", "n": n, "bytes": nbytes,
               "eager_ms": t_eager * 1e3, "eager_GBps": nbytes / t_eager / 1e9,
               "bit_exact": exact, "compile_s": compile_s}
        if exact:   # a figure only for a result that is eager's, bit for bit
            row.update(stax_ms=t_stax * 1e3, eager_over_stax=t_eager / t_stax,
                       stax_GBps=nbytes / t_stax / 1e9)
        else:
            row["status"] = "FAILED: the output is not eager's bit for bit"
            print(f"{row['cast']}: FAILED (not bit-exact with eager): no figure", flush=True)
        rows.append(row)
    prov = common.provenance("cpu")
    machine = {"python": platform.python_version(), "torch": torch.__version__,
               "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
               "torch_threads": torch.get_num_threads(), "reps": args.reps}
    lines = [f"# fp8 casts on the CPU: stax legalized (ui8 carrier) vs eager native",
             "", *common.provenance_lines(prov), "", f"machine: {json.dumps(machine)}", "",
             "Times and ratios only for casts whose stax output is eager's bit for bit "
             "(FAILED otherwise).", "",
             "| cast | elements | bytes moved | stax ms | eager ms | eager/stax | stax GB/s | eager GB/s | bit-exact |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if r["bit_exact"]:
            stax_cells = (f"{r['stax_ms']:.3f} | {r['eager_ms']:.3f} | "
                          f"{r['eager_over_stax']:.2f}x | {r['stax_GBps']:.2f}")
        else:
            stax_cells = f"FAILED | {r['eager_ms']:.3f} | - | -"
        lines.append(f"| {r['cast']} | {r['n']} | {r['bytes']} | {stax_cells} | "
                     f"{r['eager_GBps']:.2f} | {r['bit_exact']} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out + ".md", "w") as f:
            f.write(text)
        with open(args.out + ".json", "w") as f:
            json.dump({"provenance": prov, "machine": machine, "rows": rows}, f, indent=1)


# ----------------------------------------------------------------------------- CUDA mode

def cuda_time(fn, reps):
    """Median milliseconds of fn() over reps runs, each timed with CUDA events."""
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def _stax_fn(fn, legalize):
    import functools

    be = functools.partial(stax.backend.stax, options={"stax.legalize_fp8": legalize},
                           strict_native=True)
    return torch.compile(fn, backend=be, fullgraph=True, dynamic=False)


def _mismatches(got, ref, exact=True):
    """Elements whose bits differ (NaN == NaN for floats wider than fp8); exact=False:
    wider floats count where not within torch.testing's default tolerance (a graph's
    matmul/softmax need not round like eager's), fp8 and integers stay bit for bit."""
    got = got if isinstance(got, (tuple, list)) else (got,)
    ref = ref if isinstance(ref, (tuple, list)) else (ref,)
    bad = 0
    for g, r in zip(got, ref):
        if g.dtype in (E4, E5):
            bad += int((g.view(torch.uint8) != r.view(torch.uint8)).sum())
        elif g.is_floating_point() and not exact:
            rtol, atol = {torch.bfloat16: (1.6e-2, 1e-5), torch.float16: (1e-3, 1e-5)}.get(
                g.dtype, (1.3e-6, 1e-5))
            bad += int((~torch.isclose(g, r, rtol=rtol, atol=atol, equal_nan=True)).sum())
        elif g.is_floating_point():
            bad += int((~((g == r) | (g.isnan() & r.isnan()))).sum())
        else:
            bad += int((g != r).sum())
    return bad


def _verdict(row, path):
    """The mismatch count of a path, and FAILED with the reason where it has no figure."""
    err = row.get(f"{path}_error")
    n = row.get(f"{path}_mismatches", "-")
    return f"{n}; {err}" if err else str(n)


def _nbytes(ts):
    ts = ts if isinstance(ts, (tuple, list)) else (ts,)
    return sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))


def decode_step(cache, new, q):
    """One attention decode step over an fp8 KV cache: append the new keys (fp8 bytes),
    decode exactly to bf16, scores q.k^T (bf16 matmul), softmax in f32."""
    k = torch.cat([cache, new], dim=1)
    kb = k.to(torch.bfloat16)
    s = (q @ kb.transpose(1, 2)).float() * (q.shape[-1] ** -0.5)
    return k, torch.softmax(s, dim=-1)


def main_cuda(args):
    dev = torch.device(args.device)
    n = args.n or 1 << 28
    reps = args.reps or 50
    torch.manual_seed(0)
    from stax.passes.legalize_fp8 import pipeline_entry
    cases = [(E4, torch.float32), (E4, torch.bfloat16), (E5, torch.float32),
             (E5, torch.bfloat16), (torch.float32, E4), (torch.bfloat16, E4),
             (torch.float32, E5), (torch.bfloat16, E5)]
    # device-to-device copy bandwidth (read + write) for scale
    buf = torch.empty(n * 4, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(buf)
    copy_ms = cuda_time(lambda: dst.copy_(buf), reps)
    copy_gbps = 2 * buf.numel() / copy_ms / 1e6
    del buf, dst
    rows = []

    def measure(label, fn, inputs, elements, exact=True):
        ref = fn(*inputs)
        nbytes = _nbytes(inputs) + _nbytes(ref)
        row = {"case": label, "elements": elements, "bytes": nbytes}
        row["eager_ms"] = cuda_time(lambda: fn(*inputs), reps)
        for name, legalize in (("legalized", True), ("native", False)):
            try:
                torch._dynamo.reset()
                cf = _stax_fn(fn, legalize)
                t0 = time.perf_counter()
                stax.backend.clear()
                got = cf(*inputs)
                torch.cuda.synchronize()
                row[f"{name}_compile_s"] = time.perf_counter() - t0
                row[f"{name}_mismatches"] = _mismatches(got, ref, exact)
                del got
                # a figure only for a path on the triton route that computes eager's bits
                problems = checks.report_problems(stax.backend.reports(), "triton")
                if row[f"{name}_mismatches"]:
                    problems.append(f"{row[f'{name}_mismatches']} element(s) differ from "
                                    "eager")
                if problems:
                    row[f"{name}_error"] = "FAILED: " + "; ".join(problems)
                    continue
                row[f"{name}_ms"] = cuda_time(lambda: cf(*inputs), reps)
            except Exception as e:  # report, keep measuring the rest
                row[f"{name}_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        for k in ("eager", "legalized", "native"):
            if f"{k}_ms" in row:
                row[f"{k}_GBps"] = nbytes / row[f"{k}_ms"] / 1e6
        rows.append(row)
        print(json.dumps(row), flush=True)

    for src, dt in cases:
        if src in (E4, E5):
            x = torch.randint(0, 256, (n,), dtype=torch.uint8, device=dev).view(src)
        else:
            x = (torch.randn(n, device=dev) * 100).to(src)
        measure(f"{str(src)[6:]} -> {str(dt)[6:]}", lambda t, dt=dt: t.to(dt), (x,), n)
        del x
        torch.cuda.empty_cache()
    # decode step: 32 heads x 8 sequences, 4096 cached positions, head dim 128
    h, t, d = (256, 4096, 128) if dev.type == "cuda" else (8, 256, 128)
    cache = (torch.randn(h, t, d, device=dev) * 2).to(E4)
    new = (torch.randn(h, 1, d, device=dev) * 2).to(E4)
    q = torch.randn(h, 1, d, device=dev, dtype=torch.bfloat16)
    measure(f"decode step (fp8 KV {h}x{t}x{d}: cat + decode + bf16 q.k^T + softmax)",
            decode_step, (cache, new, q), cache.numel(), exact=False)

    props = torch.cuda.get_device_properties(dev)
    prov = common.provenance(str(dev))
    machine = {"python": platform.python_version(), "torch": torch.__version__,
               "gpu": props.name, "capability": f"sm_{props.major}{props.minor}",
               "reps": reps, "copy_GBps": round(copy_gbps, 1),
               "legalize_pass": pipeline_entry("triton", dev)}
    try:
        import triton
        machine["triton"] = triton.__version__
    except ImportError:
        pass

    def f(r, k, fmt):
        return fmt.format(r[k]) if k in r else "-"

    lines = ["# fp8 on the GPU: stax legalized (ui8 carriers) vs stax native fp8 vs eager",
             "", *common.provenance_lines(prov), "", f"machine: {json.dumps(machine)}", "",
             "A path whose output differs from eager's, or whose graphs are not all on the "
             "triton route without fallback ops, is FAILED and has no time.", "",
             f"Device-to-device copy: {copy_gbps:.0f} GB/s. Times: median of {reps} "
             "CUDA-event timings; bytes: inputs read + outputs written once; mismatches: "
             "elements whose bits differ from eager (the decode step's f32 softmax: "
             "elements outside torch.testing's tolerance; its fp8 cache bit for bit).", "",
             "| case | bytes moved | eager ms | legalized ms | native ms | legalized/native | "
             "eager GB/s | legalized GB/s | native GB/s | legalized mismatches | "
             "native mismatches |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        ratio = (f"{r['legalized_ms'] / r['native_ms']:.2f}x"
                 if "legalized_ms" in r and "native_ms" in r else "-")
        lines.append(
            f"| {r['case']} | {r['bytes']} | {f(r, 'eager_ms', '{:.3f}')} | "
            f"{f(r, 'legalized_ms', '{:.3f}')} | {f(r, 'native_ms', '{:.3f}')} | {ratio} | "
            f"{f(r, 'eager_GBps', '{:.0f}')} | {f(r, 'legalized_GBps', '{:.0f}')} | "
            f"{f(r, 'native_GBps', '{:.0f}')} | "
            f"{_verdict(r, 'legalized')} | {_verdict(r, 'native')} |")
    text = "\n".join(lines) + "\n"
    print(text)
    out = args.out or os.path.join(os.path.dirname(__file__), "results", "fp8-h200")
    with open(out + ".md", "w") as fh:
        fh.write(text)
    with open(out + ".json", "w") as fh:
        json.dump({"provenance": prov, "machine": machine, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
