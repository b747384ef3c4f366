"""Op handlers, gathers: index_select, embedding and one-tensor aten.index as
stax.gather."""
from __future__ import annotations

import torch
import torch.fx

from stax._mlir import ir
from stax.dialects.stax_dialect import NO_NEGATIVE_WRAP
from stax.dialects.symbolic import dim_product
from stax.importer.common import _norm_dim, _out, _val, _vshape
from stax.importer.specs import _Fallback
from stax.importer.table import _reg

aten = torch.ops.aten


# ----------------------------------------------------------------------------- gathers

def _gather_rows(b, node, x, idx, dim, wrap_negative):
    """x gathered along `dim` by an integer index tensor of any shape (the result takes
    the index's shape in place of `dim`), as stax.gather of the flattened index. Without
    `wrap_negative` a negative index is out of range (F.embedding and index_select raise
    there; x[idx] counts it from the end)."""
    shape, dtype = _out(node)
    xs = _vshape(x)
    ix = _vshape(idx)
    if _etype_is_bool(idx):
        raise _Fallback("a boolean mask index (data-dependent shape)")
    n = dim_product(ix)   # symbolic mode: a size expression (`s0*s1` token ids)
    flat = b.reshape(idx, [n]) if ix != [n] else idx
    gshape = list(xs)
    gshape[dim] = n
    if dim_product(gshape) != dim_product(shape):
        # index_select on a 0-d tensor with several indices: eager returns one element
        raise _Fallback(f"gathered {gshape} but eager returns {list(shape)}")
    attrs = {"dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim)}
    if not wrap_negative:
        attrs[NO_NEGATIVE_WRAP] = ir.UnitAttr.get()
    g = b.emit("gather", [x, flat], [b.tt(gshape, dtype)], attrs)
    return b.reshape(g, shape) if gshape != list(shape) else g


def _etype_is_bool(v):
    et = ir.RankedTensorType(v.type).element_type
    return isinstance(et, ir.IntegerType) and ir.IntegerType(et).width == 1


@_reg(aten.index_select.default)
def _index_select(b, node, a):
    x = b.v(a["self"])
    if not _vshape(x):  # a 0-d tensor indexes as a 1-element 1-d one
        x = b.reshape(x, [1])
    return _gather_rows(b, node, x, b.v(a["index"]), _norm_dim(a["dim"], len(_vshape(x))),
                        wrap_negative=False)


@_reg(aten.embedding.default)
def _embedding(b, node, a):
    return _gather_rows(b, node, b.v(a["weight"]), b.v(a["indices"]), 0, wrap_negative=False)


@_reg(aten.index.Tensor)
def _index(b, node, a):
    idxs = list(a["indices"])
    # one index tensor on one dim (x[:, idx] or x[idx]); anything else stays a fallback
    live = [i for i, t in enumerate(idxs) if t is not None]
    if len(live) != 1:
        raise _Fallback("more than one index tensor")
    d = live[0]
    ival = _val(idxs[d]) if isinstance(idxs[d], torch.fx.Node) else None
    if ival is None or (ival.dim() != 1 and d != 0):
        raise _Fallback("a multi-dim index on an inner dim")
    x = b.v(a["self"])
    return _gather_rows(b, node, x, b.v(idxs[d]), d, wrap_negative=True)
