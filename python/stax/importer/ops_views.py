"""Op handlers, views and data movement: as_strided, reshape/view/squeeze, dtype views,
expand, repeat, permute, t, transpose, slice, select, diagonal, diagonal_scatter, split,
cat, stack, slice_scatter and constant_pad_nd."""
from __future__ import annotations

import torch

from stax._mlir import ir
from stax.aliasing import storage_source
from stax.dialects.stax_dialect import NO_NEGATIVE_WRAP
from stax.dialects.symbolic import dim_sum, fixed_slice_length
from stax.dialects.symbolic import fmt_dims as dim_list
from stax.importer import equal_sizes
from stax.importer.builder import _INT64_MAX
from stax.importer.common import _norm_dim, _out, _val, _vdtype, _vshape
from stax.importer.specs import UnsupportedGraph, _Fallback
from stax.importer.table import _reg

aten = torch.ops.aten


# -- views and data movement

@_reg(aten.as_strided.default)
def _as_strided(b, node, a):
    """as_strided addresses the storage, not the logical view: PyTorch runs it on the
    tensor whose storage eager's operand views (a graph input, or a dense result), at
    eager's layout."""
    src = a["self"]
    try:
        owner = storage_source(b.storage, node, src)
    except ValueError as e:
        raise UnsupportedGraph(str(e)) from None
    return b.fallback(node, substitute={src: owner},
                      own_storage=() if owner.op == "placeholder" else (owner,))


@_reg(aten.view.default, aten.reshape.default, aten._unsafe_view.default,
      aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.unsqueeze.default,
      aten.view_copy.default, aten.flatten.using_ints)
def _reshape(b, node, a):
    shape, dtype = _out(node)
    return b.reshape(b.convert(b.v(a["self"]), dtype), shape)


@_reg(aten.view.dtype)
def _view_dtype(b, node, a):
    """`x.view(torch.uint8)` on an fp8 tensor (and other same-width dtype views): the same
    bytes reinterpreted, a stax.bitcast."""
    shape, dtype = _out(node)
    x = b.v(a["self"])
    if _vshape(x) != shape or _vdtype(x).itemsize != dtype.itemsize or torch.bool in (
            dtype, _vdtype(x)):
        raise _Fallback("dtype view that changes the shape")
    if _vdtype(x) == dtype:
        return x
    return b.emit("bitcast", [x], [b.tt(shape, dtype)])


@_reg(aten.expand.default, aten.expand_copy.default)
def _expand(b, node, a):
    shape, _ = _out(node)
    return b.broadcast(b.v(a["self"]), shape)


@_reg(aten.repeat.default)
def _repeat(b, node, a):
    """`x.repeat(r0, .., rk)` (and `torch.tile`): x, its dims aligned right with 1s in
    front, broadcast to [r0, d0, .., rk, dk] and merged pairwise to [r0 d0, .., rk dk]. The
    merge of a broadcast is no view, so a kernel writes the fresh tensor eager returns,
    reading x at (i mod d0, ..); static and symbolic sizes alike."""
    shape, _ = _out(node)
    x = b.v(a["self"])
    reps = list(a["repeats"])
    if not all(isinstance(r, int) for r in reps):
        raise _Fallback("repeat by a count that is a size of the graph (a SymInt)")
    dims = [1] * (len(reps) - len(_vshape(x))) + list(_vshape(x))
    x = b.reshape(x, dims)
    paired = [n for r, d in zip(reps, dims) for n in (r, d)]
    return b.reshape(b.broadcast(x, paired, dims=list(range(1, len(paired), 2))), shape)


@_reg(aten.permute.default, aten.permute_copy.default)
def _permute(b, node, a):
    x = b.v(a["self"])
    r = len(_vshape(x))
    return b.permute(x, [d % r for d in a["dims"]] if r else [])


@_reg(aten.t.default)
def _t(b, node, a):
    x = b.v(a["self"])
    return b.permute(x, [1, 0]) if len(_vshape(x)) == 2 else x


@_reg(aten.transpose.int)
def _transpose(b, node, a):
    x = b.v(a["self"])
    r = len(_vshape(x))
    if r < 2:
        return x
    perm = list(range(r))
    d0, d1 = a["dim0"] % r, a["dim1"] % r
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return b.permute(x, perm)


def _slice_bounds(size, start, end, step):
    start = 0 if start is None else start
    end = size if end is None else end
    if start < 0:
        start += size
    if end < 0:
        end += size
    start = min(max(start, 0), size)
    end = min(max(end, start), size)
    return start, end, step


@_reg(aten.slice.Tensor, aten.slice_copy.Tensor)
def _slice(b, node, a):
    x = b.v(a["self"])
    shape = _vshape(x)
    dim = _norm_dim(a["dim"], len(shape))
    if b.symbolic:
        return _slice_symbolic(b, node, a, x, shape, dim)
    start, end, step = _slice_bounds(shape[dim], a["start"], a["end"], a["step"])
    return b.slice(x, dim, start, end, step)


def _size_arg(b, x):
    """A slice bound as a dim: None, an int, or a size node's dim (an int or a size
    expression: the symbolic importer maps size nodes and SymInt inputs to their dims)."""
    if isinstance(x, torch.fx.Node):
        return b.values[x]
    return x


def _difference(a, b):
    """`a - b` of two dims (ints or size expressions) as a dim: an int, or the normal form
    of its expression; None where it is not a size polynomial."""
    from stax.dialects.symbolic import ExprError, normalize
    try:
        d = normalize(f"({a}) - ({b})")
    except ExprError:
        return None
    return int(d) if d.lstrip("-").isdigit() else d


def _static_difference(a, b) -> int | None:
    """`a - b` of two dims (ints or size expressions) where it is an int for every size
    (`(s0 - 1) - s0` is -1), else None."""
    d = _difference(a, b)
    return d if isinstance(d, int) else None


def _from_the_end(bound, n, *, lower: bool):
    """A slice bound written from the dim's own size (`x[:, :T - 1]`, `x[:, T - 3:]` with
    `T = x.shape[1]`) as the plain int bound it equals: `T + k` is `k` for k < 0 (k
    before the end, as `-1`), and for k >= 0 the end (an upper bound: None) or, for a
    lower bound, left as it is (an empty slice: refused below). Any other bound as it
    is."""
    if not (isinstance(bound, str) and isinstance(n, str)):
        return bound
    k = _static_difference(bound, n)
    if k is None:
        return bound
    if k < 0:
        return k
    return bound if lower else None


def _window(b, x, shape, dim, start, length):
    """The `length` elements of `x` from `start` along the dim `dim` (ints or size
    expressions), where they provably stay in the dim at every size
    (symbolic.prefix_slice_fits) or the graph checks that they do at every call
    (`_guard_window`); None otherwise. From a static start where it is proved, a
    stax.slice (a view); otherwise (the second half of a concat's gradient,
    `grad[:, s0:2*s0]`, a start that is an int argument) a stax.gather of the indices
    `iota(length) + start`, since a slice's start is a static attribute and its verifier
    wants the fit proved: the gather's run-time index check never fires, and its result
    is a copy (the dynamic graph refuses an output eager returns as a view of an
    input)."""
    from stax.dialects.symbolic import prefix_slice_fits
    n = shape[dim]
    if length is None:
        return None
    fits = prefix_slice_fits(n, start, length)
    if not fits and not _guard_window(b, n, start, length, dim):
        return None
    if isinstance(start, int) and fits:   # (a slice's verifier wants the fit proved)
        if start == 0 and length == n:
            return x
        return b.slice(x, dim, start, _INT64_MAX, 1, length=length)
    idx = b.emit("iota", [], [b.tt([length], torch.int64)],
                 {"dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)})
    idx = b.binary("add", idx, b.broadcast(b.size_polynomial(start, torch.int64), [length]))
    out = list(shape)
    out[dim] = length
    return b.emit("gather", [x, idx], [b.tt(out, _vdtype(x))],
                  {"dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim),
                   NO_NEGATIVE_WRAP: ir.UnitAttr.get()})


def _guard_window(b, n, start, length, dim) -> bool:
    """Symbolic mode: a window no fact of the symbols proves in its dim (a start that is
    an int argument, `freqs[pos:pos + T]`; the halves of a chunk of an odd size, `(s +
    1)//2`) read under a check of the graph: `0 <= start`, `0 <= length` and `start +
    length <= n` at every call's sizes, before anything runs (Dynamo guards the same
    bounds, so a call that reaches the graph meets them). False where the bounds can
    never hold, or outside symbolic mode."""
    import sympy
    if not b.symbolic:
        return False
    start_, length_ = _sympy_dim(start), _sympy_dim(length)
    return _require(b, sympy.And(sympy.Ge(start_, 0), sympy.Ge(length_, 0),
                                 sympy.Le(start_ + length_, _sympy_dim(n))),
                    f"the {length} elements from {start} of dim {dim} (size {n}) would be "
                    "read outside the dim", "window")


def _sympy_dim(d):
    """A dim (an int or a size expression) as a sympy expression."""
    import sympy
    return sympy.Integer(d) if isinstance(d, int) else sympy.parse_expr(d)


def _require(b, cond, message, kind) -> bool:
    """Record `cond` (a sympy boolean of the symbols) as a check the dynamic graph makes
    at every call (a SizeAssert of `kind`; `message` says what would break), unless it
    always holds; False where it never does."""
    import sympy

    from stax.importer.size_asserts import SizeAssert
    if cond is sympy.false:
        return False
    if cond is not sympy.true and all(a.expr != cond for a in b.size_asserts):
        b.size_asserts.append(SizeAssert(cond, message, kind=kind))
    return True


def _window_from_a_size(b, node, x, shape, dim, start, end):
    """`x[..., start:end]` from a size expression, as `_window` where eager's length is
    `end - start`, as written or under Dynamo's guards (equal_sizes.same: the window then
    takes eager's length); None otherwise."""
    from stax.importer.symbolic import dims
    n = shape[dim]
    end = n if end is None or (isinstance(end, int) and end >= 1 << 62) else end
    if isinstance(end, int) and end < 0:   # k before the end (`_from_the_end` made it so)
        end = dim_sum([n, end])
    length = _difference(end, start) if isinstance(end, (int, str)) else None
    eager = dims(_val(node).shape, f"node {node.name}")[dim]
    # equal as written, or under Dynamo's guards (a chunk's second half: equal_sizes)
    if length is None or not equal_sizes.same(eager, length):
        return None
    return _window(b, x, shape, dim, start, eager)


def _slice_symbolic(b, node, a, x, shape, dim):
    """Symbolic mode: a slice of a static dim with static bounds, the whole of a symbolic
    dim, or a static dim sliced to a symbolic length from a static start (`bias[:T]`,
    the result's dim is eager's size expression, e.g. `s1`; the dynamic graph guards
    that it fits the static size). Anything else cannot be checked: refused."""
    from stax.importer.symbolic import _unsupported, dims
    start, end, step = (_size_arg(b, a[k]) for k in ("start", "end", "step"))
    where = f"node {node.name} ({node.target})"
    start, end = _from_the_end(start, shape[dim], lower=True), \
        _from_the_end(end, shape[dim], lower=False)
    if isinstance(start, str) and step == 1:
        # from a size expression, of a symbolic or a static dim (`freqs[pos:pos + T]`)
        picked = _window_from_a_size(b, node, x, shape, dim, start, end)
        if picked is not None:
            return picked
    if not isinstance(step, int) or step < 1 or not isinstance(start, (int, type(None))):
        raise _unsupported(f"{where}: a slice with the start {start} and step {step} "
                           "cannot be imported symbolically (a static start and a positive "
                           "static step are needed)")
    n = shape[dim]
    if isinstance(n, str):
        whole = end is None or end == n or (isinstance(end, int) and end >= 1 << 62)
        if start in (None, 0) and step == 1 and whole:
            return x
        lim = _INT64_MAX if whole else end
        length = fixed_slice_length(start or 0, lim, step) if isinstance(lim, int) else None
        if length is not None:
            # from the end (`x[:, -3:]`) or to a static limit (`x[:, :4]`): a static
            # length, guarded at run time (the dim must hold what the slice reads)
            eager = dims(_val(node).shape, where)[dim]
            if eager != length:
                raise _unsupported(f"{where}: a slice [{start}:{end}:{step}] of the symbolic "
                                   f"dim {dim} (size {n}) has eager's length {eager}, not the "
                                   f"{length} it has whenever the dim holds its elements")
            return b.slice(x, dim, start or 0, lim, step, length=length)
        before_end = isinstance(end, int) and end < 0   # x[:, :-1]: k before the end
        if (whole or before_end) and (start or 0) >= 0:
            # x[start::step] of a symbolic dim to its end (or to k before it): its length
            # (a derived symbol for a step above 1) counts the elements up to there, so
            # every read is in bounds at every size; eager's length must be the same
            from stax.dialects.symbolic import slice_length
            length = slice_length(dim_sum([n, end]) if before_end else n, start or 0, step)
            eager = dims(_val(node).shape, where)[dim]
            if eager != length:
                raise _unsupported(f"{where}: a slice [{start}::{step}] of the symbolic dim "
                                   f"{dim} (size {n}) has eager's length {eager}, which is "
                                   f"not {length} as written")
            return b.slice(x, dim, start or 0, end if before_end else _INT64_MAX, step,
                           length=length)
        if step == 1 and isinstance(end, str) and (start or 0) >= 0:
            # x[start:e] to a size expression e that provably stays in the dim at every
            # size (a concat's backward: `grad[:, :s0]` of a dim of s0 + 3, `grad[:, :s0]`
            # of 2*s0): the first e - start elements from start
            picked = _window_from_a_size(b, node, x, shape, dim, start or 0, end)
            if picked is not None:
                return picked
        raise _unsupported(f"{where}: a slice [{start}:{end}:{step}] of part of the symbolic "
                           f"dim {dim} (size {n}) cannot be imported symbolically: its bounds "
                           "cannot be checked against a runtime size")
    if isinstance(end, (int, type(None))):
        start, end, step = _slice_bounds(n, start, end, step)
        return b.slice(x, dim, start, end, step)
    length = dims(_val(node).shape, where)[dim]
    start = start or 0
    if start < 0:
        raise _unsupported(f"{where}: a slice from the negative start {start} to the size "
                           f"{end} cannot be imported symbolically")
    if isinstance(length, int):
        return b.slice(x, dim, start, min(n, start + length * step), step)
    return b.slice(x, dim, start, n, step, length=length)


@_reg(aten.select.int, aten.select_copy.int)
def _select(b, node, a):
    x = b.v(a["self"])
    shape = _vshape(x)
    dim = _norm_dim(a["dim"], len(shape))
    i = a["index"]
    if b.symbolic and not isinstance(i, int):
        from stax.importer.symbolic import _unsupported
        raise _unsupported(f"node {node.name} ({node.target}) selects the index {i} (a "
                           f"size) of dim {dim}; only a static index imports symbolically")
    if isinstance(shape[dim], str):
        # `logits[:, -1]` of a growing sequence, a CLS token's `x[:, 0]`: a slice of one
        # element from the end or from the start (the dynamic graph guards the size)
        lim = _INT64_MAX if i == -1 else i + 1
        return b.reshape(b.slice(x, dim, i, lim), _out(node)[0])
    i = i % shape[dim]
    return b.reshape(b.slice(x, dim, i, i + 1), _out(node)[0])


@_reg(aten.diagonal.default, aten.diagonal_copy.default)
def _diagonal(b, node, a):
    """`x.diagonal(offset, dim1, dim2)` (`torch.diag` of a matrix, `trace`'s sum): x with
    dim1 and dim2 moved last, the two merged, then every (m + 1)-th element of the merged
    dim from the offset's start: views only (permute, reshape, strided slice), so the
    diagonal of the last two dims of a contiguous x is a view with eager's stride m + 1,
    and a graph output eager returns as a view stays one (stax.aliasing). Static sizes:
    the length, min(n, m - offset), is no polynomial of symbolic sizes."""
    x = b.v(a["self"])
    shape = _vshape(x)
    d1, d2, off, length, others = _diagonal_geometry(node, a, shape)
    n, m = shape[d1], shape[d2]
    if others + [d1, d2] != list(range(len(shape))):
        x = b.permute(x, others + [d1, d2])
    x = b.reshape(x, [shape[d] for d in others] + [n * m])
    start = (off if off >= 0 else -off * m) if length else 0
    end = start + (length - 1) * (m + 1) + 1 if length else 0
    return b.slice(x, len(others), start, end, m + 1)


def _diagonal_geometry(node, a, shape):
    """(dim1, dim2, offset, the diagonal's length, the other dims) of a diagonal of
    static `shape`."""
    if not all(isinstance(d, int) for d in shape):
        raise _Fallback("a diagonal of symbolic sizes (its length is a min of sizes)")
    r = len(shape)
    d1, d2 = _norm_dim(a["dim1"], r), _norm_dim(a["dim2"], r)
    if d1 == d2:
        raise UnsupportedGraph(f"node {node.name}: diagonal dims must differ, got {d1} twice")
    off, n, m = a["offset"], shape[d1], shape[d2]
    length = max(0, min(n, m - off) if off >= 0 else min(n + off, m))
    return d1, d2, off, length, [d for d in range(r) if d not in (d1, d2)]


@_reg(aten.diagonal_scatter.default)
def _diagonal_scatter(b, node, a):
    """x with its diagonal replaced by src (the backward of a diagonal, of `trace`):
    where j - i == offset over (dim1, dim2), src's element along the dim the diagonal
    steps one by one in (dim1 for an offset >= 0, else dim2), padded to that dim's size
    and broadcast over the other; x elsewhere. Elementwise over x's shape: one kernel,
    exact (a select)."""
    shape, dtype = _out(node)
    x, src = b.v(a["self"]), b.v(a["src"])
    d1, d2, off, length, others = _diagonal_geometry(node, a, _vshape(x))
    if length == 0:   # no element of the diagonal lies in x: x as it is (a fresh copy)
        return b.convert(x, dtype)
    along = d1 if off >= 0 else d2
    dims = others + [along]   # src's dims in x's: broadcast_in_dim takes them in order
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    if order != list(range(len(dims))):
        src = b.permute(src, order)
    short = list(shape)
    short[along] = length
    spread = b.broadcast(b.convert(src, dtype), short, dims=sorted(dims))
    if length < shape[along]:   # the rows past the diagonal's end, never selected: padded
        # in x's shape (a pad of another shape would be a kernel of its own)
        high = [0] * len(shape)
        high[along] = shape[along] - length
        spread = b.emit("pad", [spread], [b.tt(shape, dtype)],
                        {"low": ir.DenseI64ArrayAttr.get([0] * len(shape)),
                         "high": ir.DenseI64ArrayAttr.get(high),
                         "value": b.scalar_attr(dtype, 0)})
    i = b.emit("iota", [], [b.tt(shape, torch.int64)], {"dim": ir.IntegerAttr.get(
        ir.IntegerType.get_signless(64), d1)})
    j = b.emit("iota", [], [b.tt(shape, torch.int64)], {"dim": ir.IntegerAttr.get(
        ir.IntegerType.get_signless(64), d2)})
    on = b.compare("eq", b.binary("sub", j, i), b.full(shape, torch.int64, off))
    return b.select(on, spread, b.convert(x, dtype))


@_reg(aten.split.Tensor, aten.split_with_sizes.default, aten.chunk.default,
      aten.unbind.int, aten.tensor_split.sections)
def _split(b, node, a):
    x = b.v(a["self"])
    shape = _vshape(x)
    dim = _norm_dim(a.get("dim", 0), len(shape))
    if b.symbolic and isinstance(shape[dim], str):
        return _split_symbolic(b, node, x, shape, dim)
    outs, start = [], 0
    for t in _val(node):
        n = t.shape[dim] if len(t.shape) == len(shape) else 1
        r = b.slice(x, dim, start, start + n)
        outs.append(b.reshape(r, list(t.shape)))
        start += n
    return tuple(outs)


def _split_symbolic(b, node, x, shape, dim):
    """split / split_with_sizes along a symbolic dim into pieces whose sizes are size
    polynomials (`torch.split(h, [s, 3], 1)`): each piece a `_window` at the running
    offset, where it provably fits or under the graph's check that it does (a chunk of
    an odd size: pieces of `(s + 1)//2` and the rest). An unbind (a count that depends
    on the size) is refused."""
    from stax.importer.symbolic import _unsupported, dims
    where = f"node {node.name} ({node.target})"
    outs, start = [], 0
    for t in _val(node):
        if len(t.shape) != len(shape):
            raise _unsupported(f"{where} unbinds the symbolic dim {dim} (size {shape[dim]})")
        length = dims(t.shape, where)[dim]
        piece = _window(b, x, shape, dim, start, length)
        if piece is None:
            raise _unsupported(f"{where} splits the symbolic dim {dim} (size {shape[dim]}) "
                               f"into a piece of {length} from {start}, which cannot be "
                               "proved to fit at every size")
        outs.append(piece)
        start = dim_sum([start, length])
    return tuple(outs)


@_reg(aten.cat.default)
def _cat(b, node, a):
    shape, dtype = _out(node)
    dim = _norm_dim(a["dim"], len(shape))
    ins = []
    for t in a["tensors"]:
        v = b.convert(b.v(t), dtype)
        s = _vshape(v)
        if len(s) != len(shape) and s == [0]:
            continue  # legacy empty 1-D tensors are skipped by torch.cat
        if s[dim] == 0:
            continue
        ins.append(v)
    return _concat(b, ins, shape, dtype, dim)


@_reg(aten.stack.default)
def _stack(b, node, a):
    shape, dtype = _out(node)
    dim = _norm_dim(a["dim"], len(shape))
    piece = list(shape)
    piece[dim] = 1
    ins = [b.reshape(b.convert(b.v(t), dtype), piece) for t in a["tensors"]]
    return _concat(b, ins, shape, dtype, dim)


def _concat(b, ins, shape, dtype, dim):
    """torch.cat of N values as a chain of binary stax.concat."""
    if not ins:
        return b.full(shape, dtype, 0)
    if b.symbolic:
        from stax.dialects.symbolic import dims_equal
        from stax.importer.symbolic import _unsupported
        for v in ins[1:]:
            a, c = _vshape(ins[0]), _vshape(v)
            if any(k != dim and not dims_equal([a[k]], [c[k]]) for k in range(len(a))):
                # sizes Dynamo knows equal only through a guard (a chunk's half and a
                # tangent's own symbol in a backward): no polynomial shows it
                raise _unsupported(f"a concat along dim {dim} of pieces of "
                                   f"{dim_list(a)} and {dim_list(c)}, whose other dims are "
                                   "not the same polynomials of symbols")
    r = ins[0]
    for v in ins[1:]:
        out = list(_vshape(r))
        out[dim] = dim_sum([out[dim], _vshape(v)[dim]])   # `s0 + 1` along a symbolic dim
        r = b.emit("concat", [r, v], [b.tt(out, dtype)],
                   {"dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim)})
    return r


@_reg(aten.slice_scatter.default)
def _slice_scatter(b, node, a):
    """`src` written over `self[start:end]` along `dim` (step 1): the pieces of `self`
    before and after it, concatenated around `src` (rotary embeddings' backward)."""
    shape, dtype = _out(node)
    x = b.convert(b.v(a["self"]), dtype)
    src = b.convert(b.v(a["src"]), dtype)
    dim = _norm_dim(a["dim"], len(shape))
    bounds = [_size_arg(b, a.get(k)) for k in ("start", "end", "step")]
    if b.symbolic and isinstance(bounds[0], str):
        # a write at a size-expression start: a decode step's cache update
        # `cache[:, pos:pos + T] = k` (static or symbolic cache length)
        picked = _scatter_at_a_size(b, x, src, shape, dim, *bounds)
        if picked is not None:
            return picked
    if not isinstance(shape[dim], int):
        return _slice_scatter_symbolic(b, node, a, x, src, shape, dtype, dim)
    if any(isinstance(v, str) for v in bounds):
        from stax.importer.symbolic import _unsupported
        raise _unsupported(f"node {node.name} ({node.target}): slice_scatter "
                           f"[{bounds[0]}:{bounds[1]}:{bounds[2]}] of the static dim {dim} "
                           f"(size {shape[dim]}) has bounds that are sizes and no window "
                           "whose bounds the graph can check")
    start, end, step = _slice_bounds(shape[dim], a["start"], a["end"], a["step"])
    if step != 1 or not shape:
        raise _Fallback("slice_scatter with a step")
    pieces = []
    if start > 0:
        pieces.append(b.slice(x, dim, 0, start))
    if end > start:
        pieces.append(src)
    if end < shape[dim]:
        pieces.append(b.slice(x, dim, end, shape[dim]))
    return _concat(b, pieces, shape, dtype, dim)


def _scatter_at_a_size(b, x, src, shape, dim, start, end, step):
    """`src` written over `x[start:start + L]` along `dim` (step 1), `start` a size
    expression, `L` src's length there: every element of `x` picks `src[i - start]`
    where `start <= i < start + L` (a gather at the clamped offset) and keeps its own
    elsewhere. The graph checks the window's bounds at every call (`_guard_window`), so
    the gather reads inside `src`: L >= 1 holds wherever L is a symbol (Dynamo's 0/1
    specialization, which the graph also guards). None where the bounds are not such."""
    n, length = shape[dim], _vshape(src)[dim]
    if (step or 1) != 1 or length == 0 or _difference(end, start) != length or \
            not _guard_window(b, n, start, length, dim):
        return None
    i64 = torch.int64
    iota = b.emit("iota", [], [b.tt([n], i64)],
                  {"dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)})
    offset = b.binary("sub", iota, b.broadcast(b.size_polynomial(start, i64), [n]))
    last = b.broadcast(b.size_polynomial(dim_sum([length, -1]), i64), [n])
    inside = b.binary("and", b.compare("ge", offset, b.full([n], i64, 0)),
                      b.compare("le", offset, last))
    if length == 1:
        # one row (a decode step's token): src broadcast along the dim, no gather, so the
        # select is one pointwise kernel with the mask
        picked = b.broadcast(src, shape, list(range(len(shape))))
    else:
        index = b.binary("minimum", b.binary("maximum", offset, b.full([n], i64, 0)), last)
        picked = b.emit("gather", [src, index], [b.tt(shape, _vdtype(src))],
                        {"dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim),
                         NO_NEGATIVE_WRAP: ir.UnitAttr.get()})
    return b.select(b.broadcast(inside, shape, [dim]), picked, x)


def _scatter_pieces(b, x, src, dim, n, start, end, step):
    """`self[:start]`, `src`, `self[end:]` along the symbolic dim of size `n` for a window
    of static length at either end (the backward of `x[:, -3:]`, `x[:, :4]`, `x[:, 1]`),
    each piece a slice the dynamic graph can guard (a static length, or to a static
    distance before the end), or None when the bounds are not such."""
    end = _size_arg(b, end)
    if step != 1 or not isinstance(start, int):
        return None
    whole = end is None or end == n or (isinstance(end, int) and end >= 1 << 62)
    if not (whole or isinstance(end, int)):
        return None
    # the window's length must be static: a start and an end from the same side of the dim
    if whole:
        length = -start if start < 0 else None
    elif (start >= 0) == (end >= 0):
        length = end - start
    else:
        length = None
    if length is None or length < 0 or _vshape(src)[dim] != length:
        return None
    pieces = []
    if start > 0:      # a static prefix
        pieces.append(b.slice(x, dim, 0, start, 1, length=start))
    elif start < 0:    # all but the last -start elements
        pieces.append(b.slice(x, dim, 0, start, 1, length=dim_sum([n, start])))
    pieces.append(src)
    if not whole:
        if end >= 0:   # from a static index to the end
            pieces.append(b.slice(x, dim, end, _INT64_MAX, 1, length=dim_sum([n, -end])))
        else:          # the last -end elements
            pieces.append(b.slice(x, dim, end, _INT64_MAX, 1, length=-end))
    return pieces


def _fill_value(base):
    """The value a tensor made by a fill op holds (`new_zeros`, `zeros`, `full(.., v)`),
    or None."""
    target = getattr(base, "target", None)
    if target in _FILLS:
        return _FILLS[target]
    if target in (aten.full.default, aten.new_full.default):
        v = base.args[1] if target is aten.full.default else base.args[2]
        return v if isinstance(v, (int, float, bool)) else None
    return None


def _window_scatter_pieces(b, src, dim, n, start, end, shape, dtype, fill):
    """The fill, `src` over [start:end] of it, the fill again, along the symbolic dim of
    size `n`, where the bounds are size expressions and the window provably stays in the
    dim at every size (the backward of `cat([x, y], 1)[:, :s]` or `[:, s:]`: `src`
    scattered into zeros of 2*s); None when it may not."""
    from stax.dialects.symbolic import prefix_slice_fits
    length, tail = _difference(end, start), _difference(n, end)
    if length is None or tail is None or not prefix_slice_fits(n, start, length) or \
            _vshape(src)[dim] != length:
        return None
    pieces = []
    for size, piece in ((start, None), (length, src), (tail, None)):
        if size == 0:
            continue
        if piece is None:
            piece_shape = list(shape)
            piece_shape[dim] = size
            piece = b.full(piece_shape, dtype, fill)
        pieces.append(piece)
    return pieces


#: fills whose value is known at import (a slice's backward scatters into `new_zeros`)
_FILLS = {aten.new_zeros.default: 0, aten.zeros.default: 0, aten.zeros_like.default: 0}


def _slice_scatter_symbolic(b, node, a, x, src, shape, dtype, dim):
    """slice_scatter along a symbolic dim from a static start to a static distance before
    the dim's end (the backward of `logits[:, :-1]` and `labels[:, 1:]`): `src` padded by
    static amounts to the dim's size, so no bound depends on a runtime size. Over a
    zero fill that pad is the result; over any other `self` a padded mask picks
    between them."""
    from stax.importer.symbolic import _unsupported
    where = f"node {node.name} ({node.target})"
    n = shape[dim]
    start, end, step = (_size_arg(b, a.get(k)) for k in ("start", "end", "step"))
    start, step = start or 0, step or 1
    if end is None or (isinstance(end, int) and end >= 1 << 62):
        end = n
    elif isinstance(end, int) and end < 0:
        end = dim_sum([n, end])
    high = _static_difference(n, end)
    fill = _fill_value(a["self"])
    if step == 1 and fill is not None and (high is None or not isinstance(start, int)):
        pieces = _window_scatter_pieces(b, src, dim, n, start, end, shape, dtype, fill)
        if pieces is not None:
            return _concat(b, pieces, shape, dtype, dim)
    if step != 1 or not isinstance(start, int) or start < 0 or high is None or high < 0:
        pieces = _scatter_pieces(b, x, src, dim, n, start, a.get("end"), step)
        if pieces is not None:
            return _concat(b, pieces, shape, dtype, dim)
        raise _unsupported(f"{where}: slice_scatter [{start}:{end}:{step}] along the symbolic "
                           f"dim {dim} (size {n}) cannot be imported symbolically: only a "
                           "static start and an end a static distance before the dim's end, "
                           "or a window of static length from either end, step 1, have "
                           "bounds a runtime size can be checked against")
    if _vshape(src)[dim] != dim_sum([end, -start]):
        raise _unsupported(f"{where}: slice_scatter's source has {_vshape(src)[dim]} elements "
                           f"along dim {dim}, not {dim_sum([end, -start])}")
    low_pad, high_pad = [0] * len(shape), [0] * len(shape)
    low_pad[dim], high_pad[dim] = start, high

    def pad(v, value):
        return b.emit("pad", [v], [b.tt(shape, _vdtype(v))],
                      {"low": ir.DenseI64ArrayAttr.get(low_pad),
                       "high": ir.DenseI64ArrayAttr.get(high_pad),
                       "value": b.scalar_attr(_vdtype(v), value)})
    base = a["self"]
    fill = _FILLS.get(getattr(base, "target", None))
    if fill is not None:
        return pad(src, fill)
    mask = pad(b.full(_vshape(src), torch.bool, True), False)
    return b.select(mask, pad(src, 0), x)


def _hint(p):
    """A pad amount's value at trace time (an int, a SymInt node's hint), or None."""
    if isinstance(p, int):
        return p
    v = p.meta.get("val") if isinstance(p, torch.fx.Node) else None
    hint = getattr(getattr(v, "node", None), "hint", None)
    return int(hint) if hint is not None else None


def _pad_by_sizes(b, node, x, shape, dtype, sized, signs, value):
    """A pad whose amounts along the dims `sized` ({dim: (low, high)}) include size
    expressions. Each amount is a pad or a crop as it was at trace time (`signs`, the
    amounts' values then: a pad's backward crops by the same size), and the graph checks
    at every call that it still is (`SizeAssert` of kind "bound": a pad that would be a
    crop or a crop that would be a pad raises, never reads outside): a pad is a fill of
    that size concatenated on, a crop a window of the dim."""
    import sympy

    from stax.importer.symbolic import _unsupported
    where = f"node {node.name} ({node.target})"

    def bound(amount, side, d, crop):
        if isinstance(amount, int):
            return
        e = _sympy_dim(amount)
        what, other = ("crop", "pad") if crop else ("pad", "crop")
        if not _require(b, sympy.Le(e, 0) if crop else sympy.Ge(e, 0),
                        f"the {what} of {amount} {side} dim {d} (a {what} when traced) "
                        f"would be a {other}", "bound"):
            raise _unsupported(f"{where}: the amount {amount} {side} dim {d} changes sign")

    for d, (lo, hi) in sorted(sized.items()):
        hints = signs.get(d, (None, None))
        if any(isinstance(p, str) and h is None for p, h in zip((lo, hi), hints)):
            raise _unsupported(f"{where}: a pad by {lo} and {hi} along dim {d} whose sign "
                               "is unknown at trace time")
        crop_lo, crop_hi = (h is not None and h < 0 for h in hints)
        bound(lo, "before", d, crop_lo)
        bound(hi, "after", d, crop_hi)
        n = _vshape(x)[d]
        if crop_lo or crop_hi:   # the kept window first
            keep = dim_sum([n, lo if crop_lo else 0, hi if crop_hi else 0])
            piece = _window(b, x, _vshape(x), d, _difference(0, lo) if crop_lo else 0,
                            keep)
            if piece is None:
                raise _unsupported(f"{where}: a crop by {lo} and {hi} along dim {d}")
            x = piece
        pieces = []
        for amount, crop in ((lo, crop_lo), (hi, crop_hi)):
            piece_shape = list(_vshape(x))
            piece_shape[d] = amount
            pieces.append(b.full(piece_shape, dtype, value)
                          if not crop and amount != 0 else None)
        out = list(_vshape(x))
        out[d] = dim_sum([p for p, c in ((lo, crop_lo), (out[d], False), (hi, crop_hi))
                          if not c])
        x = _concat(b, [p for p in (pieces[0], b.convert(x, dtype), pieces[1])
                        if p is not None], out, dtype, d)
    return b.reshape(x, shape)


@_reg(aten.constant_pad_nd.default)
def _pad(b, node, a):
    shape, dtype = _out(node)
    x = b.v(a["self"])
    s = _vshape(x)
    r = len(s)
    pad = [_size_arg(b, p) for p in a["pad"]]
    low, high = [0] * r, [0] * r
    signs = {}   # each dim's amounts at trace time (a size's hint)
    for i in range(len(pad) // 2):
        d = r - 1 - i
        low[d], high[d] = pad[2 * i], pad[2 * i + 1]
        signs[d] = (_hint(a["pad"][2 * i]), _hint(a["pad"][2 * i + 1]))
    if any(isinstance(p, str) for p in pad):
        # symbolic mode: amounts that are sizes (`F.pad(x, (0, 128 - T))`); every dim
        # with an amount goes the same way (a static one too)
        sized = {d: (low[d], high[d]) for d in range(r) if low[d] != 0 or high[d] != 0}
        return _pad_by_sizes(b, node, x, shape, dtype, sized, signs, a["value"] or 0)
    for d in range(r):  # negative padding crops
        if low[d] < 0 or high[d] < 0:
            lo, hi = max(0, -low[d]), max(0, -high[d])
            if isinstance(s[d], str):   # a symbolic dim: to `hi` before its end
                x = b.slice(x, d, lo, -hi if hi else _INT64_MAX,
                            length=dim_sum([s[d], -lo - hi]))
            else:
                x = b.slice(x, d, lo, s[d] - hi)
    low = [max(0, p) for p in low]
    high = [max(0, p) for p in high]
    if not any(low) and not any(high):
        return b.reshape(x, shape)
    return b.emit("pad", [x], [b.tt(shape, dtype)],
                  {"low": ir.DenseI64ArrayAttr.get(low), "high": ir.DenseI64ArrayAttr.get(high),
                   "value": b.scalar_attr(dtype, a["value"] or 0)})
