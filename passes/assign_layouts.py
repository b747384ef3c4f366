"""Give every value crossing a kernel boundary its strides; copy only where a view cannot be.

Input contract (run after stax-fuse and stax-legalize-fp8): function arguments may carry
`stax.layout` (the strides the graph was specialized for; absent means contiguous), and
function results may carry `stax.layout` (eager's strides, from Dynamo's fake tensors).
Attributes are those of `stax.dialects.layout`.

Guarantees, for every `func.func` of the module:
- Every ranked-tensor argument has `stax.layout` (the given one, else contiguous).
- Every kernel, matmul, constant and collective result has `stax.result_layouts`: a
  result the function returns gets eager's strides when they give every element its own
  location (outputs and the tensors saved for the backward are what aot_autograd expects;
  an expanded output is written dense and expanded by the wrapper); every other result is
  an intermediate: row-major, unless another dense dim order of a kernel result removes
  copies its readers need (`intermediate_layouts.choose_order`: candidates from the
  permutes and reshapes reading it, scored by the bytes model below, a tie keeps
  row-major). A collective keeps the strides it records (`result_layouts`).
- Every top-level view of a value whose layout is known gets `stax.result_layouts` and
  `stax.view_offset` (elements from the start of its root buffer): permute, broadcast
  (stride 0), slice (scaled strides and an offset) and every reshape that
  `layout_algebra.view_strides` can express are views, never copies. A reshape that is
  no view of its source's layout becomes a copy kernel with `stax.copy = "<why>"` and a
  result layout of its own; nothing else is copied. Before that, a transpose read by a
  matmul stays a view the matmul reads (`layout_folds.hoist_matmul_transposes`); after,
  copies of a pointwise kernel's result that nothing else reads are computed by that
  kernel (`fold_copies_into_producers`: it and its copies become one kernel per domain,
  with no `stax.copy`) and copies of argument views of one domain are one kernel
  (`merge_argument_copies`); the layouts are then assigned again.
- Every fallback result has `stax.result_layouts`: the strides torch gives the op on fake
  tensors of the module's device (`stax.device`, default cpu: device rules such as a
  channels-last convolution hold, as in the traced graph) with its operands as the
  wrapper passes them (eager's `operand_layouts`, else
  their own), which the wrapper enforces at run time (contiguous where there is no meta
  kernel). Its views are then laid out like any other (offsets from the result's own).
- Channels-last (`passes/channels_last.py`): where the module's `stax.channels_last`
  ("auto", the default: GPU target and Inductor's rule; "on"; "off") switches a function
  with convolutions, their activation operands are passed NHWC (`operand_layouts`), the
  kernel results between convolutions are written NHWC, an operand laid out otherwise
  gets one copy kernel (`stax.copy = "channels-last input ..."`), and returned values
  still get eager's strides; the function records `stax.channels_last_decision`.
- The module gets `stax.bytes_moved = {copies, kernels, library}`: the bytes the copy
  kernels, the other kernels and the matmuls read and write under these layouts (a read
  counts the distinct elements its strides touch: an expand reads its source once).
- Values are unchanged; running the pass twice changes nothing more. The result verifies.
"""
from __future__ import annotations

import json

from stax._mlir import ir
from stax.dialects.layout import (BYTES_MOVED_ATTR, COPY_ATTR, LAYOUT_ATTR, RESULT_LAYOUTS_ATTR,
                                  VIEW_OFFSET_ATTR, arg_layouts, func_result_layouts,
                                  result_layouts_attr, set_func_layouts)
from stax.dialects.stax_dialect import ATTENTION_OPS, COLLECTIVE, FALLBACK, KERNEL, YIELD
from stax.passes.channels_last import (CHANNELS_LAST_ATTR, DECISION_ATTR, GRAPH_KIND_ATTR,
                                       ChannelsLastPlan, channels_last_strides, decide,
                                       has_convolutions, is_channels_last)
from stax.passes.fuse import verify_pass_ir
from stax.passes.intermediate_layouts import attention_layout, choose_order
from stax.passes.layout_algebra import (VIEW_OPS, contiguous_strides, output_layout,
                                        read_extent, view_layout)
from stax.passes.layout_folds import (batch_transposed_matmuls, fold_copies_into_producers,
                                      hoist_matmul_transposes, merge_argument_copies)

__all__ = ["PASS_NAME", "run", "assign_layouts", "wrap_op_in_kernel", "KERNEL_OPS"]

PASS_NAME = "stax-assign-layouts"
DEVICE_ATTR = "stax.device"  # module attribute: the device type fallback ops are probed on
KERNEL_OPS = (KERNEL, "stax.kernel")
FALLBACK_OPS = (FALLBACK, "stax.fallback")
#: library calls outside kernels whose results get layouts here (bytes: "library")
LIBRARY_OPS = ("stax.matmul",) + ATTENTION_OPS


def wrap_op_in_kernel(op, attributes=None):
    """Replace top-level `op` by a `stax_graph.kernel` holding just a copy of it (with
    `attributes` on the kernel); returns the kernel operation. Used for the copies this
    pass inserts, for `stax.fusion=False` and for stray compute ops (the driver)."""
    op = op.operation
    operands = []
    for v in op.operands:
        if v not in operands:
            operands.append(v)
    with op.context, op.location:
        kernel = ir.Operation.create(
            KERNEL, results=[r.type for r in op.results], operands=operands,
            attributes=dict(attributes or {}), regions=1, ip=ir.InsertionPoint(op))
        block = kernel.regions[0].blocks.append(*[v.type for v in operands])
        arg_of = {v: block.arguments[i] for i, v in enumerate(operands)}
        attrs = {}
        for i in range(len(op.attributes)):
            na = op.attributes[i]  # NamedAttribute
            if na.name not in (RESULT_LAYOUTS_ATTR, VIEW_OFFSET_ATTR):
                attrs[na.name] = na.attr
        inner = ir.Operation.create(
            op.name, results=[r.type for r in op.results],
            operands=[arg_of[v] for v in op.operands], attributes=attrs,
            ip=ir.InsertionPoint(block))
        ir.Operation.create(YIELD, operands=list(inner.results),
                            ip=ir.InsertionPoint(block))
    for old, new in zip(op.results, kernel.results):
        old.replace_all_uses_with(new)
    op.erase()
    return kernel


def _shape(value) -> list[int] | None:
    try:
        return list(ir.RankedTensorType(value.type).shape)
    except ValueError:
        return None


def _itemsize(value) -> int:
    et = ir.RankedTensorType(value.type).element_type
    width = getattr(et, "width", None)
    if width is None:
        for cls in (ir.IntegerType, ir.FloatType):
            try:
                width = cls(et).width
                break
            except (ValueError, TypeError):
                continue
    return max(1, (width or 32) // 8)


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _fallback_layouts(op, known, device: str = "cpu") -> list:
    """The strides torch gives a fallback op's results: its overload run on fake tensors
    of the graph's device (`wrapper_fallback.probe_mode`) with the operands as the wrapper
    passes them (eager's strides, `operand_layouts`,
    else their own layout), as the wrapper predicts them (`wrapper_fallback`), which
    restrides at run time if the op did otherwise. Contiguous where the op cannot be
    run on meta tensors or returns no tensor there."""
    import torch
    from stax.compiled_graph import _resolve_overload
    from stax.wrapper_fallback import _call_to_src, _tensor_type, probe_mode, probe_operand
    attrs = op.attributes
    mode = probe_mode()
    try:
        overload = _resolve_overload(ir.StringAttr(attrs["target"]).value)
        call = json.loads(ir.StringAttr(attrs["call"]).value)
        given = (json.loads(ir.StringAttr(attrs["operand_layouts"]).value)
                 if "operand_layouts" in attrs else [None] * len(op.operands))
        metas = []
        for v, st in zip(op.operands, given):
            if _shape(v) is None:
                metas.append(None)
                continue
            shape, dtype = _tensor_type(v)
            st = st if st is not None else known.get(v, (contiguous_strides(shape),))[0]
            metas.append(probe_operand(mode, shape, tuple(st), dtype, device))
        fp8 = (json.loads(ir.StringAttr(attrs["fp8_views"]).value)
               if "fp8_views" in attrs else {})
        for i, dn in fp8.get("operands", {}).items():
            metas[int(i)] = metas[int(i)].view(getattr(torch, dn))
        srcs = [""] * len(metas)
        args = [_call_to_src(a, srcs, metas)[1] for a in call.get("args", [])]
        kwargs = {k: _call_to_src(a, srcs, metas)[1] for k, a in call.get("kwargs", {}).items()}
        with torch.no_grad(), mode:
            m = overload(*args, **kwargs)
    except Exception:  # noqa: BLE001 - no meta kernel, or an argument it cannot take
        m = None
    predicted = (list(m) if isinstance(m, (tuple, list)) else [m]) if m is not None else []
    positions = (list(ir.DenseI64ArrayAttr(attrs["result_positions"]))
                 if "result_positions" in attrs else None)
    out = []
    for i, r in enumerate(op.results):
        pos = positions[i] if positions is not None else None
        p = predicted[pos] if pos is not None and pos < len(predicted) else (
            predicted[0] if pos is None and len(predicted) == 1 else None)
        out.append(tuple(p.stride()) if isinstance(p, torch.Tensor)
                   else contiguous_strides(_shape(r)))
    return out


class _Assigner:
    """Walks one function's top-level ops in order, tracking (strides, root, offset) of
    each value whose layout is known at compile time."""

    def __init__(self, func_op, bytes_moved: dict, device: str = "cpu",
                 channels_last: bool = False):
        self.func = func_op.operation
        self.block = self.func.regions[0].blocks[0]
        self.bytes = bytes_moved
        self.device = device  # where fallback ops are probed for eager's result strides
        self.known: dict = {}  # value -> (strides, root value, offset in elements)
        self.out_rule: dict = {}  # returned value -> eager's strides (writable)
        # a switched function's activations between convolutions (passes/channels_last.py)
        self.plan = ChannelsLastPlan(self.func) if channels_last else None
        self.cl_copies: dict = {}  # value -> its channels-last copy (one per value)
        self.returned: set = set()  # never reordered (outputs, saved tensors)

    def run(self) -> None:
        ops = list(self.block.operations)
        ret = ops[-1].operation
        layouts = arg_layouts(self.func)
        new_args = []
        for arg, st in zip(self.block.arguments, layouts):
            shape = _shape(arg)
            if shape is None:
                new_args.append(None)
                continue
            st = tuple(st) if st is not None else contiguous_strides(shape)
            self.known[arg] = (st, arg, 0)
            new_args.append(st)
        set_func_layouts(self.func, "arg_attrs", new_args)
        self.returned = set(ret.operands)
        for v, eager in zip(ret.operands, func_result_layouts(self.func)):
            shape = _shape(v)
            lay = output_layout(shape, eager) if shape is not None and eager else None
            if lay is not None and v not in self.out_rule:
                self.out_rule[v] = lay
        for op in ops:
            self.visit(op.operation)
        if self.plan is not None:
            self.count_output_copies(ret)

    def buffer_layout(self, r, op=None):
        if r in self.out_rule:
            return self.out_rule[r]
        if self.plan is not None and op is not None and op.name in KERNEL_OPS:
            operands = [(_shape(v), self.known[v][0]) for v in op.operands
                        if v in self.known and _shape(v) is not None]
            lay = self.plan.kernel_result_layout(r, operands)
            if lay is not None:
                return lay
        if op is not None and op.name in ATTENTION_OPS:
            return attention_layout(_shape(r), self.known[op.operands[0]][0])
        if op is not None:  # an intermediate: the dim order its readers copy least from
            lay = choose_order(r, self.returned)
            if lay is not None:
                return lay
        return contiguous_strides(_shape(r))

    def switch_conv(self, op) -> None:
        """Hand a convolution its activations channels-last: one copy kernel for an
        operand laid out otherwise (a graph input, a returned value, a view), and
        `operand_layouts` saying NHWC (what the wrapper passes the library)."""
        conv = self.plan.conv(op)
        given = (json.loads(ir.StringAttr(op.attributes["operand_layouts"]).value)
                 if "operand_layouts" in op.attributes else [None] * len(op.operands))
        for i in conv.activations:
            v = op.operands[i]
            if v not in self.known:  # a view of a fallback result: laid out at run time
                continue
            shape = _shape(v)
            if not is_channels_last(shape, self.known[v][0]):
                if v in self.cl_copies:
                    op.operands[i] = self.cl_copies[v]
                else:
                    self.cl_copies[v] = self.channels_last_copy(op, i)
            given[i] = list(channels_last_strides(shape))
        op.attributes["operand_layouts"] = ir.StringAttr.get(json.dumps(given))

    def channels_last_copy(self, conv_op, i):
        """A copy kernel of the convolution's operand `i`, which the convolution then
        reads, laid out channels-last (its reader is that activation operand)."""
        v = conv_op.operands[i]
        target = ir.StringAttr(conv_op.attributes["target"]).value
        why = (f"channels-last input of {target}: {_shape(v)} with strides "
               f"{list(self.known[v][0])}")
        reshape = ir.Operation.create("stax.reshape", results=[v.type], operands=[v],
                                      loc=conv_op.location, ip=ir.InsertionPoint(conv_op))
        kernel = wrap_op_in_kernel(reshape, {COPY_ATTR: ir.StringAttr.get(why)})
        conv_op.operands[i] = kernel.results[0]
        self.visit(kernel)
        return kernel.results[0]

    def count_output_copies(self, ret) -> None:
        """A convolution result the function returns is copied back to eager's strides
        by the wrapper (`stax.aliasing.emit_outputs`): count that copy."""
        for v, eager in self.out_rule.items():
            owner = v.owner
            if not isinstance(owner, ir.Block) and owner.name in FALLBACK_OPS \
                    and v in self.known and tuple(self.known[v][0]) != tuple(eager):
                self.bytes["copies"] += 2 * _numel(_shape(v)) * _itemsize(v)

    def read_bytes(self, v) -> int:
        shape = _shape(v)
        if shape is None:
            return 0
        st = self.known.get(v, (contiguous_strides(shape),))[0]
        return read_extent(shape, st) * _itemsize(v)

    def define_buffers(self, op, layouts) -> None:
        op.attributes[RESULT_LAYOUTS_ATTR] = result_layouts_attr(layouts)
        for r, st in zip(op.results, layouts):
            self.known[r] = (tuple(st), r, 0)

    def written(self, op) -> int:
        return sum(_numel(_shape(r)) * _itemsize(r) for r in op.results)

    def visit(self, op) -> None:
        name = op.name
        if name in KERNEL_OPS or name in LIBRARY_OPS:
            self.define_buffers(op, [self.buffer_layout(r, op) for r in op.results])
            moved = sum(self.read_bytes(v) for v in op.operands) + self.written(op)
            kind = ("copies" if COPY_ATTR in op.attributes else "kernels") \
                if name in KERNEL_OPS else "library"
            self.bytes[kind] += moved
        elif name == "stax.constant":
            self.define_buffers(op, [contiguous_strides(_shape(r)) for r in op.results])
        elif name in FALLBACK_OPS and all(_shape(r) is not None for r in op.results):
            if self.plan is not None and self.plan.conv(op) is not None:
                self.switch_conv(op)
            self.define_buffers(op, _fallback_layouts(op, self.known, self.device))
        elif name == COLLECTIVE and "result_layouts" in op.attributes:
            recorded = json.loads(ir.StringAttr(op.attributes["result_layouts"]).value)
            self.define_buffers(op, [tuple(st) for st in recorded])
        elif name in VIEW_OPS:
            self.visit_view(op)

    def visit_view(self, op) -> None:
        src = op.operands[0]
        r = op.results[0]
        if src not in self.known:  # a fallback result's view: laid out at run time
            return
        st, root, off = self.known[src]
        shape = _shape(r)
        layout = view_layout(op, _shape(src), st, shape)
        if layout is None:
            why = (f"reshape of a non-viewable layout: {_shape(src)} with strides "
                   f"{list(st)} has no view of shape {shape}")
            kernel = wrap_op_in_kernel(op, {COPY_ATTR: ir.StringAttr.get(why)})
            self.visit(kernel)
            return
        vst, voff = layout
        op.attributes[RESULT_LAYOUTS_ATTR] = result_layouts_attr([vst])
        op.attributes[VIEW_OFFSET_ATTR] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(64), off + voff)
        self.known[r] = (tuple(vst), root, off + voff)


def assign_layouts(func_op, bytes_moved: dict, device: str = "cpu",
                   channels_last: str = "auto", graph_kind: str | None = None) -> None:
    """Assign the layouts of one function in place, adding its bytes to `bytes_moved`.
    A transpose feeding a matmul is read by it (`layout_folds`); the copies left are
    then folded into their producer or merged, and the layouts assigned again.
    `channels_last` ("auto" / "on" / "off") and `graph_kind` decide whether the
    activations of a conv graph go channels-last (`passes/channels_last.py`)."""
    func = func_op.operation
    block = func.regions[0].blocks[0]
    switch, why = decide(func, channels_last, device, graph_kind)
    if has_convolutions(func):  # (other functions print as before)
        func.attributes[DECISION_ATTR] = ir.StringAttr.get(
            ("switched: " if switch else "kept: ") + why)
    hoist_matmul_transposes(block)
    if device == "cpu":   # (the GPU's matmul routes are not measured with it)
        batch_transposed_matmuls(block)
    moved = dict.fromkeys(bytes_moved, 0)
    _Assigner(func_op, moved, device, switch).run()
    folded = fold_copies_into_producers(block)
    if merge_argument_copies(block) or folded:
        moved = dict.fromkeys(bytes_moved, 0)
        _Assigner(func_op, moved, device, switch).run()
    for k, v in moved.items():
        bytes_moved[k] += v


def _module_str(module, name: str, default):
    attrs = module.operation.attributes
    return ir.StringAttr(attrs[name]).value if name in attrs else default


def _module_device(module) -> str:
    """The device type the module is compiled for: its `stax.device` attribute (the
    driver sets it), else "cpu" (stax-opt on a hand-written module)."""
    return _module_str(module, DEVICE_ATTR, "cpu")


def run(module: "ir.Module") -> None:
    """Run stax-assign-layouts on every func.func of `module` (in place)."""
    with module.context, ir.Location.unknown():
        verify_pass_ir(module, "input", PASS_NAME)
        moved = {"copies": 0, "kernels": 0, "library": 0}
        device = _module_device(module)
        # the option `stax.channels_last` and the graph's kind, set by the driver
        channels_last = _module_str(module, CHANNELS_LAST_ATTR, "auto")
        graph_kind = _module_str(module, GRAPH_KIND_ATTR, None)
        for op in module.body.operations:
            if op.operation.name == "func.func":
                assign_layouts(op.operation, moved, device, channels_last, graph_kind)
        i64 = ir.IntegerType.get_signless(64)
        module.operation.attributes[BYTES_MOVED_ATTR] = ir.DictAttr.get(
            {k: ir.IntegerAttr.get(i64, v) for k, v in moved.items()})
        verify_pass_ir(module, "output", PASS_NAME)


LAYOUT_ATTRS = (LAYOUT_ATTR, RESULT_LAYOUTS_ATTR, VIEW_OFFSET_ATTR, COPY_ATTR)
