"""Time to first result of a GPT-2 block on the CPU or a GPU, each case in fresh processes.

    python benchmarks/cold_start.py [--device cpu|cuda] [--runs 3] [--quick]
                                    [--out benchmarks/results/cold-start-<device>.md]

`--device cuda` runs the same cases on the GPU (stax's triton route; the artifact holds
cubins). There the first output is synchronized before the clock stops; stax cold gets
an empty stax cache folder (no Triton kernel entries) and an empty Triton cache folder;
the stax cache and artifact cases keep the Triton cache folder (its C launcher build)
of their prepare run, as Inductor's warm cases keep theirs.

Every timed run is a new Python process (`--worker CASE`): it imports torch and builds the
model (not timed), then times from just before the first stax / torch.compile call (the
import of stax included) to the first output, and checks that output against eager. The
figure is the median over `--runs` processes. Cases (one function each, `case_<name>`,
with an optional `prepare_<name>` that runs once, untimed, in its own process):

    stax_cold            torch.compile(backend="stax"), stax's compile cache off
    stax_artifact        stax.load of a saved stax.precompile artifact, then the call
    stax_cache           torch.compile(backend="stax") in a fresh process whose compile
                         cache (STAX_CACHE_DIR) a previous process filled: it must load
                         every graph from the cache and compile none
    inductor_cold        torch.compile(backend="inductor"), every Inductor cache off/empty
    inductor_warm_fx     Inductor with its FX-graph (and AOT autograd) cache warmed by a
                         previous process
    inductor_mega_cache  torch.compiler.load_cache_artifacts of what a previous process
                         saved with save_cache_artifacts, into an empty cache folder

Writes a Markdown table (with the commit, versions and machine state) to `--out`.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


# ----------------------------------------------------------------------------- the model

def model_and_input(quick: bool, device: str = "cpu"):
    import torch
    torch.manual_seed(0)
    if quick:
        model, label = common.gpt2_block(hidden=64, heads=4, seq=32)
        x = torch.randn(2, 32, 64)
    else:
        model, label = common.gpt2_block(hidden=768, heads=12, seq=256)
        x = torch.randn(1, 256, 768)
    return model.eval().to(device), x.to(device), label


def _forward(model, x):
    return model(x)


# ----------------------------------------------------------------------------- cases
# case_<name>(model, x, workdir) -> the first output; runs in a fresh process, timed.
# prepare_<name>(model, x, workdir) runs once before the timed runs, in its own process.

def case_stax_cold(model, x, workdir):
    import torch
    _instrument_stax()
    return torch.compile(model, backend="stax", fullgraph=True, dynamic=False)(x)


def prepare_stax_artifact(model, x, workdir):
    import stax
    stax.precompile(_forward, (model, x)).save(os.path.join(workdir, "gpt2.stax"))


def case_stax_artifact(model, x, workdir):
    import stax
    return stax.load(os.path.join(workdir, "gpt2.stax"))(model, x)


# stax's compile cache: where the backend's time goes (per process, summed over graphs):
# backend_s in compile_cached (a compile, or a cache load), load_s in the serializer's
# load, jit_s in the ExecutionEngine (creating engines and looking symbols up: LLVM's
# optimizer and code generator, what loading object code instead would save at most)
_DETAILS: dict = {}


def _instrument_stax():
    import stax.backend
    import stax.cache_compile as C
    import stax._mlir
    import stax.targets.llvm
    import torch_mlir.execution_engine as EE
    _DETAILS.update(backend_s=0.0, load_s=0.0, jit_s=0.0)

    def timed(fn, key):
        def run(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                _DETAILS[key] += time.perf_counter() - t
        return run

    stax.backend.compile_cached = timed(C.compile_cached, "backend_s")
    art = C.serializer()
    if art is not None:
        art.load_compiled_graph = timed(art.load_compiled_graph, "load_s")

    class TimedEngine(EE.ExecutionEngine):
        def __init__(self, *a, **k):
            t = time.perf_counter()
            super().__init__(*a, **k)
            _DETAILS["jit_s"] += time.perf_counter() - t

        def raw_lookup(self, name):
            t = time.perf_counter()
            try:
                return super().raw_lookup(name)
            finally:
                _DETAILS["jit_s"] += time.perf_counter() - t

    EE.ExecutionEngine = stax._mlir.ExecutionEngine = stax.targets.llvm.ExecutionEngine = \
        TimedEngine


def prepare_stax_cache(model, x, workdir):
    import torch
    torch.compile(model, backend="stax", fullgraph=True, dynamic=False)(x)


def case_stax_cache(model, x, workdir):
    import torch
    from stax.cache_compile import STATS
    _instrument_stax()
    out = torch.compile(model, backend="stax", fullgraph=True, dynamic=False)(x)
    if STATS["misses"] or not STATS["hits"]:
        raise RuntimeError(f"stax from its cache compiled something: {STATS}")
    _DETAILS["graphs_loaded"] = STATS["hits"]
    return out


def case_inductor_cold(model, x, workdir):
    import torch
    return torch.compile(model, backend="inductor", fullgraph=True, dynamic=False)(x)


def prepare_inductor_warm_fx(model, x, workdir):
    case_inductor_cold(model, x, workdir)


case_inductor_warm_fx = case_inductor_cold


def prepare_inductor_mega_cache(model, x, workdir):
    import torch
    case_inductor_cold(model, x, workdir)
    saved = torch.compiler.save_cache_artifacts()
    if saved is None:
        raise RuntimeError("torch.compiler.save_cache_artifacts() saved nothing")
    with open(os.path.join(workdir, "mega_cache.bin"), "wb") as f:
        f.write(saved[0])


def case_inductor_mega_cache(model, x, workdir):
    import torch
    with open(os.path.join(workdir, "mega_cache.bin"), "rb") as f:
        torch.compiler.load_cache_artifacts(f.read())
    return case_inductor_cold(model, x, workdir)


CASES = ["stax_cold", "stax_cache", "stax_artifact", "inductor_cold", "inductor_warm_fx",
         "inductor_mega_cache"]
LABELS = {"stax_cold": "stax cold (compile cache off)",
          "stax_cache": "stax from its compile cache, fresh process",
          "stax_artifact": "stax from a saved artifact (stax.load)",
          "inductor_cold": "Inductor cold (caches off)",
          "inductor_warm_fx": "Inductor, warm FX-graph cache",
          "inductor_mega_cache": "Inductor Mega-Cache (load_cache_artifacts)"}


def case_env(case: str, workdir: str, phase: str) -> dict:
    """The environment of a case's process: its own Inductor cache folder (shared by the
    prepare and timed runs where the case is about a warm cache), stax's cache off, and
    for stax a cache folder of its own (Triton kernel entries live there) and a Triton
    cache folder (the C launcher): fresh for a cold run, the prepare run's otherwise."""
    env = dict(os.environ, STAX_STRICT="1", STAX_CACHE="0")
    env.pop("TRITON_CACHE_DIR", None)
    if case == "stax_cache":  # the cache that its prepare run filled
        env.update(STAX_CACHE="1", STAX_CACHE_DIR=os.path.join(workdir, "stax-cache"))
    elif case.startswith("stax"):
        env["STAX_CACHE_DIR"] = tempfile.mkdtemp(dir=workdir, prefix="stax-cache-")
    if case == "stax_cold":
        env["TRITON_CACHE_DIR"] = tempfile.mkdtemp(dir=workdir, prefix="triton-")
    elif case.startswith("stax"):
        env["TRITON_CACHE_DIR"] = os.path.join(workdir, f"triton-{case}")
    env.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
    if case == "inductor_warm_fx":
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(workdir, "inductor-warm")
    elif case == "inductor_mega_cache" and phase == "prepare":
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(workdir, "inductor-mega-src")
    else:  # cold (and the Mega-Cache's timed run): a fresh, empty folder per process
        env["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(dir=workdir, prefix="inductor-")
        if case in ("inductor_cold", "stax_cold", "stax_artifact"):
            env["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
    return env


# ----------------------------------------------------------------------------- processes

def worker(case: str, phase: str, workdir: str, quick: bool, device: str = "cpu") -> None:
    import torch
    model, x, _ = model_and_input(quick, device)
    gpu = device.startswith("cuda")
    if gpu:
        torch.cuda.init()   # (CUDA context creation is start-up, as importing torch is)
    with torch.no_grad():
        if phase == "prepare":
            globals()[f"prepare_{case}"](model, x, workdir)
            print(json.dumps({"prepared": case}))
            return
        t0 = time.perf_counter()
        out = globals()[f"case_{case}"](model, x, workdir)
        if gpu:
            torch.cuda.synchronize()
        first = time.perf_counter() - t0
        want = model(x)
    err = (out - want).abs().max().item()
    print(json.dumps({"case": case, "first_result_s": first, "max_abs_err": err,
                      "ok": bool(torch.allclose(out, want, rtol=1e-3, atol=1e-3)),
                      "details": _DETAILS}))


def _run(case, phase, workdir, quick, device="cpu") -> dict:
    argv = [sys.executable, os.path.abspath(__file__), "--worker", case, "--phase", phase,
            "--dir", workdir, "--device", device] + (["--quick"] if quick else [])
    t0 = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, env=case_env(case, workdir, phase),
                       timeout=1800)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{case} ({phase}) failed:\n{r.stderr[-3000:]}")
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    rec["process_s"] = wall
    return rec


def measure(cases, runs: int, quick: bool, device: str = "cpu") -> dict:
    results = {}
    with tempfile.TemporaryDirectory(prefix="stax-cold-start-") as workdir:
        for case in cases:
            if f"prepare_{case}" in globals():
                _run(case, "prepare", workdir, quick, device)
            recs = [_run(case, "timed", workdir, quick, device) for _ in range(runs)]
            results[case] = {
                "first_result_s": statistics.median(r["first_result_s"] for r in recs),
                "process_s": statistics.median(r["process_s"] for r in recs),
                "runs": [round(r["first_result_s"], 3) for r in recs],
                "max_abs_err": max(r["max_abs_err"] for r in recs),
                "ok": all(r["ok"] for r in recs)}
            details = recs[0].get("details") or {}
            if details:   # medians of the instrumented stax cases' breakdown
                results[case]["details"] = {
                    k: statistics.median(r["details"][k] for r in recs) for k in details}
            r = results[case]
            print(f"{LABELS.get(case, case):45s} first result {r['first_result_s']:7.3f} s  "
                  f"(process {r['process_s']:6.2f} s; runs {r['runs']}; "
                  f"{'ok' if r['ok'] else 'WRONG'} max err {r['max_abs_err']:.2e})", flush=True)
    return results


def write_markdown(path: str, results: dict, runs: int, label: str, quick: bool,
                   device: str = "cpu") -> None:
    prov = common.provenance(device)
    where = "the CPU" if device == "cpu" else f"the GPU ({device})"
    base = results.get("inductor_cold", {}).get("first_result_s")
    warm = results.get("inductor_warm_fx", {}).get("first_result_s")
    lines = [f"# Cold start on {where}: time to first result", "",
             f"`python benchmarks/cold_start.py --device {device} --runs {runs}"
             f"{' --quick' if quick else ''}`; "
             f"model: {label}, inference (`torch.no_grad`). Each figure is the median over "
             f"{runs} fresh processes, from just before the first stax / torch.compile call "
             "(importing stax included, importing torch and building the model not) to the "
             "first output, which is checked against eager (rtol = atol = 1e-3). `process` is "
             "the whole process, Python and torch start-up included.", "",
             "| case | first result (s) | / Inductor cold | / Inductor warm | process (s) | "
             "runs (s) | check |", "| --- | ---: | ---: | ---: | ---: | --- | --- |"]
    for case, r in results.items():
        s = r["first_result_s"]
        lines.append(f"| {LABELS.get(case, case)} | {s:.3f} | "
                     f"{s / base:.3f} | {s / warm:.3f} | {r['process_s']:.2f} | "
                     f"{r['runs']} | {'ok' if r['ok'] else 'WRONG'} "
                     f"({r['max_abs_err']:.1e}) |" if base and warm else
                     f"| {LABELS.get(case, case)} | {s:.3f} | | | {r['process_s']:.2f} | "
                     f"{r['runs']} | {'ok' if r['ok'] else 'WRONG'} |")
    detailed = {c: r["details"] for c, r in results.items() if r.get("details")}
    if detailed:
        lines += ["", "Where stax's time goes (medians, seconds, summed over the graphs): "
                  "`backend` in the compile cache hook (a compile, or a load), `load` in "
                  "the serializer's load_compiled_graph, `jit` in the ExecutionEngine "
                  "(engine creation and symbol lookups: LLVM's optimizer and code "
                  "generator).", "",
                  "| case | backend (s) | load (s) | jit (s) |", "| --- | ---: | ---: | ---: |"]
        for case, d in detailed.items():
            lines.append(f"| {LABELS.get(case, case)} | {d.get('backend_s', 0):.3f} | "
                         f"{d.get('load_s', 0):.3f} | {d.get('jit_s', 0):.3f} |")
    lines += ["", "Machine and provenance:", ""] + common.provenance_lines(prov) + \
        [f"- load average: {common.load_average()}"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {path}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3, help="fresh processes per case (median)")
    p.add_argument("--quick", action="store_true", help="a small block (dim 64): a smoke run")
    p.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    p.add_argument("--device", default="cpu", help="cpu, or cuda (the triton route)")
    p.add_argument("--out", help="default: benchmarks/results/cold-start-<device>.md")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--phase", default="timed", help=argparse.SUPPRESS)
    p.add_argument("--dir", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        worker(a.worker, a.phase, a.dir, a.quick, a.device)
        return 0
    cases = [c for c in a.cases.split(",") if c]
    unknown = [c for c in cases if f"case_{c}" not in globals()]
    if unknown:
        p.error(f"unknown case(s) {unknown}; known: {CASES}")
    if a.device not in ("cpu", "cuda") and not a.device.startswith("cuda:"):
        p.error(f"--device must be cpu or cuda[:N], got {a.device!r}")
    out = a.out or os.path.join(HERE, "results", f"cold-start-{a.device.split(':')[0]}.md")
    results = measure(cases, a.runs, a.quick, a.device)
    _, _, label = model_and_input(a.quick)
    write_markdown(out, results, a.runs, label, a.quick, a.device)
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
