"""GPU benchmark: eager vs torch.compile(backend="inductor") vs torch.compile(backend="stax"),
default and tuned (Inductor and stax both under --tuned-mode, default "max-autotune",
when stax's autotuner exists), all in ONE process.

    python benchmarks/gpu.py [--quick] [--label NAME] [--out FILE] [--jsonl FILE] [--cases a,b]
                             [--no-autotune] [--tuned-mode max-autotune|max-autotune-no-cudagraphs]

Cases: a fused pointwise chain and row softmax / layernorm on large f32 tensors (GBs
moved), a GPT-2 block and a Llama block in bf16 at batch 8, seq 2048 (random norm
weights), and one GPT-2 block training step (forward + mse loss + backward) in bf16.

Every case goes through the runner the CPU benchmark uses (`common.run_case`, exercised
by test/python/test_benchmarks.py on the CPU): a float64 run of the same model is the
reference; each variant is compiled with fullgraph=True after `torch._dynamo.reset()`
(cold compile time, Inductor with its caches disabled and a fresh cache dir, stax with a
fresh, empty STAX_CACHE_DIR); stax is compiled a second time with warm caches (its
in-memory kernel cache cleared: every kernel from the disk cache), and the warm
callable is what is timed. Outputs (a training step: the loss and every gradient) are
checked element by element against float64, with tolerances derived from eager's own
error (benchmarks/checks.py), on the first call, after the warm recompile and before
and after the timed runs; every stax graph must report the route "triton" and no
fallback op. A variant that fails is FAILED with the reason and has no time or ratio.
Latency: the median of N runs, each timed by CUDA events, after warm-up; the runs of
eager, the variants and a 1 GiB copy are interleaved in 5 rounds, so a change of the
machine's state moves them alike. Achieved GB/s (bytes of the inputs read + outputs
written, the minimum any implementation must move) is compared with that copy's
bandwidth, timed in the same rounds as the case.

Writes a markdown report (benchmarks/results/gpu-<label>.md or --out) and, with
--jsonl, one JSON line per case as soon as it finishes (partial runs keep what ran);
both record the commit, torch, triton and the GPU.
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

ENV_NOTES: list[str] = []
if __name__ == "__main__":  # the environment is set before torch is imported
    ENV_NOTES = common.init_env(strict=True)
    _STAX_CACHE = tempfile.mkdtemp(prefix="stax-bench-kernel-cache-")
    os.environ["STAX_CACHE_DIR"] = _STAX_CACHE
    ENV_NOTES.append(f"STAX_CACHE_DIR={_STAX_CACHE} (fresh and empty: stax compiles cold)")

import torch  # noqa: E402

import stax.backend  # noqa: E402

TARGET_PW_BW = 0.90       # pointwise: >= 90% of copy bandwidth
TARGET_RED_BW = 0.90      # softmax / layernorm: >= 90% (issue 9)
TARGET_BLOCK = 1.0        # blocks: stax_ms <= inductor_ms
TARGET_COLD = 0.5         # cold compile <= half of Inductor's
TUNED_MODES = ("max-autotune", "max-autotune-no-cudagraphs")


# ----------------------------------------------------------------------------- variants

def variants(autotune: bool, tuned_mode: str = "max-autotune") -> list[common.Variant]:
    """Default Inductor and stax; with `autotune`, both tuned under the same mode."""
    if tuned_mode not in TUNED_MODES:
        raise ValueError(f"tuned mode {tuned_mode!r}: expected one of {TUNED_MODES}")
    out = [common.Variant("inductor", "inductor"), common.Variant("stax", "stax")]
    if autotune:
        out += [common.Variant("inductor-max-autotune", "inductor", tuned_mode),
                common.Variant("stax-max-autotune", "stax", tuned_mode)]
    return out


#: (stax variant, the Inductor variant it is compared with): tuned with tuned
PAIRS = [("stax", "inductor"), ("stax-max-autotune", "inductor-max-autotune")]


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


def warm_recompile(make_compiled, run):
    """Compile again after `torch._dynamo.reset()` with stax's in-memory kernel cache
    cleared (every kernel from the disk cache); (callable, seconds, cache statistics)."""
    from stax.targets import triton as tt
    tt.clear_memory_cache()
    before = dict(tt.STATS)
    torch._dynamo.reset()
    stax.backend.clear()
    compiled = make_compiled()
    t = time.perf_counter()
    run(compiled)
    torch.cuda.synchronize()
    return compiled, time.perf_counter() - t, {k: tt.STATS[k] - before.get(k, 0)
                                                for k in tt.STATS}


def cuda_ms_interleaved(fns: dict, *, target_s: float = 1.0, rounds: int = 5,
                        warmup: int = 3, min_runs: int = 10,
                        max_runs: int = 100) -> dict:
    """label -> (latency ms, N, back-to-back ms) of each zero-argument callable, after
    warm-up. Latency: the median of N single calls, each timed by a pair of CUDA events
    from an idle device, so the host's dispatch before the first launch counts (what one
    synchronous call costs). Back-to-back: the median over the rounds of a run of calls
    issued without waiting, timed by one pair of events, per call (what the device spends
    when the host keeps ahead of it: the kernels' own time). The rounds interleave the
    labels (order rotated every round), so a change of the machine's state during the
    measurement (clocks, other tenants) moves every label alike."""
    names = list(fns)
    per = {}
    for n in names:
        for _ in range(warmup):
            fns[n]()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fns[n]()
        torch.cuda.synchronize()
        per[n] = time.perf_counter() - t0
    times = {n: [] for n in names}
    b2b = {n: [] for n in names}
    for n, k in common.interleaved_schedule(per, rounds=rounds, min_runs=min_runs,
                                            max_runs=max_runs, target_s=target_s):
        for _ in range(k):
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            fns[n]()
            b.record()
            b.synchronize()
            times[n].append(a.elapsed_time(b))
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(k):
            fns[n]()
        b.record()
        b.synchronize()
        b2b[n].append(a.elapsed_time(b) / k)
    return {n: (statistics.median(times[n]), len(times[n]), statistics.median(b2b[n]))
            for n in names}


#: bytes a copy of COPY_ELEMS f32 moves (read + write): the bandwidth reference
COPY_ELEMS = 1 << 28


def cuda_device(target_s: float) -> common.Device:
    def time_all(fns):
        # a 1 GiB device-to-device copy is timed in the same rounds as the case, so the
        # case's fraction of copy bandwidth compares two figures of one machine state
        x = torch.randn(COPY_ELEMS, device="cuda")
        y = torch.empty_like(x)
        fns = dict(fns, **{common.REFERENCE_LABEL: lambda: y.copy_(x)})
        out = cuda_ms_interleaved(fns, target_s=target_s)
        del x, y
        return out
    return common.Device("cuda", "triton", sync=torch.cuda.synchronize, time_all=time_all,
                         warm_recompile=warm_recompile)


def nbytes(*ts) -> int:
    return sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))


# ----------------------------------------------------------------------------- cases

def cases(quick: bool) -> list[common.Case]:
    sys.path.insert(0, os.path.join(common.REPO, "test", "python"))
    from models import make_model
    torch.manual_seed(0)
    n = (1 << 24) if quick else (1 << 28)                 # 1 GiB of f32 in, 1 GiB out
    rows, cols = ((16384, 1024) if quick else (262144, 1024))
    batch, seq = (2, 512) if quick else (8, 2048)
    out = []
    x = torch.randn(n, device="cuda")
    out.append(common.Case("pointwise", f"sqrt(sigmoid(tanh(x))*2+1), {n} f32",
                           common.pointwise_chain(), (x,), kind="pointwise",
                           bytes_moved=2 * nbytes(x)))
    x = torch.randn(rows, cols, device="cuda")
    out.append(common.Case("softmax", f"softmax(x, -1), [{rows}, {cols}] f32",
                           common.row_softmax(), (x,), kind="reduction",
                           bytes_moved=2 * nbytes(x)))
    ln = common.layer_norm(cols).cuda()
    out.append(common.Case("layernorm", f"layer_norm w/ random weight+bias, [{rows}, {cols}] "
                           "f32", ln, (x,), kind="reduction",
                           bytes_moved=2 * nbytes(x) + nbytes(ln.weight, ln.bias)))
    g = common.randomize_norms(make_model("gpt2", torch.bfloat16, dim=768, n_heads=12,
                                          max_seq=seq).cuda().eval())
    xg = torch.randn(batch, seq, 768, device="cuda", dtype=torch.bfloat16)
    out.append(common.Case("gpt2_block", f"GPT-2 block (dim 768, 12 heads, explicit attention)"
                           f" inference bf16, batch {batch}, seq {seq}", g, (xg,),
                           kind="block"))
    lm = common.randomize_norms(make_model("llama", torch.bfloat16, dim=2048, n_heads=16,
                                           max_seq=seq).cuda().eval())
    xl = torch.randn(batch, seq, 2048, device="cuda", dtype=torch.bfloat16)
    out.append(common.Case("llama_block", f"Llama block (dim 2048, 16 heads, SwiGLU 5504) "
                           f"inference bf16, batch {batch}, seq {seq}", lm, (xl,),
                           kind="block"))
    gt = common.randomize_norms(make_model("gpt2", torch.bfloat16, dim=768, n_heads=12,
                                           max_seq=seq).cuda())
    out.append(common.Case("gpt2_train_step", f"GPT-2 block training step (forward + mse loss "
                           f"+ backward) bf16, batch {batch}, seq {seq}", gt,
                           (xg, torch.randn_like(xg)), train=True, kind="train"))
    return out


# ----------------------------------------------------------------------------- report

def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def _gbs(r, label, copy_gbs):
    """GB/s of a variant from its back-to-back time per call (its latency where the record
    has none): the kernels' bandwidth, without the host's dispatch of a single call."""
    ms = common.figure(r, label)
    if not r.get("bytes") or ms is None:
        return None
    ms = r["variants"][label].get("b2b_ms") or ms
    return r["bytes"] / (ms * 1e-3) / 1e9


def _case_copy_gbs(r, copy_gbs):
    """The copy bandwidth timed back-to-back in the same rounds as the case (the session's
    start-up figure for a record without one)."""
    ms = r.get("reference_b2b_ms") or r.get("reference_ms")
    return copy_gbs if not ms else 2 * 4 * COPY_ELEMS / (ms * 1e-3) / 1e9


def build_report(results, prov, state, cmdline, copy_gbs, copy_ms, labels,
                 env_notes=()) -> str:
    """The markdown report; figures only of variants that passed (common.figure)."""
    L = ["# Stax GPU benchmark\n", f"Command: `{cmdline}`\n", "## Provenance\n"]
    L += common.provenance_lines(prov)
    L.append("\n## Machine state\n")
    L += [f"- {k}: {v}" for k, v in state]
    L += [f"- env: {n}" for n in env_notes]
    L.append(f"- device-to-device copy bandwidth (1 GiB f32, `empty_like(x).copy_(x)`, "
             f"CUDA events, median): **{copy_gbs:.0f} GB/s** ({copy_ms:.3f} ms)")
    pairs = [(s, i) for s, i in PAIRS if s in labels and i in labels]
    L.append("\n## Latency\n")
    L.append("Median of N runs (CUDA events per run, after warm-up), only for variants that "
             "passed every check (FAILED otherwise; reasons under Failures). ratio = stax ms "
             "/ the Inductor ms of the same tuning (default with default, tuned with tuned; "
             "lower is better). Latency: one call from an idle device (host dispatch "
             "included). b2b: per call of a run of calls issued back to back (the device's "
             "time). GB/s = (inputs read + outputs written) / b2b time, and its fraction of "
             "the copy bandwidth timed back to back in the same rounds as the case (copy "
             "GB/s column). The timed runs of eager, every variant and the copy are "
             "interleaved in 5 rounds, order rotated each round.\n")
    L.append("| case | " + " | ".join(f"{lb} ms" for lb in ["eager"] + labels) + " | " +
             " | ".join(f"{s} / {i}" for s, i in pairs) + " | " +
             " | ".join(f"{lb} b2b ms" for lb in ["eager"] + labels) + " | " +
             " | ".join(f"{s} / {i} b2b" for s, i in pairs) +
             " | stax GB/s (of copy) | inductor GB/s (of copy) | copy GB/s |")
    L.append("|" + " --- |" * (2 * (len(labels) + len(pairs)) + 5))

    def gb_cell(r, lb):
        g = _gbs(r, lb, copy_gbs)
        return "-" if g is None else f"{g:.0f} ({g / _case_copy_gbs(r, copy_gbs):.0%})"

    for r in results:
        L.append(f"| {r['name']} | " + " | ".join(common.cell(r, lb)
                                                   for lb in ["eager"] + labels) + " | " +
                 " | ".join(fmt(common.ratio(r, s, i), ".2f") for s, i in pairs) + " | " +
                 " | ".join(common.cell(r, lb, "b2b_ms") for lb in ["eager"] + labels) +
                 " | " +
                 " | ".join(fmt(common.ratio(r, s, i, "b2b_ms"), ".2f") for s, i in pairs) +
                 f" | {gb_cell(r, 'stax')} | {gb_cell(r, 'inductor')} | "
                 f"{_case_copy_gbs(r, copy_gbs):.0f} |")
    L.append("\n## Compile time and checks\n")
    L.append("cold = first call after `torch._dynamo.reset()` with empty caches; stax warm = "
             "the same after clearing stax's in-memory kernel cache (kernels from the disk "
             "cache). check = the largest error vs the float64 run (ok) or FAILED.\n")
    L.append("| case | variant | cold s | warm s | cold / inductor cold | check | kernels | "
             "launches/call |")
    L.append("|" + " --- |" * 8)
    for r in results:
        for lb in labels:
            v = r["variants"].get(lb)
            if v is None:
                continue
            chk = (f"ok ({v.get('max_err', 0.0):.1e})" if v["status"] == "ok"
                   else common.FAILED)
            base = "inductor-max-autotune" if "max-autotune" in lb else "inductor"
            cr = common.ratio(r, lb, base, "cold_s") if lb != base else None
            L.append(f"| {r['name']} | {lb} | {common.cell(r, lb, 'cold_s', '.2f')} | "
                     f"{common.cell(r, lb, 'warm_s', '.2f')} | {fmt(cr, '.2f')} | {chk} | "
                     f"{v.get('kernels', '-')} | {v.get('launches', '-')} |")
    L.append("\n## Targets\n")
    L.append("| target | case | value | result |")
    L.append("| --- | --- | --- | --- |")

    def mark(value, ok):
        if value is None:
            return "no figure (a variant FAILED its checks)"
        return "met" if ok else "**missed**"

    for r in results:
        if r["kind"] in ("pointwise", "reduction") and r.get("bytes"):
            want = TARGET_PW_BW if r["kind"] == "pointwise" else TARGET_RED_BW
            g = _gbs(r, "stax", copy_gbs)
            frac = g / _case_copy_gbs(r, copy_gbs) if g is not None else None
            L.append(f"| >= {want:.0%} of copy bandwidth | {r['name']} | {fmt(frac, '.1%')} | "
                     f"{mark(frac, frac is not None and frac >= want)} |")
        if r["kind"] in ("block", "train"):
            for s, i in pairs:
                rel = common.ratio(r, s, i)
                L.append(f"| {s} <= {i} latency | {r['name']} | {fmt(rel, '.2f')}x | "
                         f"{mark(rel, rel is not None and rel <= TARGET_BLOCK)} |")
        cr = common.ratio(r, "stax", "inductor", "cold_s")
        L.append(f"| cold compile <= 1/2 of Inductor's | {r['name']} | {fmt(cr, '.2f')} | "
                 f"{mark(cr, cr is not None and cr <= TARGET_COLD)} |")
    L.append("\n## Failures\n")
    L += common.failure_lines(results)
    L.append("\n## Cases\n")
    for r in results:
        L.append(f"- **{r['name']}**: {r['desc']}")
        for lb, v in r["variants"].items():
            if v.get("notes"):
                L.append(f"  - {lb} notes: {v['notes']}")
            if v.get("fallback_ops") or v.get("library_calls"):
                L.append(f"  - {lb}: library calls {len(v.get('library_calls', []))}, "
                         f"fallback ops {v.get('fallback_ops', [])}")
    return "\n".join(L) + "\n"


def run_all(all_cases, variant_list, device, *, prov, state, cmdline, copy_gbs, copy_ms,
            out, jsonl=None, env_notes=()) -> list[dict]:
    """Run every case; after each, append its JSON line (with the provenance) and rewrite
    the report, so a partial run keeps what ran. One broken case does not lose the rest."""
    labels = [v.label for v in variant_list]
    results = []
    report = ""
    for case in all_cases:
        try:
            r = common.run_case(case, variant_list, device)
        except Exception as e:  # noqa: BLE001 - recorded as the case's failure
            traceback.print_exc()
            r = {"name": case.name, "desc": case.desc, "kind": case.kind,
                 "bytes": case.bytes_moved, "train": case.train,
                 "variants": {"eager": {"status": common.FAILED, "failures": [
                     f"the case raised {type(e).__name__}: {e}"]}}}
        results.append(r)
        if jsonl:
            with open(jsonl, "a") as f:
                f.write(json.dumps(dict(r, provenance=prov), default=str) + "\n")
        report = build_report(results, prov, state, cmdline, copy_gbs, copy_ms, labels,
                              env_notes)
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as f:
            f.write(report)
        case.args = ()   # the case's tensors go before the next case allocates its own
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    print("\n" + report)
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--label", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--jsonl", default=None, help="append one JSON line per finished case")
    ap.add_argument("--cases", default=None)
    ap.add_argument("--no-autotune", action="store_true")
    ap.add_argument("--tuned-mode", default="max-autotune", choices=TUNED_MODES,
                    help="the mode of both tuned variants (Inductor and stax)")
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("benchmarks/gpu.py: this torch sees no CUDA device: nothing to benchmark")
        return 1
    label = a.label or common.host_label() + ("-quick" if a.quick else "")
    out = a.out or os.path.join(common.REPO, "benchmarks", "results", f"gpu-{label}.md")
    cmdline = "python " + " ".join([os.path.relpath(sys.argv[0], common.REPO)] +
                                   (argv if argv is not None else sys.argv[1:]))
    prov = common.provenance("cuda")
    state = common.machine_state()
    for k, v in list(prov.items()) + state:
        print(f"  {k}: {v}")
    copy_gbs, copy_ms = copy_bandwidth()
    print(f"  copy bandwidth: {copy_gbs:.0f} GB/s", flush=True)
    from stax.options import autotune_available
    tuned = autotune_available() and not a.no_autotune
    if not tuned:
        print("  tuned variants: not run (stax's autotuner is not available, or "
              "--no-autotune)")
    all_cases = cases(a.quick)
    if a.cases:
        wanted = a.cases.split(",")
        unknown = set(wanted) - {c.name for c in all_cases}
        if unknown:
            ap.error(f"unknown case(s) {sorted(unknown)}; the cases are "
                     f"{[c.name for c in all_cases]}")
        all_cases = [c for c in all_cases if c.name in wanted]
    results = run_all(all_cases, variants(tuned, a.tuned_mode),
                      cuda_device(0.3 if a.quick else 1.0), prov=prov, state=state,
                      cmdline=cmdline, copy_gbs=copy_gbs, copy_ms=copy_ms, out=out,
                      jsonl=a.jsonl, env_notes=ENV_NOTES)
    print(f"wrote {out}")
    return common.exit_status(results)


if __name__ == "__main__":
    sys.exit(main())
