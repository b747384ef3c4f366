"""The graph walk: `import_graph` turns an ATen FX graph into one `func.func @main` of
stax ops (inputs and constants as arguments, each node through its handler in
`HANDLERS` or as stax_graph.fallback, the outputs' specs), located at each FX node and
the user's line, and verified."""
from __future__ import annotations

import operator
import os
import re

import torch
import torch.fx

from stax._mlir import func, ir
from stax.dialects.collective import is_collective_target
from stax.dialects.stax_dialect import StaxVerificationError, verify_module
from stax.importer import symbolic as isym
from stax.importer import equal_sizes, size_asserts
from stax.importer.builder import _Builder
from stax.importer.common import (_DTYPE_NAMES, _FP8_DTYPES, _bind, _check_static,
                                  _read_positions, _val, _vdtype, _vshape)
from stax.importer.specs import (ImportedGraph, ImporterError, InputSpec, OutputSpec,
                                 UnsupportedGraph, _Fallback)
from stax.importer.table import HANDLERS
from stax.runtime.script_objects import object_class_name


# ----------------------------------------------------------------------------- locations

_FRAME_RE = re.compile(r'File "([^"]+)", line (\d+)')
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def _user_frame(stack_trace: str | None):
    """(file, line) of the last frame outside torch itself, else the last frame."""
    if not stack_trace:
        return None
    frames = _FRAME_RE.findall(stack_trace)
    if not frames:
        return None
    for f, line in reversed(frames):
        if not os.path.abspath(f).startswith(_TORCH_DIR):
            return f, int(line)
    f, line = frames[-1]
    return f, int(line)


def _node_loc(node: torch.fx.Node) -> ir.Location:
    fr = _user_frame(node.meta.get("stack_trace"))
    if fr is None:
        return ir.Location.name(node.name)
    return ir.Location.name(node.name, childLoc=ir.Location.file(fr[0], fr[1], 0))


# ----------------------------------------------------------------------------- the graph walk

def _get_attr(gm, target: str):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _dense_attr(t: torch.Tensor, ty: ir.RankedTensorType):
    if t.dtype == torch.bfloat16:
        return None
    import numpy as np
    from stax.real_tensors import real_tensors
    with real_tensors():   # a real constant, read inside the backend's modes
        arr = np.ascontiguousarray(t.detach().cpu().numpy())
    if t.dtype == torch.bool:
        arr = arr.astype(np.bool_)
    try:
        return ir.DenseElementsAttr.get(arr, type=ty.element_type, shape=list(t.shape))
    except Exception:  # noqa: BLE001 - dtype the bindings cannot take: pass it as an argument
        return None


def import_graph(gm: torch.fx.GraphModule, example_inputs, ctx: ir.Context, *,
                 symbolic: bool = False) -> ImportedGraph:
    """Import an ATen FX graph into a new module with one `func.func @main` of stax ops.
    `symbolic=True` (tests and tools only, never the compile path) imports symbolic
    shapes as symbolic IR: `?` dims with #stax.sizes, SymInt inputs as `stax.symbol`
    index arguments (importer_symbolic); what it cannot say raises UnsupportedGraph."""
    if not symbolic:
        return _import_graph(gm, example_inputs, ctx, symbolic=False)
    with equal_sizes.recording() as used:
        imported = _import_graph(gm, example_inputs, ctx, symbolic=True)
    for guard in used:   # the graph's dims rely on them: checked at every call too
        if all(a.expr != guard for a in imported.size_asserts):
            imported.size_asserts.append(size_asserts.SizeAssert(
                guard, f"the sizes {guard.args[0]} and {guard.args[1]}, which Dynamo "
                "guarded equal (a chunk or split of a symbolic dim), differ", kind="equal"))
    return imported


def _import_graph(gm: torch.fx.GraphModule, example_inputs, ctx: ir.Context, *,
                  symbolic: bool) -> ImportedGraph:
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    example_inputs = list(example_inputs) if example_inputs is not None else []

    inputs: list[InputSpec] = []
    syms: dict[int, str] = {}  # SymInt inputs (symbolic mode): index -> symbol
    for i, n in enumerate(placeholders):
        val = n.meta.get("val")
        if val is None and i < len(example_inputs):
            val = example_inputs[i]
        if symbolic and isinstance(val, torch.SymInt):
            syms[i] = isym.symbol_of(n)
            inputs.append(InputSpec(n.name, [], torch.int64, [], "cpu", kind="symbol"))
            continue
        if object_class_name(val) is not None:
            inputs.append(InputSpec(n.name, [], object_class_name(val), [], "cpu",
                                    kind="object"))
            continue
        if not isinstance(val, torch.Tensor):
            raise UnsupportedGraph(f"input {n.name} is a {type(val).__name__} ({val!r}), not a "
                                   "tensor; stax imports tensor inputs, SymInts (symbolic "
                                   "mode) and script objects only")
        if symbolic:
            isym.check_tensor(f"input {n.name}", val, _DTYPE_NAMES)
        else:
            _check_static(f"input {n.name}", val)
        if val.layout != torch.strided:
            raise UnsupportedGraph(f"input {n.name} has layout {val.layout}")
        inputs.append(InputSpec(n.name, isym.dims(val.shape), val.dtype,
                                isym.strides(val.stride()), str(val.device)))

    constants: dict[str, torch.Tensor] = {}
    const_args: list[tuple[torch.fx.Node, torch.Tensor]] = []
    const_inline: list[tuple[torch.fx.Node, torch.Tensor]] = []
    for n in graph.nodes:
        if n.op != "get_attr":
            continue
        t = _get_attr(gm, n.target)
        if not isinstance(t, torch.Tensor):
            continue  # e.g. a submodule of a higher-order op: caught when used
        _check_static(f"constant {n.target}", t)
        constants[n.target] = t
        small = (t.numel() <= 64 and t.dtype != torch.bfloat16 and t.dtype not in _FP8_DTYPES
                 and not t.dtype.is_complex)
        (const_inline if small else const_args).append((n, t))

    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        b = _Builder(gm, symbolic)
        for i, n in enumerate(placeholders):
            b.storage.add_input(i, n.meta.get("val", inputs[i]), n)
        arg_types = [ir.IndexType.get() if i in syms else ir.NoneType.get()
                     if s.kind == "object" else b.tt(s.shape, s.dtype)
                     for i, s in enumerate(inputs)]
        for n, t in const_args:
            arg_types.append(b.tt(t.shape, t.dtype))
            inputs.append(InputSpec(n.target, list(t.shape), t.dtype, list(t.stride()),
                                    str(t.device), kind="constant"))
        with ir.InsertionPoint(module.body):
            f = func.FuncOp("main", ir.FunctionType.get(arg_types, []))
            block = f.add_entry_block()
        if syms:
            f.arg_attrs = isym.symbol_arg_attrs(dict(syms, _n=len(arg_types)))
        args = list(block.arguments)
        input_index: dict[torch.fx.Node, int] = {}
        for i, n in enumerate(placeholders):
            b.values[n] = syms.get(i, args[i])
            input_index[n] = i
        for j, (n, _) in enumerate(const_args):
            b.values[n] = args[len(placeholders) + j]
            input_index[n] = len(placeholders) + j

        outputs: list[OutputSpec] = []
        results: list[ir.Value] = []
        with ir.InsertionPoint(block):
            for n, t in const_inline:
                b.loc = _node_loc(n)
                ty = b.tt(t.shape, t.dtype)
                attr = _dense_attr(t, ty)
                if attr is None:
                    raise ImporterError(f"cannot build a dense attribute for constant {n.target}")
                b.values[n] = b.emit("constant", [], [ty], {"value": attr})

            for node in graph.nodes:
                if node.op in ("placeholder", "get_attr"):
                    continue
                b.loc = _node_loc(node)
                if node.op == "output":
                    outs = node.args[0]
                    if not isinstance(outs, (tuple, list)):
                        outs = [outs]
                    for o in outs:
                        outputs.append(_output_spec(b, node, o, input_index, results))
                    break
                if node.op != "call_function":
                    raise UnsupportedGraph(f"node {node.name} is a {node.op}; stax imports "
                                           "flat ATen graphs only")
                b.storage.add(node)
                b.values[node] = _import_node(b, node)

            func.ReturnOp(results, loc=ir.Location.unknown())
        f.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(arg_types, [r.type for r in results]))

        try:
            verify_module(module)
        except (ir.MLIRError, StaxVerificationError) as e:
            raise ImporterError(f"stax importer produced invalid IR (bug): {e}") from e

    return ImportedGraph(module=module, func_name="main", inputs=inputs, outputs=outputs,
                         fallback_ops=b.fallback_ops, collectives=b.collectives,
                         constants=constants, size_asserts=b.size_asserts)


def _output_spec(b: _Builder, out_node, o, input_index, results) -> OutputSpec:
    if o is None:
        return OutputSpec("none")
    if not isinstance(o, torch.fx.Node):
        raise UnsupportedGraph(f"graph output {o!r} is not a tensor")
    val = o.meta.get("val")
    if o in input_index:
        t = val if isinstance(val, torch.Tensor) else None  # or a SymInt input (symbolic)
        return OutputSpec("input", input_index[o],
                          list(t.shape) if t is not None else None,
                          t.dtype if t is not None else None,
                          list(t.stride()) if t is not None else None)
    if not isinstance(val, torch.Tensor):
        raise UnsupportedGraph(f"graph output {o.name} is a {type(val).__name__}, not a tensor")
    if not b.symbolic:
        _check_static(f"output {o.name}", val)
    v = b.values.get(o)
    if not isinstance(v, ir.Value):
        raise ImporterError(f"output {o.name} has no tensor value (got {v!r})")
    if _vdtype(v) != val.dtype or _vshape(v) != isym.dims(val.shape):
        raise ImporterError(f"output {o.name} ({o.target}) was imported as {v.type} but eager "
                            f"gives {tuple(val.shape)} {val.dtype}")
    results.append(v)
    return OutputSpec("tensor", len(results) - 1, isym.dims(val.shape), val.dtype,
                      isym.strides(val.stride()), isym.dim(val.storage_offset()),
                      b.storage.output_alias(val),
                      isym.exact_strides(val.stride()) if b.symbolic else None)


def _import_node(b: _Builder, node: torch.fx.Node):
    target = node.target
    if target is operator.getitem:
        src, idx = node.args
        vals = b.values[src]
        if not isinstance(vals, (tuple, list)):
            raise ImporterError(f"node {node.name}: getitem on {src.name}, which has one result")
        return vals[idx]
    if target in size_asserts.RUNTIME_ASSERTS:
        return size_asserts.import_assert(b, node)   # a check on sizes: no IR
    if size_asserts.only_asserted(node):
        return size_asserts.predicate(node)   # sizes only assertions read: no IR
    if b.symbolic and (r := isym.pre_node(b, node, _DTYPE_NAMES)) is not isym.IMPORT:
        return r  # a size (sym_size, operator.mul): its dim, no IR
    if not isinstance(target, torch._ops.OpOverload):
        raise UnsupportedGraph(f"node {node.name} calls {target}, which is not an ATen op "
                               "overload")
    if target._schema.is_mutable and not (b.symbolic and target in isym.INPLACE_WRITE_OPS):
        # (the one exception: a cache write stax.inplace_windows made, into the input aot
        # copies back, a library op)
        raise UnsupportedGraph(f"node {node.name} calls the mutating op {target}")
    val = node.meta.get("val")
    multi = isinstance(val, (tuple, list))
    read = _read_positions(node)
    for i, t in enumerate(val if multi else [val]):
        if isinstance(t, torch.Tensor):
            b.symbolic or _check_static(f"node {node.name} ({target})", t)
        elif t is not None and not (multi and i not in read):
            # an unread non-tensor result (the RNG ints of CUDA's fused attention) is
            # dropped by the fallback below; a read one cannot be carried
            raise UnsupportedGraph(f"node {node.name} ({target}) produces a "
                                   f"{type(t).__name__}, not a tensor")
    if is_collective_target(str(target)):
        return b.collective(node)
    if str(target).startswith(("_c10d_functional.", "c10d.")):
        # an async result must not be copied before its wait: no fallback for these
        raise UnsupportedGraph(f"node {node.name} calls the collective {target}, which stax "
                               "does not support (supported: all_reduce, "
                               "all_gather_into_tensor, reduce_scatter_tensor, "
                               "all_to_all_single, broadcast, wait_tensor)")
    if _touches_complex(node):
        return b.fallback(node)  # no stax op computes on complex numbers: PyTorch runs it
    handler = HANDLERS.get(target)
    why = None
    if handler is not None:
        b.node = node   # the node being imported, for errors raised in the builder
        try:
            r = handler(b, node, _bind(target, node.args, node.kwargs))
        except _Fallback as e:
            r, why = None, str(e)
        except (UnsupportedGraph, ImporterError):
            raise
        except Exception as e:  # noqa: BLE001 - name the node in the error
            raise ImporterError(f"importing node {node.name} ({target}) failed: "
                                f"{type(e).__name__}: {e}") from e
        if r is not None:
            _check_result(node, r)
            return r
    if b.symbolic and target not in isym.SYMBOLIC_LIBRARY_OPS:
        raise isym.no_fallback(node, why)
    return b.fallback(node)


def _touches_complex(node) -> bool:
    """Does the node read or produce a complex tensor?"""
    def cx(v):
        return isinstance(v, torch.Tensor) and v.dtype.is_complex
    val = node.meta.get("val")
    if any(cx(t) for t in (val if isinstance(val, (tuple, list)) else [val])):
        return True
    found = []
    torch.fx.map_arg((node.args, node.kwargs), lambda n: found.append(cx(_val(n))) or n)
    return any(found)


def _check_result(node, r):
    val = node.meta.get("val")
    vals = list(val) if isinstance(val, (tuple, list)) else [val]
    rs = list(r) if isinstance(r, (tuple, list)) else [r]
    if len(vals) != len(rs):
        raise ImporterError(f"node {node.name} ({node.target}): handler gave {len(rs)} results, "
                            f"eager gives {len(vals)}")
    for i, (t, v) in enumerate(zip(vals, rs)):
        if t is None:
            continue
        got, want = _vshape(v), isym.dims(t.shape)
        if got != want and _vdtype(v) == t.dtype and len(got) == len(want) and \
                all(equal_sizes.same(g, w) for g, w in zip(got, want)):
            # `2*(s//2)` where eager writes `s` (F.glu's backward): equal under Dynamo's
            # guards, but the IR's types cannot show it to the ops that read the value
            raise UnsupportedGraph(
                f"node {node.name} ({node.target}): result {i} has the sizes "
                f"{isym.symbolic.fmt_dims(got)}, equal to eager's "
                f"{isym.symbolic.fmt_dims(want)} only under Dynamo's guards "
                f"({'; '.join(str(g) for g in equal_sizes.equality_guards(_shape_env(t)))}"
                "), which the IR's types "
                "cannot carry")
        if got != want or _vdtype(v) != t.dtype:
            raise ImporterError(f"node {node.name} ({node.target}): result {i} imported as "
                                f"{v.type} but eager gives {tuple(t.shape)} {t.dtype}")


def _shape_env(t):
    """The shape env a fake tensor's symbolic sizes come from (None: all static)."""
    return next((d.node.shape_env for d in t.shape if isinstance(d, torch.SymInt)), None)
