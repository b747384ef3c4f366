"""The `stax_neuron` torch.compile backend: whole graphs for AWS Neuron (trn1/trn2).

    torch.compile(f, backend="stax_neuron")                    # found by entry point
    torch.compile(f, backend=stax.neuron_backend.stax_neuron)
    torch.compile(f, backend=functools.partial(stax_neuron, strict_native=True))

Each graph aot_autograd hands over (forward, backward, inference; core-ATen
decompositions) is imported into stax, legalized (`stax-legalize-fp8{formats=none}`),
lowered to StableHLO (`stax-to-stablehlo`) and converted by jaxlib to the
`hlo_module.pb` neuronx-cc reads; the artifact folder (see `stax.targets.neuron`) is
written, and the callable runs the same StableHLO on XLA's CPU client, so numerics can be
checked here before hardware. There is no Neuron runtime in this package: compile the
artifact with the command in `neuronx_cc_command.txt`.

Modes and options are those of `stax.options` (bools only; unknown keys and modes
raise). None of them changes what the Neuron target emits, so each one that is set
gives a note saying why: neuronx-cc fuses, tunes and schedules the whole graph itself,
and there are no CUDA graphs.

neuronx-cc takes static shapes only, so a graph that Dynamo makes symbolic (automatic
dynamic on a second size, `dynamic=True`, `mark_dynamic`) is compiled **once per distinct
size** it meets, at call time, by the same `stax.shape_specialize.ShapeSpecializer` the
CPU and GPU targets use: each size is a static HLO module of its own, with its own
artifact folder (content-hashed, so a later process that meets the size again reuses the
folder's HLO proto instead of converting again). The variants are kept in memory (at most
`stax.max_shape_variants`, default 8; beyond it a size runs as written, with a warning);
`report.variants` and the notes say which sizes were compiled and why, and
`stax_artifact_dirs` lists one folder per size.

A graph that cannot run on Neuron (an ATen op stax does not lower, f64, an illegal HLO
instruction) runs as written (its own forward, on the CPU) and the reason is recorded;
with `strict_native=True` or `STAX_STRICT=1` it raises `StaxCompileError`.

The callable returned to Dynamo is a `NeuronCompiled` (a `stax.backend.StaxCompiled`):
`stax_route` is "neuron" (or "fallback"), `stax_artifact_dir` the artifact folder of the
last compiled graph, `stax_artifact_dirs` all of them. Find callables through
`stax.neuron_backend.compiled_callables` / `last_report()`.
"""
from __future__ import annotations

import dataclasses
import traceback
from typing import Any

import torch

from stax import debug
from stax.backend import FallbackRecord, StaxCompiled, StaxReport, WeakRegistry
from stax.driver import StaxCompileError
from stax.options import resolve_config
from stax.shape_specialize import compile_static_or_per_size
from stax.targets.neuron import NEURON_ROUTE, NeuronGraph, compile_graph

__all__ = ["stax_neuron", "NeuronCompiled", "NeuronReport", "compiled_callables", "reports",
           "last_report", "clear", "neuron_notes"]

#: every live NeuronCompiled (weak references: the registry keeps no compiled graph alive)
compiled_callables: WeakRegistry = WeakRegistry()

_WHY = {
    "stax.fusion": "neuronx-cc fuses the whole graph itself; stax hands it the unfused graph",
    "stax.cudagraphs": "there are no CUDA graphs on Neuron (neuronx-cc compiles the whole "
                       "graph into one NEFF)",
    "stax.max_autotune": "neuronx-cc tunes the NEFF itself; stax has no Neuron autotuner",
    "stax.coordinate_descent_tuning": "neuronx-cc tunes the NEFF itself; stax has no "
                                      "Neuron autotuner",
    "stax.triton": "not applicable on Neuron (no Triton code generation)",
    "stax.cuda_codegen": "not applicable on Neuron (no CUDA code generation)",
}


def neuron_notes(mode, options) -> tuple:
    """(resolved StaxConfig, notes) for the Neuron target: every setting that was asked
    for (by the mode or explicitly) and does nothing here gets a note."""
    config = resolve_config(mode, options)  # validates: ValueError / TypeError
    notes = []
    from stax.options import DEFAULTS
    for key, why in _WHY.items():
        explicit = key in config.explicit
        if explicit or config.options[key] != DEFAULTS[key]:
            origin = f"option '{key}'={config.options[key]}" if explicit else \
                f"mode {mode!r} ({key})"
            notes.append(f"{origin}: {why}")
    return dataclasses.replace(config, target=NEURON_ROUTE, notes=tuple(notes)), notes


@dataclasses.dataclass
class NeuronReport(StaxReport):
    @property
    def route(self) -> str:
        if any(isinstance(g, FallbackRecord) for g in self.graphs):
            return "fallback"
        return NEURON_ROUTE

    @property
    def artifact_dirs(self) -> list[str]:
        return [g.artifact_dir for g in self.graphs if isinstance(g, NeuronGraph)]


class NeuronCompiled(StaxCompiled):
    stax_artifact_dirs = property(lambda self: self.report.artifact_dirs)
    stax_artifact_dir = property(
        lambda self: (self.report.artifact_dirs or [None])[-1])

    def __repr__(self):
        return (f"<NeuronCompiled {self.report.summary()} "
                f"artifacts={self.report.artifact_dirs}>")


def reports() -> list[NeuronReport]:
    return [c.report for c in compiled_callables]


def last_report() -> NeuronReport | None:
    live = list(compiled_callables)
    return live[-1].report if live else None


def clear() -> None:
    compiled_callables.clear()


def _boxed(ng: NeuronGraph):
    def run(args):
        out = ng._call(list(args))
        return out

    run._boxed_call = True
    run.compiled_graph = ng
    return run


def _make_compiler(kind: str, report: NeuronReport, strict: bool, notes: list[str],
                   record=None):
    record = record or report.graphs.append  # a shape variant records into itself too

    def compiler(gm: torch.fx.GraphModule, example_inputs):
        graph_id = debug.new_graph_id(kind)
        try:
            ng = compile_graph(gm, example_inputs, kind=kind, graph_id=graph_id)
        except Exception as e:  # noqa: BLE001 - any failure falls back (unless strict)
            reason = f"{type(e).__name__}: {e}"
            if strict:
                raise StaxCompileError(
                    f"stax could not compile the {kind} graph {graph_id} for Neuron "
                    f"(strict mode: strict_native=True or STAX_STRICT=1): {reason}") from e
            record(FallbackRecord(graph_id=graph_id, kind=kind, reason=reason))
            debug.DumpDir(graph_id).write("fallback.txt",
                                          reason + "\n\n" + traceback.format_exc())
            debug.log(f"{kind} graph {graph_id} falls back to PyTorch (runs as written): "
                      f"{reason}")
            from functorch.compile import make_boxed_func
            return make_boxed_func(gm.forward)
        record(ng)
        return _boxed(ng)

    compiler.__name__ = f"stax_neuron_{kind}_compiler"
    return compiler


def stax_neuron(gm: torch.fx.GraphModule, example_inputs, *, mode: str | None = None,
                options: dict[str, Any] | None = None, dynamic: bool | None = None,
                strict_native: bool = False):
    """The torch.compile backend `backend="stax_neuron"`. See the module docstring."""
    config, notes = neuron_notes(mode, options)
    strict = bool(strict_native) or debug.strict_enabled()
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    report = NeuronReport(config=config, graph_names=names)
    for n in report.notes:
        debug.log(f"note: {n}")

    from stax.backend import run_aot_autograd

    def compile_static(graph, inputs, record=None):
        return run_aot_autograd(graph, inputs, lambda kind: _make_compiler(
            kind, report, strict, notes, record))

    # neuronx-cc takes static shapes: one HLO module per distinct size (stax.shape_specialize)
    fn = compile_static_or_per_size(gm, example_inputs, report, strict=strict,
                                    compile_static=compile_static,
                                    max_variants=config.max_shape_variants)
    compiled = NeuronCompiled(fn, report)
    compiled_callables.append(compiled)
    return compiled
