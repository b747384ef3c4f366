"""Dispatch benchmark (issue 14): the per-call cost of launch-bound graphs.

    python benchmarks/dispatch.py [--device cpu|cuda] [--out FILE.md] [--cases a,b]
                                  [--calls N] [--rounds R] [--warmup W]

Variants: eager, Inductor (default; and mode="reduce-overhead" on CUDA) and stax
(default; and mode="reduce-overhead" on CUDA), each compiled with fullgraph=True. Cases:

- `mlp`: Linear(256, 512) -> GELU -> LayerNorm -> Linear(512, 256), batch 8 (bf16 on
  CUDA, f32 on the CPU), the graph of issue 14;
- `pointwise_1k`: one add of two 1k-element tensors;
- `gpt2_decode`: a GPT-2 decode step: batch 1, one new token, a KV cache of 1024
  positions passed as inputs (hidden 768, 12 heads; test/python/models.py's GPT2Block
  has no cache, so the block is written out here);
- `kernels20`: a graph of 20 small kernels (pointwise work separated by reductions over
  alternating dims, which stops fusion).

Every case goes through the checked runner of the other benchmarks (`common.run_case`):
outputs vs a float64 run with tolerances from eager's own error (benchmarks/checks.py),
on the first call and before and after the timed runs; every stax graph must report the
target's route (stax-cpu / triton) with no fallback op. A variant that fails any check
is FAILED and has no figure. Times: µs per call, the median of `--calls` (>= 200) calls
after `--warmup` calls, the variants interleaved in `--rounds` rounds. Launches per call
are stax's report (`launches_per_call`: kernels, split-reduction final kernels, library
calls, fallback ops, run-time copies).

On the CPU it also measures the stax wrapper's own overhead (issue 14's target: "the stax
wrapper adds at most 3 µs over the same graph's kernels alone"): for each case's compiled
graph, one call is recorded (each kernel `k<i>` and each `torch.*` library call of the
generated wrapper, with the very buffers the wrapper allocated), and then, interleaved:
- kernels alone: the recorded kernel and library calls replayed on those preallocated
  buffers (no guards, no allocation);
- the CompiledGraph: `graph(*args)` (guards, allocations, launches: the stax wrapper);
- the whole compiled call: the torch.compile'd callable (Dynamo's guards and AOT's
  runtime wrappers on top, the same for every backend).
wrapper overhead = CompiledGraph - kernels alone.

Writes the markdown report (with provenance) to --out (default
benchmarks/results/dispatch-<device>-<host>.md) and the records as JSON beside it.
"""
from __future__ import annotations

import argparse
import functools
import math
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

ENV_NOTES = common.init_env(strict=True) if __name__ == "__main__" else []

import torch  # noqa: E402
from torch import nn  # noqa: E402

import stax.backend  # noqa: E402,F401

#: issue 14's CPU target: the stax wrapper adds at most this over the kernels alone
TARGET_WRAPPER_US = 3.0
CASE_NAMES = ("mlp", "pointwise_1k", "gpt2_decode", "kernels20")


# ----------------------------------------------------------------------------- cases

class SmallMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(256, 512)
        self.ln = nn.LayerNorm(512)
        self.fc2 = nn.Linear(512, 256)

    def forward(self, x):
        return self.fc2(self.ln(nn.functional.gelu(self.fc1(x))))


class Add(nn.Module):
    def forward(self, a, b):
        return a + b


class GPT2Decode(nn.Module):
    """One GPT-2 block for one new token with the KV cache passed as inputs: returns the
    block's output and the new token's k and v (what a decoder appends to its cache)."""

    def __init__(self, hidden=768, heads=12):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(hidden)
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.c_proj = nn.Linear(hidden, hidden)
        self.ln_2 = nn.LayerNorm(hidden)
        self.c_fc = nn.Linear(hidden, 4 * hidden)
        self.mlp_proj = nn.Linear(4 * hidden, hidden)

    def forward(self, x, k_cache, v_cache):
        b, t, c = x.shape
        d = c // self.heads
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q = q.view(b, t, self.heads, d).transpose(1, 2)
        k = k.view(b, t, self.heads, d).transpose(1, 2)
        v = v.view(b, t, self.heads, d).transpose(1, 2)
        keys = torch.cat([k_cache, k], dim=2)
        values = torch.cat([v_cache, v], dim=2)
        att = torch.softmax((q @ keys.transpose(-2, -1)) * (1.0 / math.sqrt(d)), dim=-1)
        y = (att @ values).transpose(1, 2).reshape(b, t, c)
        x = x + self.c_proj(y)
        h = self.c_fc(self.ln_2(x))
        h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h * h * h)))
        return x + self.mlp_proj(h), k, v


class Kernels20(nn.Module):
    """20 rounds of (pointwise, reduction over alternating dims): 20 small kernels (each
    round's pointwise work fuses into its reduction; the reductions stop further fusion)."""

    def forward(self, x):
        for i in range(20):
            x = torch.tanh(x * 1.01 + 0.1)
            x = x - x.amax(dim=i % 2, keepdim=True)
        return x


def cases(device: str, names=CASE_NAMES) -> list[common.Case]:
    torch.manual_seed(0)
    dev = torch.device(device)
    mlp_dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    out = []
    if "mlp" in names:
        m = common.randomize_norms(SmallMLP().eval()).to(dev, mlp_dtype)
        out.append(common.Case("mlp", f"Linear(256,512) -> GELU -> LayerNorm -> "
                               f"Linear(512,256), batch 8, {str(mlp_dtype)[6:]}", m,
                               (torch.randn(8, 256, device=dev, dtype=mlp_dtype),),
                               kind="launch"))
    if "pointwise_1k" in names:
        out.append(common.Case("pointwise_1k", "a + b, 1024 f32", Add(),
                               (torch.randn(1024, device=dev), torch.randn(1024, device=dev)),
                               kind="launch"))
    if "gpt2_decode" in names:
        m = common.randomize_norms(GPT2Decode().eval()).to(dev)
        cache = 1024
        args = (torch.randn(1, 1, 768, device=dev),
                torch.randn(1, 12, cache, 64, device=dev),
                torch.randn(1, 12, cache, 64, device=dev))
        out.append(common.Case("gpt2_decode", f"GPT-2 block decode step: batch 1, one new "
                               f"token, KV cache {cache} (inputs), hidden 768, 12 heads, f32",
                               m, args, kind="launch"))
    if "kernels20" in names:
        out.append(common.Case("kernels20", "20 x (tanh(x*1.01+0.1), x - amax(x, dim=i%2)), "
                               "[32, 32] f32", Kernels20(), (torch.randn(32, 32, device=dev),),
                               kind="launch"))
    return out


def variants(device: str) -> list[common.Variant]:
    v = [common.Variant("inductor", "inductor"), common.Variant("stax", "stax")]
    if device.startswith("cuda"):
        v += [common.Variant("inductor-ro", "inductor", "reduce-overhead"),
              common.Variant("stax-ro", "stax", "reduce-overhead")]
    return v


def make_device(device: str, calls: int, rounds: int, warmup: int) -> common.Device:
    cuda = device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def time_all(fns):
        if cuda:  # a launch-bound call is timed with the device drained after it
            fns = {k: (lambda f=f: (f(), sync())) for k, f in fns.items()}
        return common.median_ms_interleaved(fns, (), warmup=warmup, rounds=rounds,
                                            min_runs=calls, max_runs=calls, no_grad=False)
    return common.Device(device, "triton" if cuda else "stax-cpu", sync=sync,
                         time_all=time_all)


# ----------------------------------------------------------------------------- wrapper overhead

class _TorchRecorder:
    """`torch` for a recording copy of the wrapper: its functions record their calls."""

    def __init__(self, log):
        self._log = log

    def __getattr__(self, name):
        real = getattr(torch, name)
        if isinstance(real, (types.BuiltinFunctionType, types.FunctionType)):
            def rec(*a, **kw):
                self._log.append((f"torch.{name}", real, a, kw))
                return real(*a, **kw)
            return rec
        return real


class _RecordedKernel:
    """A kernel global of a recording wrapper copy: `k(*a)` (CPU) and `k.launch(stream,
    *a)` (GPU: the bound launch) record the call, then make it."""

    def __init__(self, name, k, log):
        self.name, self.k, self.log = name, k, log

    def __call__(self, *a):
        self.log.append((self.name, self.k, a, {}))
        return self.k(*a)

    def launch(self, stream, *a):
        fn = self.k.launch
        self.log.append((self.name, fn, (stream,) + a, {}))
        return fn(stream, *a)


class _CheckedPathKernel:
    """A GPU kernel global whose `launch` takes Triton's own checked path
    (`TritonKernel.__call__`: alignment checks, `CompiledKernel[grid]`): the launch path
    before issue 14, for comparison."""

    def __init__(self, k):
        self.k = k

    def launch(self, stream, *a):
        return self.k(*a)


def _kernel_globals(graph):
    return {n: k for n, k in graph._globals.items() if n[:1] == "k" and n[1:].isdigit()}


def record_graph_call(graph, args) -> list:
    """One call of the CompiledGraph's wrapper with every kernel and torch library call
    recorded: [(label, fn, args, kwargs)] in launch order, holding the wrapper's buffers."""
    log = []
    g = dict(graph._globals)
    for name, k in _kernel_globals(graph).items():
        g[name] = _RecordedKernel(name, k, log)
    g["torch"] = _TorchRecorder(log)
    linear = g.get("_linear")
    if linear is not None:   # x @ w.t() as torch's linear (the wrapper's matmul form)
        def rec_linear(*a):
            log.append(("torch.nn.functional.linear", linear, a, {}))
            return linear(*a)
        g["_linear"] = rec_linear
    exec(compile(graph.source, f"<stax recorded {graph.graph_id}>", "exec"), g)
    with torch.no_grad():
        g["call"](list(args))
    return log


def capture_graph_args(graph, call) -> list:
    """The arguments the compiled callable passes to `graph` (aot_autograd's flat list:
    parameters and inputs) in one `call()`: the plain wrapper call inside the graph's
    profiler switch (`graph._call`, bound into the backend's runner at compile time) is
    swapped for a recording one for that call."""
    cell = next((c for c in (graph._call.__closure__ or ())
                 if c.cell_contents is graph._plain_call), None)
    if cell is None:
        raise RuntimeError("cannot find the CompiledGraph's plain call to record its args")
    seen, plain = [], graph._plain_call

    def spy(args):
        seen.append(list(args))
        return plain(args)
    cell.cell_contents = spy
    try:
        with torch.no_grad():
            call()
    finally:
        cell.cell_contents = plain
    if not seen:
        raise RuntimeError("the compiled call did not call its CompiledGraph")
    return seen[-1]


def kernels_alone_fn(log):
    """A callable that replays the recorded launches on their preallocated buffers."""
    calls = tuple((fn, a, kw) for _, fn, a, kw in log)

    def replay():
        for fn, a, kw in calls:
            fn(*a, **kw)
    return replay


def checked_path_graph_fn(graph, args):
    """`graph`'s wrapper with every GPU kernel on Triton's checked launch path."""
    g = dict(graph._globals)
    for name, k in _kernel_globals(graph).items():
        g[name] = _CheckedPathKernel(k)
    exec(compile(graph.source, f"<stax checked-path {graph.graph_id}>", "exec"), g)
    call, args = g["call"], list(args)
    return lambda: call(args)


def wrapper_overhead(case: common.Case, calls: int, rounds: int, warmup: int,
                     device: str = "cpu") -> dict:
    """Kernels alone vs the CompiledGraph vs the whole compiled call (µs), for the
    case's stax graph; on the GPU also the CompiledGraph with Triton's checked launch
    path, and every timed call is followed by a device synchronize (the figures are
    latencies). {"status": FAILED, ...} when it cannot be measured."""
    import checks
    cuda = device.startswith("cuda")
    stax.backend.clear()
    torch._dynamo.reset()
    # uncaptured: the default mode's CUDA graph (stax.auto_cudagraphs) would replay the
    # compiled call, and the wrapper's own cost is what is measured here
    backend = functools.partial(stax.backend.stax, options={"stax.auto_cudagraphs": False}) \
        if cuda else "stax"
    compiled = torch.compile(case.model, backend=backend, fullgraph=True)
    with torch.no_grad():
        compiled(*case.args)
    reports = [c.report for c in stax.backend.compiled_callables]
    problems = checks.report_problems(reports, "triton" if cuda else "stax-cpu")
    graphs = [g for r in reports for g in r.graphs]
    if problems or len(graphs) != 1:
        return {"status": common.FAILED,
                "failures": problems or [f"{len(graphs)} graphs, not one"]}
    graph = graphs[0]
    gargs = capture_graph_args(graph, lambda: compiled(*case.args))
    log = record_graph_call(graph, gargs)
    kernels = kernels_alone_fn(log)
    # the replay must give the wrapper's result (the same kernels on the same inputs)
    with torch.no_grad():
        want = graph(*gargs)
        kernels()
    last_out = log[-1][2][-1] if log and not log[-1][3] else log[-1][3].get("out")
    fns = {"kernels alone": kernels, "CompiledGraph": lambda: graph(*gargs),
           "compiled call": lambda: compiled(*case.args)}
    if cuda:
        fns["CompiledGraph, Triton's launch path"] = checked_path_graph_fn(graph, gargs)
        sync = torch.cuda.synchronize
        fns = {k: (lambda f=f: (f(), sync())) for k, f in fns.items()}
    t = common.median_ms_interleaved(fns, (), warmup=warmup, rounds=rounds,
                                     min_runs=calls, max_runs=calls)
    us = {k: ms * 1e3 for k, (ms, _) in t.items()}
    rec = {"status": "ok", "n": calls, "launches": [lb for lb, *_ in log],
           "kernels_us": us["kernels alone"], "graph_us": us["CompiledGraph"],
           "call_us": us["compiled call"],
           "wrapper_us": us["CompiledGraph"] - us["kernels alone"],
           "dynamo_aot_us": us["compiled call"] - us["CompiledGraph"]}
    if cuda:
        rec["checked_path_graph_us"] = us["CompiledGraph, Triton's launch path"]
    outs = [o for o in want if isinstance(o, torch.Tensor)]
    if last_out is not None and outs and not any(torch.equal(o, last_out) for o in outs):
        rec["note"] = "the replay's last buffer is not an output (a copy after the launches)"
    stax.backend.clear()
    torch._dynamo.reset()
    return rec


# ----------------------------------------------------------------------------- report

def us_cell(rec, label) -> str:
    v = rec["variants"].get(label)
    if v is None:
        return "-"
    if v.get("status") != "ok":
        return common.FAILED
    return "-" if v.get("ms") is None else f"{v['ms'] * 1e3:.1f}"


def launches_cell(rec, label) -> str:
    v = rec["variants"].get(label)
    if v is None or v.get("status") != "ok":
        return "-"
    if v.get("backend") != "stax":
        return "-"
    launches = v.get("launches", {})
    return str(sum(launches.values())) if isinstance(launches, dict) else str(launches)


def build_report(results, overhead, state, prov, cmdline, device, vlabels, calls) -> str:
    L = [f"# Stax dispatch benchmark ({device})\n", f"Command: `{cmdline}`\n",
         "## Provenance\n"]
    L += common.provenance_lines(prov)
    L.append("\n## Machine state\n")
    L += [f"- {k}: {v}" for k, v in state]
    L += [f"- env: {n}" for n in ENV_NOTES]
    L.append(f"- torch threads while timed: {torch.get_num_threads()} (stax splits a kernel "
             "of 65,536 elements or more over that many parts; with 1, none is split)")
    L.append("\n## µs per call\n")
    L.append(f"Median of {calls} calls per variant after warm-up, the variants interleaved "
             "in rounds. A figure only for a variant that passed every check (outputs vs a "
             "float64 run, on the first call and before and after the timed runs; stax: "
             "every graph on the target's route with no fallback op); FAILED otherwise "
             "(reasons below). stax launches/call is the report's `launches_per_call` "
             "(kernels + split-reduction final kernels + library calls + fallback ops + "
             "run-time copies).\n")
    cols = ["eager"] + vlabels
    L.append("| case | " + " | ".join(f"{c} µs" for c in cols) + " | " +
             " | ".join(f"{c} launches/call" for c in vlabels if c.startswith("stax")) + " |")
    L.append("|" + " --- |" * (1 + len(cols) + sum(c.startswith("stax") for c in vlabels)))
    for r in results:
        L.append(f"| {r['name']} | " + " | ".join(us_cell(r, c) for c in cols) + " | " +
                 " | ".join(launches_cell(r, c) for c in vlabels if c.startswith("stax")) + " |")
    L.append("\nstax / Inductor (lower is better): " + "; ".join(
        f"{r['name']} {common.ratio(r, 'stax', 'inductor'):.2f}"
        if common.ratio(r, 'stax', 'inductor') else f"{r['name']} -" for r in results))
    if overhead:
        cuda = device.startswith("cuda")
        L.append(f"\n## The stax wrapper's own overhead ({device})\n")
        L.append("One call of each case's compiled graph is recorded (every kernel `k<i>` and "
                 "every `torch.*` library call the generated wrapper makes, with the buffers "
                 "it allocated); then interleaved: *kernels alone* replays those launches on "
                 "the preallocated buffers; *CompiledGraph* is `graph(*args)` (guards, "
                 "allocations, launches); *compiled call* is the torch.compile'd callable "
                 "(Dynamo guards + AOT runtime wrappers on top). wrapper = CompiledGraph - "
                 f"kernels alone; issue 14's target (CPU): wrapper <= {TARGET_WRAPPER_US:g} "
                 "µs." + (" On the GPU every timed call is followed by a synchronize (the "
                          "figures are latencies), kernels are replayed through their bound "
                          "launch, and *Triton's path* is the same CompiledGraph with every "
                          "kernel launched through `CompiledKernel[grid]` with the alignment "
                          "checks (the launch path before issue 14). The graph is compiled "
                          "with stax.auto_cudagraphs off here: the wrapper is what is "
                          "measured." if cuda else "") + "\n")
        extra = " CompiledGraph, Triton's path µs |" if cuda else ""
        L.append("| case | launches replayed | kernels alone µs | CompiledGraph µs |" + extra +
                 " compiled call µs | wrapper µs | Dynamo+AOT µs | target |")
        L.append("|" + " --- |" * (9 if cuda else 8))
        for name, o in overhead.items():
            if o.get("status") != "ok":
                L.append(f"| {name} | {common.FAILED}: {' '.join(o.get('failures', []))[:300]}"
                         " | - | - | - | - | - |" + (" - |" if cuda else "") + " no figure |")
                continue
            met = ("met" if o["wrapper_us"] <= TARGET_WRAPPER_US else "**missed**") \
                if not cuda else "-"
            checked = f" {o['checked_path_graph_us']:.1f} |" if cuda else ""
            L.append(f"| {name} | {len(o['launches'])} ({', '.join(o['launches'])}) | "
                     f"{o['kernels_us']:.1f} | {o['graph_us']:.1f} |{checked} {o['call_us']:.1f} | "
                     f"{o['wrapper_us']:.1f} | {o['dynamo_aot_us']:.1f} | {met} |")
    L.append("\n## Failures\n")
    L += common.failure_lines(results)
    L.append("\n## Cases\n")
    for r in results:
        L.append(f"- **{r['name']}**: {r['desc']}")
        for lb, v in r["variants"].items():
            if v.get("backend") == "stax" and "routes" in v:
                L.append(f"  - {lb}: routes {v['routes']}, {v['graphs']} graph(s), "
                         f"{v['kernels']} kernel(s), launches/call {v['launches']}, "
                         f"library calls {len(v['library_calls'])}, fallback ops "
                         f"{v['fallback_ops']}")
    L.append(f"\nLoad average at the end: {common.load_average()}")
    return "\n".join(L) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--out", default=None, help="markdown output path (JSON beside it)")
    ap.add_argument("--cases", default=None, help=f"comma-separated subset of {CASE_NAMES}")
    ap.add_argument("--calls", type=int, default=200, help="timed calls per variant")
    ap.add_argument("--rounds", type=int, default=10, help="interleaved rounds")
    ap.add_argument("--warmup", type=int, default=20, help="warm-up calls per variant")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch.set_num_threads for every variant (default: torch's); on a "
                         "loaded 2-core VM, 1 keeps OpenMP barriers from waiting out "
                         "scheduler time slices")
    ap.add_argument("--no-overhead", action="store_true",
                    help="skip the CPU wrapper-overhead measurement")
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda but torch.cuda.is_available() is False")
    wanted = a.cases.split(",") if a.cases else list(CASE_NAMES)
    if set(wanted) - set(CASE_NAMES):
        ap.error(f"unknown case(s) {sorted(set(wanted) - set(CASE_NAMES))}")
    out = a.out or os.path.join(common.REPO, "benchmarks", "results",
                                f"dispatch-{a.device}-{common.host_label()}.md")
    cmdline = "python " + " ".join([os.path.relpath(sys.argv[0], common.REPO)] +
                                   (argv if argv is not None else sys.argv[1:]))
    prov = common.provenance(a.device)
    state = common.machine_state()
    for k, v in list(prov.items()) + state:
        print(f"  {k}: {v}")
    vs = variants(a.device)
    warm = common.warm_up_backends()
    print("  one-time backend warm-up: " + ", ".join(f"{b} {s:.2f} s" for b, s in warm.items()))
    dev = make_device(a.device, a.calls, a.rounds, a.warmup)
    all_cases = cases(a.device, wanted)
    results = [common.run_case(c, vs, dev) for c in all_cases]
    overhead = {}
    if not a.no_overhead:
        for c, r in zip(all_cases, results):
            if common.figure(r, "stax") is None:
                overhead[c.name] = {"status": common.FAILED,
                                    "failures": ["the stax variant FAILED its checks"]}
                continue
            try:
                overhead[c.name] = wrapper_overhead(c, a.calls, a.rounds, a.warmup,
                                                    a.device)
            except Exception as e:  # noqa: BLE001 - reported, never hidden
                overhead[c.name] = {"status": common.FAILED,
                                    "failures": [f"{type(e).__name__}: {e}"[:500]]}
            print(f"  [{c.name}] wrapper overhead: {overhead[c.name]}", flush=True)
    report = build_report(results, overhead, state, prov, cmdline, a.device,
                          [v.label for v in vs], a.calls)
    print("\n" + report)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        f.write(report)
    common.write_json(os.path.splitext(out)[0] + ".json",
                      {"command": cmdline, "provenance": prov, "machine": dict(state),
                       "env": ENV_NOTES, "results": results, "wrapper_overhead": overhead})
    return common.exit_status(results)


if __name__ == "__main__":
    sys.exit(main())
