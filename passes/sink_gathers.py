"""Move a gather that picks few elements of an elementwise result onto the op's operands.

`log_softmax(x)[arange(n), target]` (a manual cross-entropy) gathers n elements of an
[n, C] elementwise result. stax-fuse lets a gather read only data from outside its
kernel, so the whole [n, C] result was a full-space output of the softmax kernel: 4 bytes
written per element to read back n of them. After the rewrite the gather reads the
operands (`x`, the rows' max and log-sum broadcast), and the elementwise ops run on the n
picked elements, in the gather's kernel; the softmax kernel writes only its row values.

Guarantees, for every `func.func` of the module (its body; kernels are left alone):
- Values are bit-identical: a gather only selects elements by position, so the op of the
  picked elements is the picked elements of the op (every stax elementwise op is
  positionwise and total: a NaN, never a trap). Index range checks are unchanged: every
  new gather has the old one's index, dim and `no_negative_wrap`.
- Only a `stax.gather` whose data is an elementwise op (stax-fuse's ELEMENTWISE_OPS),
  seen through a chain of views (reshape, permute, slice, broadcast_in_dim), with static
  shapes and operands of the op's shape, is rewritten, and only when the gather keeps at
  most half of the op's elements (so the ops run on fewer elements than before, even when
  the op's result is still computed for another reader). The views are rebuilt on each
  operand with the operand's element type; an operand that is a constant `stax.full`
  becomes a `stax.full` of the picked shape.
- The rewrite repeats on the new gathers, so a chain of elementwise ops sinks to its
  kernel inputs, reductions and broadcasts. The views and the op are erased once unused.
  The new ops take the gather's location (the op keeps its own). A second run changes
  nothing more. The result verifies.
"""
from __future__ import annotations

from stax._mlir import ir
from stax.passes._per_function import (create_one, op_attributes, rewrite_worklist,
                                       run_per_function)
from stax.passes.fuse import ELEMENTWISE_OPS, VIEW_OPS, _key

__all__ = ["PASS_NAME", "run", "sink_gathers"]

PASS_NAME = "stax-sink-gathers"


def _static_numel(value):
    """The element count of a statically shaped tensor value, else None."""
    shape = ir.RankedTensorType(value.type).shape
    if any(d < 0 for d in shape):
        return None
    n = 1
    for d in shape:
        n *= d
    return n


def _elementwise_source(gather):
    """(views from the gather's data down, the elementwise op under them) or None."""
    views, value = [], gather.operands[0]
    while isinstance(value, ir.OpResult) and value.owner.name in VIEW_OPS:
        views.append(value.owner)
        value = value.owner.operands[0]
    if not isinstance(value, ir.OpResult) or value.owner.name not in ELEMENTWISE_OPS:
        return None
    return views, value.owner


def _retyped(value, element_type):
    """value's tensor type with another element type (static shapes: no encoding)."""
    return ir.RankedTensorType.get(ir.RankedTensorType(value.type).shape, element_type)


def _is_splat(value) -> bool:
    return isinstance(value, ir.OpResult) and value.owner.name == "stax.full" \
        and not value.owner.operands


def _rewrite(gather, memo, pending) -> bool:
    found = _elementwise_source(gather)
    if found is None:
        return False
    views, op = found
    picked, whole = _static_numel(gather.results[0]), _static_numel(op.results[0])
    if picked is None or whole is None or 2 * picked > whole:
        return False
    if any(_static_numel(v.results[0]) is None for v in views):
        return False
    shape = ir.RankedTensorType(op.results[0].type).shape
    if any(ir.RankedTensorType(a.type).shape != shape for a in op.operands):
        return False
    loc = gather.location
    with ir.InsertionPoint(gather):
        new_operands = []
        for a in op.operands:
            et = ir.RankedTensorType(a.type).element_type
            if _is_splat(a):
                new_operands.append(create_one("stax.full", [], _retyped(gather.results[0], et),
                                               op_attributes(a.owner), loc))
                continue
            t = a
            for view in reversed(views):
                t = create_one(view.name, [t], _retyped(view.results[0], et),
                               op_attributes(view), loc)
            g = create_one("stax.gather", [t, gather.operands[1]],
                           _retyped(gather.results[0], et), op_attributes(gather), loc)
            new_operands.append(g)
            pending[_key(g.owner)] = g.owner
        result_et = ir.RankedTensorType(op.results[0].type).element_type
        sunk = create_one(op.name, new_operands, _retyped(gather.results[0], result_et),
                          op_attributes(op), op.location)
    gather.results[0].replace_all_uses_with(sunk)
    gather.erase()
    for dead in views + [op]:   # from the gather's side down: each is read by the last
        if list(dead.results[0].uses):
            return True
        splats = [a.owner for a in dead.operands if _is_splat(a)]
        dead.erase()
        for full in splats:
            if not list(full.results[0].uses):
                full.erase()
    return True


def sink_gathers(func_op) -> int:
    """Rewrite one function's body in place; returns how many gathers were sunk."""
    return rewrite_worklist(func_op, lambda block: [o.operation for o in block.operations
                                                    if o.operation.name == "stax.gather"],
                            _rewrite, lambda block: None)


def run(module: "ir.Module") -> None:
    """Run stax-sink-gathers on every func.func of `module` (in place)."""
    run_per_function(module, PASS_NAME, sink_gathers)
