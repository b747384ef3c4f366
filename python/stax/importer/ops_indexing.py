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

def _i64(value):
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)


def _iota(b, shape, dim):
    return b.emit("iota", [], [b.tt(shape, torch.int64)], {"dim": _i64(dim)})


def _gather(b, data, index, dim, wrap_negative):
    """stax.gather of `data` along `dim` at the 1-D `index` (the result has the index's
    length in place of `dim`); without `wrap_negative` a negative index is out of range."""
    shape = list(_vshape(data))
    shape[dim] = _vshape(index)[0]
    attrs = {"dim": _i64(dim)}
    if not wrap_negative:
        attrs[NO_NEGATIVE_WRAP] = ir.UnitAttr.get()
    return b.emit("gather", [data, index], [b.tt(shape, _vdtype(data))], attrs)


def _checked_coords(b, index, size, wrap_negative):
    """The 1-D `index` as coordinates of a dim of `size` (int64): range-checked (and
    wrapped, where negative ones count from the end) by the gather of an iota of that
    size, so an out-of-range index raises naming this dim's size."""
    return _gather(b, _iota(b, [size], 0), index, 0, wrap_negative)


def _row_major_position(b, coords, sizes):
    """(sum of coords[k] times the product of sizes[k + 1:], the product of all sizes):
    the position of 1-D int64 coordinates in the row-major flattening of `sizes`."""
    n = _vshape(coords[0])
    flat, stride = None, 1
    for coord, size in zip(reversed(coords), reversed(sizes)):
        if stride != 1:
            step = b.size_polynomial(stride, torch.int64)
            coord = b.binary("mul", coord, b.broadcast(step, n))
        flat = coord if flat is None else b.binary("add", flat, coord)
        stride = dim_product([stride, size])
    return flat, stride


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
    g = _gather(b, x, flat, dim, wrap_negative)
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
    coords = [_checked_coords(b, b.reshape(idx, [n]), xs[d], wrap_negative=False) if d == dim
              else b.reshape(_iota(b, ishape, d), [n]) for d in range(len(xs))]
    flat, numel = _row_major_position(b, coords, xs)
    return b.reshape(_gather(b, b.reshape(x, [numel]), flat, 0, wrap_negative=False), ishape)


@_reg(aten.flip.default)
def _flip(b, node, a):
    """torch.flip: along each flipped dim of more than one element, a gather at
    (size - 1 - i), computed from an iota of the (static or symbolic) size, so in range
    by construction. A computed result, fresh as eager's (flip is no view in torch)."""
    x = b.v(a["self"])
    rank = len(_vshape(x))
    i64 = torch.int64
    for d in sorted({_norm_dim(d, max(rank, 1)) for d in a["dims"]}):
        n = _vshape(x)[d] if rank else 1
        if n in (0, 1):
            continue
        last = b.binary("sub", b.size_polynomial(n, i64), b.full([], i64, 1))
        x = _gather(b, x, b.binary("sub", b.broadcast(last, [n]), _iota(b, [n], 0)), d,
                    wrap_negative=False)
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

    def coords(k):
        idx = b.v(index_of[k])
        if _vshape(idx) != bshape:
            idx = b.broadcast(idx, bshape)
        idx = b.reshape(idx, [n]) if bshape != [n] else idx
        return _checked_coords(b, idx, xs[live[k]], wrap_negative=True)
    flat, merged_size = _row_major_position(b, [coords(k) for k in range(len(live))],
                                            [xs[d] for d in live])
    _refuse_empty_source(b, merged_size, n)
    merged = b.reshape(x, xs[:first] + [merged_size] + xs[last + 1:])
    return b.reshape(_gather(b, merged, flat, first, wrap_negative=False), shape)
