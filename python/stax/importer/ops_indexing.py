"""Op handlers, gathers: index_select, embedding, torch.gather, flip and aten.index
(tensor indexing by one or several integer index tensors) as stax.gather."""
from __future__ import annotations

import torch
import torch.fx

from stax._mlir import ir
from stax.dialects.stax_dialect import NO_NEGATIVE_WRAP
from stax.dialects.symbolic import dim_product, free_symbols
from stax.importer.common import _norm_dim, _out, _val, _vdtype, _vshape
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
    _refuse_empty_source(b, xs[dim], n)
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


def _refuse_empty_source(b, size, count):
    """A gather of `count` indices along a dim of `size` elements: where the dim is empty
    and there are indices, every call is an index error in eager, and a kernel would
    read at a clamped index into an empty buffer (the process crashed). Static sizes:
    PyTorch runs the op instead and raises eager's IndexError. A size that may be 0 at
    run time (an unbacked symbol: `mark_unbacked`; Dynamo specializes a backed 0): a
    check the dynamic graph makes before anything runs, raising IndexError."""
    if size == 0 and count != 0:
        raise _Fallback("a gather of indices from an empty dim (eager raises IndexError; "
                        "PyTorch runs the op so the call raises as eager does)")
    if isinstance(size, str) and any(sym.startswith("u") for sym in free_symbols(size)):
        import sympy

        from stax.importer.ops_views import _require, _sympy_dim
        _require(b, sympy.Or(sympy.Gt(_sympy_dim(size), 0), sympy.Eq(_sympy_dim(count), 0)),
                 f"{count} index(es) would be gathered from a dim of size {size} = 0 (an "
                 "index out of bounds for a dimension with size 0; eager raises IndexError)",
                 "gather")


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


@_reg(aten.gather.default)
def _gather_along(b, node, a):
    """torch.gather(x, dim, idx) (and take_along_dim): out[p] = x[p with p[dim] = idx[p]],
    with idx no larger than x in the other dims. One stax.gather of a flat index into x
    flattened. idx is range-checked on x's dim as a gather from an iota of its size (a
    negative index is out of range, as in eager); the other coordinates are iotas of the
    output's dims. Everything is computed at the output's element count, so the index
    arithmetic, the gather and their consumers can be one kernel."""
    x, idx = b.v(a["self"]), b.v(a["index"])
    xs, ishape = _vshape(x), _vshape(idx)
    if not xs or not ishape:
        raise _Fallback("torch.gather of a 0-d tensor")
    dim = _norm_dim(a["dim"], len(xs))
    n = dim_product(ishape)
    _refuse_empty_source(b, xs[dim], n)
    i64 = torch.int64
    dim0 = {"dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)}
    checked = b.emit("gather", [b.emit("iota", [], [b.tt([xs[dim]], i64)], dim0),
                                b.reshape(b.convert(idx, i64), [n])],
                     [b.tt([n], i64)], {**dim0, NO_NEGATIVE_WRAP: ir.UnitAttr.get()})
    flat, stride = None, 1
    for d in reversed(range(len(xs))):
        if d == dim:
            coord = checked
        else:
            along = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), d)
            coord = b.reshape(b.emit("iota", [], [b.tt(ishape, i64)], {"dim": along}), [n])
        if stride != 1:
            coord = b.binary("mul", coord, b.broadcast(b.size_polynomial(stride, i64), [n]))
        flat = coord if flat is None else b.binary("add", flat, coord)
        stride = dim_product([stride, xs[d]])
    g = b.emit("gather", [b.reshape(x, [stride]), flat], [b.tt([n], _vdtype(x))],
               {**dim0, NO_NEGATIVE_WRAP: ir.UnitAttr.get()})
    return b.reshape(g, ishape)


@_reg(aten.flip.default)
def _flip(b, node, a):
    """torch.flip: along each flipped dim of more than one element, a gather at
    (size - 1 - i), computed from an iota of the (static or symbolic) size, so in range
    by construction. A computed result, fresh as eager's (flip is no view in torch)."""
    x = b.v(a["self"])
    rank = len(_vshape(x))
    i64 = torch.int64
    dim0 = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)
    for d in sorted({_norm_dim(d, max(rank, 1)) for d in a["dims"]}):
        n = _vshape(x)[d] if rank else 1
        if n in (0, 1):
            continue
        iota = b.emit("iota", [], [b.tt([n], i64)], {"dim": dim0})
        last = b.binary("sub", b.size_polynomial(n, i64), b.full([], i64, 1))
        reverse = b.binary("sub", b.broadcast(last, [n]), iota)
        x = b.emit("gather", [x, reverse], [b.tt(_vshape(x), _vdtype(x))],
                   {"dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), d),
                    NO_NEGATIVE_WRAP: ir.UnitAttr.get()})
    return x


@_reg(aten.index.Tensor)
def _index(b, node, a):
    idxs = list(a["indices"])
    live = [i for i, t in enumerate(idxs) if t is not None]
    for i in live:
        ival = _val(idxs[i]) if isinstance(idxs[i], torch.fx.Node) else None
        if ival is None or ival.dtype in (torch.bool, torch.uint8):
            raise _Fallback("a boolean mask index (data-dependent shape)")
    x = b.v(a["self"])
    if len(live) == 1 and (live[0] == 0 or _val(idxs[live[0]]).dim() == 1):
        # x[idx] / x[:, idx]: one gather along the dim
        return _gather_rows(b, node, x, b.v(idxs[live[0]]), live[0], wrap_negative=True)
    return _gather_flat(b, node, x, idxs, live)


def _gather_flat(b, node, x, idxs, live):
    """x[i0, i1, ...] (several index tensors, broadcast together to B, or one index of
    several dims on an inner dim) as one stax.gather of the flattened index into x with
    the indexed dims merged. As eager places the result: B in place of the indexed dims
    where they are adjacent, else first (x permuted so they lead).

    Each index is first wrapped and range-checked on its own dim, as a gather from an
    iota of that dim's size (the gather's own check: an out-of-range component raises
    IndexError naming it and its dim's size, as eager does, instead of landing in range
    of the merged dim); the flat index is then the sum of the checked components times
    their strides in the merged dim, in range by construction."""
    rank = len(_vshape(x))
    index_of = {k: idxs[d] for k, d in enumerate(live)}   # by position among the indexed
    if live != list(range(live[0], live[-1] + 1)):
        x = b.permute(x, live + [d for d in range(rank) if d not in live])
        live = list(range(len(live)))
    xs = _vshape(x)
    shape, _ = _out(node)
    first, last = live[0], live[-1]
    bshape = list(shape[first:len(shape) - (rank - 1 - last)])
    n = dim_product(bshape)
    i64 = torch.int64
    dim0 = {"dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)}
    flat, stride = None, 1
    for k in reversed(range(len(live))):
        d = live[k]
        idx = b.v(index_of[k])
        if _vshape(idx) != bshape:
            idx = b.broadcast(idx, bshape)
        if bshape != [n]:
            idx = b.reshape(idx, [n])
        iota = b.emit("iota", [], [b.tt([xs[d]], i64)], dim0)
        term = b.emit("gather", [iota, idx], [b.tt([n], i64)], dim0)
        if stride != 1:
            term = b.binary("mul", term, b.broadcast(b.size_polynomial(stride, i64), [n]))
        flat = term if flat is None else b.binary("add", flat, term)
        stride = dim_product([stride, xs[d]])
    _refuse_empty_source(b, stride, n)
    merged = b.reshape(x, xs[:first] + [stride] + xs[last + 1:])
    attrs = {"dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), first),
             NO_NEGATIVE_WRAP: ir.UnitAttr.get()}
    g = b.emit("gather", [merged, flat],
               [b.tt(xs[:first] + [n] + xs[last + 1:], _vdtype(x))], attrs)
    return b.reshape(g, shape)
