"""Dynamic shapes: a GPT-2 block at inference over many shapes, eager vs Inductor vs stax.

    python benchmarks/dynamic.py [--device cpu|cuda] [--quick] [--size-oblivious]
                                 [--out benchmarks/results/dynamic-<device>.md]

One model, 8 sequence lengths x 4 batch sizes (32 shapes), each backend in turn
(`--size-oblivious`: all of them under Dynamo's `backed_size_oblivious=True`, where a
size of 1 is not specialized, so batch 1 needs no graph of its own):

    eager      the module as written
    inductor   torch.compile(model, backend="inductor", dynamic=True)
    stax       torch.compile(model, backend="stax", dynamic=True,
                             options={"stax.max_shape_variants": 64})
    stax-static  the same under STAX_DYNAMIC=0: one static compile per shape (stax's own
               static kernels, the baseline of the per-shape target)

Per backend it reports:

- **compiles**: Dynamo graph compiles (the backend was called) and, for stax, what it
  compiled inside those graphs: one dynamic variant for a graph compiled once for every
  size (kernels with runtime sizes), or one static variant per size for a graph that
  could not stay dynamic (`docs/dynamic-shapes.md`);
- **compile time**: for each shape, its first call's time minus that shape's steady
  state, summed over the shapes (so it counts every recompile and every variant, and
  nothing of a call's own run time);
- **steady-state time per shape** (median after warm-up) and its geometric mean over the
  shapes as a ratio to eager and to Inductor.

A figure counts only when the run checked it: every first call and every timed shape's
output of a compiled backend matches eager within the float64-reference tolerance
(`checks.check_tensor`), and every stax graph and every variant has the target's own
route (STAX_STRICT=1 as well: a fallback raises instead of being timed). The issue's
targets (one compile for all shapes; compile time at most half of Inductor's; per-shape
time within 1.1x of stax's own static kernels and at or below Inductor's dynamic code)
are printed with whether they are met.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402

PRESETS = {  # hidden, heads, batch sizes, sequence lengths
    "cpu": (768, 12, (1, 2, 3, 4), (16, 32, 48, 64, 96, 128, 192, 256)),
    "cuda": (768, 12, (1, 4, 8, 16), (32, 64, 128, 192, 256, 384, 512, 1024)),
    "quick": (64, 4, (1, 2, 3, 5), (8, 12, 16, 24, 32, 40, 48, 64)),
}


def _counting(backend, counter: dict, **compile_kwargs):
    """torch.compile's backend argument: `backend` itself (a name or a callable), with
    every Dynamo graph compile counted (the callable is what Dynamo calls once per
    graph)."""
    import torch
    inner = torch._dynamo.lookup_backend(backend)

    def counted(gm, example_inputs, **kw):
        counter["graphs"] += 1
        return inner(gm, example_inputs, **kw)
    return counted


def _sync(device):
    import torch
    if device == "cuda":
        torch.cuda.synchronize()


def _run_backend(name, model, model64, inputs, device, target_s):
    import torch
    import checks
    import stax.backend

    torch._dynamo.reset()
    counter = {"graphs": 0}
    if name == "eager":
        fn = model
    elif name == "inductor":
        fn = torch.compile(model, backend=_counting("inductor", counter), dynamic=True)
    else:
        # "stax-static": the per-size route (STAX_DYNAMIC=0), the baseline that the one
        # compile's per-shape time is held to (within 1.1x of stax's own static kernels)
        os.environ["STAX_DYNAMIC"] = "0" if name == "stax-static" else "1"
        before = len(stax.backend.reports())
        fn = torch.compile(model, backend=_counting("stax", counter), dynamic=True,
                           options={"stax.max_shape_variants": 64})
    rows, problems = [], []
    first_s = {}
    with torch.no_grad():
        for key, x in inputs.items():
            _sync(device)
            t = time.perf_counter()
            out = fn(x)
            _sync(device)
            first_s[key] = time.perf_counter() - t
            if name != "eager":
                eager = model(x)
                ref = model64(x.double())
                rec = checks.check_tensor(f"out {key}", out, eager, ref)
                if not rec.ok:
                    problems.append(f"{name} {key}: {rec.reason}")
        for key, x in inputs.items():
            ms, n = common.median_ms(lambda a: (fn(a), _sync(device)), (x,), warmup=2,
                                     min_runs=5, target_s=target_s)
            if name != "eager":  # what was timed is checked too
                rec = checks.check_tensor(f"timed {key}", fn(x), model(x), model64(x.double()))
                if not rec.ok:
                    problems.append(f"{name} {key} (timed runs): {rec.reason}")
            rows.append({"shape": key, "ms": ms, "runs": n,
                         "first_s": first_s[key], "compile_s": max(0.0, first_s[key] - ms / 1e3)})
    result = {"backend": name, "rows": rows, "graphs": counter["graphs"],
              "compile_s": sum(r["compile_s"] for r in rows), "problems": problems}
    if name.startswith("stax"):
        os.environ.pop("STAX_DYNAMIC", None)
        reps = stax.backend.reports()[before:]
        route = "triton" if device == "cuda" else "stax-cpu"
        problems += checks.report_problems(reps, route)
        variants = [v for r in reps for v in (getattr(r, "variants", None) or [])]
        problems += [f"stax variant {v.describe()}: route {v.route}" for v in variants
                     if v.route != route]
        result["variants"] = len(variants)
        result["dynamic_variants"] = sum(1 for v in variants if getattr(v, "dynamic", False))
        result["static_graphs"] = sum(1 for r in reps if not getattr(r, "variants", None))
        result["compiles"] = result["static_graphs"] + len(variants)
        # what ran from a CUDA graph (a timing is launch-bound without one)
        result["cudagraphs"] = [c for r in reps for c in r.cudagraphs]
    else:
        result["compiles"] = counter["graphs"]
    return result


def _geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--quick", action="store_true", help="a small block (tests, smoke runs)")
    ap.add_argument("--target-s", type=float, default=0.3,
                    help="about how long each shape's timed runs take (s)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--size-oblivious", action="store_true",
                    help="run every backend under Dynamo's backed_size_oblivious=True (no 0/1 "
                         "specialization of a size, no graph of its own for batch 1)")
    args = ap.parse_args(argv)
    env_notes = common.init_env()
    import torch
    import checks

    hidden, heads, batches, seqs = PRESETS["quick" if args.quick else args.device]
    torch.manual_seed(0)
    model, label = common.gpt2_block(hidden=hidden, heads=heads, seq=max(seqs))
    common.randomize_norms(model)
    model = model.to(args.device)
    model64 = checks.float64_model(model)
    g = torch.Generator().manual_seed(1)
    inputs = {f"{b}x{t}": torch.randn(b, t, hidden, generator=g).to(args.device)
              for t in seqs for b in batches}
    import contextlib
    import torch.fx.experimental._config as fx_config
    dynamo_mode = (fx_config.patch(backed_size_oblivious=True) if args.size_oblivious
                   else contextlib.nullcontext())
    with dynamo_mode:
        results = [_run_backend(n, model, model64, inputs, args.device, args.target_s)
                   for n in ("eager", "inductor", "stax", "stax-static")]
    by = {r["backend"]: r for r in results}
    ok = not any(r["problems"] for r in results)

    prov = common.provenance(args.device)
    lines = ["# Dynamic shapes: GPT-2 block inference over 32 shapes", "",
             f"`python benchmarks/dynamic.py --device {args.device}"
             f"{' --quick' if args.quick else ''}"
             f"{' --size-oblivious' if args.size_oblivious else ''}`", "",
             *common.provenance_lines(prov), *[f"- {n}" for n in env_notes],
             *(["- Dynamo: `torch.fx.experimental._config.backed_size_oblivious = True` for "
                "every backend (a size of 1 is not specialized: batch 1 shares the graph)"]
               if args.size_oblivious else []),
             f"- model: {label}, hidden {hidden}, heads {heads}, f32; batches {list(batches)}, "
             f"sequence lengths {list(seqs)}", "",
             "| backend | Dynamo graphs | stax variants | compiles | compile time (s) | "
             "geomean ms | vs eager | vs Inductor |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    ms = {n: [r["ms"] for r in by[n]["rows"]] for n in by}
    for n, r in by.items():
        gm = _geomean(ms[n])
        vs_e = _geomean([a / b for a, b in zip(ms[n], ms["eager"])])
        vs_i = _geomean([a / b for a, b in zip(ms[n], ms["inductor"])])
        lines.append(f"| {n} | {r['graphs']} | {r.get('variants', '-')} | "
                     f"{r['compiles'] if n != 'eager' else '-'} | "
                     f"{r['compile_s']:.2f} | {gm:.3f} | {vs_e:.2f}x | {vs_i:.2f}x |")
    lines += ["", "Per shape (steady-state median ms; first call s):", "",
              "| shape (batch x seq) | eager | inductor | stax | stax / inductor | "
              "stax first call (s) | inductor first call (s) |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    lines[-2] = lines[-2].replace("| stax | stax / inductor |",
                                  "| stax | stax-static | stax / inductor | stax / stax-static |")
    lines[-1] += " --- | --- |"
    for i, row in enumerate(by["eager"]["rows"]):
        s, ind = by["stax"]["rows"][i], by["inductor"]["rows"][i]
        ss = by["stax-static"]["rows"][i]
        lines.append(f"| {row['shape']} | {row['ms']:.3f} | {ind['ms']:.3f} | {s['ms']:.3f} | "
                     f"{ss['ms']:.3f} | {s['ms'] / ind['ms']:.2f} | {s['ms'] / ss['ms']:.2f} | "
                     f"{s['first_s']:.2f} | {ind['first_s']:.2f} |")
    st, ind = by["stax"], by["inductor"]
    lines += ["", "Targets (issue 10):", "",
              f"- one compile for all shapes: stax {st['compiles']} compiles "
              f"({st['graphs']} Dynamo graphs: {st['dynamic_variants']} compiled once for "
              f"every size, {st['variants'] - st['dynamic_variants']} static variants, "
              f"{st['static_graphs']} static graphs of Dynamo's own specializations): "
              f"{'met' if st['compiles'] == 1 else 'missed'}; Inductor {ind['compiles']}",
              f"- compile time at most half of Inductor's: stax {st['compile_s']:.2f} s, "
              f"Inductor {ind['compile_s']:.2f} s, ratio {st['compile_s'] / max(ind['compile_s'], 1e-9):.2f}: "
              f"{'met' if st['compile_s'] <= 0.5 * ind['compile_s'] else 'missed'}",
              f"- per-shape time within 1.1x of stax's own static kernels (stax-static, "
              f"STAX_DYNAMIC=0: one static compile per shape): geomean "
              f"{_geomean([a / b for a, b in zip(ms['stax'], ms['stax-static'])]):.2f}x, "
              f"{sum(a <= 1.1 * b for a, b in zip(ms['stax'], ms['stax-static']))} of "
              f"{len(ms['stax'])} shapes within 1.1x",
              f"- per-shape time at or below Inductor's dynamic code: geomean "
              f"{_geomean([a / b for a, b in zip(ms['stax'], ms['inductor'])]):.2f}x, "
              f"{sum(a <= b for a, b in zip(ms['stax'], ms['inductor']))} of {len(ms['stax'])} shapes at or below"]
    for n in ("stax", "stax-static"):
        if by[n].get("cudagraphs"):
            lines += ["", f"CUDA graphs ({n}, each compiled graph's capture status):", ""]
            lines += [f"- {c}" for c in by[n]["cudagraphs"]]
    lines += ["", f"Checks: {'all passed' if ok else 'FAILED'}"]
    for r in results:
        lines += [f"- {p}" for p in r["problems"]]
    common.write_report("\n".join(lines) + "\n", args.out,
                        f"dynamic-{args.device}{'-quick' if args.quick else ''}"
                        f"{'-size-oblivious' if args.size_oblivious else ''}.md",
                        {"provenance": prov, "results": results})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
