"""A decode loop with an int position: eager vs Inductor vs stax, compiles and time per step.

    python benchmarks/decode.py [--device cpu|cuda] [--steps 64] [--prefill N] [--quick]
                                [--backends eager,inductor,stax[,stax-matvec-off]]
                                [--out benchmarks/results/decode-<device>.md]

The model is a reference-Llama-style attention layer: `forward(x, start_pos: int)`
slices a rotary table at `start_pos`, writes the new keys and values into caches
preallocated as buffers, in place (`cache_k[:b, start_pos:start_pos + t] = k`), and
attends over the cache up to `start_pos + t`. A prefill of `--prefill` tokens at position
0 is followed by `--steps` one-token steps at positions prefill, prefill + 1, ... Each
backend compiles as a user would (`torch.compile(model, backend=...)`, no `dynamic=`):
Dynamo compiles the first call static and makes `start_pos` a SymInt on its second value.
`stax` compiles attention's one-row bmms as kernels that read the cache where it lies
(stax-decompose-matvec, on by default); `stax-matvec-off` is the A/B without it
(`stax.decompose_matvec="off"`: library bmms on heads copied out of the cache), and
`stax-matvec` asks for it explicitly ("on", what `stax` did before it was the default).

Per backend:

- **Dynamo graphs** (the backend was called) and, for stax, what it compiled inside them
  (a variant compiled once for every size, or one static variant per size);
- **cold loop (s)**: the whole loop's first run, compiles included; **warm loop (s)**:
  the same loop again (caches reset), nothing left to compile; **compile time** is their
  difference;
- **ms per step**: the median of the warm loop's one-token steps, and its ratio to eager
  and to Inductor.

A figure counts only when the run checked it: every step's output of a compiled backend,
in both loops, and its caches after each loop match eager within the float64-reference
tolerance (`checks.check_tensor`), and every stax graph and variant has the target's own
route (STAX_STRICT=1: a fallback raises instead of being timed).
"""
from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402

#: stax variants by name: their options (the A/B backends of decode.py and
#: profile_decode.py)
VARIANT_OPTIONS = {
    "stax-matvec": {"stax.decompose_matvec": "on"},
    "stax-matvec-off": {"stax.decompose_matvec": "off"},   # bmms as library calls
    "stax-nocg": {"stax.auto_cudagraphs": False},          # no per-size CUDA graphs
}


def backend_for(name):
    """The torch.compile backend of a backend name: a VARIANT_OPTIONS name is stax with
    those options, any other name is itself."""
    options = VARIANT_OPTIONS.get(name)
    if options is None:
        return name
    import functools
    import stax.backend
    return functools.partial(stax.backend.stax, options=options)
#: library ops a stax figure may hold: the in-place cache writes
WRITE_OPS = ("aten.index_copy_.default",)

PRESETS = {  # dim, heads, batch, cache length, prefill
    "cpu": (512, 8, 4, 512, 32),
    "cuda": (1024, 16, 8, 2048, 128),
    "quick": (64, 4, 2, 64, 8),
}


def _model_class():
    import torch

    class DecodeAttention(torch.nn.Module):
        def __init__(self, dim, heads, batch, most):
            super().__init__()
            self.heads, self.hd = heads, dim // heads
            self.wq, self.wk, self.wv, self.wo = (torch.nn.Linear(dim, dim, bias=False)
                                                  for _ in range(4))
            self.register_buffer("cache_k", torch.zeros(batch, most, dim))
            self.register_buffer("cache_v", torch.zeros(batch, most, dim))
            self.register_buffer("freqs", torch.randn(most, dim) * 0.1 + 1)

        def forward(self, x, start_pos: int):
            b, t, c = x.shape
            f = self.freqs[start_pos:start_pos + t]
            q, k, v = self.wq(x) * f, self.wk(x) * f, self.wv(x)
            self.cache_k[:b, start_pos:start_pos + t] = k
            self.cache_v[:b, start_pos:start_pos + t] = v
            n = start_pos + t
            keys = self.cache_k[:b, :n].view(b, n, self.heads, self.hd).transpose(1, 2)
            vals = self.cache_v[:b, :n].view(b, n, self.heads, self.hd).transpose(1, 2)
            q = q.view(b, t, self.heads, self.hd).transpose(1, 2)
            att = torch.softmax(q @ keys.transpose(-1, -2) * self.hd ** -0.5, dim=-1)
            return self.wo((att @ vals).transpose(1, 2).reshape(b, t, c))

    return DecodeAttention


def _sync(device):
    import torch
    if device == "cuda":
        torch.cuda.synchronize()


def _reset(*models):
    for m in models:
        m.cache_k.zero_()
        m.cache_v.zero_()


def _run_backend(name, base, inputs, device):
    import torch
    import checks
    import stax.backend
    from dynamic import _counting

    torch._dynamo.reset()
    counter = {"graphs": 0}
    model, eager = copy.deepcopy(base), copy.deepcopy(base)
    ref64 = checks.float64_model(base)
    before = len(stax.backend.reports())
    fn = model if name == "eager" else torch.compile(
        model, backend=_counting(backend_for(name), counter))
    problems, loops = [], []
    with torch.no_grad():
        for phase in ("cold", "warm"):
            _reset(model, eager, ref64)
            step_s, outs = [], []
            _sync(device)
            start = time.perf_counter()
            for pos, x in inputs:
                t0 = time.perf_counter()
                out = fn(x, pos)
                _sync(device)
                step_s.append(time.perf_counter() - t0)
                outs.append(out.clone())
            loops.append((time.perf_counter() - start, step_s))
            # checked after the loop: the oracles' work between steps (a float64 layer
            # each) changed the steps' times (on the H100, stax 0.96 ms interleaved,
            # 0.50 ms in a loop of its own; eager the other way)
            if name != "eager":
                for (pos, x), out in zip(inputs, outs):
                    rec = checks.check_tensor(f"{phase} step at {pos}", out, eager(x, pos),
                                              ref64(x.double(), pos))
                    if not rec.ok:
                        problems.append(f"{name}: {rec.reason}")
                for cache in ("cache_k", "cache_v"):
                    rec = checks.check_tensor(f"{phase} {cache}", getattr(model, cache),
                                              getattr(eager, cache), getattr(ref64, cache))
                    if not rec.ok:
                        problems.append(f"{name}: {rec.reason}")
    (cold_s, _), (warm_s, warm_steps) = loops
    result = {"backend": name, "graphs": counter["graphs"], "cold_s": cold_s,
              "warm_s": warm_s, "compile_s": max(0.0, cold_s - warm_s),
              "step_ms": 1e3 * statistics.median(warm_steps[1:]),
              "problems": problems}
    if name.startswith("stax"):
        reps = stax.backend.reports()[before:]
        route = "triton" if device == "cuda" else "stax-cpu"
        # the cache writes in place (stax.inplace_windows): PyTorch's index_copy_ into
        # the buffer, a library op the report names; any other fallback op fails the run
        problems += checks.report_problems(reps, route, allowed_fallback_ops=WRITE_OPS)
        variants = [v for r in reps for v in (getattr(r, "variants", None) or [])]
        problems += [f"stax variant {v.describe()}: route {v.route}" for v in variants
                     if v.route != route]
        result["variants"] = len(variants)
        result["dynamic_variants"] = sum(1 for v in variants if getattr(v, "dynamic", False))
    return result


def _ratio(r, base) -> str:
    return f"{r['step_ms'] / base['step_ms']:.2f}x" if base else "-"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--quick", action="store_true", help="a small layer (tests, smoke runs)")
    ap.add_argument("--backends", default="eager,inductor,stax",
                    help="comma list, in run order (eager and inductor are the ratios' bases)")
    ap.add_argument("--prefill", type=int, default=None,
                    help="tokens of the prefill (the first step's position); default: the "
                         "preset's")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    env_notes = common.init_env()
    import torch

    dim, heads, batch, most, prefill = PRESETS["quick" if args.quick else args.device]
    prefill = prefill if args.prefill is None else args.prefill
    if prefill + args.steps > most:
        ap.error(f"--steps {args.steps} past the cache: at most {most - prefill}")
    torch.manual_seed(0)
    base = _model_class()(dim, heads, batch, most).to(args.device).eval()
    g = torch.Generator().manual_seed(1)
    inputs = [(0, torch.randn(batch, prefill, dim, generator=g).to(args.device))]
    inputs += [(prefill + i, torch.randn(batch, 1, dim, generator=g).to(args.device))
               for i in range(args.steps)]
    results = [_run_backend(n, base, inputs, args.device)
               for n in args.backends.split(",")]
    by = {r["backend"]: r for r in results}
    ok = not any(r["problems"] for r in results)

    prov = common.provenance(args.device)
    lines = ["# A decode loop with an int position (a KV cache written in place)", "",
             f"`python benchmarks/decode.py --device {args.device} --steps {args.steps}"
             f"{' --quick' if args.quick else ''}`", "",
             *common.provenance_lines(prov), *[f"- {n}" for n in env_notes],
             f"- model: one attention layer, dim {dim}, heads {heads}, batch {batch}, "
             f"caches of {most}, f32; a prefill of {prefill} tokens at position 0, then "
             f"{args.steps} one-token steps at positions {prefill}..{prefill + args.steps - 1}",
             "- `torch.compile(model, backend=...)` with no `dynamic=`: Dynamo makes "
             "`start_pos` symbolic on its second value",
             f"- stax writes the caches in place through PyTorch's {', '.join(WRITE_OPS)} "
             "(a library op its report names, stax.inplace_windows); every other op of its "
             "graphs is a stax kernel or a torch matmul", "",
             "| backend | Dynamo graphs | stax variants (dynamic) | cold loop (s) | warm loop (s) "
             "| compile time (s) | ms per step | vs eager | vs Inductor |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for n, r in by.items():
        var = f"{r['variants']} ({r['dynamic_variants']})" if "variants" in r else "-"
        lines.append(f"| {n} | {r['graphs'] if n != 'eager' else '-'} | {var} | "
                     f"{r['cold_s']:.2f} | {r['warm_s']:.2f} | "
                     f"{r['compile_s'] if n != 'eager' else 0:.2f} | {r['step_ms']:.3f} | "
                     f"{_ratio(r, by.get('eager'))} | {_ratio(r, by.get('inductor'))} |")
    lines += ["", f"Checks: {'all passed' if ok else 'FAILED'}"]
    for r in results:
        lines += [f"- {p}" for p in r["problems"]]
    common.write_report("\n".join(lines) + "\n", args.out,
                        f"decode-{args.device}{'-quick' if args.quick else ''}.md",
                        {"provenance": prov, "results": results})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
