"""Move dtype converts below broadcasts, so a cast of a small operand fuses into its reader.

`broadcast_in_dim(convert(x))` becomes `convert(broadcast_in_dim(x))` when every user of
the broadcast is a fusible op (stax-fuse's FUSIBLE_OPS). A bf16 LayerNorm or RMSNorm
weight upcast to f32 and read broadcast over the rows was a `[N]` convert of its own: a
pointwise kernel of a different shape than the norm's reduction kernel, so stax-fuse
could not put it there, and a GPU call launched one kernel more per cast (two per
LayerNorm on the H200 dispatch benchmark's MLP). After the rewrite the convert has the
broadcast's shape and fuses into the kernel that reads it; the broadcast is a view that
stax-fuse clones into that kernel.

Guarantees, for every `func.func` of the module:
- Values are bit-identical: a convert is elementwise and a broadcast copies elements,
  so converting each copy equals copying each converted element.
- Only a `stax.convert` whose result is read by a `stax.broadcast_in_dim` is touched,
  and only where all of that broadcast's users are fusible: a broadcast read by a
  matmul, a fallback or `func.return` would materialize the larger converted tensor, so
  it is left as it was.
- A widening convert (bf16 -> f32) of a function argument read by two or more
  fusible ops gets one copy per fusible reader, placed just before it, so each reader's
  kernel converts the narrow argument itself rather than reading a wide intermediate
  another kernel wrote; non-fusible readers (matmuls, fallbacks, `func.return`) keep
  the original. Values are unchanged (each copy is the same elementwise cast).
- A convert that still has other users stays for them; one left without users is
  erased. Ops keep their locations (the new ops take the broadcast's and the
  convert's). Running the pass twice changes nothing more (a broadcast's operand is no
  longer a convert). The result verifies (stax's verifiers).
"""
from __future__ import annotations

from stax._mlir import ir
from stax.passes._per_function import run_per_function
from stax.passes.fuse import FUSIBLE_OPS

__all__ = ["PASS_NAME", "run", "sink_converts"]

PASS_NAME = "stax-sink-converts"


def _walk_blocks(op):
    for region in op.regions:
        for block in region.blocks:
            yield block
            for inner in block.operations:
                yield from _walk_blocks(inner.operation)


def _users(value):
    return [u.owner for u in value.uses]


def _rewrite(bcast) -> bool:
    src = bcast.operands[0]
    if not isinstance(src, ir.OpResult):
        return False
    conv = src.owner
    if conv.name != "stax.convert" or len(conv.operands) != 1:
        return False
    users = _users(bcast.results[0])
    if not users or any(u.name not in FUSIBLE_OPS for u in users):
        return False
    x = conv.operands[0]
    out_type = ir.RankedTensorType(bcast.results[0].type)
    x_type = ir.RankedTensorType(x.type)
    # the encoding (a symbolic type's #stax.sizes) stays: only the element type changes
    wide = ir.RankedTensorType.get(list(out_type.shape), x_type.element_type,
                                   encoding=out_type.encoding)
    with ir.InsertionPoint(bcast):
        new_bcast = ir.Operation.create(
            "stax.broadcast_in_dim", results=[wide], operands=[x],
            attributes={n: bcast.attributes[n] for n in bcast.attributes}, loc=bcast.location)
        new_conv = ir.Operation.create(
            "stax.convert", results=[out_type], operands=[new_bcast.results[0]],
            attributes={n: conv.attributes[n] for n in conv.attributes}, loc=conv.location)
    bcast.results[0].replace_all_uses_with(new_conv.results[0])
    bcast.erase()
    if not list(conv.results[0].uses):
        conv.erase()
    return True


def _width(t) -> int:
    et = ir.RankedTensorType(t).element_type
    return getattr(et, "width", 0)


def _copy_per_reader(conv) -> bool:
    """Give each fusible reader of a widening convert of a function argument its own copy
    of the convert: each reader's kernel then reads the narrow argument (2 bytes of a
    bf16) instead of one kernel writing the wide tensor for the others to read (4 + 4
    bytes of an f32: the Llama block's f32 residual, 134 MB each way on the H200)."""
    x = conv.operands[0]
    if not isinstance(x, ir.BlockArgument):   # (only the function body is visited)
        return False
    if _width(conv.results[0].type) <= _width(x.type):
        return False
    readers = []   # one entry per op (an op reading the convert twice has two uses)
    for u in _users(conv.results[0]):
        if u.name in FUSIBLE_OPS and not any(u == r for r in readers):
            readers.append(u)
    if len(readers) < 2:
        return False
    for reader in readers:
        with ir.InsertionPoint(reader):
            copy = ir.Operation.create(
                "stax.convert", results=[conv.results[0].type], operands=[x],
                attributes={n: conv.attributes[n] for n in conv.attributes},
                loc=conv.location)
        for i, operand in enumerate(reader.operands):
            if operand == conv.results[0]:
                reader.operands[i] = copy.results[0]
    if not list(conv.results[0].uses):
        conv.erase()
    return True


def sink_converts(func_op) -> int:
    """Rewrite one function in place; returns how many broadcasts and converts were
    rewritten."""
    n = 0
    for block in list(_walk_blocks(func_op)):
        for op in [o.operation for o in block.operations]:
            if op.name == "stax.broadcast_in_dim" and _rewrite(op):
                n += 1
    if func_op.regions and func_op.regions[0].blocks:
        body = func_op.regions[0].blocks[0]
        for op in [o.operation for o in body.operations]:
            if op.name == "stax.convert" and len(op.operands) == 1 and _copy_per_reader(op):
                n += 1
    return n


def run(module: "ir.Module") -> None:
    """Run stax-sink-converts on every func.func of `module` (in place)."""
    run_per_function(module, PASS_NAME, sink_converts)
