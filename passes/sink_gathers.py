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
  seen through a chain of views (reshape, permute, slice, broadcast_in_dim), with
  operands of the op's shape, is rewritten, and only when the gather keeps at most half
  of the op's elements (so the ops run on fewer elements than before, even when the op's
  result is still computed for another reader). With symbolic sizes the op's count
  must be the picked count times a factor other than 1, as polynomials (`[s0]` of
  `[s0, 1000]` or of `[s0, s1]`: Dynamo makes a symbol 2 or more); otherwise the gather
  stays. The views are rebuilt on each
  operand with the operand's element type and the types keep their #stax.sizes
  encodings; an operand that is a constant `stax.full` becomes a `stax.full` of the
  picked shape.
- The rewrite repeats on the new gathers, so a chain of elementwise ops sinks to its
  kernel inputs, reductions and broadcasts. The views and the op are erased once unused.
  The new ops take the gather's location (the op keeps its own). A second run changes
  nothing more. The result verifies.
"""
from __future__ import annotations

from stax._mlir import ir
from stax.passes._per_function import (create_one, op_attributes, rewrite_worklist,
                                       run_per_function)
from stax.dialects.symbolic import dim_product, dims_of, divides
from stax.passes.fuse import ELEMENTWISE_OPS, VIEW_OPS, _key

__all__ = ["PASS_NAME", "run", "sink_gathers"]

PASS_NAME = "stax-sink-gathers"


def _numel(value):
    """A tensor value's element count: an int, or for symbolic dims a size expression."""
    return dim_product(dims_of(value.type))


def _keeps_at_most_half(picked, whole) -> bool:
    """picked <= whole / 2. With symbols: whole is picked times a factor other than 1 (a
    constant of 2 or more, or a symbol, which Dynamo makes 2 or more: it specializes
    sizes 0 and 1), as polynomials."""
    if isinstance(picked, int) and isinstance(whole, int):
        return 2 * picked <= whole
    return picked != whole and divides(picked, whole)


def _elementwise_source(gather):
    """(views from the gather's data down, the elementwise op under them) or None."""
    views, value = [], gather.operands[0]
    while isinstance(value, ir.OpResult) and value.owner.name in VIEW_OPS and \
            len(value.owner.operands) == 1:
        views.append(value.owner)
        value = value.owner.operands[0]
    if not isinstance(value, ir.OpResult) or value.owner.name not in ELEMENTWISE_OPS:
        return None
    return views, value.owner


def _retyped(value, element_type):
    """value's tensor type with another element type (and its #stax.sizes encoding)."""
    t = ir.RankedTensorType(value.type)
    return ir.RankedTensorType.get(t.shape, element_type, encoding=t.encoding)


def _is_splat(value) -> bool:
    return isinstance(value, ir.OpResult) and value.owner.name == "stax.full" \
        and not value.owner.operands


def _rewrite(gather, _memo, pending) -> bool:
    found = _elementwise_source(gather)
    if found is None:
        return False
    views, op = found
    if not _keeps_at_most_half(_numel(gather.results[0]), _numel(op.results[0])):
        return False
    dims = dims_of(op.results[0].type)
    if any(dims_of(a.type) != dims for a in op.operands):
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
