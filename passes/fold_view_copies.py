"""Compute the reshapes no view can give in the pointwise kernels that produce their sources.

A graph compiled once for every size (stax.dynamic_compile) runs its top-level views as
torch views, and a reshape that is no view of its source's layout is a copy there (torch's
`reshape` copies). Attention's head split `reshape(permute(reshape(slice(qkv))))` is one
for each of Q, K and V, and the causal scores' `k.transpose(-2, -1)` one more: on the H200
those copies were most of what the dynamic GPT-2 block lost against its static kernels.
stax-assign-layouts folds such copies into their producer, but it takes static shapes.
This pass does the same on symbolic shapes (`?` dims with a `#stax.sizes` encoding), with
the rewrites of stax-assign-layouts (passes/layout_folds.py):

1. `hoist_matmul_transposes`: a reshape of a permute that transposes the last two dims,
   read only by matmuls, becomes a transpose of the reshape, which the matmul reads as it
   is (torch.matmul takes a transposed operand);
2. each top-level `stax.reshape` whose source is top-level views of the one result of a
   pointwise kernel, and that is no view of that (contiguous) result, becomes a copy
   kernel. Whether it is a view is decided at sample sizes (every symbol a distinct prime
   near 1000), where torch's own stride rule is applied to a meta tensor: a reshape that
   needs a copy there needs one at every size but sizes of 1;
3. `fold_copies_into_producers`: the copies of one producer are computed by the producer
   itself, on each copy's domain (the view chain applied to the producer's inputs), so
   the producer writes Q, K and V per head and its own result disappears;
4. `merge_argument_copies`: a copy of views of a function argument (`x.repeat(2, 3)`:
   x broadcast to [2, s0, 3, C] and merged to [2*s0, 3*C]; `x.t().reshape(-1)`) is a
   copy kernel that reads the argument, with the view chain inside it, one kernel for
   the copies of one domain (torch's reshape made these copies at run time, and the
   graph reported no kernel for them);
5. a copy that did not fold becomes the top-level reshape it was, marked
   `stax.torch_copy`: torch's reshape copies it at run time, and the dynamic graph's
   report says how many such copies it makes.

Guarantees, for every `func.func` of the module:
- Values are bit-identical: a pointwise op commutes with an index remap, so computing the
  producer per element of the copy gives the copy's elements.
- Only a pointwise kernel with one result, read through views and copies only, is
  rewritten (not a bf16/f16 one that reads a matmul: F.linear's bias add, run as one
  torch.addmm that rounds the sum once, as eager), and only when its copies together
  are no larger than its result at the sample sizes (the copies would otherwise
  recompute it); anything else is left as it was. A copy whose reshape is a view at run time (a size of 1) is still computed
  correctly, as a fresh tensor.
- A kernel's results keep one shape: the copies of one domain share one kernel.
- Static shapes are handled too (stax-assign-layouts already does this on them).
- Running the pass twice changes nothing more. The result verifies.
"""
from __future__ import annotations

from stax._mlir import ir
from stax.dialects.layout import COPY_ATTR, TORCH_COPY_ATTR
from stax.dialects.stax_dialect import YIELD
from stax.passes._per_function import run_per_function
from stax.passes.assign_layouts import KERNEL_OPS, wrap_op_in_kernel
from stax.passes.layout_algebra import VIEW_OPS
from stax.passes.layout_folds import (_known, _owner, _shape, fold_copies_into_producers,
                                      hoist_matmul_transposes, kernel_kind,
                                      merge_argument_copies, sample_dims, sample_sizes)

__all__ = ["PASS_NAME", "run", "fold_view_copies"]

PASS_NAME = "stax-fold-view-copies"

_WHY = "a reshape that is no view of its source's layout (stax-fold-view-copies)"


def _chain_to_root(reshape):
    """(root value, [view ops from the root to the reshape's operand]) when the
    reshape's operand is top-level views of the one result of a pointwise kernel, or of
    a function argument (contiguous: the dynamic graph's guard)."""
    chain, v = [], reshape.operands[0]
    while True:
        op = _owner(v)
        if op is None:
            return (v, chain) if chain else None   # (a reshape of an argument is a view)
        if op.name in VIEW_OPS:
            chain.insert(0, op)
            v = op.operands[0]
            continue
        if op.name in KERNEL_OPS and len(op.results) == 1 and kernel_kind(op) == "pointwise" \
                and COPY_ATTR not in op.attributes and not _rounds_a_matmul(op):
            return v, chain
        return None


def _rounds_a_matmul(kernel) -> bool:
    """A bf16/f16 kernel reading a matmul's result: F.linear's bias add, which the
    dynamic graph runs with its matmul as one torch.addmm, the sum rounded once as
    eager's (computed per copy, the matmul's result would be rounded twice)."""
    if str(ir.RankedTensorType(kernel.results[0].type).element_type) not in ("bf16", "f16"):
        return False
    return any(_owner(v) is not None and _owner(v).name == "stax.matmul"
               for v in kernel.operands)


def _apply_view(view, t, env):
    """`view` applied to meta tensor `t` at the sample sizes `env`, as torch runs it."""
    out = sample_dims(_shape(view.results[0]), env)
    if view.name == "stax.reshape":
        return t.reshape(out)
    if view.name == "stax.permute":
        return t.permute(list(ir.DenseI64ArrayAttr(view.attributes["perm"])))
    if view.name == "stax.broadcast_in_dim":
        dims = list(ir.DenseI64ArrayAttr(view.attributes["dims"]))
        shape = [1] * len(out)
        for i, d in enumerate(dims):
            shape[d] = t.shape[i]
        return t.reshape(shape).expand(out)
    # stax.slice: `out[d]` elements from the start, `step` apart
    start = list(ir.DenseI64ArrayAttr(view.attributes["start"]))
    step = list(ir.DenseI64ArrayAttr(view.attributes["step"]))
    index = []
    for d, (a, s, n) in enumerate(zip(start, step, out)):
        a = a + t.shape[d] if a < 0 else a
        index.append(slice(a, a + n * s, s))
    return t[tuple(index)]


def needs_copy(reshape, root, chain) -> bool:
    """Whether `reshape` of `root` (contiguous) viewed through `chain` copies at the
    sample sizes."""
    import torch   # (here: stax-opt runs the passes without importing torch, 1.5 s)
    env = sample_sizes([_shape(root)] + [_shape(v.results[0]) for v in chain + [reshape]])
    t = torch.empty(sample_dims(_shape(root), env), device="meta")
    for view in chain:
        t = _apply_view(view, t, env)
    try:
        t.view(sample_dims(_shape(reshape.results[0]), env))
    except (RuntimeError, ValueError):   # (a meta tensor raises the latter)
        return True
    return False


def _mark_copies(block) -> int:
    n = 0
    for op in list(block.operations):
        op = op.operation
        if op.name != "stax.reshape" or not _known(op.results[0]):
            continue
        found = _chain_to_root(op)
        if found is None or not all(_known(v.results[0]) for v in found[1]) or \
                not needs_copy(op, *found):
            continue
        wrap_op_in_kernel(op, {COPY_ATTR: ir.StringAttr.get(_WHY)})
        n += 1
    return n


def _unwrap_copies(block) -> None:
    """The copies left (they did not fold) become top-level reshapes again."""
    for op in list(block.operations):
        op = op.operation
        if op.name not in KERNEL_OPS or COPY_ATTR not in op.attributes or \
                ir.StringAttr(op.attributes[COPY_ATTR]).value != _WHY:
            continue
        body = [o.operation for o in op.regions[0].blocks[0].operations]
        if len(body) != 2 or body[0].name != "stax.reshape" or body[1].name != YIELD:
            continue
        with op.location:
            flat = ir.Operation.create("stax.reshape", results=[op.results[0].type],
                                       operands=[op.operands[0]],
                                       attributes={TORCH_COPY_ATTR: ir.UnitAttr.get()},
                                       ip=ir.InsertionPoint(op)).results[0]
        op.results[0].replace_all_uses_with(flat)
        op.erase()


def fold_view_copies(func_op) -> bool:
    changed = False
    for region in func_op.regions:
        for block in region.blocks:
            changed |= hoist_matmul_transposes(block)
            if _mark_copies(block):
                changed |= fold_copies_into_producers(block)
                changed |= merge_argument_copies(block, _WHY)
                _unwrap_copies(block)
    return changed


def run(module: "ir.Module") -> None:
    run_per_function(module, PASS_NAME, fold_view_copies)
