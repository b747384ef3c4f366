"""One compile for every size: a CPU graph with symbolic shapes, compiled once with
kernels that take their sizes at run time (docs/dynamic-shapes.md, "One compile"). An
inference graph is built here; a training graph's forward and backward are built here
too, both at forward-compile time (stax.dynamic_training says how).

`compile_dynamic(gm, example_inputs, report, config)` is what the backend tries first for
a Dynamo graph with symbolic inputs on the CPU target. Inside the backend call Dynamo's
tracing context is active, so aot_autograd traces the graph symbolically; its inference
graph is then

  1. imported with `import_graph(..., symbolic=True)` (`?` dims carrying Dynamo's size
     expressions, SymInt placeholders as `stax.symbol` arguments);
  2. run through the driver's pass pipeline up to stax-fuse (`fused_pipeline(config)`,
     or the unfused one with one kernel per op). stax-assign-layouts and stax-schedule take
     static shapes, so they are not run: every kernel reads and writes contiguous
     tensors, which is what the runtime-size generator takes (targets/cpu_symbolic);
  3. compiled kernel by kernel, each ONCE (`llvm.compile_kernel`: a `SizedCpuKernel`
     for a kernel with `?` dims, a static kernel otherwise); matmuls run through torch
     (`torch.matmul` takes any size), and views (reshape, permute, broadcast, slice) are
     torch views computed at run time.

`DynamicGraph` (stax.dynamic_graph: the run-time side) is the callable aot_autograd gets.
Each call:

  - reads every symbol's value from the argument that binds it (a SymInt placeholder,
    or a tensor dim that is exactly the symbol);
  - checks every argument before anything runs, raising `StaxGuardError` naming the
    argument, the dim, what was expected and what came: the tensor's rank, dtype and
    device, every static dim, every symbolic dim against its expression (two dims of one
    symbol must be equal), each symbol's range as Dynamo assumed it (the 0/1
    specialization: a backed symbol is >= 2; the `min`/`max` of `mark_dynamic`), and
    the strides Dynamo's fake tensor recorded, and a size argument that is an
    expression (`s0*s1`, saved by a forward) against it. So a call can never read or write out of
    bounds, and never computes with sizes it was not checked for;
  - allocates each kernel's results (contiguous, sizes from the symbol expressions),
    runs the steps, and returns the outputs with eager's strides (restrided by a copy
    where a view's strides differ from eager's; not the case for the ops above).

What cannot stay dynamic raises `CannotStayDynamic` with the reason; the backend then
specializes per size (stax.shape_specialize) and the report says "could not stay
dynamic: <reason>": a training graph whose forward or backward cannot (the reason names
the graph), an importer refusal (an op with no symbolic rule, a fallback op; a mean over
a symbolic dim is not one: it divides by a stax.size_value), a kernel refusal (targets/cpu_symbolic's or targets/triton_symbolic's
"not supported"), an
output that eager returns as a view of an input but that is not top-level views of it
here (outputs that are views of inputs stay views: torch views of that argument), and
top-level ops this runner does not execute (constants, fallbacks other than the
convolutions the symbolic importer emits, collectives). Slices of a static dim to a
symbolic length are guarded before anything runs (`_slice_length_guards`).
Dynamo's RestartAnalysis raised inside aot_autograd is passed on.
"""
from __future__ import annotations

import dataclasses
import time
from collections import Counter
from typing import Any

import torch

from stax import debug
from stax.recompiles import announce
from stax.dynamic_graph import (CannotStayDynamic, DynamicGraph, OutputPlan, _ArgCheck, _Step,
                                 _contiguous_strides, _library_runner, _slice_length_guards,
                                 _symbol_ranges, _torch_dtype, _view_runner, with_form)
from stax.dynamic_graph import _evaluate  # noqa: F401 - the tests evaluate sizes through here
from stax.dialects.layout import TORCH_COPY_ATTR

__all__ = ["CannotStayDynamic", "DynamicGraph", "DynamicShapes", "compile_dynamic",
           "dynamic_enabled"]


def dynamic_enabled() -> bool:
    """False under STAX_DYNAMIC=0: symbolic CPU graphs are then specialized per size, as
    on the other targets (for comparing the two, and the per-size tests)."""
    import os
    return os.environ.get("STAX_DYNAMIC", "1").strip() not in ("0", "false", "off", "no")


def _view_root(v, producer, view_ops):
    """The value `v` is a chain of top-level views of (a block argument, or the first
    value that is not a view)."""
    while v in producer and producer[v].name in view_ops:
        v = producer[v].operands[0]
    return v


def _graph_device(example_inputs, target):
    """The device of the graph's tensors: its first tensor input's, else the target's."""
    from stax import dynamic_kernels
    for x in example_inputs:
        if isinstance(x, torch.Tensor):
            return x.device
    return torch.device(dynamic_kernels.DEVICES[target])


def _constant_runner(op, device):
    """A top-level stax.constant: its tensor, made once at compile time on the graph's
    device; the step returns it (a kernel reads it, an output copies it)."""
    from stax.real_tensors import real_tensors
    from stax.wrapper import _dense_to_tensor
    from stax.wrapper_fallback import _tensor_type
    shape, dtype = _tensor_type(op.results[0])
    with real_tensors():
        t = _dense_to_tensor(op.attributes["value"], shape, dtype).to(device)
    return with_form(lambda ins, env: t, "constant")


def _attention_runner(op):
    """stax.attention / stax.masked_attention at run time: runtime.attention's call (the
    library's SDPA, or the explicit form where it would differ), its output laid out as
    the library lays it (top-level views read it as it is; kernels read a contiguous
    copy)."""
    from stax._mlir import ir
    from stax.runtime.attention import attention
    scale = ir.FloatAttr(op.attributes["scale"]).value
    return lambda ins, env: attention(ins[0], ins[1], ins[2], scale, None,
                                      ins[3] if len(ins) > 3 else None)


def _check_runner(op):
    """A top-level stax_graph.check: raises eager's RuntimeError where its condition (a
    0-d bool a kernel computed) is false; no results."""
    from stax._mlir import ir
    message = ir.StringAttr(op.attributes["message"]).value

    def check(ins, env):
        torch._assert_async(ins[0], message)
        return []
    return check


def _derived_size(*_):
    """Stands for a size argument that is not one symbol (`s0*s1`, which aot_autograd's
    forward saves for the backward) in the copy of a graph that is imported: the
    importer reads such a node's size from its value and never calls it."""
    raise AssertionError("_derived_size is an import placeholder; it never runs")


@dataclasses.dataclass
class _SizeSlots:
    """What `_importable` took out of a graph for the importer, which takes SymInt inputs
    that are exactly one symbol and tensor outputs (and inputs returned) only."""
    kept: list          # the call's argument of each placeholder left, in order
    derived: dict       # argument -> its size expression (an int or a normal form)
    outputs: dict       # output position -> its size expression
    names: dict         # argument -> placeholder name (for the guards' messages)


def _importable(gm):
    """(a copy of `gm` the symbolic importer takes, _SizeSlots). A SymInt placeholder
    whose size is an expression (`s0*s1`), or a symbol an earlier one binds, becomes a node the importer reads the size
    from (`_derived_size`), and the call's argument is checked against the expression;
    a graph output that is a computed size (not a SymInt input) is left out of the
    copy's outputs and computed from the symbols at run time."""
    from stax.dialects import symbolic
    from stax.importer import symbolic as isym
    from stax.importer import UnsupportedGraph
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    derived, names, bound = {}, {}, set()
    for i, n in enumerate(phs):
        names[i] = n.name
        v = n.meta.get("val")
        if isinstance(v, torch.SymInt):
            try:
                d = isym.dim(v, f"input {n.name}")
            except UnsupportedGraph as e:
                raise CannotStayDynamic(f"the symbolic importer refused the graph: {e}") \
                    from None
            if not (isinstance(d, str) and d.isidentifier()) or d in bound or \
                    symbolic.derived_parts(d) is not None:
                # an expression, a symbol an earlier argument binds (two equal sizes
                # Dynamo gave one symbol: `tokens.shape[1]` and `labels.shape[1]`), or a
                # floor division (`s0//2`, named `fdiv2_s0`: GLU's backward takes it)
                derived[i] = d
            else:
                bound.add(d)
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    outs = out_node.args[0]
    seq = isinstance(outs, (tuple, list))
    items = list(outs) if seq else [outs]
    kept_phs = {n for i, n in enumerate(phs) if i not in derived}
    size_outs = {}
    for j, o in enumerate(items):
        v = o.meta.get("val") if isinstance(o, torch.fx.Node) else o
        if isinstance(o, torch.fx.Node) and o in kept_phs:
            continue   # an input returned (a tensor or a SymInt input): the importer's
        if isinstance(v, (torch.SymInt, int)) and not isinstance(v, bool):
            size_outs[j] = isym.dim(v, f"output {j}")
    if not derived and not size_outs:
        return gm, _SizeSlots(list(range(len(phs))), {}, {}, names)
    graph = torch.fx.Graph()
    val_map = {}
    for i in derived:
        node = graph.create_node("call_function", _derived_size, (), {},
                                 name=f"{phs[i].name}_size")
        node.meta = dict(phs[i].meta)
        val_map[phs[i]] = node
    mapped = graph.graph_copy(gm.graph, val_map)
    mapped = list(mapped) if seq else [mapped]
    left = [m for j, m in enumerate(mapped) if j not in size_outs]
    graph.output(tuple(left) if seq else (left[0] if left else None))
    copy = torch.fx.GraphModule(gm, graph)
    copy.meta = dict(getattr(gm, "meta", {}))
    return copy, _SizeSlots([i for i in range(len(phs)) if i not in derived], derived,
                            size_outs, names)


def _addmm_plans(block) -> dict:
    """stax.matmul op -> (its consumer, a kernel that only adds a bias along the last dim,
    the bias value), found as the static wrapper finds them
    (stax.matmul_epilogues.matmul_epilogue_plans: the matmul's one use, every other
    operand computed before it; bias_add_operand): run as one torch.addmm, the sum
    rounded once as eager's F.linear (stax-fuse keeps a bf16/f16 bias add a kernel of
    its own for this)."""
    from stax.matmul_epilogues import bias_add_operand, matmul_epilogue_plans
    ops = list(block.operations)
    plans = {}
    for i, plan in matmul_epilogue_plans(ops, set()).items():
        if not isinstance(plan, tuple):
            continue
        kop, acc_idx = plan
        bias_idx = bias_add_operand(kop, acc_idx)
        if bias_idx is not None:
            plans[ops[i].operation] = (kop.operation, kop.operation.operands[bias_idx])
    return plans


class _FoldedKernelRefused(Exception):
    """A kernel of the graph after stax-fold-view-copies has no runtime-size lowering."""


def _build(gm, example_inputs, config, graph_id, *, kind: str = "inference") -> DynamicGraph:
    """`_build_once` with the view copies folded into their producers
    (stax-fold-view-copies), or, where a kernel that made cannot be lowered with runtime
    sizes, without."""
    try:
        return _build_once(gm, example_inputs, config, graph_id, kind=kind,
                           fold_view_copies=config.fusion)
    except _FoldedKernelRefused:
        return _build_once(gm, example_inputs, config, graph_id, kind=kind,
                           fold_view_copies=False)


def _build_once(gm, example_inputs, config, graph_id, *, kind: str = "inference",
                fold_view_copies: bool = True) -> DynamicGraph:
    """Import, fuse and compile the symbolic ATen graph once. `kind` names it (an
    inference graph, or aot_autograd's forward or backward). A tensor argument keeps the
    strides Dynamo's fake tensors give it (guarded exactly; top-level views read it as it
    is, kernels read a contiguous copy): a transposed or sliced input, a backward's saved
    `permute` of a weight."""
    from stax._mlir import ir, new_context
    from stax.dialects import symbolic
    from stax.dialects.stax_dialect import ATTENTION_OPS, CHECK, FALLBACK
    from stax.driver import (_FP8, KERNEL_OPS, UNFUSED_PIPELINE, VIEW_OPS,
                             _block, _main_func, _run_passes, _wrap_stray_ops, fused_pipeline,
                             fp8_legalization, name_kernels)
    from stax.importer import UnsupportedGraph, import_graph
    from stax import dynamic_kernels
    from stax.targets.cpu_errors import KernelLoweringError

    n_args = sum(1 for n in gm.graph.nodes if n.op == "placeholder")
    inplace_notes = []
    if kind == "inference":   # a decode step's cache writes, in place (see the module)
        from stax import inplace_windows
        gm, inplace_notes = inplace_windows.rewrite(gm)
    gm, slots = _importable(gm)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    ctx = new_context()
    with ctx, ir.Location.unknown():
        try:
            imported = import_graph(gm, None, ctx, symbolic=True)
        except UnsupportedGraph as e:
            raise CannotStayDynamic(f"the symbolic importer refused the graph: {e}") from None
        module = imported.module
        # the MLIR after each pass, as the static path writes it (STAX_DEBUG_DIR)
        dump = debug.DumpDir(graph_id)
        dump.fx_graph(gm)
        dump.ir("imported", module)
        checks: list[_ArgCheck] = []
        constants = []
        for i, spec in enumerate(imported.inputs):
            arg = slots.kept[i] if i < len(slots.kept) else None   # None: a constant
            if spec.kind == "symbol":
                val = placeholders[i].meta["val"]
                checks.append(_ArgCheck(arg, spec.name, "symbol", symbol=str(val.node.expr)))
            elif spec.kind == "constant":
                constants.append(imported.constants[spec.name])
            elif spec.kind == "object":
                raise CannotStayDynamic(f"input {spec.name} is an object, not a tensor")
            else:
                want = _contiguous_strides(spec.shape)
                contiguous = not any(d != 1 and a != b for d, a, b in
                                     zip(spec.shape, spec.strides, want))
                val = placeholders[i].meta.get("val")
                # every 0-d tensor, whatever its fake device says, as the static wrapper
                # (wrapper._cpu_input_on_gpu): CUDA attention's philox seed and offset
                # are CPU tensors at run time where the backward's fake ones are not
                host = (isinstance(val, torch.Tensor) and val.dim() == 0 and
                        dynamic_kernels.DEVICES[config.target] != "cpu")
                checks.append(_ArgCheck(arg, spec.name, "tensor", dims=list(spec.shape),
                                        dtype=spec.dtype,
                                        strides=None if contiguous else list(spec.strides),
                                        host_scalar=host))
        for arg, expr in sorted(slots.derived.items()):
            checks.append(_ArgCheck(arg, slots.names[arg], "size", dims=[expr]))
        length_guards = _slice_length_guards(module)
        fp8_notes: list = []
        pre = fp8_legalization(module, config.target, dynamic_kernels.DEVICES[config.target],
                               config, example_inputs, fp8_notes)
        _run_passes(module, pre + (fused_pipeline(config, config.target) if config.fusion
                                   else UNFUSED_PIPELINE), dump)
        if fold_view_copies:   # the copies torch's reshape would make, by their producer
            _run_passes(module, ["stax-fold-view-copies"], dump)
        func_op = _main_func(module)
        _wrap_stray_ops(func_op)
        name_kernels(func_op)

        block = _block(func_op)
        _pass_host_scalars_through(block, slots.kept, checks)
        slot_of: dict = {}
        for j, a in enumerate(block.arguments):
            slot_of[a] = j
        next_slot = len(block.arguments)
        steps, kernels, library_calls, outputs = [], [], [], []
        addmm = _addmm_plans(block)   # matmul -> (bias-add kernel, bias)
        fused_away = {kop: mm for mm, (kop, _) in addmm.items()}
        fallback_ops = []   # stax_graph.fallback ops PyTorch runs (_library_runner)
        torch_copies = []   # reshapes no view gives, copied by torch.reshape at run time
        device = None       # the graph's device, for its tensor literals
        result_dims = []    # every top-level result's dims (the symbols they use)
        for op in block.operations:
            op = op.operation
            name = op.name
            if name == "func.return":
                for v in op.operands:
                    outputs.append(v)
                continue
            ins = [slot_of[v] for v in op.operands]
            outs = list(range(next_slot, next_slot + len(op.results)))
            next_slot += len(op.results)
            for r, s in zip(op.results, outs):
                slot_of[r] = s
            res_dims = [list(symbolic.dims_of(r.type)) for r in op.results]
            result_dims.extend(res_dims)
            if op in fused_away:   # computed by the matmul's torch.addmm
                slot_of[op.results[0]] = slot_of[fused_away[op].results[0]]
                continue
            if op in addmm:   # the bias is computed before it (matmul_epilogue_plans)
                shapes = [symbolic.fmt_dims(symbolic.dims_of(v.type)) for v in op.operands]
                library_calls.append(f"addmm {shapes[0]} @ {shapes[1]} + bias (torch.addmm: "
                                     "the matmul and its bias kernel, sizes read at run time)")
                steps.append(_Step("matmul", [slot_of[addmm[op][1]]] + ins, outs, with_form(
                    lambda ins, env: torch.addmm(ins[0], ins[1], ins[2]), "addmm")))
                continue
            if name in KERNEL_OPS:
                kname = ir.StringAttr(op.attributes["name"]).value
                try:
                    k, run = dynamic_kernels.compile_kernel(op, kname, config.target)
                except KernelLoweringError as e:
                    if fold_view_copies:
                        raise _FoldedKernelRefused(kname) from None
                    raise CannotStayDynamic(f"kernel {kname}: {e}") from None
                kernels.append(k)
                steps.append(_Step("kernel", ins, outs, run, res_dims,
                                   [_torch_dtype(ir.RankedTensorType(r.type).element_type)
                                    for r in op.results], kname))
            elif name == "stax.matmul":
                shapes = [symbolic.fmt_dims(symbolic.dims_of(v.type)) for v in op.operands]
                library_calls.append(f"matmul {shapes[0]} @ {shapes[1]} (torch.matmul, "
                                     "sizes read at run time)")
                steps.append(_Step("matmul", ins, outs, with_form(
                    lambda ins, env: torch.matmul(ins[0], ins[1]), "matmul")))
            elif name in ATTENTION_OPS:   # stax-fuse-attention's library call
                shapes = [symbolic.fmt_dims(symbolic.dims_of(v.type)) for v in op.operands]
                library_calls.append(f"scaled_dot_product_attention {shapes[0]} ({name}, "
                                     "sizes read at run time)")
                steps.append(_Step("matmul", ins, outs, _attention_runner(op)))
            elif name in VIEW_OPS:
                steps.append(_Step("view", ins, outs, _view_runner(name, op, res_dims[0])))
                if TORCH_COPY_ATTR in op.attributes:
                    torch_copies.append(symbolic.fmt_dims(res_dims[0]))
            elif name == "stax.constant":   # a tensor literal (`torch.tensor([1., 2.])`)
                if device is None:
                    device = _graph_device(example_inputs, config.target)
                steps.append(_Step("constant", ins, outs, _constant_runner(op, device)))
            elif name == CHECK:   # eager's assertion on a value a kernel computed
                steps.append(_Step("library", ins, [], _check_runner(op)))
            elif name == FALLBACK:
                # PyTorch runs it, as the static path's fallback op: reported the same way
                steps.append(_Step("library", ins, outs, _library_runner(op, res_dims)))
                fallback_ops.append(ir.StringAttr(op.attributes["target"]).value)
            else:
                raise CannotStayDynamic(f"top-level op {name} is not run by the dynamic "
                                        "graph (constants, fallbacks and collectives take "
                                        "static shapes)")
        results = []
        group_of_root, root_of_group = {}, {}   # output storages (below)
        ret_iter = iter(outputs)
        producer = {r: op.operation for op in block.operations for r in op.operation.results}
        specs = list(imported.outputs)
        # outputs per eager storage group
        sharing = Counter(s.alias.group for s in specs
                          if s.alias is not None and s.alias.group is not None)
        for j in sorted(slots.outputs):   # the sizes left out of the imported outputs
            specs.insert(j, ("size", slots.outputs[j]))
        for spec in specs:
            if isinstance(spec, tuple):
                results.append(OutputPlan("size", spec[1]))
                continue
            if spec.kind == "none":
                results.append(OutputPlan("none"))
                continue
            if spec.kind == "input":   # the input itself
                results.append(OutputPlan("tensor", spec.index))
                continue
            v = next(ret_iter)
            base = spec.alias.input if spec.alias is not None else None
            if base is not None:
                # eager returns a view of an input: it must stay one, so the value must
                # be views (torch views at run time) of that very argument
                if _view_root(v, producer, VIEW_OPS) != block.arguments[base]:
                    raise CannotStayDynamic(
                        f"output {spec.index} is a view of input {base} in eager, but the "
                        "compiled graph computes it (a copy)")
                results.append(OutputPlan("tensor", slot_of[v]))   # no restriding copy
                continue
            strides = list(spec.strides) if spec.strides else None
            offset = spec.storage_offset
            group = spec.alias.group if spec.alias is not None else None
            alone = group is None or sharing[group] == 1
            root = _view_root(v, producer, VIEW_OPS)
            # outputs share a storage exactly when eager's do (its `group`): a second
            # output over a root an earlier one returns, in another group or none (`v1`
            # and `v1.clone()`, one value in the IR), is a copy; outputs eager keeps in
            # one storage that the graph computes apart cannot be made to share one here
            if group is not None and root_of_group.setdefault(group, root) != root:
                raise CannotStayDynamic(
                    f"output {spec.index} shares a storage with another output in eager, "
                    "but the compiled graph computes them apart")
            if root in list(block.arguments) or (
                    root in producer and producer[root].name == "stax.constant"):
                # a fresh tensor in eager that the IR reads straight from an argument
                # or a constant (returned, it would be one tensor every call shares)
                # (`trunc` of an int, a reshape of x, `cat(...).copy_(x)`): copied, never
                # returned aliased; the outputs of one eager storage (`v.copy_(x)` and `v`)
                # are copied into one new storage
                results.append(OutputPlan("fresh", slot_of[v], strides, offset, alone, group,
                                          spec.exact_strides))
                continue
            if root in group_of_root and (group is None or group_of_root[root] != group):
                results.append(OutputPlan("fresh", slot_of[v], strides, offset,
                                          exact_strides=spec.exact_strides))
                continue
            group_of_root.setdefault(root, group)
            results.append(OutputPlan("tensor", slot_of[v], strides, offset, alone, group,
                                      spec.exact_strides))
        symbols = {}
        for c in checks:
            if c.kind == "symbol":
                symbols.setdefault(c.symbol, (c.index, None))
            else:
                for d, e in enumerate(c.dims):
                    if isinstance(e, str) and e.isidentifier() and \
                            symbolic.derived_parts(e) is None:
                        symbols.setdefault(e, (c.index, d))
        used = set()
        for c in checks:
            for e in (c.dims or []) + (c.strides or []):
                if isinstance(e, str):
                    used |= symbolic.free_symbols(e)
        for e in list(slots.outputs.values()) + [e for dims in result_dims for e in dims]:
            if isinstance(e, str):
                used |= symbolic.free_symbols(e)
        for k in kernels:
            used |= set(getattr(k, "symbols", ()))
        used |= {s for a in imported.size_asserts for s in a.symbols}
        derived = sorted(s for s in used if symbolic.derived_parts(s) is not None)
        unbound = sorted({b for s in used for b in symbolic.base_symbols(s)} - set(symbols))
        if unbound:
            raise CannotStayDynamic(f"symbols {unbound} are no argument's dim or SymInt")
        strided = [c.name for c in checks if c.strides is not None]
        layout = (f"inputs {', '.join(strided)} have Dynamo's strides, the others are "
                  "contiguous (guarded)" if strided else
                  "inputs must be contiguous (guarded)")
        what = "" if kind == "inference" else f" ({kind} graph)"
        notes = [f"dynamic{what}: compiled once for every size of "
                 f"{', '.join(sorted(symbols)) or 'its (all static) dims'}: "
                 f"{len(kernels)} kernel(s) with runtime sizes, {len(library_calls)} "
                 f"matmul(s) through torch; {layout}"] + fp8_notes + inplace_notes
        if torch_copies:
            notes.append(f"{len(torch_copies)} reshape(s) that no view gives, to "
                         f"{', '.join(torch_copies)}: torch's reshape copies them at run time "
                         "(stax-fold-view-copies could not have the kernel that produces their "
                         "source write them)")
        if imported.size_asserts:
            notes.append(f"{len(imported.size_asserts)} runtime assertion(s) of Dynamo on the "
                         "sizes, checked at every call: " +
                         "; ".join(str(a.expr) for a in imported.size_asserts))
        # fp8 outputs ride as uint8 bytes once legalized: returned as fp8 views
        views = [sp.dtype if pre and not isinstance(sp, tuple) and
                 getattr(sp, "dtype", None) in _FP8 else None for sp in specs]
        try:
            dynamic_kernels.finish_compiles(kernels, example_inputs, derived, config.target)
        except KernelLoweringError as e:
            raise CannotStayDynamic(f"a kernel did not compile: {e}") from None
        g = DynamicGraph(graph_id, checks, constants, steps, results, symbols,
                         _symbol_ranges(example_inputs), kernels, library_calls, notes,
                         (ctx, module), kind=kind, arg_order=slots.kept, n_args=n_args,
                         target=config.target)
        g.output_views = views
        g.n_values = next_slot - len(block.arguments)  # slots beyond args and constants
        g.derived = tuple(derived)
        g.length_guards = length_guards
        g.size_asserts = imported.size_asserts
        g.fallback_ops = fallback_ops
        g.launches_per_call += len(fallback_ops)
        return g


def _pass_host_scalars_through(block, kept, checks) -> None:
    """A host scalar that only library ops read (CUDA attention's philox seed and offset,
    which its backward takes on the CPU) is handed to them as it comes, not copied to the
    device: `pass_through`."""
    from stax.dialects.stax_dialect import FALLBACK
    by_arg = {c.index: c for c in checks if c.kind == "tensor" and c.host_scalar}
    for j, a in enumerate(block.arguments):
        c = by_arg.get(kept[j]) if j < len(kept) else None
        if c is not None and all(u.owner.name == FALLBACK for u in a.uses):
            c.pass_through = True


def _sized_cudagraphs(graph, config, report):
    """The per-size CUDA graph runner of a GPU inference graph (stax.cudagraphs_sized), or
    None: reduce-overhead captures every size; the default mode captures a graph that
    auto_capture_blocker admits (the copy limits are checked per size)."""
    if config.target != "triton":
        return None
    from stax.cudagraphs import auto_capture_blocker
    from stax.cudagraphs_sized import SizedCudaGraphs
    if config.cudagraphs:
        runner = SizedCudaGraphs(graph, auto=False, copy_outputs=config.cudagraph_copy_outputs)
    elif config.auto_cudagraphs and auto_capture_blocker(graph, "inference") is None:
        runner = SizedCudaGraphs(graph, auto=True)
        graph.notes.append(
            f"auto cudagraphs: {graph.launches_per_call} launches per call are replayed "
            "from one CUDA graph per size (captured on a size's second call, outputs "
            "copied out; a call behaves as uncaptured; off with "
            "options={'stax.auto_cudagraphs': False})")
    else:
        return None
    report.runners.append(runner)
    return runner


@dataclasses.dataclass
class _Holder:
    graph: Any = None


def _is_restart(e: Exception) -> bool:
    """Dynamo's RestartAnalysis family (TensorifyScalarRestartAnalysis: it specializes a
    Python float it had passed as a tensor and traces again)."""
    try:
        from torch._dynamo.exc import RestartAnalysis
    except ImportError:
        return False
    return isinstance(e, RestartAnalysis)


class DynamicShapes:
    """`report.specializer` of a graph compiled once for every size: one variant, marked
    dynamic, and the notes the report shows (it stands where a ShapeSpecializer would)."""

    def __init__(self, variant, symbols: list[str], training: bool = False):
        self.variants = {"dynamic": variant}
        self.last_variant = None
        self.symbols = symbols
        self.max_variants = 1
        self.dynamic = True
        self.training = training      # forward and backward, each compiled once

    def notes(self) -> list[str]:
        v = self.variants["dynamic"]
        syms = ", ".join(self.symbols) or "none left free: Dynamo specialized them all"
        what = " (training: its forward and backward graphs)" if self.training else ""
        return [f"dynamic: Dynamo gave this graph symbolic sizes ({syms}); "
                f"stax compiled it once{what}, with kernels that take their sizes at run "
                f"time, in {v.compile_s:.2f} s; it served {v.calls} call(s) at every size, "
                f"route {v.route}"]


class _DynamicCallable:
    """What the backend returns to Dynamo: aot_autograd's callable over the DynamicGraph;
    counts the calls on the one variant."""

    def __init__(self, fn, shapes: DynamicShapes):
        self._fn = fn
        self.shapes = shapes

    def __call__(self, *args):
        v = self.shapes.variants["dynamic"]
        v.calls += 1
        self.shapes.last_variant = v
        return self._fn(*args)


def _free_symbols(x) -> set:
    """The symbols a SymInt / SymFloat still depends on (after the shape environment's
    replacements: a size Dynamo has since specialized depends on none)."""
    if not isinstance(x, (torch.SymInt, torch.SymFloat)):
        return set()
    node = x.node
    expr = node.shape_env.replace(node.expr) if node.shape_env is not None else node.expr
    return {str(f) for f in expr.free_symbols}


def _has_symbolic_size(gm, example_inputs) -> bool:
    """A tensor placeholder with a symbolic dim (as Dynamo recorded it or as it comes),
    or a SymInt / SymFloat placeholder that is not one of the tensors' symbolic strides
    or offsets (a value the graph computes with)."""
    from stax.shape_specialize import _dynamo_value, _placeholders
    scalars, layout_symbols = [], set()
    for i, node in enumerate(_placeholders(gm)):
        for v in (example_inputs[i] if i < len(example_inputs) else None,
                  _dynamo_value(node)):
            if isinstance(v, (torch.SymInt, torch.SymFloat)):
                scalars.append(_free_symbols(v))
            elif isinstance(v, torch.Tensor):
                if any(_free_symbols(d) for d in v.shape):
                    return True
                for x in list(v.stride()) + [v.storage_offset()]:
                    layout_symbols |= _free_symbols(x)
    return any(free and not free <= layout_symbols for free in scalars)


def compile_dynamic(gm, example_inputs, report, config):
    """The callable for a symbolic Dynamo graph compiled once for every size, with
    `report.specializer` a DynamicShapes; raises CannotStayDynamic(reason). A graph that
    needs a backward gets its forward and backward compiled once each
    (stax.dynamic_training)."""
    from stax.backend import needs_autograd, run_aot_autograd
    from stax.dynamic_training import run_training_aot, training_note
    from stax.shape_specialize import ShapeVariant, _symbolic_positions
    if not dynamic_enabled():
        raise CannotStayDynamic("STAX_DYNAMIC=0 turns the dynamic path off")
    from stax.dynamic_kernels import DEVICES
    if config.target not in DEVICES:
        raise CannotStayDynamic(f"the {config.target} target has no kernels with runtime "
                                "sizes")
    training = needs_autograd(example_inputs)
    if config.target == "triton" and config.cudagraphs and training:
        raise CannotStayDynamic("CUDA graphs (stax.cudagraphs) of training graphs are "
                                "captured per size: one static variant per size keeps them")
    # a Python float Dynamo passes as a tensor (a norm's eps under dynamic=True): the
    # symbolic trace makes Dynamo specialize it and trace again (RestartAnalysis, passed
    # on below); one that stays a tensor read with .item() is refused by the importer
    tensors, _, _ = _symbolic_positions(gm, list(example_inputs))
    if not _has_symbolic_size(gm, example_inputs):
        # (a recompile for an input's new layout: the sizes are static, only strides or
        # offsets are symbolic) the runtime-size kernels read contiguous copies, while a
        # static compile per layout reads the strides as they come
        raise CannotStayDynamic("no size is symbolic, only strides or offsets (Dynamo "
                                "recompiled for an input's new layout): one static "
                                "compile per layout reads them without copies")
    holder = _Holder()

    def inference(aten_gm, aten_inputs):
        holder.graph = _build(aten_gm, aten_inputs, config, debug.new_graph_id("inference"))
        return _sized_cudagraphs(holder.graph, config, report) or holder.graph

    def refuse(kind):
        def compiler(*_):
            raise CannotStayDynamic(f"aot_autograd made a {kind} graph for a graph with no "
                                    "input that requires grad")
        return compiler

    def build(aten_gm, aten_inputs, graph_id, kind):
        return _build(aten_gm, aten_inputs, config, graph_id, kind=kind)

    start = time.perf_counter()
    built = None
    try:
        if training:
            fn, built = run_training_aot(gm, example_inputs, config, build)
        else:
            fn = run_aot_autograd(gm, example_inputs, lambda kind: inference
                                  if kind == "inference" else refuse(kind))
    except CannotStayDynamic:
        raise
    except Exception as e:  # noqa: BLE001 - aot_autograd's own failure: per size instead
        if _is_restart(e):
            raise   # Dynamo's own control flow (it traces the frame again): not a failure
        inner = e
        while inner is not None and not isinstance(inner, CannotStayDynamic):
            inner = inner.__cause__ or inner.__context__
        if inner is not None:
            raise inner from None
        raise CannotStayDynamic(f"aot_autograd failed: {type(e).__name__}: {e}") from None
    graphs = built.graphs if built is not None else \
        ([holder.graph] if holder.graph is not None else [])
    if not graphs:
        raise CannotStayDynamic("aot_autograd compiled no inference graph")
    symbols = sorted({s for g in graphs for s in g.symbols})
    if not symbols:
        raise CannotStayDynamic("Dynamo specialized every symbolic size while tracing: "
                                "the static compile takes the graph (strided kernels, no "
                                "copies)")
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    # `shapes`: the symbolic tensors' shapes at the call it was compiled on (any size runs)
    variant = ShapeVariant(index=0, key=("dynamic",), sizes={s: "any" for s in symbols},
                           shapes={names[i]: tuple(example_inputs[i].shape) for i in tensors
                                   if isinstance(example_inputs[i], torch.Tensor)},
                           fn=fn, graphs=list(graphs), compile_s=time.perf_counter() - start,
                           reason="the first call: compiled once for every size",
                           dynamic=True)
    report.graphs.extend(graphs)
    shapes = DynamicShapes(variant, symbols,
                           training=built is not None and built.forward is not None)
    if built is not None and (note := training_note(built)) is not None:
        report.extra_notes.append(note)
    report.specializer = shapes
    kernels = sum(len(g.kernels) for g in graphs)
    what = "forward + backward " if shapes.training else ""
    msg = (f"graph with symbolic shapes ({', '.join(symbols)}): {what}compiled once "
           f"for every size in {variant.compile_s:.2f} s ({kernels} kernels)")
    announce(msg)
    debug.log(msg)
    return _DynamicCallable(fn, shapes)
