"""CPU benchmark: eager vs torch.compile(backend="inductor") vs torch.compile(backend="stax"),
all in ONE process, same thread count.

    python benchmarks/cpu.py [--quick] [--threads N] [--label NAME] [--out FILE]

For each case: cold compile time (torch._dynamo.reset(), then the first call: Dynamo +
AOT + backend compile + one run), correctness against eager (max abs error, dtype-aware
tolerance), then steady state (warm-up, then the median of N timed runs, N >= 10 and
adaptive to about 1.5 s; the runs of eager/inductor/stax are interleaved in 5 rounds so
that load from other processes hits all three alike). STAX_STRICT=1 is set before torch is imported, so a stax fallback
raises and shows as FAILED instead of being timed as stax; for stax the route must be
"stax-cpu". Inductor's caches are disabled and its cache dir is a fresh tmpdir.

Writes a markdown report to benchmarks/results/cpu-<host>.md (or --out).
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

ENV_NOTES = common.init_env(strict=True)  # before torch is imported

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import stax.backend  # noqa: E402  (registers nothing; the entry point does)

TARGET_SPEEDUP_VS_EAGER = 2.0      # fused pointwise: stax >= 2x faster than eager
TARGET_VS_INDUCTOR = 1.25          # fused pointwise: stax_ms <= 1.25 * inductor_ms
TARGET_COLD_RATIO = 1.0 / 3.0      # every case: stax cold compile <= 1/3 of Inductor's


def pointwise(x):
    return torch.sqrt(torch.sigmoid(torch.tanh(x)) * 2.0 + 1.0)


def softmax(x):
    return torch.softmax(x, dim=-1)


def make_layernorm(n):
    w = torch.randn(n)
    b = torch.randn(n)

    def layernorm(x):
        return F.layer_norm(x, (n,), w, b, eps=1e-5)
    return layernorm


def cases(quick: bool):
    torch.manual_seed(0)
    pw_n = (1 << 20) if quick else (1 << 24)
    rows, cols = (1024, 1024) if quick else (8192, 1024)
    hidden, heads, seq, batch = (256, 4, 128, 1) if quick else (768, 12, 256, 1)
    out = [
        ("pointwise", f"sqrt(sigmoid(tanh(x))*2+1), {pw_n} f32", pointwise,
         (torch.randn(pw_n),)),
        ("softmax", f"softmax(x, -1), [{rows}, {cols}] f32", softmax,
         (torch.randn(rows, cols),)),
        ("layernorm", f"layer_norm w/ weight+bias, [{rows}, {cols}] f32",
         make_layernorm(cols), (torch.randn(rows, cols),)),
    ]
    block, src = common.gpt2_block(hidden, heads, seq)
    out.append(("gpt2_block", f"GPT-2 block inference, batch {batch}, seq {seq}, hidden "
                f"{hidden}, {heads} heads, no_grad ({src})", block,
                (torch.randn(batch, seq, hidden),)))
    return out


def run_case(name, fn, args, target_s):
    r = {"name": name}
    with torch.no_grad():
        ref = fn(*args)
    timed = {"eager": fn}
    for backend in ("inductor", "stax"):
        stax.backend.clear()
        compiled, out, cold, err = common.compile_cold(fn, args, backend)
        r[f"{backend}_cold_s"] = cold
        if err is None and backend == "stax":
            rep = stax.backend.last_report()
            if rep is None:
                err = "no stax report (backend not called?)"
            else:
                r["stax_route"] = rep.route
                r["stax_kernels"] = rep.kernel_count
                r["stax_library_calls"] = rep.library_calls
                r["stax_fallback_ops"] = rep.fallback_ops
                if rep.route != "stax-cpu":
                    err = f"route {rep.route!r} != 'stax-cpu': {rep.fallback_reason}"
        if err is not None:
            r[f"{backend}_error"] = err
            print(f"  {backend}: FAILED (cold attempt {cold:.2f} s): "
                  f"{' '.join(err.split())[:400]}", flush=True)
            continue
        r[f"{backend}_err"], r[f"{backend}_ok"] = common.compare(out, ref)
        timed[backend] = compiled
        extra = ""
        if backend == "stax":
            extra = (f"; route {r['stax_route']}, kernels {r['stax_kernels']}, "
                     f"library calls {r['stax_library_calls']}, "
                     f"fallback ops {r['stax_fallback_ops']}")
        print(f"  {backend}: cold {cold:.2f} s, max abs err {r[backend + '_err']:.2e} "
              f"{'ok' if r[backend + '_ok'] else 'MISMATCH'}{extra}", flush=True)
    # steady state: all variants interleaved (a shared machine's load hits them alike)
    for k, (ms, n) in common.median_ms_interleaved(timed, args, target_s=target_s).items():
        r[f"{k}_ms"], r[f"{k}_n"] = ms, n
        print(f"  {k}: {ms:.3f} ms (median of {n})", flush=True)
    torch._dynamo.reset()
    return r


def fmt(v, spec):
    return "FAILED" if v is None else format(v, spec)


def mark(ok):
    return "met" if ok else "**missed**"


def build_report(results, state, cmdline, warm):
    L = []
    L.append("# Stax CPU benchmark\n")
    L.append(f"Command: `{cmdline}`\n")
    L.append("## Machine state\n")
    for k, v in state:
        L.append(f"- {k}: {v}")
    for n in ENV_NOTES:
        L.append(f"- env: {n}")
    L.append("- one-time backend warm-up (trivial function, not charged to any case): " +
             ", ".join(f"{b} {s:.2f} s" for b, s in warm.items()))
    L.append("- all three run in one process with the same torch thread count; stax "
             "splits large kernels over torch.get_num_threads() parts (its own thread "
             "pool) and runs matmuls through torch (library calls)")
    L.append("")
    L.append("## Results\n")
    L.append("Times are medians of N timed runs after warm-up (eager, inductor and stax "
             "interleaved in 5 rounds). speedup = eager_ms / "
             "stax_ms; vs inductor = stax_ms / inductor_ms (lower is better); cold = "
             "first call after `torch._dynamo.reset()` (Dynamo + AOT + compile + one run); "
             "cold ratio = stax_cold / inductor_cold.\n")
    L.append("| case | eager ms | inductor ms | stax ms | stax speedup vs eager | "
             "stax ms / inductor ms | inductor cold s | stax cold s | cold ratio | "
             "max abs err (ind / stax) | stax kernels | stax library calls |")
    L.append("|" + " --- |" * 12)
    for r in results:
        s, e, i = r.get("stax_ms"), r["eager_ms"], r.get("inductor_ms")
        sc, ic = (r.get("stax_cold_s") if "stax_error" not in r else None,
                  r.get("inductor_cold_s") if "inductor_error" not in r else None)
        err_i = "FAILED" if "inductor_error" in r else \
            f"{r['inductor_err']:.1e} {'ok' if r['inductor_ok'] else 'MISMATCH'}"
        err_s = "FAILED" if "stax_error" in r else \
            f"{r['stax_err']:.1e} {'ok' if r['stax_ok'] else 'MISMATCH'}"
        L.append(f"| {r['name']} | {e:.3f} | {fmt(i, '.3f')} | {fmt(s, '.3f')} | "
                 f"{fmt(e / s if s else None, '.2f')}{'x' if s else ''} | "
                 f"{fmt(s / i if s and i else None, '.2f')} | {fmt(ic, '.2f')} | "
                 f"{fmt(sc, '.2f')} | {fmt(sc / ic if sc and ic else None, '.3f')} | "
                 f"{err_i} / {err_s} | {r.get('stax_kernels', '-')} | "
                 f"{len(r.get('stax_library_calls', [])) if 'stax_library_calls' in r else '-'} |")
    L.append("")
    L.append("## Targets\n")
    L.append("| target | case | value | result |")
    L.append("| --- | --- | --- | --- |")
    for r in results:
        ok_s = "stax_error" not in r and r.get("stax_ok", False)
        if r["name"] == "pointwise":
            sp = r["eager_ms"] / r["stax_ms"] if ok_s else None
            rel = r["stax_ms"] / r["inductor_ms"] if ok_s and "inductor_ms" in r else None
            L.append(f"| stax >= {TARGET_SPEEDUP_VS_EAGER:g}x faster than eager | pointwise | "
                     f"{fmt(sp, '.2f')}x | {mark(sp is not None and sp >= TARGET_SPEEDUP_VS_EAGER)} |")
            L.append(f"| stax time within {TARGET_VS_INDUCTOR:g}x of Inductor | pointwise | "
                     f"{fmt(rel, '.2f')} | {mark(rel is not None and rel <= TARGET_VS_INDUCTOR)} |")
    for r in results:
        ok_s = "stax_error" not in r and r.get("stax_ok", False)
        cr = r["stax_cold_s"] / r["inductor_cold_s"] if ok_s and \
            "inductor_error" not in r else None
        L.append(f"| stax cold compile <= 1/3 of Inductor's | {r['name']} | "
                 f"{fmt(cr, '.3f')} | {mark(cr is not None and cr <= TARGET_COLD_RATIO)} |")
    for r in results:
        if "stax_ok" in r and not r["stax_ok"]:
            L.append(f"| stax matches eager within tolerance | {r['name']} | "
                     f"{r['stax_err']:.2e} | **missed** |")
    L.append("")
    L.append("## Cases\n")
    for r in results:
        L.append(f"- **{r['name']}**: {r['desc']}; timed runs N: eager {r['eager_n']}, "
                 f"inductor {r.get('inductor_n', '-')}, stax {r.get('stax_n', '-')}")
        if "stax_route" in r:
            L.append(f"  - stax route `{r['stax_route']}`, {r['stax_kernels']} kernel(s), "
                     f"library calls {r['stax_library_calls']}, fallback ops "
                     f"{r['stax_fallback_ops']}")
        for b in ("inductor", "stax"):
            if f"{b}_error" in r:
                txt = r[f"{b}_error"].strip().replace("\n", "\n    ")
                L.append(f"  - **{b} FAILED** (cold attempt {r[f'{b}_cold_s']:.2f} s):\n\n"
                         f"    ```\n    {txt[:3000]}\n    ```")
    L.append("")
    L.append(f"Load average at the end: {common.load_average()}")
    return "\n".join(L) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch.set_num_threads for all three (default: torch's default)")
    ap.add_argument("--label", default=None, help="results file label (default: hostname)")
    ap.add_argument("--out", default=None, help="markdown output path")
    ap.add_argument("--cases", default=None, help="comma-separated subset of case names")
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    label = a.label or common.host_label() + ("-quick" if a.quick else "")
    out = a.out or os.path.join(common.REPO, "benchmarks", "results", f"cpu-{label}.md")
    cmdline = "python " + " ".join([os.path.relpath(sys.argv[0], common.REPO)] +
                                   (argv if argv is not None else sys.argv[1:]))

    state = common.machine_state()
    print("Machine state:")
    for k, v in state:
        print(f"  {k}: {v}")
    for n in ENV_NOTES:
        print(f"  env: {n}")
    warm = common.warm_up_backends()
    print("  one-time backend warm-up: " +
          ", ".join(f"{b} {s:.2f} s" for b, s in warm.items()), flush=True)

    target_s = 0.5 if a.quick else 1.5
    results = []
    for name, desc, fn, args in cases(a.quick):
        if a.cases and name not in a.cases.split(","):
            continue
        print(f"\n[{name}] {desc}", flush=True)
        r = run_case(name, fn, args, target_s)
        r["desc"] = desc
        results.append(r)

    report = build_report(results, state, cmdline, warm)
    print("\n" + report)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        f.write(report)
    print(f"wrote {os.path.relpath(out, common.REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
