"""Move reshapes above elementwise ops, so a matmul's epilogue fuses with the ops after its view.

A Linear is `addmm` on `[B*T, N]` followed by a `view` to `[B, T, N]`. Its bias add is
elementwise on `[B*T, N]`, the GELU (or the residual add, or the next LayerNorm) that
reads the view is on `[B, T, N]`, and stax-fuse keeps one domain shape per pointwise
kernel: the bias add became a kernel of its own, a full write and read of the
activation more than needed (two per GPT-2 MLP, one per attention projection).

`reshape(e(x1, ..., xn))`, `e` elementwise, becomes `e(reshape(x1), ..., reshape(xn))`:
the op is computed in the reshape's shape, its operands are read through reshapes
(views, which stax-fuse clones into the kernel that reads them, where the schedule
turns them into index arithmetic). The new operand reshapes are moved up in turn while
their operand is again such an op, so a whole epilogue chain takes the consumer's
shape. A reshape of a reshape is composed into one.

Guarantees, for every `func.func` of the module:
- Values are bit-identical: an elementwise op computes each element from the elements
  at the same position of its operands, and a reshape of a row-major tensor only
  renames positions, so reshaping before or after gives the same elements.
- Only an elementwise op (stax-fuse's ELEMENTWISE_OPS, bitcast excluded: it may change
  the element width) is moved, except a bf16/f16 linear's bias add (it stays at the
  matmul's shape, where stax-fuse keeps it a kernel of its own and the wrapper runs it
  as torch.addmm, rounded once as eager's; what reads the view is another kernel, the
  same traffic as the fused epilogue), and only when its result's users are `stax.reshape`s to
  one shape and ops no kernel holds (`func.return`, as for a tensor saved for the
  backward; a matmul; a fallback). Those read the moved op's result through a reshape
  back to the old shape (a view of the kernel's result: nothing is computed twice or
  copied). An op with a user that stax-fuse would put in a kernel (another op, a view
  or generator of its own shape) is left where it is: moving it would split that
  kernel.
- The moved ops keep their locations and attributes; the new reshapes take the
  original reshape's location. Ops left without users are erased. Nothing outside
  elementwise ops and reshapes changes. Running the pass twice changes nothing more (a
  moved op's users are ops of its new shape, not reshapes, unless its consumer was a
  reshape to yet another shape, which the first run already followed).
- Symbolic shapes (`?` dims with a `#stax.sizes` encoding) are kept: the new reshapes
  take the original reshape's type, with each operand's element type.
- The result verifies (stax's verifiers).
"""
from __future__ import annotations

from stax._mlir import ir
from stax.passes.fuse import (ELEMENTWISE_OPS, FUSIBLE_OPS, GEN_OPS, VIEW_OPS,
                              TRITON_EPILOGUES_ATTR, is_linear_bias_add)
from stax.passes.fuse import _key  # an op's identity (its C pointer)
from stax.passes._per_function import op_attributes, rewrite_worklist, run_per_function

__all__ = ["PASS_NAME", "run", "hoist_reshapes"]

PASS_NAME = "stax-hoist-reshapes"

_MOVABLE = ELEMENTWISE_OPS - {"stax.bitcast"}


def _same_type_except_element(like: ir.RankedTensorType, element_type) -> ir.Type:
    return ir.RankedTensorType.get(list(like.shape), element_type, like.encoding)


def _reshaped(value, target: ir.RankedTensorType, loc, created: list) -> ir.Value:
    """`value` as `target`'s shape (its own element type): the value itself when it has
    that shape already, a reshape of the source when it is a reshape (composed), else a
    new reshape inserted at the current insertion point (appended to `created`)."""
    vtype = ir.RankedTensorType(value.type)
    want = _same_type_except_element(target, vtype.element_type)
    if isinstance(value, ir.OpResult) and value.owner.name == "stax.reshape":
        value = value.owner.operands[0]
    if value.type == want:
        return value
    op = ir.Operation.create("stax.reshape", results=[want], operands=[value], loc=loc)
    created.append(op)
    return op.results[0]


def _is_epilogue(value, memo) -> bool:
    """Whether `value` is computed by elementwise ops only, from values no fusible op
    made (function arguments, matmul results, constants), seen through views: a
    matmul's epilogue. Moving such a chain never takes an op out of a reduction's
    kernel."""
    if not isinstance(value, ir.OpResult):
        return True
    op = value.owner
    key = _key(op)
    if key in memo:
        return memo[key]
    if op.name in VIEW_OPS or op.name in GEN_OPS:
        ok = all(_is_epilogue(x, memo) for x in op.operands)
    elif op.name in FUSIBLE_OPS:
        ok = op.name in _MOVABLE and all(_is_epilogue(x, memo) for x in op.operands)
    else:
        ok = True
    memo[key] = ok
    return ok


def _feeds_fusion(reshape) -> bool:
    return any(u.owner.name in FUSIBLE_OPS for u in reshape.results[0].uses)


def _rewrite(reshape, memo, pending: dict, bias_alone: bool = True) -> bool:
    """Move the op `reshape` reads above it, if allowed. The reshapes it erases leave
    `pending` (the worklist, keyed by op identity); the operand reshapes it makes join
    it."""
    src = reshape.operands[0]
    if not isinstance(src, ir.OpResult):
        return False
    op = src.owner
    if op.name not in _MOVABLE or len(op.results) != 1 or (bias_alone and
                                                           is_linear_bias_add(op)):
        return False
    if not _is_epilogue(src, memo):
        return False
    target = ir.RankedTensorType(reshape.results[0].type)
    users, others = [], []
    for use in op.results[0].uses:
        u = use.owner
        if u.name == "stax.reshape" and u.results[0].type == target:
            users.append(u)
        elif u.name in FUSIBLE_OPS or u.name in VIEW_OPS or u.name in GEN_OPS:
            return False   # a reader of its own shape: moving would split its kernel
        else:
            others.append(u)   # func.return (a tensor saved for the backward), a matmul
    loc = reshape.location
    created = []
    with ir.InsertionPoint(op):
        operands = [_reshaped(x, target, loc, created) for x in op.operands]
        out_type = _same_type_except_element(
            target, ir.RankedTensorType(op.results[0].type).element_type)
        moved = ir.Operation.create(op.name, results=[out_type], operands=operands,
                                    attributes=op_attributes(op),
                                    loc=op.location)
    for u in users:
        u.results[0].replace_all_uses_with(moved.results[0])
        pending.pop(_key(u), None)  # before erasing: a freed op's address is reused
        memo.pop(_key(u), None)
        u.erase()
    if others:   # they read the moved op's result viewed back in its old shape
        with ir.InsertionPoint(op):
            back = ir.Operation.create("stax.reshape", results=[op.results[0].type],
                                       operands=[moved.results[0]], loc=op.location)
        op.results[0].replace_all_uses_with(back.results[0])
    del memo[_key(op)]
    op.erase()
    for r in created:
        pending[_key(r)] = r
    return True



def _erase_dead_reshapes(block) -> None:
    for op in reversed([o.operation for o in block.operations]):
        if op.name == "stax.reshape" and not list(op.results[0].uses):
            op.erase()


def hoist_reshapes(func_op) -> int:
    """Rewrite one function in place (its body only: a kernel's ops keep the kernel's
    domain); returns how many ops were moved."""
    bias_alone = TRITON_EPILOGUES_ATTR not in func_op.attributes
    # a worklist: each move makes operand reshapes that may move further up (only
    # reshapes read by a fusible op start it: one read by a matmul or a permute gains
    # nothing from moving its producer)
    return rewrite_worklist(
        func_op, lambda block: [o.operation for o in block.operations
                                if o.operation.name == "stax.reshape" and
                                _feeds_fusion(o.operation)],
        lambda op, memo, pending: _rewrite(op, memo, pending, bias_alone),
        _erase_dead_reshapes)


def run(module: "ir.Module") -> None:
    """Run stax-hoist-reshapes on every func.func of `module` (in place)."""
    run_per_function(module, PASS_NAME, hoist_reshapes)
