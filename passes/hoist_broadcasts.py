"""Move broadcasts above elementwise ops on parameters, so the ops fuse into their reader.

BatchNorm at inference scales by `rsqrt(running_var + eps)`: elementwise ops on a
per-channel parameter, broadcast to the activation's shape by the kernel that applies
them. stax-fuse keeps one domain shape per pointwise kernel, so the per-channel ops were
a kernel of their own (one launch for 128 values: a conv + BN + ReLU block ran 4
launches on the H200 where Inductor runs 3). A causal mask's `bias[..., :T, :T] == 0`
was one too (GPT-2's `k2_fused_eq`).

`broadcast_in_dim(e(x1, ..., xn))`, `e` elementwise, becomes
`e(broadcast_in_dim(x1), ..., broadcast_in_dim(xn))` with the same dims: the op is
computed in the broadcast's shape, per element of the consumer, and its operands are read
through broadcasts (views, which stax-fuse clones into the kernel that reads them). The
new operand broadcasts move up in turn while their operand is again such an op; a
broadcast of a broadcast is composed into one, and a broadcast of a `stax.full` is a
`stax.full` of the new shape.

Guarantees, for every `func.func` of the module:
- Values are bit-identical: an elementwise op computes each element from the elements
  at the same position of its operands, and a broadcast only repeats elements, so
  broadcasting before or after gives the same elements. An op with a float operand or
  result narrower than f32 (bf16, f16) is never moved: inside a kernel such values stay
  f32 and are rounded where the kernel stores them, so moving the op into its reader's
  kernel would drop that rounding.
- Only an elementwise op (stax-fuse's ELEMENTWISE_OPS, bitcast excluded) moves, and only
  when everything it is computed from is function arguments and generators
  (`stax.full`, `stax.iota`), through elementwise ops and views: parameters and buffers.
  A value computed by a reduction, a matmul or a library call is never moved (a
  reduction's per-row value would be recomputed per element, and the work it saves is
  not a launch).
- Only when the op's one reader is that broadcast and the broadcast's one reader is a
  fusible op (it joins that op's kernel). A moved op read by two kernels would become a
  full-size result of one of them, written and read again; such ops stay.
- The moved ops keep their locations and attributes; the new broadcasts take the
  original broadcast's location. Ops left without users are erased. Running the pass
  twice changes nothing more.
- Symbolic shapes (`?` dims with a `#stax.sizes` encoding) are kept: the new
  broadcasts take the original broadcast's type, with each operand's element type.
- The result verifies (stax's verifiers).
"""
from __future__ import annotations

from stax._mlir import ir
from stax.passes._per_function import op_attributes, rewrite_worklist, run_per_function
from stax.passes.fuse import ELEMENTWISE_OPS, FUSIBLE_OPS, GEN_OPS, VIEW_OPS
from stax.passes.fuse import _key  # an op's identity (its C pointer)

__all__ = ["PASS_NAME", "run", "hoist_broadcasts"]

PASS_NAME = "stax-hoist-broadcasts"

_MOVABLE = ELEMENTWISE_OPS - {"stax.bitcast"}
_BROADCAST = "stax.broadcast_in_dim"
_NARROW_FLOATS = frozenset({"bf16", "f16", "f8E4M3FN", "f8E5M2", "f8E4M3FNUZ", "f8E5M2FNUZ"})


def _dims(op) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes["dims"]))


def _rounds_at_kernel_boundary(op) -> bool:
    """A bf16 / f16 (or narrower) float result or operand: inside a kernel the code
    generators keep such values in f32, and a kernel rounds them only where it stores
    them, so moving the op into its consumer's kernel would drop a rounding."""
    for v in list(op.operands) + list(op.results):
        et = ir.RankedTensorType(v.type).element_type
        if str(et) in _NARROW_FLOATS:
            return True
    return False


def _from_parameters(value, memo) -> bool:
    """Whether `value` is computed from function arguments and generators only, through
    movable elementwise ops and views."""
    if not isinstance(value, ir.OpResult):
        return True   # a function argument
    op = value.owner
    key = _key(op)
    if key not in memo:
        memo[key] = False   # (no cycles in SSA; set before recursing all the same)
        if op.name in GEN_OPS:
            memo[key] = True
        elif op.name in VIEW_OPS or op.name in _MOVABLE:
            memo[key] = all(_from_parameters(x, memo) for x in op.operands)
    return memo[key]


def _broadcast(value, target: ir.RankedTensorType, dims: list[int], loc,
               created: list) -> ir.Value:
    """`value` broadcast to `target`'s shape (its own element type) along `dims`: a
    broadcast of a broadcast composed into one, a full as a full of the new shape."""
    vtype = ir.RankedTensorType(value.type)
    want = ir.RankedTensorType.get(list(target.shape), vtype.element_type, target.encoding)
    if isinstance(value, ir.OpResult) and value.owner.name == "stax.full":
        src = value.owner
        op = ir.Operation.create("stax.full", results=[want],
                                 attributes=op_attributes(src),
                                 loc=loc)
        created.append(op)
        return op.results[0]
    if isinstance(value, ir.OpResult) and value.owner.name == _BROADCAST:
        inner = value.owner
        dims = [dims[d] for d in _dims(inner)]
        value = inner.operands[0]
    if value.type == want:
        return value
    op = ir.Operation.create(_BROADCAST, results=[want], operands=[value],
                             attributes={"dims": ir.DenseI64ArrayAttr.get(dims)}, loc=loc)
    created.append(op)
    return op.results[0]


def _one_fusible_reader(broadcast) -> bool:
    """The broadcast's only reader is a fusible op (the kernel the moved op joins): a
    moved op read by two kernels would be a full-size kernel result."""
    readers = [use.owner for use in broadcast.results[0].uses]
    return len(readers) == 1 and readers[0].name in FUSIBLE_OPS


def _movable(value, memo) -> bool:
    """`value` is the one result of an elementwise op on parameters, read once, that
    keeps its value inside a kernel (module docstring)."""
    if not isinstance(value, ir.OpResult):
        return False
    op = value.owner
    return (op.name in _MOVABLE and len(op.results) == 1 and len(list(value.uses)) == 1
            and not _rounds_at_kernel_boundary(op) and _from_parameters(value, memo))


def _unit_reshape_dims(src, reshaped, dims: list[int]) -> list[int] | None:
    """The dims of one broadcast from `src` for a broadcast along `dims` of its reshape
    `reshaped` that only adds unit dims (`v.reshape(1, C, 1)`), or None for any other
    reshape (and for a source with a unit or symbolic dim of its own)."""
    before = list(ir.RankedTensorType(src.type).shape)
    after = list(ir.RankedTensorType(reshaped.type).shape)
    if any(n == 1 or n < 0 for n in before) or any(n < 0 for n in after):
        return None
    kept = [i for i, n in enumerate(after) if n != 1]
    if [after[i] for i in kept] != before:
        return None
    return [dims[i] for i in kept]


def _composed(broadcast, memo, pending: dict):
    """`broadcast` of a broadcast, or of a reshape that only adds unit dims, that is the
    only reader of a movable op's result: one broadcast of the op in its place (a mask
    broadcast to [T, T], then to [B, H, T, T]; `v.reshape(1, C, 1)` broadcast to
    [B, C, W]), so the op's users are broadcasts to the consumer's shape; otherwise
    `broadcast` itself."""
    inner = broadcast.operands[0]
    if not (isinstance(inner, ir.OpResult) and inner.owner.name in (_BROADCAST,
                                                                     "stax.reshape")):
        return broadcast
    first = inner.owner
    src = first.operands[0]
    # composed only where the op then moves (nothing changes where it stays)
    if len(list(inner.uses)) != 1 or not _one_fusible_reader(broadcast) or \
            not _movable(src, memo):
        return broadcast
    if first.name == _BROADCAST:
        dims = [_dims(broadcast)[d] for d in _dims(first)]
    else:
        dims = _unit_reshape_dims(src, inner, _dims(broadcast))
        if dims is None:
            return broadcast
    with ir.InsertionPoint(broadcast):
        one = ir.Operation.create(_BROADCAST, results=[broadcast.results[0].type],
                                  operands=[src],
                                  attributes={"dims": ir.DenseI64ArrayAttr.get(dims)},
                                  loc=broadcast.location)
    broadcast.results[0].replace_all_uses_with(one.results[0])
    for op in (broadcast, first):
        pending.pop(_key(op), None)   # before erasing: a freed op's address is reused
        memo.pop(_key(op), None)
        op.erase()
    return one


def _rewrite(broadcast, memo, pending: dict) -> bool:
    """Move the op `broadcast` reads below it, if allowed (module docstring). The
    broadcasts it erases leave `pending` (the worklist, keyed by op identity); the
    operand broadcasts it makes join it."""
    broadcast = _composed(broadcast, memo, pending)
    src = broadcast.operands[0]
    if not _one_fusible_reader(broadcast) or not _movable(src, memo):
        return False
    op = src.owner
    target = ir.RankedTensorType(broadcast.results[0].type)
    dims = _dims(broadcast)
    loc = broadcast.location
    created = []
    with ir.InsertionPoint(op):
        operands = [_broadcast(x, target, dims, loc, created) for x in op.operands]
        out_type = ir.RankedTensorType.get(
            list(target.shape), ir.RankedTensorType(op.results[0].type).element_type,
            target.encoding)
        moved = ir.Operation.create(op.name, results=[out_type], operands=operands,
                                    attributes=op_attributes(op),
                                    loc=op.location)
    memo[_key(moved)] = True
    broadcast.results[0].replace_all_uses_with(moved.results[0])
    pending.pop(_key(broadcast), None)  # before erasing: a freed op's address is reused
    memo.pop(_key(broadcast), None)
    broadcast.erase()
    memo.pop(_key(op), None)
    op.erase()
    for r in created:
        if r.name == _BROADCAST:
            pending[_key(r)] = r
    return True


def _erase_dead(block) -> None:
    """Broadcasts, fulls and movable ops the rewrites left without users."""
    for op in reversed([o.operation for o in block.operations]):
        if (op.name in (_BROADCAST, "stax.full") or op.name in _MOVABLE) and \
                len(op.results) == 1 and not list(op.results[0].uses):
            op.erase()


def hoist_broadcasts(func_op) -> int:
    """Rewrite one function in place (its body only); returns how many ops were moved."""
    return rewrite_worklist(
        func_op, lambda block: [o.operation for o in block.operations
                                if o.operation.name == _BROADCAST and
                                _one_fusible_reader(o.operation)],
        _rewrite, _erase_dead)


def run(module: "ir.Module") -> None:
    """Run stax-hoist-broadcasts on every func.func of `module` (in place)."""
    run_per_function(module, PASS_NAME, hoist_broadcasts)
