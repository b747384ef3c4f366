"""Record on every kernel its schedule: domain, index maps, offsets, phases and tiling.

Runs after `stax-fuse`. For every `stax_graph.kernel` of every `func.func` it writes the
`stax.schedule` attribute (`stax.dialects.schedule`, docs/schedule.md) computed by
`stax.passes.kernel_schedule.analyze`. Guarantees:

- Every kernel gets a schedule that verifies (`schedule_errors`): the domain with its
  parallel and reduced dims; one read per (input, view path) with its affine index map
  over the domain dims and its linear offset map, simplified (a contiguous reshape's
  offset is the plain linear index); the map and offset of every result; the reduction
  phases in dependency order and the per-row values; the GPU tiling the Triton generator
  picks by default, and the CPU tiling the CPU generator emits its loops from (mode, lanes,
  loop order, vector dim, tail, thread split, 2-D tile: passes/cpu_tiling.py).
- Strides: a kernel attribute `stax.strides = {inputs = [array<i64: ...>, ...], outputs =
  [...]}` when present; else the layouts stax-assign-layouts recorded (the operands'
  `stax.layout` / `stax.result_layouts`, the kernel's own `stax.result_layouts`) when
  every operand and result has one; else contiguous.
- A kernel the analysis cannot describe (dynamic shapes, reductions of different
  signatures, a value neither in the domain nor in its rows) is a PassError located at
  the kernel and naming it and the reason: a code generator would have to guess, so the
  pass refuses instead of recording half a schedule.
- Nothing else changes: no op is added, removed or moved. Running the pass twice gives
  the same IR (the schedule is recomputed from the body and replaces the old one). The
  input and the output are verified.
"""
from __future__ import annotations

from stax._mlir import ir
from stax.dialects.schedule import ATTR, to_attr
from stax.passes.fuse import verify_pass_ir
from stax.passes.kernel_schedule import ScheduleError, analyze

__all__ = ["PASS_NAME", "run", "schedule_kernel", "STRIDES_ATTR"]

PASS_NAME = "stax-schedule"
STRIDES_ATTR = "stax.strides"


def _error(message, location):
    from stax.passes.registry import PassError
    return PassError(message, pass_name=PASS_NAME, location=location)


def _operand_layout(value):
    from stax.dialects.layout import value_layout
    return value_layout(value)


def _assigned_layouts(op):
    """(input strides, output strides) from stax-assign-layouts' attributes, or (None,
    None) unless every operand and result has one."""
    from stax.dialects.layout import result_layouts
    ins = [_operand_layout(v) for v in op.operands]
    outs = result_layouts(op)
    if outs is None or any(st is None for st in ins):
        return None, None
    return [list(st) for st in ins], [list(st) for st in outs]


def _strides(op):
    """(input strides, output strides) from `stax.strides`, else from the layouts
    stax-assign-layouts recorded, else (None, None): contiguous."""
    if STRIDES_ATTR not in op.attributes:
        return _assigned_layouts(op)
    d = op.attributes[STRIDES_ATTR]
    try:
        d = ir.DictAttr(d)
        return tuple([[int(x) for x in ir.DenseI64ArrayAttr(a)] for a in ir.ArrayAttr(d[k])]
                     for k in ("inputs", "outputs"))
    except (ValueError, KeyError) as e:
        raise _error(f"attribute '{STRIDES_ATTR}' must be {{inputs = [array<i64: ...>, ...], "
                     f"outputs = [...]}}, got {d} ({e})", op.location) from None


def schedule_kernel(op) -> None:
    """Write the schedule of one kernel op (raises PassError when it has none)."""
    ins, outs = _strides(op)
    try:
        s = analyze(op, ins, outs)
    except ScheduleError as e:
        raise _error(str(e), op.location) from None
    op.attributes[ATTR] = to_attr(s)


def run(module: "ir.Module") -> None:
    """Run stax-schedule on every kernel of `module` (in place)."""
    from stax.dialects.stax_dialect import KERNEL
    with module.context, ir.Location.unknown():
        verify_pass_ir(module, "input", PASS_NAME)
        kernels = []

        def visit(op):
            if op.name == KERNEL:
                kernels.append(op)
                return ir.WalkResult.SKIP
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
        for k in kernels:
            schedule_kernel(k)
        verify_pass_ir(module, "output", PASS_NAME)
