"""The stax driver: one ATen FX graph in, one guarded callable (`CompiledGraph`) out.

    compile_graph(gm, example_inputs, config) -> CompiledGraph

Target selection (`select_target`): from the example inputs' device. All CPU ->
"stax-cpu" (kernels by `stax.targets.llvm`); all on one CUDA device -> "triton"
(kernels by `stax.targets.triton`, matmuls by cuBLAS through torch, fallback ops by
torch on the GPU); anything else (CPU and CUDA tensors mixed, two CUDA devices, other
devices) is refused with a StaxUnsupportedError naming the inputs, and the backend runs
the graph as written (or raises under STAX_STRICT=1). On CUDA with `stax.triton=False`
(or `stax.cuda_codegen=False`) there is no code generator: refused likewise, with that
reason.

Steps: import (`stax.importer.import_graph`) -> passes (`canonicalize, cse,
stax-sink-converts, stax-fuse, cse`; without stax-fuse when `stax.fusion=False`, and then every op is wrapped in its
own one-op `stax.kernel`) -> the boundary layouts written onto @main (`stax.layout`: the
example inputs' strides on the arguments, eager's on the results) -> `stax-assign-layouts`
(every kernel boundary's strides, views, copies: docs/layouts.md) -> `stax-schedule` (each
kernel's domain, index maps and offsets for those strides, phases, tiling:
docs/schedule.md) -> each `stax.kernel` compiled by the target for the strides the pass
gave its inputs and outputs -> a generated Python wrapper.

Triton specifics. Each kernel is compiled with `aligned`: one bool per pointer argument
(the kernel's inputs, then its outputs) saying whether that pointer is 16-byte aligned
on every call. Buffers the wrapper allocates are (the CUDA caching allocator hands out
512-byte aligned blocks), views of them are when their byte offset is a multiple of 16,
results of fallback ops are assumed not to be, and graph arguments are when the example
input's data pointer was: the guards then also check `data_ptr() % 16 == 0` for those
arguments (a misaligned tensor, e.g. `x[1:]`, fails the guard with advice: pass
`x.clone()`). Under `stax.max_autotune` the driver calls
the max-autotune tuner (`_Tuner`, on `stax.autotune.tune`): every kernel's config is
tuned, and a matmul whose consumer is a pointwise kernel is also tried as a Triton
`tt.dot` matmul with that kernel fused as its epilogue, against cuBLAS + the kernel;
the wrapper calls the winner, and `CompiledGraph.tuned` records every search (see the
max-autotune section below; time bound `STAX_AUTOTUNE_BUDGET_S`).
`CompiledGraph.launches_per_call` counts what one call launches (`launch_counts` gives
the parts): each stax kernel once and the final kernel of each Triton split reduction
again, library calls and fallback ops (at least one launch each), and the layout and
dtype copies the wrapper's run-time helpers made around fallback ops and outputs in the
latest call.

The wrapper is Python source (`CompiledGraph.source`, hashable, saved as `wrapper.py`
under STAX_DEBUG_DIR). It

* checks guards before anything runs: argument count; each tensor argument's shape,
  dtype, device, and the strides the kernels were specialized for (dims of size 1
  are not checked). A mismatch raises `StaxGuardError` naming the argument;
* allocates kernel results with `torch.empty_strided` in the layouts stax-assign-layouts
  gave them (contiguous intermediates; graph outputs get the strides eager gives them);
* calls the kernels, runs `stax.matmul` through the library (`torch.mm/bmm/matmul`
  with `out=`), `stax.fallback` through `torch.ops.<ns>.<op>.<overload>`;
* turns top-level views into `torch.as_strided` (no copy) with the pass's strides and
  offset; a reshape not expressible as a view is a one-op copy kernel the pass inserted;
* drops intermediates (`del`) right after their last use;
* returns the outputs with the FX graph's output structure (tuple/list/single).

Modules: this one (target selection, the pass pipeline, compile_graph); `stax.wrapper`
(the wrapper generator); `stax.guards`, `stax.compiled_graph`, `stax.errors`,
`stax.routes` (what a compiled graph needs at run time); `stax.gpu_tuning` (the triton
kernel compiler and max-autotune); `stax.aliasing` (eager's aliasing and layouts).

Values of the generated module's globals: `k<i>` kernels, `c<i>` constants (created
once at compile time), `f<i>` the fallback ATen overloads, `_guard_*` diagnostics.
"""
from __future__ import annotations

import re
from typing import Any

import torch

from stax import debug
from stax.compiled_graph import CompiledGraph
from stax.errors import StaxCompileError, StaxGuardError, StaxUnsupportedError
from stax.guards import ArgGuard, _guards_for, guard_failure  # noqa: F401 (re-exported)
from stax.options import StaxConfig, resolve_config
from stax.routes import ALIGN, CPU_ROUTE, ROUTE, TRITON_ROUTE  # noqa: F401 (re-exported)

__all__ = ["compile_graph", "CompiledGraph", "StaxGuardError", "StaxCompileError",
           "StaxUnsupportedError", "wrap_op_in_kernel", "name_kernels", "FUSED_PIPELINE",
           "UNFUSED_PIPELINE", "fused_pipeline"]

FUSED_PIPELINE = ["canonicalize", "cse", "stax-sink-converts", "stax-hoist-reshapes",
                  "stax-hoist-broadcasts",
                  "stax-hoist-concat-unary", "stax-sink-gathers", "stax-fuse",
                  "cse"]
_FP8 = tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n))


def _is_fp8(t) -> bool:
    return isinstance(t, torch.Tensor) and t.dtype in _FP8


def _needs_fp8_legalization(route, device, config) -> bool:
    if route != "triton":
        return True  # the CPU code generator holds no fp8
    if config is not None and config["stax.legalize_fp8"]:
        return True
    try:
        major, minor = torch.cuda.get_device_capability(device)
    except Exception:  # no device to ask (compile-only use): assume a current GPU
        return False
    return (major, minor) < (8, 9)


def fp8_legalization(module, route, device, config, example_inputs, notes) -> list:
    """The passes to run before the pipeline for fp8: `stax-legalize-fp8` where the
    target cannot hold the graph's fp8 values (_needs_fp8_legalization; only graphs that
    hold fp8 at all pay for it), encoding e4m3fn overflow as eager does on this device
    (probed once). Notes that fp8 inputs go in as their bytes."""
    if not (_needs_fp8_legalization(route, device, config) and "f8E" in str(module)):
        return []
    from stax.passes.legalize_fp8 import pipeline_entry
    if any(_is_fp8(t) for t in example_inputs):
        notes.append("fp8 inputs are passed as zero-copy uint8 views and fp8 "
                     "arithmetic runs on the decoded values (stax-legalize-fp8)")
    return [pipeline_entry(route, device)]


UNFUSED_PIPELINE = ["canonicalize", "cse"]


def fused_pipeline(config=None, route=None) -> list:
    """FUSED_PIPELINE for a config: unless `stax.decompose_matvec="off"`, a batched
    matmul with one row or column becomes a multiply and a sum first
    (stax-decompose-matvec), so stax-fuse reads a KV cache's heads where they lie. "auto"
    (the default) puts it in on both routes: `benchmarks/decode.py` measured the step
    faster with it, on the CPU 0.51 against 0.56 ms at caches of 32-95 and 1.12 against
    1.20 at 256-455, on the H100 0.39 against 0.49 (session 38's opposite finding came
    from the loop's checks between steps).

    With a `route` (the static compile and the dynamic graph), explicit
    attention becomes one library call after that (stax-fuse-attention): on the CPU
    route unless `stax.fuse_attention="off"`, on the triton route only with "on" (its
    Triton kernels measured at 0.91x Inductor on the H100's layout.py attention)."""
    choice = config["stax.decompose_matvec"] if config is not None else "auto"
    head = FUSED_PIPELINE[:2]
    if choice in ("on", "auto"):
        head = head + ["stax-decompose-matvec"]
    attention = config["stax.fuse_attention"] if config is not None else "auto"
    if route is not None and (attention == "on" or
                              (attention == "auto" and route == CPU_ROUTE)):
        head = head + ["stax-fuse-attention"]
    return head + FUSED_PIPELINE[2:]

VIEW_OPS = ("stax.broadcast_in_dim", "stax.reshape", "stax.permute", "stax.slice")
# the structural ops live in `stax_graph` (IRDL variadics must be homogeneous)
from stax.dialects.stax_dialect import (ATTENTION_OPS, CHECK, COLLECTIVE, FALLBACK,  # noqa: F401
                                        KERNEL, YIELD)
KERNEL_OPS = (KERNEL, "stax.kernel")
FALLBACK_OPS = (FALLBACK, "stax.fallback")
# top-level ops the wrapper handles itself (everything else goes into a kernel)
_WRAPPER_OPS = KERNEL_OPS + FALLBACK_OPS + ATTENTION_OPS + (
    COLLECTIVE, CHECK, "stax.matmul", "stax.constant", "func.return") + VIEW_OPS


# ----------------------------------------------------------------------------- types



# ----------------------------------------------------------------------------- guards


# ----------------------------------------------------------------------------- IR helpers

def _main_func(module):
    for op in module.body.operations:
        if op.operation.name == "func.func":
            if str(op.operation.attributes["sym_name"]).strip('"') == "main":
                return op
    raise StaxUnsupportedError("the imported module has no func.func @main")


def _block(func_op):
    return func_op.operation.regions[0].blocks[0]


def wrap_op_in_kernel(op, attributes=None) -> Any:
    """Replace top-level `op` by a `stax.kernel` holding just a copy of it; returns the
    kernel operation. Used for `stax.fusion=False`, for stray compute ops the fuser left
    outside a kernel, and for views that need a copy (`stax.passes.assign_layouts`)."""
    from stax.passes.assign_layouts import wrap_op_in_kernel as wrap
    return wrap(op, attributes)


def _wrap_stray_ops(func_op, include_views=False) -> int:
    """Wrap every top-level op the wrapper cannot run itself in its own kernel."""
    n = 0
    for op in list(_block(func_op).operations):
        name = op.operation.name
        if name in _WRAPPER_OPS and not (include_views and name in VIEW_OPS):
            continue
        wrap_op_in_kernel(op)
        n += 1
    return n


# ----------------------------------------------------------------------------- the wrapper


# ----------------------------------------------------------------------------- compile_graph

def _check_inputs(example_inputs, names):
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.SymInt) or (
                isinstance(x, torch.Tensor) and
                any(not isinstance(s, int) for s in list(x.shape) + list(x.stride()))):
            from stax.importer import _SPECIALIZED
            raise StaxUnsupportedError(
                f"input {i} ('{names[i]}') has a symbolic shape "
                f"({tuple(x.shape) if isinstance(x, torch.Tensor) else x}); compile_graph "
                f"takes static shapes only ({_SPECIALIZED})")


def _device_key(d) -> str:
    d = torch.device(d)
    if d.type == "cuda":
        if d.index is not None:
            return f"cuda:{d.index}"
        # no GPU here (PTX-only and interpreted runs compile for a fake cuda:0)
        return f"cuda:{torch.cuda.current_device() if torch.cuda.is_available() else 0}"
    return str(d)


def placed_devices(gm) -> dict[str, list[str]]:
    """{device: [node names]} of the graph's nodes that choose a device themselves (a
    `device=` argument: factories such as `full`, `arange`, `empty`, and `_to_copy` to
    another device). A graph without tensor inputs gets its device from these; one that
    moves tensors to a device its inputs are not on is refused (stax compiles a graph
    for one device). A 0-d `full` or `scalar_tensor` made on the CPU that only other ops
    read does not count: PyTorch takes a CPU scalar in any device's ops (`y[mask] = 0`
    on CUDA indexes with a CPU `full([], 0)`), and stax makes it a constant of the
    graph's own device. (A CPU scalar the graph returns, or one moved there by
    `_to_copy`, counts: eager returns it on the CPU.)"""
    out: dict[str, list[str]] = {}
    if gm is None:
        return out
    for n in gm.graph.nodes:
        if _cpu_scalar_operand(n):
            continue
        if n.op == "call_function" and n.kwargs.get("device") is not None:
            try:
                key = _device_key(n.kwargs["device"])
            except (RuntimeError, TypeError):
                continue
            out.setdefault(key, []).append(n.name)
    return out


def _cpu_scalar_operand(n) -> bool:
    val = n.meta.get("val")
    return n.op == "call_function" and \
        n.target in (torch.ops.aten.full.default, torch.ops.aten.scalar_tensor.default) and \
        isinstance(val, torch.Tensor) and val.dim() == 0 and val.device.type == "cpu" and \
        all(u.op != "output" for u in n.users)


def select_target(example_inputs, names=None, gm=None) -> tuple[str, str]:
    """(route, device) for these example inputs: ("stax-cpu", "cpu") when every tensor
    is on the CPU (or there is none), ("triton", "cuda:<i>") when every tensor is on the
    same CUDA device. With the graph `gm`, the devices its factories and device copies
    name count too (`placed_devices`): a graph without tensor inputs runs where they
    place it, and one that moves tensors to a device none of its inputs is on is
    refused. Raises StaxUnsupportedError naming the inputs (or nodes) otherwise."""
    devs: dict[str, list[int]] = {}
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.Tensor):
            devs.setdefault(_device_key(x.device), []).append(i)
    placed = placed_devices(gm)
    moved = {d: ns for d, ns in placed.items() if d not in devs}
    if moved and devs:
        where = "; ".join(f"{d}: {', '.join(ns[:4])}" for d, ns in sorted(moved.items()))
        raise StaxUnsupportedError(
            f"the graph places tensors on a device none of its inputs is on ({where}; "
            f"inputs on {', '.join(sorted(devs))}); stax compiles a graph for one device. "
            "The graph runs as written; move the inputs (or the created tensors) to one "
            "device to compile it")
    if not devs and placed:
        if len(placed) > 1:
            where = "; ".join(f"{d}: {', '.join(ns[:4])}" for d, ns in sorted(placed.items()))
            raise StaxUnsupportedError(
                f"the graph creates tensors on more than one device ({where}); stax "
                "compiles a graph for one device")
        (dev,) = placed
        if dev == "cpu":
            return CPU_ROUTE, "cpu"
        if dev.startswith("cuda:"):
            return TRITON_ROUTE, dev
        raise StaxUnsupportedError(
            f"the graph creates tensors on device {dev} ({', '.join(placed[dev][:4])}); "
            "stax targets CPU tensors (stax-cpu) and CUDA tensors (triton) only")

    def who(idx):
        shown = ", ".join(f"{i} ('{names[i]}')" if names else str(i) for i in idx[:6])
        return shown + (f" and {len(idx) - 6} more" if len(idx) > 6 else "")

    if not devs or set(devs) == {"cpu"}:
        return CPU_ROUTE, "cpu"
    if len(devs) == 1:
        (dev,) = devs
        if dev.startswith("cuda:"):
            return TRITON_ROUTE, dev
        raise StaxUnsupportedError(
            f"inputs {who(devs[dev])} are on device {dev}; stax targets CPU tensors "
            "(stax-cpu) and CUDA tensors (triton) only")
    gpus = [d for d in devs if d.startswith("cuda:")]
    if len(gpus) == 1 and set(devs) == {"cpu", gpus[0]}:
        # CUDA tensors with CPU ones beside them, as torch allows: a CPU 0-dim tensor is a
        # scalar operand of CUDA ops (the wrapper copies it to the device), and a CPU tensor
        # that only fallback ops read or that is only returned (sdpa's RNG state saved for
        # the backward) stays on the CPU (`_cpu_input_on_gpu`)
        return TRITON_ROUTE, gpus[0]
    parts = "; ".join(f"{d}: inputs {who(idx)}" for d, idx in sorted(devs.items()))
    raise StaxUnsupportedError(
        f"the graph's tensor inputs are on more than one device ({parts}); stax compiles a "
        "graph for one device: all CPU (stax-cpu) or on one CUDA device (triton; CPU "
        "tensors beside them are allowed). Move the inputs to one device")


def output_structure(gm):
    """How the graph returns its results: ("tuple" | "list" | "single", count)."""
    for n in gm.graph.nodes:
        if n.op == "output":
            out = n.args[0]
            if isinstance(out, tuple):
                return "tuple", len(out)
            if isinstance(out, list):
                return "list", len(out)
            return "single", 1
    return "tuple", 0


def write_boundary_layouts(func_op, imported, example_inputs, names) -> None:
    """The input contract of stax-assign-layouts: `stax.layout` on each tensor argument
    of @main (the strides of its example input, or of the constant it is bound to: what
    the guards check), and on each tensor result (eager's strides, from the importer's
    OutputSpecs; the first spec of a result wins)."""
    from stax.dialects.layout import set_func_layouts
    from stax.real_tensors import real_tensors
    block_args = list(_block(func_op).arguments)
    in_specs = list(getattr(imported, "inputs", []) or [])
    constants = getattr(imported, "constants", {}) or {}
    pos_of = {nm: i for i, nm in enumerate(names)}
    args: list = [None] * len(block_args)
    next_ph = 0
    for i, spec in enumerate(in_specs[:len(block_args)]):
        kind = getattr(spec, "kind", "placeholder")
        if kind == "constant":
            with real_tensors():
                t = constants[spec.name]
                st = tuple(t.stride()) if isinstance(t, torch.Tensor) else ()
        else:
            pos = pos_of.get(spec.name, next_ph)
            next_ph = pos + 1
            ex = example_inputs[pos] if pos < len(example_inputs) else None
            if kind == "object" or not isinstance(ex, torch.Tensor):
                continue
            st = tuple(int(s) for s in ex.stride())
        if "tensor<" in str(block_args[i].type):
            args[i] = st
    set_func_layouts(func_op, "arg_attrs", args)
    n_results = len(list(_block(func_op).operations)[-1].operation.operands)
    results: list = [None] * n_results
    for spec in getattr(imported, "outputs", []) or []:
        if getattr(spec, "kind", "tensor") != "tensor":
            continue
        st = getattr(spec, "strides", None) or getattr(spec, "stride", None)
        if st is not None and 0 <= spec.index < n_results and results[spec.index] is None:
            results[spec.index] = tuple(int(s) for s in st)
    set_func_layouts(func_op, "res_attrs", results)


def assign_layouts(module, func_op, notes, dump: debug.DumpDir, tag="assign-layouts") -> None:
    """Run stax-assign-layouts; note each copy kernel it inserted (a view that is not
    one) and name the kernels again (the copies, numbered in launch order)."""
    from stax._mlir import ir
    from stax.dialects.layout import COPY_ATTR
    from stax.passes.channels_last import DECISION_ATTR
    _run_passes(module, ["stax-assign-layouts"], None)
    if DECISION_ATTR in func_op.attributes:
        decision = ir.StringAttr(func_op.attributes[DECISION_ATTR]).value
        # (a graph left as it was under "auto" is what it always was: no note)
        if not decision.startswith("kept: auto") and f"channels-last {decision}" not in notes:
            notes.append(f"channels-last {decision}")
    for op in _block(func_op).operations:
        op = op.operation
        if COPY_ATTR in op.attributes and op.name in KERNEL_OPS:
            if ir.StringAttr(op.attributes[COPY_ATTR]).value.startswith("channels-last"):
                continue  # (the decision's note above stands for these)
            inner = op.regions[0].blocks[0].operations[0]
            label = str(inner.location)
            label = label[5:].split('"', 1)[0] if label.startswith('loc("') else inner.name
            if not any(n.startswith(f"{label}: a reshape") for n in notes):
                why = ir.StringAttr(op.attributes[COPY_ATTR]).value
                notes.append(f"{label}: a reshape of a non-contiguous value is not a view; "
                             f"compiled a copy kernel ({why})")
    name_kernels(func_op)
    dump.ir(tag, module)


def _run_passes(module, names, dump: debug.DumpDir):
    from stax.passes.registry import run_pipeline
    # the registry hands over the text without locations: print the module itself
    run_pipeline(module, names,
                 dump_callback=(lambda spec, _text: dump.ir(spec, module)) if dump else None)


_INDEX_RE = re.compile(r"^k\d+(?:_|$)")  # the index part of a descriptive kernel name


def name_kernels(func_op) -> None:
    """Number the kernels of @main in launch order and make sure each has a descriptive
    name (`k<i>_...`, see `stax.passes.fuse.kernel_name`): the fuser's names keep their
    description, the one-op kernels the driver wraps (fusion off, stray ops, view
    copies) get one from their op. The name is the kernel's symbol (LLVM and Triton),
    its profiler label and its name in reports, so it must be unique in the graph."""
    from stax._mlir import ir
    from stax.passes.fuse import REDUCTION_OPS, kernel_name
    i = 0
    for op in _block(func_op).operations:
        op = op.operation
        if op.name not in KERNEL_OPS:
            continue
        old = ir.StringAttr(op.attributes["name"]).value if "name" in op.attributes else ""
        if _INDEX_RE.match(old):
            new = _INDEX_RE.sub(f"k{i}_", old).rstrip("_")
        else:
            members = [o.operation for o in op.regions[0].blocks[0].operations
                       if o.operation.name not in (YIELD, "stax.yield")]
            reduction = any(o.name in REDUCTION_OPS for o in members)
            new = kernel_name(i, members, reduction)
        if new != old:
            op.attributes["name"] = ir.StringAttr.get(new, op.context)
        i += 1


def compile_graph(gm: torch.fx.GraphModule, example_inputs, config: StaxConfig | None = None,
                  *, kind: str = "graph", graph_id: str | None = None) -> CompiledGraph:
    """Compile one ATen FX graph (as aot_autograd hands it over) for the target its
    example inputs pick (`select_target`): stax-cpu or triton.

    Raises (for the backend to fall back on): `stax.importer.UnsupportedGraph`,
    `stax.passes.registry.PassError`, `StaxUnsupportedError`, MLIR / codegen errors.
    """
    from stax.wrapper import _generate, _Replan  # (the wrapper generator imports the driver)
    config = config if config is not None else resolve_config()
    graph_id = graph_id or debug.new_graph_id(kind)
    dump = debug.DumpDir(graph_id)
    dump.fx_graph(gm)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    names = [n.name for n in placeholders]
    example_inputs = list(example_inputs)
    if len(names) != len(example_inputs):
        raise StaxUnsupportedError(f"the graph has {len(names)} placeholders but "
                                   f"{len(example_inputs)} example inputs came")
    _check_inputs(example_inputs, names)
    route, device = select_target(example_inputs, names, gm)
    config = config.for_target(route)
    if route == TRITON_ROUTE:
        off = [k for k in ("stax.triton", "stax.cuda_codegen") if not config[k]]
        if off:
            how = " and ".join(f"'{k}'=False" for k in off)
            raise StaxUnsupportedError(
                f"the inputs are CUDA tensors ({device}) and option {how} turns off the "
                "triton target, the only GPU code generator of stax; the graph runs as "
                "written (PyTorch eager on the GPU)")

    from stax._mlir import ir, new_context
    from stax.importer import import_graph

    ctx = new_context()
    with ctx, ir.Location.unknown():
        imported = import_graph(gm, example_inputs, ctx)
        module = imported.module
        dump.ir("imported", module)
        notes = list(config.notes)
        # fp8 values ride in uint8 carriers where the target cannot hold them: always on
        # the CPU target, on GPUs before sm_89, or when asked (`stax.legalize_fp8`).
        # (only graphs that hold fp8 at all pay for the pass)
        pre = fp8_legalization(module, route, device, config, example_inputs, notes)
        if config.fusion:
            if route == TRITON_ROUTE and config.max_autotune:
                # the Triton matmul may take the whole epilogue, rounding the bias add
                # with the rest once (stax.passes.fuse.is_linear_bias_add)
                from stax.passes.fuse import TRITON_EPILOGUES_ATTR
                with module.context:
                    _main_func(module).attributes[TRITON_EPILOGUES_ATTR] = ir.UnitAttr.get()
            _run_passes(module, pre + fused_pipeline(config, route), dump)
        else:
            _run_passes(module, pre + UNFUSED_PIPELINE, dump)
            _wrap_stray_ops(_main_func(module))
            dump.ir("one-kernel-per-op", module)
        func_op = _main_func(module)
        stray = _wrap_stray_ops(func_op)
        if stray:
            notes.append(f"{stray} op(s) left outside kernels by the passes were compiled "
                         "as one-op kernels")
            dump.ir("wrap-stray-ops", module)
        name_kernels(func_op)
        write_boundary_layouts(func_op, imported, example_inputs, names)
        module.operation.attributes["stax.device"] = ir.StringAttr.get(torch.device(device).type)
        # the channels-last decision of stax-assign-layouts (passes/channels_last.py)
        module.operation.attributes["stax.channels_last"] = ir.StringAttr.get(
            config.channels_last)
        module.operation.attributes["stax.graph_kind"] = ir.StringAttr.get(kind)
        assign_layouts(module, func_op, notes, dump)
        # each kernel's domain, index maps over the layouts just decided, phases, tiling
        # (docs/schedule.md): what the code generators read
        _run_passes(module, ["stax-schedule"], dump)
        guards = _guards_for(example_inputs, names, device)
        while True:
            try:
                _generate(gm, example_inputs, imported, func_op, guards, names, notes,
                          graph_id, dump, dry_run=True, route=route, device=device,
                          config=config)
                break
            except _Replan:
                # a view of a fallback result needed a copy kernel: lay it out too
                assign_layouts(module, func_op, notes, dump, tag="view-copies")
                _run_passes(module, ["stax-schedule"], dump)
        cg = _generate(gm, example_inputs, imported, func_op, guards, names, notes,
                       graph_id, dump, route=route, device=device, config=config)
        if route == CPU_ROUTE:
            from stax import cpu_autotune
            if cpu_autotune.enabled(config):   # the winners are in each kernel's tiling.cpu
                dump.ir("cpu-autotune", module)
        elif config is not None and config.max_autotune:   # the tuned tiling.gpu
            dump.ir("autotune", module)
        # kernels may refer to IR objects: keep their context alive with the callable
        cg._mlir_keepalive = (ctx, module)
        return cg
