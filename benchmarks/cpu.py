"""CPU benchmark: eager vs torch.compile(backend="inductor") vs torch.compile(backend="stax"),
all in ONE process, same thread count.

    python benchmarks/cpu.py [--quick] [--threads N] [--label NAME] [--out FILE] [--cases a,b]
                             [--autotune]

`--autotune` adds the variant "stax-autotuned": stax with mode="max-autotune" (the CPU
autotuner, stax.cpu_autotune, searches every kernel's tiling.cpu; its cold time includes
the search, with a fresh autotune cache), reported beside stax's default schedules.

Every case goes through the runner shared with the GPU benchmark (`common.run_case`):
a float64 run of the same model gives the reference; each variant is compiled with
fullgraph=True after `torch._dynamo.reset()` (cold compile time: Dynamo + AOT + backend
compile + one run), and its outputs are checked element by element against float64
with tolerances derived from eager's own error (benchmarks/checks.py), on the first
call and on calls before and after the timed runs. For stax every compiled graph must
report the route "stax-cpu" with no fallback op. A variant that fails any check is
FAILED with the reason, and no time or ratio is reported for it. Steady state: warm-up,
then the median of N timed runs (N >= 10, adaptive to about 1.5 s), eager, inductor and
stax interleaved in 5 rounds so that load from other processes hits all three alike.
STAX_STRICT=1 is set before torch is imported; Inductor's caches are disabled and its
cache dir is a fresh tmpdir.

Writes a markdown report to benchmarks/results/cpu-<host>.md (or --out) and the same
records as JSON beside it (.json), both with the commit, versions and device.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

# the environment is set before torch is imported, and only when run as a script
ENV_NOTES = common.init_env(strict=True) if __name__ == "__main__" else []

import torch  # noqa: E402

import stax.backend  # noqa: E402,F401  (the backend itself comes by entry point)

TARGET_SPEEDUP_VS_EAGER = 2.0      # fused pointwise: stax >= 2x faster than eager
TARGET_VS_INDUCTOR = 1.25          # fused pointwise: stax_ms <= 1.25 * inductor_ms
TARGET_COLD_RATIO = 1.0 / 3.0      # every case: stax cold compile <= 1/3 of Inductor's
VARIANTS = [common.Variant("inductor", "inductor"), common.Variant("stax", "stax")]
AUTOTUNED = common.Variant("stax-autotuned", "stax", mode="max-autotune")


def cases(quick: bool) -> list[common.Case]:
    torch.manual_seed(0)
    pw_n = (1 << 20) if quick else (1 << 24)
    rows, cols = (1024, 1024) if quick else (8192, 1024)
    hidden, heads, seq, batch = (256, 4, 128, 1) if quick else (768, 12, 256, 1)
    out = [
        common.Case("pointwise", f"sqrt(sigmoid(tanh(x))*2+1), {pw_n} f32",
                    common.pointwise_chain(), (torch.randn(pw_n),), kind="pointwise"),
        common.Case("softmax", f"softmax(x, -1), [{rows}, {cols}] f32", common.row_softmax(),
                    (torch.randn(rows, cols),), kind="reduction"),
        common.Case("layernorm", f"layer_norm w/ random weight+bias, [{rows}, {cols}] f32",
                    common.layer_norm(cols), (torch.randn(rows, cols),), kind="reduction"),
        common.Case("picked_nll", f"-log_softmax(x)[arange(n), target].mean(), [{rows}, "
                    f"{cols}] f32", common.picked_nll(),
                    (torch.randn(rows, cols), torch.randint(0, cols, (rows,))),
                    kind="reduction"),
    ]
    # a ResNet stage's BatchNorm + ReLU at inference: NCHW rows of 56 (no whole vector of
    # 16 lanes: stax's rows are merged into runs, tiling.cpu.merged)
    bn = torch.nn.Sequential(torch.nn.BatchNorm2d(64), torch.nn.ReLU()).eval()
    common.randomize_norms(bn)
    with torch.no_grad():
        bn[0].running_mean.uniform_(-0.5, 0.5)
        bn[0].running_var.uniform_(0.5, 1.5)
    n_img = 2 if quick else 32
    out.append(common.Case("bn_relu_nchw", f"BatchNorm2d(64) + ReLU at inference, [{n_img}, "
                           "64, 56, 56] f32 NCHW, random stats", bn,
                           (torch.randn(n_img, 64, 56, 56),), kind="pointwise"))
    block, src = common.gpt2_block(hidden, heads, seq)
    common.randomize_norms(block)
    out.append(common.Case(
        "gpt2_block", f"GPT-2 block inference, batch {batch}, seq {seq}, hidden {hidden}, "
        f"{heads} heads, random norm weights, no_grad ({src})", block,
        (torch.randn(batch, seq, hidden),),
        kind="block"))
    return out


def cpu_device(target_s: float) -> common.Device:
    def time_all(fns):
        return common.median_ms_interleaved(fns, (), target_s=target_s, no_grad=False)
    return common.Device("cpu", "stax-cpu", sync=lambda: None, time_all=time_all)


def mark(value, ok) -> str:
    if value is None:
        return "no figure (a variant FAILED its checks)"
    return "met" if ok else "**missed**"


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def check_cell(r, label) -> str:
    v = r["variants"].get(label)
    if v is None:
        return "-"
    if v["status"] != "ok":
        return common.FAILED
    return f"ok ({v.get('max_err', 0.0):.1e})"


def build_report(results, state, prov, cmdline, warm, env_notes) -> str:
    L = ["# Stax CPU benchmark\n", f"Command: `{cmdline}`\n", "## Provenance\n"]
    L += common.provenance_lines(prov)
    L.append("\n## Machine state\n")
    L += [f"- {k}: {v}" for k, v in state]
    L += [f"- env: {n}" for n in env_notes]
    L.append("- one-time backend warm-up (trivial function, not charged to any case): " +
             ", ".join(f"{b} {s:.2f} s" for b, s in warm.items()))
    L.append("- all three run in one process with the same torch thread count; stax "
             "splits large kernels over torch.get_num_threads() parts (on torch's OpenMP "
             "team) and runs matmuls through torch (library calls)")
    L.append("- stax allocates its CPU buffers of 4 MiB or more advised MADV_HUGEPAGE "
             "and recycles one once nothing holds it (stax.runtime.cpu_alloc; "
             "STAX_CPU_OUTPUT_CACHE_MB="
             f"{os.environ.get('STAX_CPU_OUTPUT_CACHE_MB', '512 (default)')}: a timed "
             "call's output, dropped, is the next call's buffer, as on the GPU with "
             "torch's caching allocator); eager and Inductor allocate through torch's CPU "
             "allocator as configured (THP_MEM_ALLOC_ENABLE="
             f"{os.environ.get('THP_MEM_ALLOC_ENABLE', 'unset')}), so on the large cases "
             "part of a difference is page faults of fresh outputs, not kernel time")
    L.append("\n## Results\n")
    L.append("A time is reported only for a variant that passed every check (outputs vs a "
             "float64 run, tolerance from eager's own error, on the first call and before "
             "and after the timed runs; stax: every graph on route stax-cpu, no fallback "
             "op); FAILED otherwise, with the reason below. Times are medians of N timed "
             "runs after warm-up (interleaved in 5 rounds). speedup = eager_ms / stax_ms; "
             "stax/inductor = stax_ms / inductor_ms (lower is better); cold = first call "
             "after `torch._dynamo.reset()` (Dynamo + AOT + compile + one run). The check "
             "column gives the largest error vs float64.\n")
    L.append("| case | eager ms | inductor ms | stax ms | stax speedup vs eager | "
             "stax ms / inductor ms | inductor cold s | stax cold s | cold ratio | "
             "check (inductor / stax) | stax kernels | stax launches/call |")
    L.append("|" + " --- |" * 12)
    for r in results:
        sp = common.ratio(r, "eager", "stax")
        L.append(f"| {r['name']} | {common.cell(r, 'eager')} | {common.cell(r, 'inductor')} | "
                 f"{common.cell(r, 'stax')} | {fmt(sp, '.2f')}{'x' if sp else ''} | "
                 f"{fmt(common.ratio(r, 'stax', 'inductor'), '.2f')} | "
                 f"{common.cell(r, 'inductor', 'cold_s', '.2f')} | "
                 f"{common.cell(r, 'stax', 'cold_s', '.2f')} | "
                 f"{fmt(common.ratio(r, 'stax', 'inductor', 'cold_s'), '.3f')} | "
                 f"{check_cell(r, 'inductor')} / {check_cell(r, 'stax')} | "
                 f"{r['variants'].get('stax', {}).get('kernels', '-')} | "
                 f"{r['variants'].get('stax', {}).get('launches', '-')} |")
    if any("stax-autotuned" in r["variants"] for r in results):
        L.append("\n### stax default vs stax autotuned (mode=\"max-autotune\", the CPU "
                 "autotuner)\n")
        L.append("| case | eager ms | inductor ms | stax default ms | stax autotuned ms | "
                 "default / autotuned | autotuned cold s | check (autotuned) |")
        L.append("|" + " --- |" * 8)
        for r in results:
            gain = common.ratio(r, "stax", "stax-autotuned")
            L.append(f"| {r['name']} | {common.cell(r, 'eager')} | "
                     f"{common.cell(r, 'inductor')} | {common.cell(r, 'stax')} | "
                     f"{common.cell(r, 'stax-autotuned')} | {fmt(gain, '.2f')} | "
                     f"{common.cell(r, 'stax-autotuned', 'cold_s', '.2f')} | "
                     f"{check_cell(r, 'stax-autotuned')} |")
    L.append("\n## Targets\n")
    L.append("| target | case | value | result |")
    L.append("| --- | --- | --- | --- |")
    for r in results:
        if r["name"] == "pointwise":
            sp = common.ratio(r, "eager", "stax")
            rel = common.ratio(r, "stax", "inductor")
            L.append(f"| stax >= {TARGET_SPEEDUP_VS_EAGER:g}x faster than eager | pointwise | "
                     f"{fmt(sp, '.2f')}x | {mark(sp, sp and sp >= TARGET_SPEEDUP_VS_EAGER)} |")
            L.append(f"| stax time within {TARGET_VS_INDUCTOR:g}x of Inductor | pointwise | "
                     f"{fmt(rel, '.2f')} | {mark(rel, rel and rel <= TARGET_VS_INDUCTOR)} |")
    for r in results:
        cr = common.ratio(r, "stax", "inductor", "cold_s")
        L.append(f"| stax cold compile <= 1/3 of Inductor's | {r['name']} | "
                 f"{fmt(cr, '.3f')} | {mark(cr, cr is not None and cr <= TARGET_COLD_RATIO)} |")
    L.append("\n## Failures\n")
    L += common.failure_lines(results)
    L.append("\n## Cases\n")
    for r in results:
        v = r["variants"]
        L.append(f"- **{r['name']}**: {r['desc']}; timed runs N: " + ", ".join(
            f"{lb} {v[lb].get('n', '-')}" for lb in v))
        s = v.get("stax", {})
        if "routes" in s:
            L.append(f"  - stax: routes {s['routes']}, {s['graphs']} graph(s), "
                     f"{s['kernels']} kernel(s), launches/call {s['launches']}, library "
                     f"calls {s['library_calls']}, fallback ops {s['fallback_ops']}")
    L.append(f"\nLoad average at the end: {common.load_average()}")
    return "\n".join(L) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch.set_num_threads for all three (default: torch's default)")
    ap.add_argument("--label", default=None, help="results file label (default: hostname)")
    ap.add_argument("--out", default=None, help="markdown output path (JSON beside it)")
    ap.add_argument("--cases", default=None, help="comma-separated subset of case names")
    ap.add_argument("--autotune", action="store_true",
                    help="add stax with mode=max-autotune (the CPU autotuner)")
    a = ap.parse_args(argv)
    variants = VARIANTS + [AUTOTUNED] if a.autotune else VARIANTS
    if a.autotune:   # a cold search, not a cache hit from an earlier run
        import tempfile
        os.environ["STAX_CACHE_DIR"] = tempfile.mkdtemp(prefix="stax-cpu-autotune-")
    if a.threads:
        torch.set_num_threads(a.threads)
    label = a.label or common.host_label() + ("-quick" if a.quick else "")
    out = a.out or os.path.join(common.REPO, "benchmarks", "results", f"cpu-{label}.md")
    cmdline = "python " + " ".join([os.path.relpath(sys.argv[0], common.REPO)] +
                                   (argv if argv is not None else sys.argv[1:]))
    prov = common.provenance("cpu")
    state = common.machine_state()
    print("Provenance and machine state:")
    for k, v in list(prov.items()) + state:
        print(f"  {k}: {v}")
    for n in ENV_NOTES:
        print(f"  env: {n}")
    warm = common.warm_up_backends()
    print("  one-time backend warm-up: " +
          ", ".join(f"{b} {s:.2f} s" for b, s in warm.items()), flush=True)

    device = cpu_device(0.5 if a.quick else 1.5)
    wanted = a.cases.split(",") if a.cases else None
    all_cases = cases(a.quick)
    if wanted and set(wanted) - {c.name for c in all_cases}:
        ap.error(f"unknown case(s) {sorted(set(wanted) - {c.name for c in all_cases})}; "
                 f"the cases are {[c.name for c in all_cases]}")
    results = [common.run_case(c, variants, device) for c in all_cases
               if not wanted or c.name in wanted]

    report = build_report(results, state, prov, cmdline, warm, ENV_NOTES)
    print("\n" + report)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        f.write(report)
    json_out = os.path.splitext(out)[0] + ".json"
    common.write_json(json_out, {"command": cmdline, "provenance": prov,
                                 "machine": dict(state), "env": ENV_NOTES,
                                 "results": results})
    print(f"wrote {os.path.relpath(out, common.REPO)} and "
          f"{os.path.relpath(json_out, common.REPO)}")
    return common.exit_status(results)


if __name__ == "__main__":
    sys.exit(main())
