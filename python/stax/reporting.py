"""`stax.explain(...)`: a readable account of what stax did with compiled code.

    print(stax.explain())              # the newest report (stax.backend.last_report())
    print(stax.explain(cf))            # cf = torch.compile(f, backend="stax"): every
                                       # graph Dynamo compiled for f (graph breaks too)
    print(stax.explain(report))        # a StaxReport, StaxCompiled or CompiledGraph

For each graph: its id, kind and route; each kernel by name and kind with the user's
source lines it computes; library calls; fallback ops; for a graph that runs as written,
why; then max-autotune results, CUDA-graph status and the notes.
"""
from __future__ import annotations

__all__ = ["explain", "explain_report", "reports_of", "fallback_op_reason"]


def _stax_compiled_of(obj, depth: int = 8):
    """The StaxCompiled behind a Dynamo-compiled function (through its wrappers)."""
    from stax.backend import StaxCompiled
    for _ in range(depth):
        if obj is None or isinstance(obj, StaxCompiled):
            return obj
        obj = getattr(obj, "__wrapped__", None)
    return obj if isinstance(obj, StaxCompiled) else None


def reports_of(fn) -> list:
    """The StaxReports of the graphs Dynamo compiled with stax for `fn` (what
    `torch.compile(f, backend="stax")` returned, an `OptimizedModule`, or `f` itself),
    oldest first; empty when it has not run yet (Dynamo compiles on the first call)."""
    target = getattr(fn, "_torchdynamo_orig_callable", None) or fn
    mod = getattr(fn, "_orig_mod", None)
    if mod is not None:  # torch.compile(module): the graphs are of its forward
        target = type(mod).forward
    code = getattr(getattr(target, "__func__", target), "__code__", None)
    if code is None:
        return []
    try:
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list
        entries = _debug_get_cache_entry_list(code)
    except Exception:  # noqa: BLE001 - a torch without the cache-entry API
        return []
    fglobals = getattr(getattr(target, "__func__", target), "__globals__", {})
    out = []
    for e in reversed(entries):  # Dynamo keeps the newest entry first
        for name in e.code.co_names:
            if name.startswith("__compiled_fn"):
                sc = _stax_compiled_of(fglobals.get(name))
                if sc is not None and sc.report not in out:
                    out.append(sc.report)
    return out


def _graph_lines(g) -> list[str]:
    from stax.backend import FallbackRecord
    if isinstance(g, FallbackRecord):
        return [f"graph {g.graph_id} ({g.kind}): runs as written by PyTorch (fallback)",
                "  why: " + g.reason.strip().replace("\n", "\n       ")]
    lines = [f"graph {g.graph_id}: route {g.route}, device {g.device}, "
             f"{len(g.kernels)} kernel(s), {g.launches_per_call} launch(es) per call"]
    sources = getattr(g, "kernel_sources", None) or [[] for _ in g.kernels]
    for k, src in zip(g.kernels, sources):
        kind = getattr(k, "kind", None) or getattr(getattr(k, "ttir_kernel", None), "kind", None)
        lines.append(f"  kernel {getattr(k, 'name', '?')}" + (f" ({kind})" if kind else ""))
        for s in src:
            lines.append(f"    from {s}")
        if not src:
            lines.append("    from (no user source line recorded)")
    for c in g.library_calls:
        lines.append(f"  library call: {c}")
    for op in g.fallback_ops:
        lines.append(f"  fallback op: {op}: run by PyTorch inside the compiled graph, "
                     f"because {fallback_op_reason(op)}")
    return lines


def fallback_op_reason(target: str) -> str:
    """Why the importer handed the ATen op `target` ("aten.special_zeta.default") to
    PyTorch: it has no lowering of it at all, or its lowering declined these arguments
    (dtypes, complex values, options it does not cover)."""
    try:
        from stax.compiled_graph import _resolve_overload
        from stax.importer import HANDLERS
        overload = _resolve_overload(target)
    except Exception:  # noqa: BLE001 - an op this torch does not know any more
        return "stax has no lowering for it"
    if target == "aten.index_copy_.default":   # only stax.inplace_windows makes it
        return ("it writes a cache window in place, into the buffer aot_autograd copies "
                "back (stax.inplace_windows), where a stax kernel would rebuild the whole "
                "cache")
    if overload in HANDLERS:
        return ("stax lowers it only for some arguments (dtypes, complex values, options), "
                "and not for these")
    return "stax has no lowering for this ATen op"


def _rank() -> str:
    """` (rank r of w)` in a torch.distributed process, else empty."""
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return f" (rank {dist.get_rank()} of {dist.get_world_size()})"
    except Exception:  # noqa: BLE001 - a report never fails for this
        pass
    return ""


def explain_report(report) -> str:
    """The text of `explain` for one StaxReport."""
    cfg = report.config
    head = [f"stax report{_rank()}: route {report.route}, target {cfg.target}, "
            f"{report.kernel_count} kernel(s) in {len(report.graphs)} graph(s), "
            f"launches per call {report.launches_per_call}"]
    body = [f"compiled because Dynamo recompiled: {r}"
            for r in getattr(report, "recompile_reasons", ())]
    for g in report.graphs:
        body += _graph_lines(g)
    if not report.graphs:
        body.append("no graph compiled yet (aot_autograd compiles the backward on the "
                    "first backward call)")
    for t in report.tuned:
        ms = f" {t['best_ms']:.3f} ms" if t.get("best_ms") is not None else ""
        body.append(f"tuned {t['kind']} {t['kernel']}: {t['route']}: {t['winner']}{ms}")
    for c in report.cudagraphs:
        body.append(f"cudagraph: {c}")
    for n in report.notes:
        body.append(f"note: {n}")
    return "\n".join(head + body)


def explain(x=None) -> str:
    """A readable multi-line summary of what stax did: `x` is a report (StaxReport),
    a compiled callable (StaxCompiled), a CompiledGraph, a function or module that
    `torch.compile(..., backend="stax")` returned (every graph compiled for it, in
    order), or None for the newest report."""
    from stax.backend import FallbackRecord, StaxCompiled, StaxReport, last_report
    from stax.compiled_graph import CompiledGraph
    if x is None:
        x = last_report()
        if x is None:
            return "stax: nothing compiled in this process yet (or it was freed)"
    if isinstance(x, StaxCompiled):
        x = x.report
    if isinstance(x, StaxReport):
        return explain_report(x)
    if isinstance(x, (CompiledGraph, FallbackRecord)):
        return "\n".join(_graph_lines(x))
    if callable(x):
        found = reports_of(x)
        if not found:
            return (f"stax: no stax-compiled graph for {getattr(x, '__name__', x)!r} yet "
                    "(Dynamo compiles on the first call; was it compiled with "
                    "backend='stax'?)")
        parts = [explain_report(r) for r in found]
        if len(parts) > 1:
            parts = [f"[{i + 1}/{len(parts)}] {p}" for i, p in enumerate(parts)]
        return "\n\n".join(parts)
    raise TypeError(f"stax.explain takes a report, a compiled callable or a compiled "
                    f"function, not {type(x).__name__}")
