"""CUDA graphs for a graph compiled once for every size: one capture per size.

A `DynamicGraph` (stax.dynamic_graph) serves every size with one compile, but each call
pays Python for every launch: on the H200 a GPT-2 block at batch 1 took 0.68 ms through
it against 0.35 ms for the static compile of that size, which the default mode replays
from a CUDA graph. A CUDA graph records one size, so `SizedCudaGraphs` keeps one
`CudaGraphRunner` per tuple of symbol values, as Inductor's cudagraph trees record one
graph per shape; the kernels are still compiled once.

    runner = SizedCudaGraphs(dynamic_graph, auto=True)   # default mode (stax.auto_cudagraphs)
    runner = SizedCudaGraphs(dynamic_graph, auto=False)  # reduce-overhead (stax.cudagraphs)
    outs = runner(args)                                  # aot_autograd's boxed convention

Per call:

1. `DynamicGraph.bind` checks every argument (rank, dtype, device, each dim against its
   symbol or value, strides, symbol ranges, slice lengths) and gives the symbols' values:
   the guards run before anything, captured or not;
2. the symbols' values pick the size's runner (made on the first call of a size), which
   does what it does for a static graph: the first call of a size runs uncaptured (a
   new size may compile a kernel variant, which cannot happen inside a capture), the
   second captures, later ones replay (`stax.cudagraphs` says how, and when a size stays
   uncaptured: in the default mode, more than AUTO_MAX_COPY_BYTES copied in or out);
3. at most `max_sizes` sizes keep a runner, least recently used first out (a captured
   graph holds its own memory pool). In the default mode, once `max_sizes` runners were
   dropped before they ever replayed (sizes that do not come back within `max_sizes`
   calls: a decode loop whose cache length grows every step), the graph captures no new
   size and runs the others uncaptured, and says so: each capture costs a
   `gc.collect()`, an allocator flush and a synchronization (`torch.cuda.graph`), which
   a size that never replays does not pay back. The sizes that did replay keep their
   graphs. Under reduce-overhead the user asked for graphs: it keeps capturing.

Outputs: in the default mode every call returns fresh tensors (copied out of the static
buffers). Under reduce-overhead they live in the static buffers, and one OutputLedger is
shared by every size, so an output read after any later call of the same compiled graph
raises the stale-output error, whatever size that call had: the rule does not depend on
sizes. Inference graphs only: training graphs under CUDA graphs are compiled per size
(stax.dynamic_compile says so).
"""
from __future__ import annotations

import collections
import types

from stax.cudagraphs import CudaGraphRunner, OutputLedger, capturing

__all__ = ["SizedCudaGraphs", "MAX_CAPTURED_SIZES"]

#: the runner's key in a size's memo (DynamicGraph.bind's `env.memo`)
_SIZE_KEY = ("cuda graph key",)

#: sizes that keep a runner (and, once captured, a CUDA graph with its memory pool)
MAX_CAPTURED_SIZES = 32


class SizedCudaGraphs:
    """One compiled DynamicGraph replayed from a CUDA graph per size (module docstring)."""

    _boxed_call = True

    def __init__(self, graph, kind: str = "inference", *, auto: bool,
                 copy_outputs: bool | None = None, max_sizes: int = MAX_CAPTURED_SIZES,
                 runner_factory=CudaGraphRunner):
        if max_sizes < 1:
            raise ValueError(f"max_sizes must be at least 1, got {max_sizes}")
        self.graph = graph
        self.kind = kind
        self.auto = auto
        self.copy_outputs = copy_outputs   # the runners decide (auto always copies)
        self.max_sizes = max_sizes
        self._factory = runner_factory
        self.ledger = OutputLedger()
        self.runners: collections.OrderedDict = collections.OrderedDict()
        self.evictions = 0
        self.unreplayed_evictions = 0   # runners dropped that never replayed
        #: why the default mode captures no new size (None: it still does)
        self.capture_stopped = None
        self._notes: list[str] = []   # the per-size runners' notes (status() sums them up)
        device = str(getattr(graph, "device", "cuda"))
        #: why no size is captured (None: each size decides); a graph whose tensors live
        #: elsewhere (the tests' triton route over CPU tensors) runs uncaptured
        self.reason = None if device.startswith("cuda") else \
            f"the graph's tensors are on {device}, not a CUDA device"
        # an instance attribute too (torch._dynamo.disable copies __dict__ only)
        self._boxed_call = True

    # ------------------------------------------------------------------ report
    @property
    def graph_id(self) -> str:
        return self.graph.graph_id

    def _size_label(self, key) -> str:
        return ", ".join(f"{s}={v}" for s, v in key) or "static"

    def status(self) -> str:
        how = " (auto: default mode, outputs copied)" if self.auto else ""
        if self.reason is not None:
            return f"{self.kind} graph {self.graph_id} (dynamic): not captured{how}: {self.reason}"
        captured = [k for k, r in self.runners.items() if r.captured]
        refused = [(k, r.reason) for k, r in self.runners.items() if r.reason]
        parts = [f"{self.kind} graph {self.graph_id} (dynamic): one CUDA graph per size"
                 f"{how}: {len(captured)} size(s) captured"]
        if captured:
            parts.append("[" + "; ".join(self._size_label(k) for k in captured) + "]")
        if refused:
            shown = "; ".join(f"{self._size_label(k)}: {why}" for k, why in refused[:4])
            parts.append(f", {len(refused)} uncaptured ({shown}"
                         f"{', ...' if len(refused) > 4 else ''})")
        if self.evictions:
            parts.append(f", {self.evictions} size(s) dropped (at most {self.max_sizes} kept)")
        if self.capture_stopped:
            parts.append(f"; {self.capture_stopped}")
        return " ".join(parts[:2]) + "".join(parts[2:])

    @property
    def replays(self) -> int:
        return sum(r.replays for r in self.runners.values())

    # ------------------------------------------------------------------ calls
    def _runner(self, key):
        r = self.runners.get(key)
        if r is not None:
            self.runners.move_to_end(key)
            return r
        if self.capture_stopped:
            return None
        if len(self.runners) >= self.max_sizes:
            _, dropped = self.runners.popitem(last=False)   # its static buffers go with it
            self.evictions += 1
            if not getattr(dropped, "replays", 0):
                self.unreplayed_evictions += 1
            if self.auto and self.unreplayed_evictions >= self.max_sizes:
                self.capture_stopped = (
                    f"auto-capture of new sizes stopped: {self.unreplayed_evictions} sizes "
                    f"were dropped before any replay (sizes that do not come back within "
                    f"{self.max_sizes} calls); they run uncaptured")
                for k in [k for k, r in self.runners.items() if not getattr(r, "replays", 0)]:
                    del self.runners[k]
                return None
        g = self.graph
        # what CudaGraphRunner reads of a compiled graph, for this size
        view = types.SimpleNamespace(
            graph_id=f"{g.graph_id}[{self._size_label(key)}]",
            fallback_ops=list(getattr(g, "fallback_ops", [])),
            launches_per_call=getattr(g, "launches_per_call", 0),
            notes=self._notes, device=getattr(g, "device", "cuda"), source="",
            input_names=[])
        r = self._factory(g, view, self.kind, copy_outputs=self.copy_outputs,
                          ledger=self.ledger, auto=self.auto)
        self.runners[key] = r
        return r

    def __call__(self, args):
        args = args if isinstance(args, list) else list(args)
        env = self.graph.bind(args)   # every guard first; the symbols' values key the size
        if self.reason is not None or capturing():   # (or inside the caller's capture)
            return self.graph.run_bound(args, env)
        memo = getattr(env, "memo", None)   # per size (DynamicGraph.bind)
        key = memo.get(_SIZE_KEY) if memo is not None else None
        if key is None:   # made once per size
            key = tuple(sorted(env.items()))
            if memo is not None:
                memo[_SIZE_KEY] = key
        r = self._runner(key)
        if r is None or r.reason is not None:   # uncaptured: no second bind
            return self.graph.run_bound(args, env)
        return r(args)
