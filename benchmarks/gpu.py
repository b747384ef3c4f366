"""GPU benchmark: eager vs torch.compile(backend="inductor") vs torch.compile(backend="stax")
(default, and max-autotune-no-cudagraphs when the autotuner exists), all in ONE process.

    python benchmarks/gpu.py [--quick] [--label NAME] [--out FILE] [--cases a,b]

Cases: a fused pointwise chain and row softmax / layernorm on large f32 tensors (GBs
moved), a GPT-2 block and a Llama block in bf16 at batch 8, seq 2048, and one GPT-2 block
training step (forward + backward) in bf16.

For each case and variant: cold compile time (torch._dynamo.reset(), then the first
call: Dynamo + AOT + backend compile + one run; Inductor with its caches disabled and a
fresh cache dir, stax with a fresh, empty STAX_CACHE_DIR), warm compile time for stax
(the same compile again after `torch._dynamo.reset()` and clearing stax's in-memory
kernel cache: every kernel comes from the disk cache), correctness against eager
(dtype-aware tolerance), then the median latency of N timed runs (CUDA events around
each run, after warm-up). Achieved GB/s (bytes of the inputs read + outputs written,
the minimum any implementation must move) is compared with the device-to-device copy
bandwidth measured first (`torch.empty_like(x).copy_(x)`, 1 GiB, CUDA events).
STAX_STRICT=1 is set before torch is imported, so a stax fallback raises and shows as
FAILED instead of being timed; the stax route must be "triton".

Writes a markdown report (benchmarks/results/gpu-<label>.md or --out) and, with
--jsonl, one JSON line per case as soon as it finishes (partial runs keep what ran).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

ENV_NOTES = common.init_env(strict=True)  # before torch is imported
_STAX_CACHE = tempfile.mkdtemp(prefix="stax-bench-kernel-cache-")
os.environ["STAX_CACHE_DIR"] = _STAX_CACHE
ENV_NOTES.append(f"STAX_CACHE_DIR={_STAX_CACHE} (fresh and empty: stax compiles cold)")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import stax.backend  # noqa: E402

sys.path.insert(0, os.path.join(common.REPO, "test", "python"))
from models import make_model  # noqa: E402

TARGET_PW_BW = 0.90       # pointwise: >= 90% of copy bandwidth
TARGET_RED_BW = 0.85      # softmax / layernorm: >= 85%
TARGET_BLOCK = 1.0        # blocks: stax_ms <= inductor_ms
TARGET_COLD = 0.5         # cold compile <= half of Inductor's


# ----------------------------------------------------------------------------- timing

def cuda_ms(fn, *, warmup: int = 3, min_runs: int = 10, max_runs: int = 100,
            target_s: float = 1.0) -> tuple[float, int]:
    """Median ms of fn() over N runs, each timed by a pair of CUDA events, after warm-up;
    N adapts to about target_s (at least min_runs)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    per = time.perf_counter() - t0
    n = int(min(max_runs, max(min_runs, target_s / max(per, 1e-6))))
    times = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times), n


def copy_bandwidth() -> tuple[float, float]:
    """(GB/s, ms) of a 1 GiB device-to-device copy (read + write counted)."""
    x = torch.randn(1 << 28, device="cuda")
    y = torch.empty_like(x)
    ms, _ = cuda_ms(lambda: y.copy_(x), warmup=5, min_runs=20)
    return 2 * x.numel() * x.element_size() / (ms * 1e-3) / 1e9, ms


def nbytes(*ts) -> int:
    return sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))


# ----------------------------------------------------------------------------- cases

def pointwise(x):
    return torch.sqrt(torch.sigmoid(torch.tanh(x)) * 2.0 + 1.0)


def softmax(x):
    return torch.softmax(x, dim=-1)


def make_layernorm(n):
    w = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")

    def layernorm(x):
        return F.layer_norm(x, (n,), w, b, eps=1e-5)
    return layernorm, (w, b)


def cases(quick: bool):
    """(name, description, fn, args, bytes_moved or None, kind, train)"""
    torch.manual_seed(0)
    n = (1 << 24) if quick else (1 << 28)                 # 1 GiB of f32 in, 1 GiB out
    rows, cols = ((16384, 1024) if quick else (262144, 1024))
    batch, seq = (2, 512) if quick else (8, 2048)
    out = []
    x = torch.randn(n, device="cuda")
    out.append(("pointwise", f"sqrt(sigmoid(tanh(x))*2+1), {n} f32", pointwise, (x,),
                2 * nbytes(x), "pointwise", False))
    x = torch.randn(rows, cols, device="cuda")
    out.append(("softmax", f"softmax(x, -1), [{rows}, {cols}] f32", softmax, (x,),
                2 * nbytes(x), "reduction", False))
    ln, wb = make_layernorm(cols)
    out.append(("layernorm", f"layer_norm w/ weight+bias, [{rows}, {cols}] f32", ln, (x,),
                2 * nbytes(x) + nbytes(*wb), "reduction", False))
    g = make_model("gpt2", torch.bfloat16, dim=768, n_heads=12, max_seq=seq).cuda().eval()
    xg = torch.randn(batch, seq, 768, device="cuda", dtype=torch.bfloat16)
    out.append(("gpt2_block", f"GPT-2 block (dim 768, 12 heads, explicit attention) "
                f"inference bf16, batch {batch}, seq {seq}", g, (xg,), None, "block", False))
    lm = make_model("llama", torch.bfloat16, dim=2048, n_heads=16, max_seq=seq).cuda().eval()
    xl = torch.randn(batch, seq, 2048, device="cuda", dtype=torch.bfloat16)
    out.append(("llama_block", f"Llama block (dim 2048, 16 heads, SwiGLU 5504) inference "
                f"bf16, batch {batch}, seq {seq}", lm, (xl,), None, "block", False))
    gt = make_model("gpt2", torch.bfloat16, dim=768, n_heads=12, max_seq=seq).cuda()
    out.append(("gpt2_train_step", f"GPT-2 block training step (forward + mse loss + "
                f"backward) bf16, batch {batch}, seq {seq}", gt, (xg,), None, "train", True))
    return out


# ----------------------------------------------------------------------------- one case

def _train_fn(model):
    def step(x, t):
        return F.mse_loss(model(x), t)
    return step


def _compile(fn, backend, mode):
    if backend == "stax" and mode:
        import functools
        return torch.compile(fn, backend=functools.partial(stax.backend.stax, mode=mode))
    return torch.compile(fn, backend=backend, mode=mode)


def run_variant(label, backend, mode, fn, args, ref, train, model):
    """Cold compile + check + (for stax) warm compile. Returns (record, callable)."""
    r = {}
    stax.backend.clear()
    torch._dynamo.reset()
    torch.cuda.synchronize()
    compiled = _compile(fn, backend, mode)
    t = time.perf_counter()
    try:
        if train:
            model.zero_grad(set_to_none=True)
            loss = compiled(*args)
            loss.backward()
            out = [loss.detach()] + [p.grad for p in model.parameters()]
        else:
            with torch.no_grad():
                out = compiled(*args)
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - reported, never hidden
        r["error"] = f"{type(e).__name__}: {e}"
        r["cold_s"] = time.perf_counter() - t
        r["traceback"] = traceback.format_exc()[-4000:]
        return r, None
    r["cold_s"] = time.perf_counter() - t
    r["err"], r["ok"] = common.compare(out, ref)
    if backend == "stax":
        rep = stax.backend.last_report()
        r["route"] = rep.route
        r["kernels"] = rep.kernel_count
        r["launches"] = rep.launches_per_call
        r["library_calls"] = len(rep.library_calls)
        r["fallback_ops"] = rep.fallback_ops
        r["notes"] = rep.notes
        # max-autotune: which route each matmul took, how many searches hit the cache
        tuned = getattr(rep, "tuned", [])
        if tuned:
            r["tuned_matmuls"] = [f"{t['kernel']}: {t['route']} ({t['winner']})"
                                  for t in tuned if t["kind"] == "matmul"]
            r["tuned_searches"] = len(tuned)
            # every config timed per search (label -> ms): the data behind the defaults
            r["tuned"] = [{"kernel": t["kernel"], "kind": t["kind"], "winner": t["winner"],
                           "best_ms": t["best_ms"], "timings": t["timings"]} for t in tuned]
            r["tuned_from_cache"] = sum(1 for t in tuned if t.get("from_cache"))
        if rep.route != "triton":
            r["error"] = f"route {rep.route!r} != 'triton': {rep.fallback_reason}"
            return r, None
        # warm compile: fresh Dynamo, in-memory kernel cache cleared -> disk cache only
        try:
            from stax.targets import triton as tt
            tt.clear_memory_cache()
            before = dict(tt.STATS)
            torch._dynamo.reset()
            stax.backend.clear()
            c2 = _compile(fn, backend, mode)
            t = time.perf_counter()
            if train:
                model.zero_grad(set_to_none=True)
                c2(*args).backward()
            else:
                with torch.no_grad():
                    c2(*args)
            torch.cuda.synchronize()
            r["warm_s"] = time.perf_counter() - t
            r["warm_cache"] = {k: tt.STATS[k] - before.get(k, 0) for k in tt.STATS}
            compiled = c2
        except Exception as e:  # noqa: BLE001
            r["warm_error"] = f"{type(e).__name__}: {e}"
    return r, compiled


def run_case(name, desc, fn, args, moved, kind, train, variants, target_s):
    print(f"\n[{name}] {desc}", flush=True)
    rec = {"name": name, "desc": desc, "kind": kind, "bytes": moved, "variants": {}}
    model = fn if train else None
    if train:
        target = torch.randn_like(args[0])
        args = (args[0], target)
        fn = _train_fn(model)
        model.zero_grad(set_to_none=True)
        loss = fn(*args)
        loss.backward()
        ref = [loss.detach()] + [p.grad.clone() for p in model.parameters()]
    else:
        with torch.no_grad():
            ref = fn(*args)
    torch.cuda.synchronize()
    callables = {"eager": fn}
    for label, backend, mode in variants:
        r, c = run_variant(label, backend, mode, fn, args, ref, train, model)
        rec["variants"][label] = r
        if c is None:
            print(f"  {label}: FAILED (cold {r.get('cold_s', 0):.2f} s): "
                  f"{' '.join(r['error'].split())[:600]}", flush=True)
            continue
        callables[label] = c
        extra = ""
        if backend == "stax":
            extra = (f"; warm {r.get('warm_s', float('nan')):.2f} s "
                     f"(cache {r.get('warm_cache')}); route {r['route']}, kernels "
                     f"{r['kernels']}, launches/call {r['launches']}, library calls "
                     f"{r['library_calls']}, fallback ops {r['fallback_ops']}")
        print(f"  {label}: cold {r['cold_s']:.2f} s, max abs err {r['err']:.2e} "
              f"{'ok' if r['ok'] else 'MISMATCH'}{extra}", flush=True)
    rec["variants"].setdefault("eager", {})
    for label, c in callables.items():
        if train:
            def run(c=c):
                model.zero_grad(set_to_none=True)
                c(*args).backward()
        else:
            def run(c=c):
                with torch.no_grad():
                    c(*args)
        try:
            ms, n = cuda_ms(run, target_s=target_s)
        except Exception as e:  # noqa: BLE001
            rec["variants"][label]["error"] = f"timing: {type(e).__name__}: {e}"
            print(f"  {label}: timing FAILED: {e}", flush=True)
            continue
        rec["variants"][label]["ms"] = ms
        rec["variants"][label]["n"] = n
        gbs = f", {moved / (ms * 1e-3) / 1e9:.0f} GB/s" if moved else ""
        print(f"  {label}: {ms:.3f} ms (median of {n}){gbs}", flush=True)
    torch._dynamo.reset()
    return rec


# ----------------------------------------------------------------------------- report

def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def build_report(results, state, cmdline, copy_gbs, copy_ms, variants):
    L = ["# Stax GPU benchmark\n", f"Command: `{cmdline}`\n", "## Machine state\n"]
    for k, v in state:
        L.append(f"- {k}: {v}")
    for n in ENV_NOTES:
        L.append(f"- env: {n}")
    L.append(f"- device-to-device copy bandwidth (1 GiB f32, `empty_like(x).copy_(x)`, "
             f"CUDA events, median): **{copy_gbs:.0f} GB/s** ({copy_ms:.3f} ms)")
    L.append("")
    labels = [v[0] for v in variants]
    L.append("## Latency\n")
    L.append("Median of N runs (CUDA events per run, after warm-up). ratio = ms / "
             "inductor ms (lower is better). GB/s = (inputs read + outputs written) / "
             "time, and its fraction of the copy bandwidth.\n")
    L.append("| case | " + " | ".join(f"{lb} ms" for lb in ["eager"] + labels) +
             " | stax / inductor | stax GB/s (of copy) | inductor GB/s (of copy) |")
    L.append("|" + " --- |" * (len(labels) + 5))
    for r in results:
        v = r["variants"]
        ms = {lb: v.get(lb, {}).get("ms") for lb in ["eager"] + labels}
        s, i = ms.get("stax"), ms.get("inductor")
        def gb(x):
            if not r["bytes"] or x is None:
                return "-"
            g = r["bytes"] / (x * 1e-3) / 1e9
            return f"{g:.0f} ({g / copy_gbs:.0%})"
        L.append(f"| {r['name']} | " + " | ".join(
            "FAILED" if "error" in v.get(lb, {}) else fmt(ms[lb], ".3f")
            for lb in ["eager"] + labels) +
            f" | {fmt(s / i if s and i else None, '.2f')} | {gb(s)} | {gb(i)} |")
    L.append("")
    L.append("## Compile time\n")
    L.append("cold = first call after `torch._dynamo.reset()` with empty caches; stax warm = "
             "the same after clearing stax's in-memory kernel cache (kernels from the disk "
             "cache).\n")
    L.append("| case | inductor cold s | stax cold s | stax warm s | stax cold / inductor "
             "cold | stax kernels | launches/call | max abs err (inductor / stax) |")
    L.append("|" + " --- |" * 8)
    for r in results:
        v = r["variants"]
        ic = v.get("inductor", {}).get("cold_s") if "error" not in v.get("inductor", {}) else None
        sv = v.get("stax", {})
        sc = sv.get("cold_s") if "error" not in sv else None
        def err(lb):
            x = v.get(lb, {})
            if "error" in x or "err" not in x:
                return "FAILED"
            return f"{x['err']:.1e} {'ok' if x['ok'] else 'MISMATCH'}"
        L.append(f"| {r['name']} | {fmt(ic, '.2f')} | {fmt(sc, '.2f')} | "
                 f"{fmt(sv.get('warm_s'), '.2f')} | {fmt(sc / ic if sc and ic else None, '.2f')}"
                 f" | {sv.get('kernels', '-')} | {sv.get('launches', '-')} | "
                 f"{err('inductor')} / {err('stax')} |")
    L.append("")
    L.append("## Targets\n")
    L.append("| target | case | value | result |")
    L.append("| --- | --- | --- | --- |")
    for r in results:
        s = r["variants"].get("stax", {})
        i = r["variants"].get("inductor", {})
        ok = "error" not in s and s.get("ms")
        if r["kind"] in ("pointwise", "reduction") and r["bytes"]:
            want = TARGET_PW_BW if r["kind"] == "pointwise" else TARGET_RED_BW
            frac = r["bytes"] / (s["ms"] * 1e-3) / 1e9 / copy_gbs if ok else None
            L.append(f"| >= {want:.0%} of copy bandwidth | {r['name']} | "
                     f"{fmt(frac, '.1%')} | {'met' if frac and frac >= want else '**missed**'} |")
        if r["kind"] in ("block", "train"):
            rel = s["ms"] / i["ms"] if ok and i.get("ms") else None
            L.append(f"| <= Inductor's latency | {r['name']} | {fmt(rel, '.2f')}x | "
                     f"{'met' if rel and rel <= TARGET_BLOCK else '**missed**'} |")
        cr = s["cold_s"] / i["cold_s"] if "error" not in s and "cold_s" in s and \
            "error" not in i and i.get("cold_s") else None
        L.append(f"| cold compile <= 1/2 of Inductor's | {r['name']} | {fmt(cr, '.2f')} | "
                 f"{'met' if cr and cr <= TARGET_COLD else '**missed**'} |")
    L.append("")
    L.append("## Cases and failures\n")
    for r in results:
        L.append(f"- **{r['name']}**: {r['desc']}")
        for lb, v in r["variants"].items():
            if "notes" in v and v["notes"]:
                L.append(f"  - {lb} notes: {v['notes']}")
            if "error" in v:
                txt = v["error"].strip().replace("\n", "\n    ")
                L.append(f"  - **{lb} FAILED**:\n\n    ```\n    {txt[:3000]}\n    ```")
            if "warm_error" in v:
                L.append(f"  - {lb} warm compile FAILED: {v['warm_error'][:1000]}")
    return "\n".join(L) + "\n"


def gpu_state():
    st = common.machine_state()
    p = torch.cuda.get_device_properties(0)
    st += [("gpu", f"{p.name}, {p.total_memory / 2**30:.0f} GiB, sm_{p.major}{p.minor}, "
                   f"{p.multi_processor_count} SMs"),
           ("cuda (torch)", str(torch.version.cuda))]
    try:
        import triton
        st.append(("triton", triton.__version__))
    except Exception:  # noqa: BLE001
        st.append(("triton", "not importable"))
    return st


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--label", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--jsonl", default=None, help="append one JSON line per finished case")
    ap.add_argument("--cases", default=None)
    ap.add_argument("--no-autotune", action="store_true")
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to benchmark")
        return 1
    label = a.label or common.host_label() + ("-quick" if a.quick else "")
    out = a.out or os.path.join(common.REPO, "benchmarks", "results", f"gpu-{label}.md")
    cmdline = "python " + " ".join([os.path.relpath(sys.argv[0], common.REPO)] +
                                   (argv if argv is not None else sys.argv[1:]))
    state = gpu_state()
    for k, v in state:
        print(f"  {k}: {v}")
    copy_gbs, copy_ms = copy_bandwidth()
    print(f"  copy bandwidth: {copy_gbs:.0f} GB/s", flush=True)
    from stax.options import autotune_available
    variants = [("inductor", "inductor", None), ("stax", "stax", None)]
    if autotune_available() and not a.no_autotune:
        variants.append(("stax-max-autotune", "stax", "max-autotune-no-cudagraphs"))
    else:
        print("  stax max-autotune: not run (autotuner not available or --no-autotune)")
    results = []
    for name, desc, fn, args, moved, kind, train in cases(a.quick):
        if a.cases and name not in a.cases.split(","):
            continue
        try:
            r = run_case(name, desc, fn, args, moved, kind, train, variants,
                         0.3 if a.quick else 1.0)
        except Exception as e:  # noqa: BLE001 - one broken case must not lose the rest
            traceback.print_exc()
            r = {"name": name, "desc": desc, "kind": kind, "bytes": moved,
                 "variants": {"eager": {"error": f"{type(e).__name__}: {e}"}}}
        results.append(r)
        if a.jsonl:
            with open(a.jsonl, "a") as f:
                f.write(json.dumps(r, default=str) + "\n")
        report = build_report(results, state, cmdline, copy_gbs, copy_ms, variants)
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as f:
            f.write(report)
        del fn, args
        torch.cuda.empty_cache()
    print("\n" + report)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
