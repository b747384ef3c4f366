"""The layout attributes of stax (set by `stax-assign-layouts`) and their verifier.

A layout is the strides (in elements) of a tensor value in memory, plus, for a view, its
storage offset from the buffer it views. They are builtin attributes under fixed names,
not a tensor encoding: the encoding slot holds `#stax.sizes` for symbolic dims and the
elementwise verifiers compare whole types, so a layout in the type would make two equal
values of different layouts unequal types. Builtin `array<i64: ...>` attributes print,
parse and compare as MLIR's own, need no IRDL, and are read without a parser.

- `stax.layout = array<i64: s0, s1, ...>` on a function argument: the strides the graph
  was specialized for (absent: contiguous); on a function result: eager's strides, the
  layout the caller must see (what Dynamo's fake tensors record).
- `stax.result_layouts = [array<i64: ...>, ...]` on an op: one strides array per result.
- `stax.view_offset = k : i64` on a top-level view: its storage offset, in elements, from
  the start of the buffer it views (a function argument, a kernel, matmul, fallback,
  collective or constant result: the view's root).
- `stax.copy = "<why>"` on a kernel: a one-op copy kernel the pass inserted because a
  view is not expressible on its source's layout.
- `stax.bytes_moved = {kernels = ..., library = ..., copies = ...}` on the module: the
  bytes the chosen layouts make the graph read and write.
- `stax.channels_last = "auto" | "on" | "off"` on the module (the option, set by the
  driver) and `stax.channels_last_decision = "switched: ..." | "kept: ..."` on a function
  with a convolution: whether its activations went channels-last, and why.

`verify_layouts(module)` checks every such attribute: the right attribute kind, one
array per result, each of the value's rank, no negative stride, and no overlap where a
buffer is written (kernel and matmul results, function results that must be written).
Messages name the op (or function) and the result or argument, located like MLIR's.
"""
from __future__ import annotations

from stax._mlir import ir
from stax.dialects.structural import StaxVerificationError, _loc_prefix
from stax.runtime.strides import non_overlapping



__all__ = ["LAYOUT_ATTR", "RESULT_LAYOUTS_ATTR", "VIEW_OFFSET_ATTR", "COPY_ATTR", "TORCH_COPY_ATTR",
           "BYTES_MOVED_ATTR", "CHANNELS_LAST_ATTR", "CHANNELS_LAST_MODES", "DECISION_ATTR", "verify_layouts", "strides_attr", "result_layouts_attr",
           "read_strides", "result_layouts", "arg_layouts", "func_result_layouts",
           "set_func_layouts", "value_layout"]

LAYOUT_ATTR = "stax.layout"
RESULT_LAYOUTS_ATTR = "stax.result_layouts"
VIEW_OFFSET_ATTR = "stax.view_offset"
COPY_ATTR = "stax.copy"
#: unit attribute on a top-level stax.reshape that no view gives and that no kernel
#: computes: torch's reshape copies it at run time (stax-fold-view-copies leaves these in
#: graphs compiled for every size; their report counts them)
TORCH_COPY_ATTR = "stax.torch_copy"
BYTES_MOVED_ATTR = "stax.bytes_moved"
#: module: the `stax.channels_last` option ("auto" | "on" | "off"); function: what
#: stax-assign-layouts decided for its convolutions ("switched: why" | "kept: why")
CHANNELS_LAST_ATTR = "stax.channels_last"
CHANNELS_LAST_MODES = ("auto", "on", "off")
DECISION_ATTR = "stax.channels_last_decision"

# ops whose results are buffers a kernel or a library call writes: no two elements may
# share a memory location
_WRITTEN = ("stax_graph.kernel", "stax.kernel", "stax.matmul")


def strides_attr(strides) -> "ir.Attribute":
    return ir.DenseI64ArrayAttr.get([int(s) for s in strides])


def result_layouts_attr(layouts) -> "ir.Attribute":
    return ir.ArrayAttr.get([strides_attr(s) for s in layouts])


def read_strides(attr) -> tuple[int, ...] | None:
    """The strides of a `array<i64: ...>` attribute, or None when it is not one."""
    try:
        return tuple(int(s) for s in ir.DenseI64ArrayAttr(attr))
    except (ValueError, TypeError):
        return None


def result_layouts(op) -> list[tuple[int, ...]] | None:
    """The `stax.result_layouts` of an op (one strides tuple per result), or None."""
    op = op.operation if hasattr(op, "operation") else op
    if RESULT_LAYOUTS_ATTR not in op.attributes:
        return None
    out = []
    for a in ir.ArrayAttr(op.attributes[RESULT_LAYOUTS_ATTR]):
        st = read_strides(a)
        if st is None:
            return None
        out.append(st)
    return out


def _dict_list(func_op, key: str) -> list[dict]:
    """The per-argument (`arg_attrs`) or per-result (`res_attrs`) dictionaries of a
    func.func, as {name: attr} dicts (empty where there are none)."""
    n = len(func_op.regions[0].blocks[0].arguments) if key == "arg_attrs" else len(
        ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value).results)
    out: list[dict] = [{} for _ in range(n)]
    if key in func_op.attributes:
        for i, d in enumerate(ir.ArrayAttr(func_op.attributes[key])):
            d = ir.DictAttr(d)
            out[i] = {d[j].name: d[j].attr for j in range(len(d))}
    return out


def _layouts_of(func_op, key: str) -> list:
    return [read_strides(d[LAYOUT_ATTR]) if LAYOUT_ATTR in d else None
            for d in _dict_list(func_op, key)]


def arg_layouts(func_op) -> list:
    """Per function argument: its `stax.layout` strides, or None."""
    return _layouts_of(func_op.operation, "arg_attrs")


def value_layout(value):
    """The strides stax-assign-layouts gave `value`: a function argument's `stax.layout`,
    an op result's `stax.result_layouts` entry; None when it has none (an argument of a
    block that is not a function's, or no layout recorded)."""
    if isinstance(value, ir.BlockArgument):
        owner = value.owner.owner.operation  # the block's parent op
        if owner.name != "func.func":
            return None
        layouts = arg_layouts(owner)
        return layouts[value.arg_number] if value.arg_number < len(layouts) else None
    layouts = result_layouts(value.owner)
    return layouts[value.result_number] if layouts else None


def func_result_layouts(func_op) -> list:
    """Per function result: its `stax.layout` strides (eager's), or None."""
    return _layouts_of(func_op.operation, "res_attrs")


def set_func_layouts(func_op, key: str, layouts) -> None:
    """Set `stax.layout` on each argument (`arg_attrs`) or result (`res_attrs`) whose
    entry of `layouts` is not None, keeping the other attributes there."""
    func_op = func_op.operation
    dicts = _dict_list(func_op, key)
    for d, st in zip(dicts, layouts):
        if st is not None:
            d[LAYOUT_ATTR] = strides_attr(st)
    func_op.attributes[key] = ir.ArrayAttr.get(
        [ir.DictAttr.get(d, context=func_op.context) for d in dicts])


def _shape(value_type) -> list[int] | None:
    try:
        return list(ir.RankedTensorType(value_type).shape)
    except ValueError:
        return None


def _check(strides, shape, what: str, written: bool) -> str | None:
    """The problem with `strides` for a value of `shape`, or None."""
    if strides is None:
        return f"{what} is not an array<i64: ...> of strides"
    if shape is None:
        return f"{what} is set on a value that is not a ranked tensor"
    if len(strides) != len(shape):
        return (f"{what} has {len(strides)} strides {list(strides)} for a value of rank "
                f"{len(shape)} (shape {shape})")
    neg = [i for i, s in enumerate(strides) if s < 0]
    if neg:
        return f"{what} has a negative stride {strides[neg[0]]} at dim {neg[0]}"
    if written and not non_overlapping(shape, strides):
        return (f"{what} strides {list(strides)} overlap for shape {shape}: a written "
                "buffer needs a distinct location per element")
    return None


def _string(attr) -> str | None:
    try:
        return ir.StringAttr(attr).value
    except ValueError:
        return None


def _verify_func(func_op, errors: list) -> None:
    where = f"{_loc_prefix(func_op)}: error: 'func.func' op"
    if DECISION_ATTR in func_op.attributes:
        text = _string(func_op.attributes[DECISION_ATTR])
        if text is None or not text.startswith(("switched: ", "kept: ")):
            errors.append(f"{where} '{DECISION_ATTR}' must be a string \"switched: <why>\" or "
                          f"\"kept: <why>\", got {func_op.attributes[DECISION_ATTR]}")
    for key, kind in (("arg_attrs", "argument"), ("res_attrs", "result")):
        if key not in func_op.attributes:
            continue
        block_args = func_op.regions[0].blocks[0].arguments
        types = ([a.type for a in block_args] if kind == "argument" else
                 list(ir.FunctionType(
                     ir.TypeAttr(func_op.attributes["function_type"]).value).results))
        for i, d in enumerate(_dict_list(func_op, key)):
            if LAYOUT_ATTR not in d:
                continue
            # a function result the graph returns is eager's layout; an expanded one
            # (stride 0) is legal there, the kernel then writes a dense buffer
            msg = _check(read_strides(d[LAYOUT_ATTR]), _shape(types[i]),
                         f"{kind} {i} '{LAYOUT_ATTR}'", written=False)
            if msg:
                errors.append(f"{where} {msg}")


def _verify_op(op, errors: list) -> None:
    attrs = op.attributes
    where = f"{_loc_prefix(op)}: error: '{op.name}' op"
    if op.name == "builtin.module" and CHANNELS_LAST_ATTR in attrs \
            and _string(attrs[CHANNELS_LAST_ATTR]) not in CHANNELS_LAST_MODES:
        errors.append(f"{where} '{CHANNELS_LAST_ATTR}' must be one of "
                      f"{', '.join(repr(m) for m in CHANNELS_LAST_MODES)} (the option "
                      f"stax.channels_last), got {attrs[CHANNELS_LAST_ATTR]}")
    if RESULT_LAYOUTS_ATTR in attrs:
        try:
            entries = list(ir.ArrayAttr(attrs[RESULT_LAYOUTS_ATTR]))
        except ValueError:
            errors.append(f"{where} '{RESULT_LAYOUTS_ATTR}' is not an array of strides")
            entries = None
        if entries is not None and len(entries) != len(op.results):
            errors.append(f"{where} '{RESULT_LAYOUTS_ATTR}' has {len(entries)} layouts "
                          f"for {len(op.results)} results")
        elif entries is not None:
            for i, (a, r) in enumerate(zip(entries, op.results)):
                msg = _check(read_strides(a), _shape(r.type),
                             f"result {i} '{RESULT_LAYOUTS_ATTR}'", op.name in _WRITTEN)
                if msg:
                    errors.append(f"{where} {msg}")
    if VIEW_OFFSET_ATTR in attrs:
        try:
            off = ir.IntegerAttr(attrs[VIEW_OFFSET_ATTR]).value
        except ValueError:
            off = None
        if off is None or off < 0:
            errors.append(f"{where} '{VIEW_OFFSET_ATTR}' must be a non-negative integer, "
                          f"got {attrs[VIEW_OFFSET_ATTR]}")
        if RESULT_LAYOUTS_ATTR not in attrs:
            errors.append(f"{where} '{VIEW_OFFSET_ATTR}' without '{RESULT_LAYOUTS_ATTR}'")
    if COPY_ATTR in attrs:
        if op.name not in ("stax_graph.kernel", "stax.kernel"):
            errors.append(f"{where} '{COPY_ATTR}' is only valid on a kernel")
        elif not isinstance(attrs[COPY_ATTR], ir.StringAttr) and \
                not ir.StringAttr.isinstance(attrs[COPY_ATTR]):
            errors.append(f"{where} '{COPY_ATTR}' must be a string (why the copy is needed)")
    if TORCH_COPY_ATTR in attrs and (op.name != "stax.reshape" or
                                     str(attrs[TORCH_COPY_ATTR]) != "unit"):
        errors.append(f"{where} '{TORCH_COPY_ATTR}' is a unit attribute of a stax.reshape")


def verify_layouts(module) -> None:
    """Check every layout attribute of `module` (see the module docstring); raises
    StaxVerificationError with one located line per problem."""
    errors: list[str] = []

    def visit(op):
        if op.name == "func.func":
            _verify_func(op, errors)
        else:
            _verify_op(op, errors)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if errors:
        raise StaxVerificationError("\n".join(errors))
