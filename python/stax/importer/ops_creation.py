"""Op handlers, tensor creation: full/zeros/ones/empty (and their _like and new_ forms),
scalar_tensor, and arange as stax.iota."""
from __future__ import annotations

import torch

from stax._mlir import ir
from stax.importer import symbolic as isym
from stax.importer.builder import _is_size
from stax.importer.common import _out
from stax.importer.specs import _Fallback
from stax.importer.table import _reg

aten = torch.ops.aten


# -- creation

@_reg(aten.full.default, aten.full_like.default, aten.zeros.default, aten.ones.default,
      aten.zeros_like.default, aten.ones_like.default, aten.scalar_tensor.default,
      aten.empty.memory_format, aten.empty_strided.default, aten.empty_like.default,
      aten.new_zeros.default, aten.new_ones.default, aten.new_full.default,
      aten.new_empty.default, aten.new_empty_strided.default)
def _full(b, node, a):
    shape, dtype = _out(node)
    t = node.target
    if t in (aten.full.default, aten.full_like.default, aten.new_full.default):
        value = a["fill_value"]
    elif t is aten.scalar_tensor.default:
        value = a["s"]
    elif t in (aten.ones.default, aten.ones_like.default, aten.new_ones.default):
        value = 1
    else:
        value = 0  # zeros, and empty (uninitialized memory: any value will do)
    if isinstance(value, torch.fx.Node) and _is_size(value):
        return b.size_scalar(isym.dim(value.meta["val"]), shape, dtype)   # a size as a value
    if not isinstance(value, (bool, int, float)):
        raise _Fallback(f"fill value {value!r}")
    return b.full(shape, dtype, value)


@_reg(aten.arange.default, aten.arange.start, aten.arange.start_step)
def _arange(b, node, a):
    shape, dtype = _out(node)
    if dtype == torch.bool:
        raise _Fallback("bool arange")
    start = a.get("start") or 0
    step = a.get("step") or 1
    r = b.emit("iota", [], [b.tt(shape, dtype)],
               {"dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)})
    # a start or step may be a size expression (`arange(s0 - 1, -1, -1)` of a reflect
    # pad in a dynamic graph): b.operand reads it as a stax.size_value
    if step != 1:
        r = b.binary("mul", r, b.operand(step, shape, dtype))
    if start != 0:
        r = b.binary("add", r, b.operand(start, shape, dtype))
    return r
