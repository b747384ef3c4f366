"""One compile for every size, training: aot_autograd's forward AND backward graphs of a
symbolic CPU graph, each compiled once with runtime sizes (docs/dynamic-shapes.md,
"Training").

The difficulty is timing. aot_autograd compiles the backward after the forward, and
lazily: only when the forward saves no SymInt, at the first `.backward()`, when nothing
can fall back per size any more (the forward has run; the graph is Dynamo's). With
SymInts saved it compiles it right after the forward, but it swallows a failure there
(it logs "failed to eagerly compile backwards for dynamic" and tries again at the first
backward). So the decision is made at forward-compile time, for both graphs:

  1. `partition_fn` wraps aot_autograd's own partitioner (`default_partition`, what the
     static path gets from aot_module_simplified) and keeps the backward module it
     returns (aot_autograd edits it in place afterwards for effect tokens and saved-
     tensor hooks, before it compiles the forward, so the one kept is the final one);
  2. the forward compiler builds the forward's `DynamicGraph` (import, stax-fuse,
     kernels), then the backward's, from the kept module and the fake values of its
     placeholders (saved tensors, the SymInts the forward saves, the tangents). If
     either cannot stay dynamic it raises `CannotStayDynamic` naming the graph and the
     reason, which the backend turns into per-size variants (shape_specialize), as
     before. Nothing has run yet, so that is always still possible;
  3. the backward compiler, whenever aot_autograd calls it, returns the backward graph
     built in step 2.

Both graphs take their tensor arguments with exactly the strides Dynamo's fake tensors
give them (a saved `permute` of a weight is transposed; guarded), return every output,
saved tensors included, with those strides, and keep outputs that are views of inputs
views of them (dynamic_compile). The backward's guards check the saved SymInts and every
saved tensor's and tangent's dims against the symbols (the saved SymInts bind them first,
so the backward checks the sizes its forward ran with). A size the forward saves that is
an expression (`s0*s1`) is computed from the symbols and checked in the backward.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from stax import debug

__all__ = ["TrainingGraphs", "run_training_aot", "training_note"]


@dataclasses.dataclass
class TrainingGraphs:
    """What one training compile built: the forward and backward DynamicGraphs (or the
    inference graph, when aot_autograd found nothing to differentiate)."""
    forward: Any = None
    backward: Any = None
    inference: Any = None
    backward_module: Any = None    # the partitioner's backward, kept for step 2
    backward_compiles: int = 0     # how often aot_autograd asked for the backward

    @property
    def graphs(self) -> list:
        return [g for g in (self.inference, self.forward, self.backward) if g is not None]


def _placeholder_values(gm) -> list:
    return [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]


def run_training_aot(gm, example_inputs, config, build):
    """aot_autograd's callable for a symbolic graph that needs a backward, with both
    graphs compiled once by `build(gm, inputs, graph_id, kind)` (dynamic_compile._build)
    before the forward compile returns; (callable, TrainingGraphs). CannotStayDynamic
    from either graph propagates (with "the forward graph: " / "the backward graph: ").
    """
    from torch._functorch.partitioners import default_partition

    from stax.backend import run_aot_autograd
    from stax.dynamic_compile import CannotStayDynamic
    built = TrainingGraphs()

    def partition(joint, joint_inputs, **kw):
        fw, bw = default_partition(joint, joint_inputs, **kw)
        built.backward_module = bw
        return fw, bw

    def named(what, fn):
        try:
            return fn()
        except CannotStayDynamic as e:
            raise CannotStayDynamic(f"the {what} graph: {e}") from None

    def forward(fw_gm, fw_inputs):
        built.forward = named("forward", lambda: build(
            fw_gm, fw_inputs, debug.new_graph_id("forward"), "forward"))
        bw_gm = built.backward_module
        if bw_gm is None:
            raise CannotStayDynamic("aot_autograd compiled a forward without partitioning "
                                    "a backward (no backward to compile once)")
        built.backward = named("backward", lambda: build(
            bw_gm, _placeholder_values(bw_gm), debug.new_graph_id("backward"), "backward"))
        return built.forward

    def backward(bw_gm, bw_inputs):
        built.backward_compiles += 1
        g = built.backward
        if g is None or len(bw_inputs) != g.n_args:
            # not the graph partitioned for this forward: never run a mismatched one
            raise CannotStayDynamic(
                f"aot_autograd asked for a backward of {len(bw_inputs)} inputs; the one "
                f"built with the forward takes {getattr(g, 'n_args', None)}")
        return g

    def inference(inf_gm, inf_inputs):
        built.inference = build(inf_gm, inf_inputs, debug.new_graph_id("inference"),
                                "inference")
        return built.inference

    compilers = {"forward": forward, "backward": backward, "inference": inference}
    fn = run_aot_autograd(gm, example_inputs, lambda kind: compilers[kind],
                          partition_fn=partition)
    if built.forward is not None and built.backward is None:
        raise CannotStayDynamic("the backward graph was not built with the forward")
    if not built.graphs:
        raise CannotStayDynamic("aot_autograd compiled no graph")
    return fn, built


def training_note(built: TrainingGraphs) -> str | None:
    """The report's line for a training graph compiled once."""
    if built.forward is None:
        return None
    fw, bw = built.forward, built.backward
    return (f"training: compiled once for every size, forward ({fw.graph_id}: "
            f"{len(fw.kernels)} kernel(s), {len(fw.library_calls)} matmul(s)) and backward "
            f"({bw.graph_id}: {len(bw.kernels)} kernel(s), {len(bw.library_calls)} "
            "matmul(s)), both built at forward-compile time; the backward checks the "
            "sizes its forward saved")

