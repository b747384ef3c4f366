"""The `stax` torch.compile backend.

    torch.compile(f, backend="stax")                       # found by entry point
    torch.compile(f, backend="stax", mode="max-autotune")
    torch.compile(f, backend="stax", options={"stax.fusion": False})
    torch.compile(f, backend=functools.partial(stax.backend.stax, mode="max-autotune",
                                               options={"stax.cudagraphs": False}))

(torch.compile refuses `mode` and `options` together; the partial is the way to combine
them.) The Dynamo graph goes through aot_autograd with the core ATen decompositions;
its forward, backward (compiled lazily, on the first backward) and inference graphs
each go through `stax.driver.compile_graph`.

A graph that cannot be compiled (importer, pass or codegen error) runs as written
(its own `gm.forward`), and the reason is recorded; with `strict_native=True` or
`STAX_STRICT=1` it raises `StaxCompileError` instead. Under `STAX_DEBUG=1` reasons
and notes are printed to stderr. Without STAX_DEBUG a fallback is not silent either: the
first one in a process emits one `StaxFallbackWarning` (a UserWarning, once per process)
saying how many graphs ran as written so far and how to see why; `fallback_count()` is
the running total.

A graph with symbolic shapes (Dynamo's automatic dynamic shapes after a second size,
`dynamic=True`, `mark_dynamic`) on the CPU is compiled once for every size with kernels
that take their sizes at run time (`stax.dynamic_compile`; in training its forward and
backward, `stax.dynamic_training`); where it cannot stay dynamic (the GPU, an op or
kernel with no runtime-size support: the notes say why), it is compiled per shape: the callable is a
`stax.shape_specialize.ShapeSpecializer` that compiles one static variant per distinct
size tuple through the same static pipeline (at most `stax.max_shape_variants`, default
8; later sizes run as written with one StaxFallbackWarning, an error in strict mode).
The report's `variants` lists them and its notes say which sizes each was specialized
for (docs/dynamic-shapes.md).

The target is picked from the example inputs' device (`stax.driver.select_target`):
CPU tensors -> "stax-cpu", CUDA tensors -> "triton"; mixed devices, or CUDA with
`stax.triton=False`, make every graph fall back with that reason. The mode/options notes
are resolved for the picked target. Under `stax.cudagraphs` (mode "reduce-overhead" or
"max-autotune") every graph compiled for the triton target runs through a
`stax.cudagraphs.CudaGraphRunner` (capture on the second call, replay after; see that
module for the output-aliasing rule and the reasons it records when it cannot capture).

The callable handed back to Dynamo is a `StaxCompiled`; it reports what happened, under
the same names as its `StaxReport` (`stax.backend.last_report().stax_route` works too,
and so does the report's short name `last_report().route`); `stax.explain(...)` or
`.explain()` on either gives a readable account of all of it:

    stax_route            "stax-cpu" / "triton" when every graph compiled natively for
                          that target, "fallback" when any whole graph fell back
    stax_fallback_reason  None, or the reason(s) text
    stax_fallback_ops     ATen ops PyTorch runs inside otherwise compiled graphs
    stax_library_calls    matmuls run by the library (torch.mm/bmm with out=), output
                          layout copies, and torch.distributed collectives
    stax_collectives      the collectives alone ("collective all_reduce sum group '0'
                          [8, 64] f32"), in graph order; this process's, so this rank's
    stax_tuned            under max-autotune (triton target): one dict per search, in
                          compile order: kernel (name), kind ("kernel" / "matmul"),
                          route (for a matmul: "cublas + stax epilogue kernel ..." or
                          "triton matmul + fused epilogue ..."), winner (config label),
                          best_ms, timings (label -> ms), covered/total, descent_steps,
                          from_cache, stopped_by_budget, note; empty otherwise
    stax_notes            settings that do not apply to the target, view copies, ...
    stax_kernel_count     number of compiled kernels (all graphs)
    stax_launches_per_call  per graph kind (inference / forward / backward): launches of
                          one call (stax kernels + library calls + fallback ops)
    stax_cudagraphs       under stax.cudagraphs: each graph's capture status, with the
                          precise reason where it runs uncaptured
    stax_graphs           the CompiledGraph / FallbackRecord of each graph
    stax_variants         for a graph with symbolic shapes: its ShapeVariants (sizes,
                          graphs, route, calls, compile time); empty otherwise

Dynamo keeps that callable to itself; tests and users find it through
`stax.backend.compiled_callables` (every StaxCompiled created in this process and still
alive, oldest first; held by weak reference, so an entry goes with its compiled code
after `torch._dynamo.reset()`), `stax.backend.reports()` (their reports) and
`stax.backend.last_report()`. `clear()` empties both lists.
"""
from __future__ import annotations

import dataclasses
import functools
import traceback
from typing import Any

import torch

from stax import debug
from stax.cache_compile import compile_cached
from stax.compiled_graph import _bind
from stax.driver import (CompiledGraph, StaxCompileError, StaxGuardError,
                         StaxUnsupportedError, compile_graph, select_target)
from stax.options import StaxConfig, resolve_config
from stax.recompiles import announce, new_dynamo_recompile_reasons
from stax.shape_specialize import compile_static_or_per_size

__all__ = ["stax", "StaxCompileError", "StaxGuardError", "StaxCompiled", "StaxReport",
           "FallbackRecord", "WeakRegistry", "compiled_callables", "reports", "last_report",
           "clear", "StaxFallbackWarning", "fallback_count"]


class StaxFallbackWarning(UserWarning):
    """A graph ran as written by PyTorch because stax could not compile it."""


#: the report names, each readable as `<callable>.stax_<name>` and `<report>.stax_<name>`
REPORT_NAMES = ("route", "fallback_reason", "fallback_ops", "library_calls", "notes",
                "kernel_count", "graphs", "launches_per_call", "cudagraphs", "tuned",
                "variants", "collectives")

# graphs that fell back in this process, and whether the one warning has been given;
# the count is not cleared by clear(): the warning's "how many" is per process
_fallbacks = 0
_fallback_warned = False


def fallback_count() -> int:
    """How many graphs ran as written (fell back to PyTorch eager) in this process."""
    return _fallbacks


def _note_fallback(warning: str | None = None) -> None:
    """Count a fallback; the first one of the process warns (once: a model whose graphs
    all fall back would otherwise warn per graph). Under STAX_DEBUG every reason is
    printed instead. A `warning` of its own (the shape-variant cap, which its caller
    gives once per graph) is always warned, without STAX_DEBUG."""
    global _fallbacks, _fallback_warned
    _fallbacks += 1
    if debug.debug_enabled():
        return
    import warnings
    if warning is not None:
        warnings.warn(warning, StaxFallbackWarning, stacklevel=3)
        return
    if _fallback_warned:
        return
    _fallback_warned = True
    n = _fallbacks
    warnings.warn(
        f"stax: {n} graph{'s' if n != 1 else ''} ran as written by PyTorch (fell back to "
        "eager) in this process so far (stax.backend.fallback_count() is the running "
        "total); set STAX_DEBUG=1 to print why, or read the reasons from "
        "stax.backend.reports() (each report's fallback_reason); STAX_STRICT=1 makes a "
        "fallback an error. This warning is shown once per process.",
        StaxFallbackWarning, stacklevel=2)

class WeakRegistry:
    """The live objects appended to it, oldest first, held by weak reference: a list as
    far as reading goes (len, iteration, indexing, slices, == a list), plus append and
    clear. An entry goes when nothing else holds its object (for a compiled callable:
    after `torch._dynamo.reset()`, or once its function is gone), so the registry never
    keeps compiled code alive (it kept every graph's kernels and buffers: 40 compiles,
    378 MB)."""

    def __init__(self):
        self._refs: list = []

    def _live(self) -> list:
        out = []
        for r in self._refs:
            o = r()
            if o is not None:
                out.append(o)
        if len(out) != len(self._refs):
            self._refs = [r for r in self._refs if r() is not None]
        return out

    def append(self, obj) -> None:
        import weakref
        self._refs.append(weakref.ref(obj))

    def clear(self) -> None:
        self._refs.clear()

    def __len__(self):
        return len(self._live())

    def __bool__(self):
        return bool(self._live())

    def __iter__(self):
        return iter(self._live())

    def __getitem__(self, i):
        return self._live()[i]

    def __eq__(self, other):
        return self._live() == list(other) if isinstance(other, (list, tuple, WeakRegistry)) \
            else NotImplemented

    def __repr__(self):
        return f"WeakRegistry({self._live()!r})"


#: every live StaxCompiled created in this process (oldest first), held weakly
compiled_callables: WeakRegistry = WeakRegistry()


@dataclasses.dataclass
class FallbackRecord:
    """A graph that runs as written (its own forward) because stax could not compile it."""
    graph_id: str
    kind: str
    reason: str
    route: str = "fallback"
    kernels: list = dataclasses.field(default_factory=list)
    library_calls: list = dataclasses.field(default_factory=list)
    fallback_ops: list = dataclasses.field(default_factory=list)
    notes: list = dataclasses.field(default_factory=list)
    source: str | None = None


@dataclasses.dataclass
class StaxReport:
    """What the backend did for one Dynamo graph (shared by its fw/bw/inference graphs)."""
    config: StaxConfig
    graph_names: list[str]
    graphs: list = dataclasses.field(default_factory=list)
    extra_notes: list = dataclasses.field(default_factory=list)

    runners: list = dataclasses.field(default_factory=list)
    #: the guard failures that made Dynamo compile this graph (empty for a first compile)
    recompile_reasons: list = dataclasses.field(default_factory=list)
    #: the ShapeSpecializer of a graph with symbolic shapes (None for a static graph)
    specializer: Any = None

    @property
    def variants(self) -> list:
        """The static variants compiled for a graph with symbolic shapes (ShapeVariant,
        oldest first); empty for a static graph."""
        return list(self.specializer.variants.values()) if self.specializer else []

    @property
    def route(self) -> str:
        if any(isinstance(g, FallbackRecord) for g in self.graphs):
            return "fallback"
        routes = {getattr(g, "route", "stax-cpu") for g in self.graphs}
        if not routes:
            return self.config.target
        return routes.pop() if len(routes) == 1 else "mixed:" + ",".join(sorted(routes))

    @property
    def launches_per_call(self) -> dict[str, int]:
        """Launches of one call of each graph kind (kind from the graph id); for a graph
        with symbolic shapes, of the variant the last call ran."""
        graphs = self.graphs
        last = self.specializer.last_variant if self.specializer else None
        if last is not None:
            graphs = last.graphs
        out: dict[str, int] = {}
        for g in graphs:
            if isinstance(g, FallbackRecord):
                continue
            kind = next((k for k in ("inference", "forward", "backward")
                         if f"_{k}_" in g.graph_id), "graph")
            out[kind] = out.get(kind, 0) + g.launches_per_call
        return out

    @property
    def cudagraphs(self) -> list[str]:
        """Capture status of each graph (empty unless stax.cudagraphs applies)."""
        out = [r.status() for r in self.runners]
        if self.config.target == "triton" and self.config.cudagraphs:
            for g in self.graphs:
                if isinstance(g, FallbackRecord):
                    out.append(f"{g.kind} graph {g.graph_id}: not captured: it runs as "
                               f"written by PyTorch (fallback: {g.reason})")
        return out

    @property
    def fallback_reason(self) -> str | None:
        reasons = [f"{g.kind} graph {g.graph_id}: {g.reason}" for g in self.graphs
                   if isinstance(g, FallbackRecord)]
        return "\n".join(reasons) if reasons else None

    @property
    def fallback_ops(self) -> list[str]:
        return [op for g in self.graphs for op in g.fallback_ops]

    @property
    def library_calls(self) -> list[str]:
        return [c for g in self.graphs for c in g.library_calls]

    @property
    def collectives(self) -> list[str]:
        """The torch.distributed collectives its graphs call (library calls in graph
        order; the report is this process's, so this rank's)."""
        return [c for g in self.graphs for c in getattr(g, "collectives", ())]

    @property
    def tuned(self) -> list[dict]:
        return [dict(t, graph=g.graph_id) for g in self.graphs for t in getattr(g, "tuned", ())]

    @property
    def notes(self) -> list[str]:
        out = []
        shape_notes = self.specializer.notes() if self.specializer else []
        for n in list(self.config.notes) + self.extra_notes + shape_notes + \
                [n for g in self.graphs for n in g.notes]:
            if n not in out:
                out.append(n)
        return out

    @property
    def kernel_count(self) -> int:
        return sum(len(g.kernels) for g in self.graphs)

    # the same names as the compiled callable's attributes (StaxCompiled.stax_*)
    stax_route = property(lambda self: self.route)
    stax_fallback_reason = property(lambda self: self.fallback_reason)
    stax_fallback_ops = property(lambda self: self.fallback_ops)
    stax_library_calls = property(lambda self: self.library_calls)
    stax_notes = property(lambda self: self.notes)
    stax_kernel_count = property(lambda self: self.kernel_count)
    stax_graphs = property(lambda self: self.graphs)
    stax_launches_per_call = property(lambda self: self.launches_per_call)
    stax_cudagraphs = property(lambda self: self.cudagraphs)
    stax_tuned = property(lambda self: self.tuned)
    stax_variants = property(lambda self: self.variants)
    stax_collectives = property(lambda self: self.collectives)

    def explain(self) -> str:
        """A readable multi-line account: each graph with its route, its kernels (name,
        kind, the user's source lines), library calls, fallback ops, and why a graph
        or op runs in PyTorch; then the notes. See `stax.reporting.explain`."""
        from stax.reporting import explain_report
        return explain_report(self)

    def summary(self) -> str:
        lines = [f"stax route={self.route} kernels={self.kernel_count} "
                 f"launches/call={self.launches_per_call} "
                 f"graphs={[g.graph_id for g in self.graphs]}"]
        for x in self.cudagraphs:
            lines.append(f"  cudagraph: {x}")
        if self.fallback_reason:
            lines.append(f"  fallback: {self.fallback_reason}")
        for x in self.fallback_ops:
            lines.append(f"  fallback op: {x}")
        for x in self.library_calls:
            lines.append(f"  library call: {x}")
        for t in self.tuned:
            ms = f" {t['best_ms']:.3f} ms" if t.get("best_ms") is not None else ""
            cache = " (cached)" if t.get("from_cache") else ""
            lines.append(f"  tuned {t['kind']} {t['kernel']}: {t['route']}: "
                         f"{t['winner']}{ms}{cache}")
        for x in self.notes:
            lines.append(f"  note: {x}")
        return "\n".join(lines)


def stax_decompositions(training: bool = False) -> dict:
    """The core ATen decompositions, less the ops the importer lowers better whole:
    nll_loss_forward/backward (their decompositions gather along the class dim, which
    stax has no kernel for; the importer writes the pick as a masked reduction over the
    class dim that fuses with log_softmax).

    For training graphs also less `_scaled_dot_product_flash_attention_for_cpu`: its
    decomposition returns the attention probabilities where the op returns logsumexp
    (it is meant for inference and export), and the backward op reads that slot, so
    every gradient through CPU sdpa came out wrong. Inductor excludes it too."""
    return dict(_stax_decompositions(training))


@functools.lru_cache(maxsize=2)
def _stax_decompositions(training: bool) -> dict:
    # built once per process: core_aten_decompositions() takes ~30 ms per call, which
    # every torch.compile of a graph would pay again (a copy is handed out)
    from torch._decomp import core_aten_decompositions
    aten = torch.ops.aten
    keep = {aten.nll_loss_forward.default, aten.nll_loss_backward.default}
    if training:
        keep.add(aten._scaled_dot_product_flash_attention_for_cpu.default)
    table = {k: v for k, v in core_aten_decompositions().items() if k not in keep}
    # ops core ATen keeps whole that stax writes as its own reductions: the vector norm
    # (F.normalize, clip_grad_norm_, cosine similarity) becomes pow/abs, sum or amax and
    # a root, which fuse with their producers and consumers and keep a graph dynamic.
    # Below autograd only: a training graph's backward is still the op's own formula,
    # which gives a zero vector's norm a zero gradient where the decomposition's root
    # would give NaN
    from torch._decomp import get_decompositions
    table.update(get_decompositions([aten.linalg_vector_norm]))
    # eager-exact decompositions in place of torch's (nearest upsampling's indices,
    # threshold_backward's dtype): see stax.decompositions
    from stax.decompositions import eager_exact_decompositions
    table.update(eager_exact_decompositions())
    # a convolution's bias added by the kernel after it on CUDA: stax.gpu_decompositions
    from stax.gpu_decompositions import gpu_decompositions
    table.update(gpu_decompositions())
    return table


def needs_autograd(example_inputs) -> bool:
    """aot_autograd will build a backward: grad mode is on and some input requires grad."""
    return torch.is_grad_enabled() and any(
        isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs)


def run_aot_autograd(gm, example_inputs, make_compiler, partition_fn=None):
    """aot_autograd over `stax_decompositions()`; `make_compiler(kind)` gives the
    compiler of each graph kind ("forward", "backward", "inference"). `partition_fn`
    (default: aot_autograd's own, `default_partition`) splits the joint graph; the
    dynamic path wraps it to see the backward before the forward is compiled."""
    from torch._dynamo.backends.common import aot_autograd
    extra = {"partition_fn": partition_fn} if partition_fn is not None else {}
    aot = aot_autograd(fw_compiler=make_compiler("forward"),
                       bw_compiler=make_compiler("backward"),
                       inference_compiler=make_compiler("inference"),
                       decompositions=stax_decompositions(needs_autograd(example_inputs)),
                       **extra)
    from stax.decompositions import eager_exact_kernels
    with eager_exact_kernels():  # torch's py_impl decompositions would run before ours
        return aot(gm, example_inputs)


class StaxCompiled:
    """The callable returned to Dynamo: forwards to aot_autograd's callable and carries
    the report. Keyword arguments are bound by the Dynamo graph's placeholder names
    (`L_x_` may also be spelled `x`)."""

    def __init__(self, fn, report: StaxReport):
        self._fn = fn
        self.report = report

    def __call__(self, *args, **kwargs):
        if kwargs:
            args = _bind(self.report.graph_names, args, kwargs, "the stax-compiled graph")
        return self._fn(*args)

    stax_route = property(lambda self: self.report.route)
    stax_fallback_reason = property(lambda self: self.report.fallback_reason)
    stax_fallback_ops = property(lambda self: self.report.fallback_ops)
    stax_library_calls = property(lambda self: self.report.library_calls)
    stax_notes = property(lambda self: self.report.notes)
    stax_kernel_count = property(lambda self: self.report.kernel_count)
    stax_graphs = property(lambda self: self.report.graphs)
    stax_launches_per_call = property(lambda self: self.report.launches_per_call)
    stax_cudagraphs = property(lambda self: self.report.cudagraphs)
    stax_tuned = property(lambda self: self.report.tuned)
    stax_variants = property(lambda self: self.report.variants)
    stax_collectives = property(lambda self: self.report.collectives)

    def explain(self) -> str:
        return self.report.explain()

    def __repr__(self):
        return f"<StaxCompiled {self.report.summary()}>"


def reports() -> list[StaxReport]:
    """The reports of every live StaxCompiled created in this process, oldest first."""
    return [c.report for c in compiled_callables]


def last_report() -> StaxReport | None:
    """The report of the newest live StaxCompiled (None when there is none)."""
    live = list(compiled_callables)
    return live[-1].report if live else None


def clear() -> None:
    compiled_callables.clear()


def _boxed(cg: CompiledGraph, runner=None):
    """aot_autograd's calling convention: one list of arguments (`_boxed_call`)."""
    call = runner if runner is not None else cg._call

    def run(args):
        return call(list(args) if not isinstance(args, list) else args)

    run._boxed_call = True
    run.compiled_graph = cg
    run.cudagraph_runner = runner
    return run


def _cudagraph_runner(cg, kind: str, config: StaxConfig, report: StaxReport):
    """The CUDA graph runner of a compiled GPU graph, or None: reduce-overhead captures
    every graph; the default mode (stax.auto_cudagraphs) captures a small inference graph
    with its outputs copied, and notes it (stax.cudagraphs.auto_capture_blocker)."""
    if getattr(cg, "route", "stax-cpu") != "triton":
        return None
    from stax.cudagraphs import CudaGraphRunner, auto_capture_blocker
    if config.cudagraphs:
        runner = CudaGraphRunner(cg._call, cg, kind, copy_outputs=config.cudagraph_copy_outputs)
    elif config.auto_cudagraphs and auto_capture_blocker(cg, kind) is None:
        runner = CudaGraphRunner(cg._call, cg, kind, auto=True)
        cg.notes.append(f"auto cudagraphs: {cg.launches_per_call} launches per call are "
                        "replayed from one CUDA graph, outputs copied out (a call behaves "
                        "as uncaptured; off with options={'stax.auto_cudagraphs': False})")
    else:
        return None
    report.runners.append(runner)
    return runner


def _make_compiler(kind: str, config: StaxConfig, report: StaxReport, strict: bool,
                   record=None):
    """The aot_autograd compiler of one graph kind; each CompiledGraph (or FallbackRecord)
    goes to `record` (default: appended to `report.graphs`)."""
    record = record if record is not None else report.graphs.append

    def compiler(gm: torch.fx.GraphModule, example_inputs):
        graph_id = debug.new_graph_id(kind)
        try:
            cg = compile_cached(compile_graph, gm, example_inputs, config, kind=kind,
                                graph_id=graph_id)
        except Exception as e:  # noqa: BLE001 - any lowering failure falls back
            reason = f"{type(e).__name__}: {e}"
            if strict:
                raise StaxCompileError(
                    f"stax could not compile the {kind} graph {graph_id} natively "
                    f"(strict mode: strict_native=True or STAX_STRICT=1): {reason}") from e
            rec = FallbackRecord(graph_id=graph_id, kind=kind, reason=reason)
            record(rec)
            debug.DumpDir(graph_id).write("fallback.txt",
                                          reason + "\n\n" + traceback.format_exc())
            # one line under STAX_DEBUG=1 (a fallback is expected, not a crash); the
            # traceback under STAX_DEBUG=2 (and in the dump's fallback.txt)
            debug.log(f"{kind} graph {graph_id} falls back to PyTorch (runs as written): "
                      f"{reason}", exc=e)
            _note_fallback()
            from functorch.compile import make_boxed_func
            return make_boxed_func(gm.forward)
        record(cg)
        debug.log(f"{kind} graph {graph_id}: {len(cg.kernels)} kernel(s), library calls "
                  f"{cg.library_calls}, fallback ops {cg.fallback_ops}")
        for n in cg.notes:
            if n not in config.notes:
                debug.log(f"note: {n}")
        return _boxed(cg, _cudagraph_runner(cg, kind, config, report))

    compiler.__name__ = f"stax_{kind}_compiler"
    return compiler


def stax(gm: torch.fx.GraphModule, example_inputs, *, mode: str | None = None,
         options: dict[str, Any] | None = None, dynamic: bool | None = None,
         strict_native: bool = False):
    """The torch.compile backend (`backend="stax"`). See the module docstring."""
    config = resolve_config(mode, options)  # raises ValueError/TypeError first
    try:
        target, _device = select_target(list(example_inputs), gm=gm)
    except StaxUnsupportedError:
        # mixed devices: every graph falls back with the driver's reason; the notes (and
        # the cudagraph report) are those of the GPU target when a CUDA tensor is involved
        target = "triton" if any(isinstance(x, torch.Tensor) and x.is_cuda
                                 for x in example_inputs) else None
    if target is not None:
        config = config.for_target(target)
    strict = bool(strict_native) or debug.strict_enabled()
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    report = StaxReport(config=config, graph_names=names)
    report.recompile_reasons = new_dynamo_recompile_reasons()
    for r in report.recompile_reasons:
        announce(f"Dynamo: {r}")
    for n in report.notes:
        debug.log(f"note: {n}")

    def compile_static(graph, inputs, record=None):
        return run_aot_autograd(graph, inputs, lambda kind: _make_compiler(
            kind, config, report, strict, record))

    def compile_dynamic(graph, inputs):
        from stax.dynamic_compile import compile_dynamic as once
        return once(graph, inputs, report, config)

    # a symbolic CPU or GPU graph: one compile for every size (stax.dynamic_compile);
    # otherwise, or where it cannot stay dynamic, one static compile per distinct size
    fn = compile_static_or_per_size(gm, example_inputs, report, strict=strict,
                                    compile_static=compile_static,
                                    max_variants=config.max_shape_variants,
                                    compile_dynamic=compile_dynamic
                                    if config.target in ("stax-cpu", "triton") else None)
    compiled = StaxCompiled(fn, report)
    compiled_callables.append(compiled)
    return compiled
