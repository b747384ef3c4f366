"""Per-shape specialization: a Dynamo graph with symbolic shapes runs as compiled stax
code, one static compile per distinct size tuple.

On the CPU target a graph (inference, or training's forward and backward) is first
compiled once for every size (`stax.dynamic_compile`, the `compile_dynamic` hook of
`compile_static_or_per_size`); what
follows is for the graphs that cannot stay dynamic (the specializer's
`not_dynamic_reason`, noted as "could not stay dynamic: ...") and for the other targets.

Dynamo hands the backend a symbolic graph after the second distinct size it sees
(automatic dynamic shapes), for `dynamic=True` and for `torch._dynamo.mark_dynamic`:
its tensor placeholders carry fake tensors with symbolic sizes (`s77`, `2*s77`) and each
free symbol is a SymInt placeholder of its own, to which the compiled code passes the
call's int. stax compiles static shapes only, so `ShapeSpecializer` (the callable the
backend returns for such a graph) does, on each call:

  1. the variant key: the exact sizes, strides (and, for CUDA tensors, 16-byte
     alignment) of every tensor whose size Dynamo left symbolic, and the value of every
     symbolic scalar placeholder. Everything else (static sizes, dtypes, devices,
     requires_grad, grad mode, the bounds of `mark_dynamic`, the 0/1 specialization) is
     guarded by Dynamo before the call and is the same for every call that reaches it;
  2. a known key runs its variant;
  3. a new key, while fewer than `stax.max_shape_variants` variants exist, compiles one:
     the Dynamo graph with the call's scalar values written into it as constants
     (`specialize_graph`), through the backend's static pipeline (aot_autograd, then
     `stax.driver.compile_graph` for each of forward / backward / inference), with the
     call's real tensors as the example inputs. Training gets an autograd function per
     variant; its backward is compiled on the first backward, as for a static graph;
  4. past the cap the call runs the Dynamo graph as written (PyTorch eager), with one
     StaxFallbackWarning (once per graph) naming the cap and how to raise it, and a
     FallbackRecord in the report; under strict mode it raises StaxCompileError.

Each variant's own generated wrapper keeps its guards (`stax.guards`): a variant can
only run on arguments it was compiled for, so a guard failure there is an error, never
a wrong answer. The report of the graph (one StaxReport for all variants) lists every
variant's graphs, and its notes say what was specialized, e.g. "specialized for s77=5;
3 variants compiled", with the compile time of each (each new size is a full compile).
"""
from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import torch

from stax import debug
from stax.recompiles import announce

__all__ = ["has_symbolic_inputs", "specialize_graph", "ShapeVariant", "ShapeSpecializer",
           "compile_static_or_per_size"]

_SYM_SCALARS = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _is_symbolic_tensor(t: torch.Tensor) -> bool:
    if t.layout != torch.strided:
        return any(not isinstance(s, int) for s in t.shape)
    return any(not isinstance(s, int) for s in
               list(t.shape) + list(t.stride()) + [t.storage_offset()])


def _placeholders(gm) -> list:
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


def _dynamo_value(node):
    """What Dynamo recorded for a placeholder: a (fake) tensor, a SymInt, ... or None."""
    return node.meta.get("example_value", node.meta.get("val"))


def _is_wrapped_scalar(node) -> bool:
    """A Python float (or int) that Dynamo left unspecialized and passes as a 0-dim
    tensor, read in the graph with `.item()` (module attributes such as a norm's `eps`
    under dynamic=True)."""
    arg = node.meta.get("grapharg")
    return bool(getattr(arg, "pass_arg_as_tensor", False))


def _symbolic_positions(gm, example_inputs) -> tuple[list[int], list[int], list[int]]:
    """(tensor, scalar, wrapped-scalar positions) of the placeholders whose value is
    symbolic: tensors with a symbolic size, stride or offset; SymInt/SymFloat/SymBool;
    Python scalars passed as 0-dim tensors (`_is_wrapped_scalar`)."""
    tensors, scalars, wrapped = [], [], []
    for i, node in enumerate(_placeholders(gm)):
        ex = example_inputs[i] if i < len(example_inputs) else None
        val = _dynamo_value(node)
        if isinstance(ex, _SYM_SCALARS) or isinstance(val, _SYM_SCALARS):
            scalars.append(i)
        elif _is_wrapped_scalar(node):
            wrapped.append(i)
        elif any(isinstance(v, torch.Tensor) and _is_symbolic_tensor(v) for v in (ex, val)):
            tensors.append(i)
    return tensors, scalars, wrapped


def has_symbolic_inputs(gm, example_inputs) -> bool:
    """True when Dynamo gave this graph symbolic sizes or scalars (a SymInt placeholder,
    a placeholder tensor whose recorded size, stride or offset is symbolic, or a Python
    scalar passed as a tensor and read with `.item()`): stax compiles it per value."""
    return any(_symbolic_positions(gm, list(example_inputs)))


def _item_users(node) -> list:
    return [u for u in node.users if (u.op == "call_method" and u.target == "item") or
            u.target is torch.ops.aten._local_scalar_dense.default]


def only_read_by_item(node) -> bool:
    """A wrapped-scalar placeholder that the graph reads only with `.item()`: once the
    value is written in, the placeholder is unused."""
    return bool(node.users) and len(_item_users(node)) == len(node.users)


def specialize_graph(gm: torch.fx.GraphModule, values: dict[int, Any],
                     wrapped: dict[int, Any] | None = None,
                     drop_wrapped: frozenset = frozenset()) -> torch.fx.GraphModule:
    """A copy of `gm` with the call's scalar values written in as constants: placeholder
    `i` of `values` is gone (its users read `values[i]`, an int, float or bool), and the
    `.item()` reads of wrapped-scalar placeholder `i` of `wrapped` read `wrapped[i]`; that
    placeholder stays unless `i` is in `drop_wrapped` (read only by `.item()`: a 0-dim
    CPU tensor the compiled graph would take and never read, which kept a GPU variant out
    of CUDA graphs). The other placeholders stay, in order. Tracing it with the call's
    tensors gives a static graph."""
    graph = torch.fx.Graph()
    val_map = {}
    for i, node in enumerate(_placeholders(gm)):
        if i in values:
            val_map[node] = values[i]
        elif wrapped and i in wrapped:
            for user in _item_users(node):
                val_map[user] = wrapped[i]
    out = graph.graph_copy(gm.graph, val_map)
    graph.output(out)
    for i, node in enumerate(_placeholders(gm)):
        if i in drop_wrapped and not val_map[node].users:
            graph.erase_node(val_map[node])
    graph._codegen = gm.graph._codegen
    _fold_size_arithmetic(graph)
    for node in graph.nodes:
        # a size Dynamo made unbacked (a slice of a buffer to a symbolic length under
        # backed_size_oblivious, on torch 2.11): the static trace has no shape env to
        # rebind it in (aot_autograd's run_node asserted "shape_env should not be None")
        node.meta.pop("unbacked_bindings", None)
    new = torch.fx.GraphModule(gm, graph)
    new.meta = dict(gm.meta)
    return new


def _fold_size_arithmetic(graph: torch.fx.Graph) -> None:
    """Compute, in place, the size arithmetic of a graph whose sizes are now constants
    (`mul(5, 2)` -> 10, `ge(5, 0)` -> True), run its runtime size checks (`DYNAMO_SIZE_CHECKS`:
    each raises as it would at run time when the call's sizes violate it)
    and drop them: what is left is the tensor work, with literal sizes."""
    # (here, not at import: the importer package loads the MLIR bindings)
    from stax.importer.size_asserts import DYNAMO_SIZE_CHECKS, SIZE_FUNCTIONS
    for node in list(graph.nodes):
        if node.op != "call_function" or node.all_input_nodes:
            continue
        if node.target in DYNAMO_SIZE_CHECKS:
            node.target(*node.args, **node.kwargs)   # raises when a check fails
            if not node.users:
                graph.erase_node(node)
        elif node.target in SIZE_FUNCTIONS:
            value = node.target(*node.args, **node.kwargs)
            for user in list(node.users):
                user.replace_input_with(node, value)
            graph.erase_node(node)


def _symbol_readers(gm, tensor_pos, scalar_pos, wrapped_pos) -> list[tuple[str, int, int | None]]:
    """(symbol name, placeholder position, dim or None) for each free symbol of the graph
    that a call's arguments show directly: a scalar placeholder, or a tensor dim whose
    recorded size is a bare symbol (`s77`, not `2*s77`), then the wrapped scalars (by
    placeholder name). First reader of each name wins."""
    nodes = _placeholders(gm)
    out, seen = [], set()
    for i in scalar_pos:
        val = _dynamo_value(nodes[i])
        # (a symbol Dynamo has since specialized prints as its value: the placeholder's
        # name then, `s47`, not `6272`)
        name = str(val) if val is not None and str(val).isidentifier() else nodes[i].name
        if name not in seen:
            seen.add(name)
            out.append((name, i, None))
    for i in tensor_pos:
        val = _dynamo_value(nodes[i])
        if not isinstance(val, torch.Tensor):
            continue
        for d, s in enumerate(val.shape):
            name = str(s)
            if isinstance(s, torch.SymInt) and name.isidentifier() and name not in seen:
                seen.add(name)
                out.append((name, i, d))
    return out + [(nodes[i].name, i, None) for i in wrapped_pos]


@dataclasses.dataclass
class ShapeVariant:
    """One static compile of a symbolic graph: the sizes it was specialized for, its
    compiled callable (aot_autograd's, over stax's compiled graphs) and those graphs."""
    index: int
    key: tuple
    sizes: dict                  # symbol name -> the value it was specialized for
    shapes: dict                 # placeholder name -> shape, for the symbolic tensors
    fn: Any = None
    graphs: list = dataclasses.field(default_factory=list)
    compile_s: float = 0.0
    calls: int = 0
    reason: str = ""             # why it was compiled: what no earlier variant matched
    #: compiled once for every size (stax.dynamic_compile): `sizes` maps each symbol to
    #: "any"
    dynamic: bool = False

    @property
    def route(self) -> str:
        from stax.backend import FallbackRecord
        routes = {"fallback" if isinstance(g, FallbackRecord) else getattr(g, "route", "?")
                  for g in self.graphs}
        if "fallback" in routes:
            return "fallback"
        return routes.pop() if len(routes) == 1 else "mixed:" + ",".join(sorted(routes))

    def describe(self) -> str:
        """`s77=5, s12=64` (or the symbolic tensors' shapes where no symbol is bare);
        `dynamic: s77, s12` for the one variant that serves every size."""
        if self.dynamic:
            return "dynamic: " + ", ".join(self.sizes)
        if self.sizes:
            return ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        return ", ".join(f"{k}: {v}" for k, v in self.shapes.items())


class ShapeSpecializer:
    """The callable the backend returns for a graph with symbolic shapes: per call it
    picks (or compiles) the static variant for the call's sizes. See the module
    docstring. `compile_variant(gm, example_inputs, record)` is the static pipeline; it
    returns the callable and passes every compiled graph (or FallbackRecord) to
    `record`."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs, report, *, strict: bool,
                 compile_variant, max_variants: int):
        self.gm = gm
        self.report = report
        self.strict = strict
        self.max_variants = max_variants
        self._compile_variant = compile_variant
        nodes = _placeholders(gm)
        self.names = [n.name for n in nodes]
        self.tensor_positions, self.scalar_positions, self.wrapped_positions = \
            _symbolic_positions(gm, list(example_inputs))
        #: wrapped scalars read only by .item(): their value is in the key and written
        #: into the variant, which no longer takes them
        self.dropped_wrapped = frozenset(i for i in self.wrapped_positions
                                         if only_read_by_item(nodes[i]))
        scalars = set(self.scalar_positions) | self.dropped_wrapped
        self.kept_positions = [i for i in range(len(nodes)) if i not in scalars]
        self.symbols = _symbol_readers(gm, self.tensor_positions, self.scalar_positions,
                                       self.wrapped_positions)
        self.variants: dict[tuple, ShapeVariant] = {}
        self.last_variant: ShapeVariant | None = None  # None: the last call ran as written
        self.calls_as_written = 0
        self._cap_record = None
        self._compiling = threading.Lock()  # two threads meeting a new size compile it once
        #: why the graph was not compiled once for every size (stax.dynamic_compile), or
        #: None where that was not tried (the GPU and Neuron targets)
        self.not_dynamic_reason: str | None = None

    # ------------------------------------------------------------------ per call

    def key(self, args) -> tuple:
        """What a variant is specialized on, beyond what Dynamo guards (module doc)."""
        parts = []
        for i in self.tensor_positions:
            t = args[i]
            if isinstance(t, torch.Tensor):
                aligned = t.is_cuda and t.data_ptr() % 16 == 0
                parts.append((tuple(t.shape), t.stride() if t.layout == torch.strided
                              else None, aligned))
            else:
                parts.append((type(t), t))
        for i in self.scalar_positions:
            parts.append((type(args[i]), args[i]))
        for i in self.wrapped_positions:
            parts.append((args[i].dtype, args[i].item()))
        return tuple(parts)

    def __call__(self, *args):
        key = self.key(args)
        variant = self.variants.get(key)
        if variant is None:
            with self._compiling:
                variant = self.variants.get(key)
                if variant is None and len(self.variants) < self.max_variants:
                    variant = self._compile(key, args)
            if variant is None:
                return self._run_as_written(args)
        variant.calls += 1
        self.last_variant = variant
        return variant.fn(*[args[i] for i in self.kept_positions])

    # ------------------------------------------------------------------ compiling

    def _sizes(self, args) -> dict:
        out = {}
        for name, i, d in self.symbols:
            v = args[i] if d is None else args[i].shape[d]
            out[name] = v.item() if isinstance(v, torch.Tensor) else v
        return out

    def _compile(self, key, args) -> ShapeVariant:
        variant = ShapeVariant(
            index=len(self.variants), key=key, sizes=self._sizes(args),
            shapes={self.names[i]: tuple(args[i].shape) for i in self.tensor_positions
                    if isinstance(args[i], torch.Tensor)},
            reason=self._new_variant_reason(key, args))
        announce(f"graph with symbolic shapes ({self.symbol_list()}): new stax variant "
                 f"{len(self.variants) + 1}: {variant.reason}")
        gm = specialize_graph(self.gm, {i: args[i] for i in self.scalar_positions},
                              {i: args[i].item() for i in self.wrapped_positions},
                              self.dropped_wrapped)
        example = [args[i] for i in self.kept_positions]

        def record(graph):
            variant.graphs.append(graph)
            self.report.graphs.append(graph)

        start = time.perf_counter()
        try:
            variant.fn = self._compile_variant(gm, example, record)
        except Exception as e:  # noqa: BLE001 - aot_autograd itself failed for these sizes
            if self.strict:
                err = self._strict_error(variant, e)
                raise err from err.__cause__
            variant.fn = self._as_written_for(variant, gm, e, record)
        variant.compile_s = time.perf_counter() - start
        self.variants[key] = variant
        debug.log(f"graph with symbolic shapes ({self.symbol_list()}): compiled variant "
                  f"{variant.index + 1} of at most {self.max_variants} for "
                  f"{variant.describe()} in {variant.compile_s:.2f} s (route "
                  f"{variant.route}; the backward, if any, compiles on its first call)")
        return variant

    def _new_variant_reason(self, key, args) -> str:
        """What about this call no compiled variant matches: per argument, the dims whose
        size no variant had (with the symbol and the sizes compiled so far), else the
        strides or the alignment; the first call says so."""
        if not self.variants:
            return f"the first call ({self._describe_call(args)})"
        olds = [v.key for v in self.variants.values()]
        nodes = _placeholders(self.gm)
        parts, named = [], set()
        for j, i in enumerate(self.tensor_positions):
            t = args[i]
            if not isinstance(t, torch.Tensor):
                continue
            shape, strides, aligned = key[j]
            seen = [k[j] for k in olds]
            head = f"argument {i} ('{self.names[i]}')"
            for d, size in enumerate(shape):
                had = sorted({s[0][d] for s in seen if len(s[0]) > d})
                if size not in had:
                    fake = _dynamo_value(nodes[i])
                    sym = str(fake.shape[d]) if isinstance(fake, torch.Tensor) and \
                        fake.dim() > d and not isinstance(fake.shape[d], int) else None
                    named.add(sym)
                    parts.append(f"{head} dim {d} is {size}" + (f" ({sym})" if sym else "") +
                                 f"; the variants were compiled for {had}")
            if not parts and all(s[0] == shape for s in seen) and \
                    all(s[1] != strides for s in seen):
                parts.append(f"{head} has strides {strides}; no variant of shape "
                             f"{shape} was compiled for them")
            if not parts and all(s[:2] == (shape, strides) and s[2] != aligned for s in seen):
                parts.append(f"{head} is {'' if aligned else 'not '}16-byte aligned, "
                             "unlike the variant of its shape")
        for j, i in enumerate(self.scalar_positions, start=len(self.tensor_positions)):
            had = sorted({k[j][1] for k in olds}, key=repr)
            if str(_dynamo_value(nodes[i])) in named:
                continue  # the symbol a tensor dim above already shows
            if key[j][1] not in had:
                parts.append(f"argument {i} ('{self.names[i]}') is {key[j][1]!r}; the "
                             f"variants were compiled for {had}")
        return "; ".join(parts) or f"a new combination of sizes ({self._describe_call(args)})"

    @staticmethod
    def _strict_error(variant, e: Exception):
        """Strict mode's error for a variant whose static compile raised before stax saw
        a graph: a StaxCompileError naming the sizes and the cause (a data-dependent
        output shape, `masked_select` say, is stax's refusal: StaxUnsupportedError)."""
        from torch._subclasses.fake_tensor import (DataDependentOutputException,
                                                   DynamicOutputShapeException)

        from stax.backend import StaxCompileError
        from stax.errors import StaxUnsupportedError
        err = StaxCompileError(
            f"the static compile for {variant.describe()} failed before stax saw a graph: "
            f"{type(e).__name__}: {e} (strict mode; without it these sizes run as written)")
        err.__cause__ = e
        if isinstance(e, (DataDependentOutputException, DynamicOutputShapeException)):
            err.__cause__ = StaxUnsupportedError(
                f"a data-dependent output shape ({type(e).__name__}): stax compiles "
                "static shapes per size and cannot hold it")
            err.__cause__.__cause__ = e
        return err

    def _as_written_for(self, variant, gm, e: Exception, record):
        """The variant's callable where its static compile raised before stax saw a
        graph (aot_autograd's tracing): the graph runs as written, with the reason."""
        from stax.backend import FallbackRecord, _note_fallback
        reason = f"{type(e).__name__}: {e}"
        record(FallbackRecord(graph_id=debug.new_graph_id("variant"), kind="shape variant",
                              reason=f"the static compile for {variant.describe()} "
                                     f"failed: {reason}"))
        debug.log(f"shape variant {variant.describe()} runs as written: {reason}", exc=e)
        _note_fallback()
        return gm  # the specialized graph: the call's sizes are constants in it

    def symbol_list(self) -> str:
        names = [s[0] for s in self.symbols]
        return ", ".join(names) if names else "symbolic tensor sizes"

    # ------------------------------------------------------------------ past the cap

    def cap_message(self, args) -> str:
        return (f"stax: a graph with symbolic shapes ({self.symbol_list()}) has compiled "
                f"its {self.max_variants} static variants (the cap, option "
                f"'stax.max_shape_variants'), so new sizes ({self._describe_call(args)} "
                f"first) run as written by PyTorch; raise the cap with "
                f"options={{'stax.max_shape_variants': {2 * self.max_variants}}} or "
                f"STAX_MAX_SHAPE_VARIANTS={2 * self.max_variants}")

    def _describe_call(self, args) -> str:
        sizes = self._sizes(args)
        if sizes:
            return ", ".join(f"{k}={v}" for k, v in sizes.items())
        return ", ".join(f"{self.names[i]}: {tuple(args[i].shape)}"
                         for i in self.tensor_positions if isinstance(args[i], torch.Tensor))

    def _note_cap(self, args) -> None:
        from stax.backend import FallbackRecord, StaxCompileError, _note_fallback
        msg = self.cap_message(args)
        if self.strict:
            raise StaxCompileError(msg + " (strict mode: strict_native=True or "
                                         "STAX_STRICT=1 makes this an error)")
        self._cap_record = FallbackRecord(
            graph_id=debug.new_graph_id("beyond_cap"), kind="shape variant",
            reason=msg.removeprefix("stax: "))
        self.report.graphs.append(self._cap_record)
        debug.log(msg)
        _note_fallback(warning=msg)

    def _run_as_written(self, args):
        with self._compiling:   # one warning and one record, whichever thread comes first
            if self._cap_record is None:
                self._note_cap(args)
        self.calls_as_written += 1
        self.last_variant = None
        return self.gm(*args)

    # ------------------------------------------------------------------ reporting

    def notes(self) -> list[str]:
        """What the report says about the specialization (its notes)."""
        vs = list(self.variants.values())
        total = sum(v.compile_s for v in vs)
        head = (f"shape-specialized: Dynamo gave this graph symbolic sizes "
                f"({self.symbol_list()}); stax compiles one static variant per distinct "
                f"size, each a full compile: {len(vs)} variant(s) compiled in {total:.2f} s "
                f"of at most {self.max_variants} (option 'stax.max_shape_variants')")
        if self.last_variant is not None:
            head += f"; the last call ran the variant specialized for {self.last_variant.describe()}"
        out = [head]
        if self.not_dynamic_reason:
            out.append(f"could not stay dynamic: {self.not_dynamic_reason}")
        for v in vs:
            ids = ", ".join(g.graph_id for g in v.graphs) or "none"
            out.append(f"variant {v.index + 1}: specialized for {v.describe()}: route "
                       f"{v.route}, {v.calls} call(s), compiled in {v.compile_s:.2f} s, "
                       f"graphs {ids}; compiled because {v.reason}")
        if self.calls_as_written:
            out.append(f"{self.calls_as_written} call(s) beyond the cap ran as written by "
                       "PyTorch")
        return out


def compile_static_or_per_size(gm, example_inputs, report, *, strict: bool, compile_static,
                               max_variants: int, compile_dynamic=None):
    """What a backend returns to Dynamo: `compile_static(gm, example_inputs)` for a static
    graph. For one with symbolic shapes, first `compile_dynamic(gm, example_inputs)` when
    given (the CPU target: one compile for every size, stax.dynamic_compile); where that
    raises CannotStayDynamic, or is not given, a ShapeSpecializer (set as
    `report.specializer`) that compiles one static variant per distinct size at call
    time, its notes saying why the graph could not stay dynamic. Every target's backend
    (CPU and GPU through `stax.backend`, Neuron) takes this one path."""
    if not has_symbolic_inputs(gm, example_inputs):
        return compile_static(gm, example_inputs)
    why = None
    if compile_dynamic is not None:
        from stax.dynamic_compile import CannotStayDynamic
        try:
            return compile_dynamic(gm, example_inputs)
        except CannotStayDynamic as e:
            why = str(e)  # per size is still native: no error under strict mode
            announce(f"graph with symbolic shapes could not stay dynamic: {why}")
            debug.log(f"graph with symbolic shapes could not stay dynamic (compiled per "
                      f"size instead): {why}")
    fn = ShapeSpecializer(gm, example_inputs, report, strict=strict,
                          compile_variant=compile_static, max_variants=max_variants)
    fn.not_dynamic_reason = why
    report.specializer = fn
    return fn
