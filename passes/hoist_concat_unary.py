"""Move unary elementwise ops on a concat's operands after the concat, as a select.

`concat(neg(a), b)` (rotate-half in rotary embeddings: `cat((-x2, x1), -1)`) becomes
`select(iota < |a|, neg(concat(a, b)), concat(a, b))` along the concat's dim. stax-fuse
lets a concat read only kernel inputs (its operands must come from outside the kernel),
so `neg(a)` was a kernel of its own that wrote half a tensor for the concat's kernel to
read back: two kernels of the Llama block on the H200, each a launch and a round trip
through memory. After the rewrite the concat reads `a` and `b` themselves (views of a
kernel input), and the unary op, the mask and the select are elementwise over the
concat's shape, so the whole rotary expression is one kernel, as Inductor's `tl.where`.

Guarantees, for every `func.func` of the module (its body; kernels are left alone):
- Values are bit-identical: inside operand i's region along the dim the result is the
  unary op of that operand's element, outside it the concat's element as before. The op
  is computed over the whole concat and the other elements are discarded by the select;
  stax's unary ops are total (a NaN, never a trap), so no element that was not computed
  before can fail.
- Only a `stax.concat` whose dim is static in every operand is touched (its other dims
  may be symbolic: the new ops keep the concat's `#stax.sizes` encoding), and only
  operands that are a unary elementwise op (dialects.stax_dialect.UNARY_OPS) whose
  result has the operand's type and whose only user is that concat. A concat with no
  such operand is unchanged.
- The new ops take the concat's location (the unary op keeps its own); the old unary
  ops are erased. A second run changes nothing more. The result verifies.
"""
from __future__ import annotations

from stax._mlir import ir
from stax.dialects.stax_dialect import UNARY_OPS
from stax.passes._per_function import create_one, op_attributes, ops_named, run_per_function

__all__ = ["PASS_NAME", "run", "hoist_concat_unary"]

PASS_NAME = "stax-hoist-concat-unary"

_UNARY = frozenset("stax." + n for n in UNARY_OPS)


def _hoistable(value, concat) -> bool:
    """Whether a concat operand is a unary op of the same type read only by `concat`."""
    if not isinstance(value, ir.OpResult):
        return False
    op = value.owner
    if op.name not in _UNARY or len(op.operands) != 1:
        return False
    if op.operands[0].type != value.type:
        return False
    return all(u.owner == concat for u in value.uses)


def _rewrite(concat) -> bool:
    dim = ir.IntegerAttr(concat.attributes["dim"]).value
    if not all(ir.RankedTensorType(v.type).shape[dim] >= 0
               for v in list(concat.operands) + [concat.results[0]]):
        return False   # the regions' bounds along a symbolic dim are runtime sizes
    picked = [i for i, v in enumerate(concat.operands) if _hoistable(v, concat)]
    if not picked:
        return False
    out = ir.RankedTensorType(concat.results[0].type)
    shape, n = list(out.shape), out.shape[dim]
    i64, i1 = ir.IntegerType.get_signless(64), ir.IntegerType.get_signless(1)
    # the other dims may be symbolic: the mask keeps the concat's #stax.sizes encoding
    index_t = ir.RankedTensorType.get(shape, i64, encoding=out.encoding)
    mask_t = ir.RankedTensorType.get(shape, i1, encoding=out.encoding)
    loc = concat.location
    starts, at = [], 0
    for v in concat.operands:
        starts.append(at)
        at += ir.RankedTensorType(v.type).shape[dim]
    unary = {i: concat.operands[i].owner for i in picked}
    with ir.InsertionPoint(concat):
        inner = [unary[i].operands[0] if i in unary else v
                 for i, v in enumerate(concat.operands)]
        joined = create_one("stax.concat", inner, concat.results[0].type,
                         {"dim": concat.attributes["dim"]}, loc)
        iota = create_one("stax.iota", [], index_t,
                       {"dim": ir.IntegerAttr.get(i64, dim)}, loc)

        def bound(value):
            return create_one("stax.full", [], index_t,
                           {"value": ir.IntegerAttr.get(i64, value)}, loc)
        result = joined
        for i in picked:
            op = unary[i]
            lo, hi = starts[i], starts[i] + ir.RankedTensorType(op.results[0].type).shape[dim]
            applied = create_one(op.name, [joined], concat.results[0].type,
                              op_attributes(op), op.location)
            if lo > 0:   # from lo on: the op's value, before it what is there
                ge = create_one("stax.cmp_ge", [iota, bound(lo)], mask_t, {}, loc)
                applied = create_one("stax.select", [ge, applied, result], concat.results[0].type,
                                  {}, loc)
            if hi < n:   # up to hi
                lt = create_one("stax.cmp_lt", [iota, bound(hi)], mask_t, {}, loc)
                applied = create_one("stax.select", [lt, applied, result], concat.results[0].type,
                                  {}, loc)
            result = applied
    concat.results[0].replace_all_uses_with(result)
    concat.erase()
    unique = []   # one op can be two operands (`cat((n, n))`): erased once
    for op in unary.values():
        if not any(op == u for u in unique):
            unique.append(op)
    for op in unique:
        op.erase()
    return True


def hoist_concat_unary(func_op) -> int:
    """Rewrite one function's body in place; returns how many concats were rewritten."""
    return sum(1 for op in ops_named(func_op, "stax.concat") if _rewrite(op))


def run(module: "ir.Module") -> None:
    """Run stax-hoist-concat-unary on every func.func of `module` (in place)."""
    run_per_function(module, PASS_NAME, hoist_concat_unary)
