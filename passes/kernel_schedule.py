"""The kernel schedule analysis: domain, index maps, offsets, phases and tiling of one kernel.

`analyze(kernel_op, input_strides=None, output_strides=None) -> KernelSchedule` (the
dataclass of `stax.dialects.schedule`) works out, once, what each code generator used to
work out for itself:

- the iteration domain: a pointwise kernel's domain shape, or a reduction kernel's full
  space S with its reduced dims D (and keepdim); parallel dims are the others;
- for every read of every kernel input, the index map from domain coordinates to the
  input's coordinates, composed (`AffineExpr.compose`) through the body's views:
  `broadcast_in_dim` (a broadcast or dropped dim reads 0), `permute`, `slice`
  (start + step * d), `reshape` (linearize, then floordiv/mod per dim), and through
  `concat` (a read per operand, with its `where` condition) and `pad` (shifted, with the
  in-bounds condition). A gather's data-dependent read is recorded as computed with its
  reason, never as a wrong map. Row-space reads (after a reduction) use only the
  parallel dims. The same input read through two view paths has two reads;
- the map of every kernel result from the domain (a view of a domain value composes the
  view's forward map; a slice or an expanding broadcast of one is recorded as computed);
- the linear offset map of each read and result for the given strides (contiguous when
  not given), simplified by MLIR (`simplify_affine_expr`) plus the bound facts MLIR's
  simplifier does not know (a dim d of size n has 0 <= d < n; floordiv of floordiv;
  floordiv of a mod): a contiguous reshape's offset simplifies to the plain linear index;
- the reduction phases in dependency order (softmax: max, then sum of exp(x - max)) and
  the per-row values;
- a GPU tiling from the Triton generator's own public heuristics
  (`triton_ttir.analyze_kernel`, `default_config`), or a 2-D tile for a pointwise kernel
  with a transposed read (`gpu_tile`), and the CPU tiling the CPU generator reads
  (`cpu_tiling.cpu_tiling`: mode, lanes, loop order, tail, thread split, 2-D tile).

A kernel this cannot describe raises `ScheduleError` naming the kernel and why.
"""
from __future__ import annotations

import dataclasses

from stax._mlir import ir
from stax.dialects.schedule import (KernelSchedule, Read, Result,
                                    stride_along)
from stax.targets.kernel_ir import contiguous_strides  # (a list; also this module's API)
from stax.targets.kernel_ir import reduction_signature

__all__ = ["analyze", "ScheduleError", "simplify", "contiguous_strides", "VIEW_OPS",
           "view_map", "reshape_map", "compose", "linear_offset", "sum_terms",
           "INDEX_OPS", "REDUCTION_OPS", "reduction_phases", "loop_order", "expr_range",
           "where_pins", "restrict_to_where", "gpu_tile", "TILE_MIN", "TILE_BLOCK"]

REDUCTION_OPS = frozenset({"stax.reduce_sum", "stax.reduce_max", "stax.reduce_min",
                           "stax.reduce_prod", "stax.argmax", "stax.argmin"})
VIEW_OPS = frozenset({"stax.broadcast_in_dim", "stax.reshape", "stax.permute", "stax.slice"})
# ops evaluated at a domain point that read their operands at other points
INDEX_OPS = frozenset({"stax.concat", "stax.pad", "stax.gather"})
GEN_OPS = frozenset({"stax.full", "stax.iota"})


# A pointwise kernel gets a 2-D GPU tile when a read is contiguous along another domain dim
# than the results are, and is strided along theirs (a transposed operand), both dims of at
# least TILE_MIN elements: each load is then contiguous along its own tile axis. Blocks of
# TILE_BLOCK (or the dim's size, a power of two at least 16) per tiled dim.
TILE_MIN = 16
TILE_BLOCK = 64


class ScheduleError(Exception):
    """The kernel cannot be scheduled; the message names the kernel and why."""


# ----------------------------------------------------------------------------- affine algebra

def _c(v):
    return ir.AffineConstantExpr.get(int(v))


def _d(i):
    return ir.AffineDimExpr.get(i)


def _floordiv(e, c):
    return ir.AffineFloorDivExpr.get(e, _c(c))


def _mod(e, c):
    return ir.AffineModExpr.get(e, _c(c))


def _const_of(e):
    e = e.maybe_downcast()
    return e.value if isinstance(e, ir.AffineConstantExpr) else None


def _bounded(e, sizes):
    """(expr, lo, hi): `e` rewritten with the facts 0 <= d_i < sizes[i], and its range."""
    e = e.maybe_downcast()
    if isinstance(e, ir.AffineConstantExpr):
        return e, e.value, e.value
    if isinstance(e, ir.AffineDimExpr):
        return e, 0, max(0, sizes[e.position] - 1)
    if isinstance(e, ir.AffineAddExpr):
        a, alo, ahi = _bounded(e.lhs, sizes)
        b, blo, bhi = _bounded(e.rhs, sizes)
        return a + b, alo + blo, ahi + bhi
    if isinstance(e, ir.AffineMulExpr):
        a, alo, ahi = _bounded(e.lhs, sizes)
        b, blo, bhi = _bounded(e.rhs, sizes)
        prods = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
        return a * b, min(prods), max(prods)
    if isinstance(e, (ir.AffineFloorDivExpr, ir.AffineModExpr, ir.AffineCeilDivExpr)):
        c = _const_of(e.rhs)
        x, lo, hi = _bounded(e.lhs, sizes)
        if c is None or c <= 0:  # not produced by this analysis; keep it as it is
            return e, -(1 << 62), 1 << 62
        inner = x.maybe_downcast()
        if isinstance(e, ir.AffineCeilDivExpr):
            return ir.AffineCeilDivExpr.get(x, _c(c)), -(-lo // c), -(-hi // c)
        if isinstance(e, ir.AffineFloorDivExpr):
            if lo // c == hi // c:
                return _c(lo // c), lo // c, lo // c
            if isinstance(inner, ir.AffineFloorDivExpr) and _const_of(inner.rhs):
                # (x floordiv a) floordiv c == x floordiv (a * c)
                return _bounded(_floordiv(inner.lhs, _const_of(inner.rhs) * c), sizes)
            if isinstance(inner, ir.AffineModExpr) and _const_of(inner.rhs) and \
                    _const_of(inner.rhs) % c == 0:
                # (x mod (m * c)) floordiv c == (x floordiv c) mod m
                m = _const_of(inner.rhs) // c
                return _bounded(_mod(_floordiv(inner.lhs, c), m), sizes)
            split = _split_sum(x, c, sizes)
            if split is not None:  # (k*q + r) floordiv c == q floordiv (c/k), 0 <= r < k
                k, q, _ = split
                return _bounded(_floordiv(q, c // k), sizes)
            r = _floordiv(x, c)
            if not isinstance(r.maybe_downcast(), ir.AffineFloorDivExpr):
                return _bounded(r, sizes)  # MLIR pulled multiples of c out: look again
            return r, lo // c, hi // c
        # mod
        if lo >= 0 and hi < c:
            return x, lo, hi
        if isinstance(inner, ir.AffineModExpr) and _const_of(inner.rhs) and \
                _const_of(inner.rhs) % c == 0:
            return _bounded(_mod(inner.lhs, c), sizes)  # (x mod (k*c)) mod c == x mod c
        split = _split_sum(x, c, sizes)
        if split is not None:  # (k*q + r) mod c == k*(q mod (c/k)) + r, 0 <= r < k
            k, q, rest = split
            return _bounded(_mod(q, c // k) * _c(k) + rest, sizes)
        r = _mod(x, c)
        if not isinstance(r.maybe_downcast(), ir.AffineModExpr):
            return _bounded(r, sizes)
        return r, 0, c - 1
    return e, -(1 << 62), 1 << 62


def _terms(e):
    """A sum as [(expr, coefficient)] plus its constant."""
    e = e.maybe_downcast()
    if isinstance(e, ir.AffineAddExpr):
        a, ca = _terms(e.lhs)
        b, cb = _terms(e.rhs)
        return a + b, ca + cb
    if isinstance(e, ir.AffineConstantExpr):
        return [], e.value
    if isinstance(e, ir.AffineMulExpr) and _const_of(e.rhs) is not None:
        return [(e.lhs, _const_of(e.rhs))], 0
    return [(e, 1)], 0


def _split_sum(x, c, sizes):
    """(k, q, r) with x == k*q + r, k > 1 dividing c and 0 <= r < k over the bounds, or
    None: the terms of large coefficients share the factor k, the rest stay below k."""
    import math
    terms, const = _terms(x)
    if len(terms) < 2:
        return None
    terms.sort(key=lambda t: -abs(t[1]))
    for i in range(1, len(terms)):
        k = c
        for _, co in terms[:i]:
            k = math.gcd(k, co)
        if k <= 1:
            continue
        rest = _c(const)
        for t, co in terms[i:]:
            rest = rest + t * _c(co)
        _, lo, hi = _bounded(rest, sizes)
        if 0 <= lo and hi < k:
            q = _c(0)
            for t, co in terms[:i]:
                q = q + t * _c(co // k)
            return k, q, rest
    return None


def without_unit_dims(e, sizes):
    """`e` with every dim of size 1 replaced by 0 (its only value)."""
    m = ir.AffineMap.get(len(sizes), 0, [ir.AffineConstantExpr.get(0) if n == 1 else
                                         ir.AffineDimExpr.get(i)
                                         for i, n in enumerate(sizes)])
    return e.compose(m)


def simplify(e, sizes):
    """`e` over dims of these sizes, simplified: MLIR's `simplify_affine_expr` and the
    bound facts it lacks, to a fixed point."""
    n = len(sizes)
    prev = None
    for _ in range(6):
        e = ir.AffineExpr.simplify_affine_expr(_bounded(e, sizes)[0], n, 0)
        text = str(e)
        if text == prev:
            break
        prev = text
    return e


def expr_range(e, sizes):
    """(lo, hi): the values `e` takes over dims 0 <= d_i < sizes[i] (inclusive bounds)."""
    _, lo, hi = _bounded(e, sizes)
    return lo, hi


def where_pins(where, sizes) -> dict:
    """{text of a term: its one value} for the terms of the conditions `where` (each >= 0)
    that, within 0 <= d_i < sizes[i], can take only one value where they hold: the
    coordinate along the dim of a concat or pad operand of extent 1. A condition with one
    term bounds it; a condition whose largest value over the bounds is 0 holds only with
    every term at its bound."""
    bounds = {}

    def rng(t):
        return bounds.get(str(t)) or expr_range(t, sizes)

    for _ in range(2):  # a bound found by a later condition can pin a term of an earlier one
        for w in where:
            terms, const = _terms(simplify(w, sizes))
            if len(terms) == 1:
                t, a = terms[0]
                lo, hi = rng(t)
                if a > 0:   # a*t + const >= 0
                    lo = max(lo, -(const // a))
                else:
                    hi = min(hi, const // -a)
                bounds[str(t)] = (lo, hi)
            top = const + sum(max(a * rng(t)[0], a * rng(t)[1]) for t, a in terms)
            if terms and top == 0:
                for t, a in terms:
                    v = rng(t)[1] if a > 0 else rng(t)[0]
                    bounds[str(t)] = (v, v)
    return {k: lo for k, (lo, hi) in bounds.items() if lo == hi}


def _replace(e, pins):
    """`e` with every subexpression whose text is a key of `pins` replaced by its value."""
    if str(e) in pins:
        return _c(pins[str(e)])
    e = e.maybe_downcast()
    if isinstance(e, ir.AffineAddExpr):
        return _replace(e.lhs, pins) + _replace(e.rhs, pins)
    if isinstance(e, ir.AffineMulExpr):
        return _replace(e.lhs, pins) * _replace(e.rhs, pins)
    for kind in (ir.AffineFloorDivExpr, ir.AffineModExpr, ir.AffineCeilDivExpr):
        if isinstance(e, kind):
            return kind.get(_replace(e.lhs, pins), _replace(e.rhs, pins))
    return e


def restrict_to_where(e, where, sizes):
    """`e` as it is where every condition of `where` holds (within the dims' bounds): the
    terms those conditions pin replaced by their value, simplified. A read's offset on its
    own region: a concat operand of extent 1 along the concat dim is read at one
    coordinate there, whatever the map writes for it."""
    pins = where_pins(list(where or ()), sizes)
    return simplify(_replace(e, pins), sizes) if pins else e


def _compose(view_map: "ir.AffineMap", index, ndims):
    """`view_map` applied to `index` (exprs over the domain's `ndims` dims)."""
    sub = ir.AffineMap.get(ndims, 0, list(index))
    return [r.compose(sub) for r in view_map.results]


def _offset(index, strides):
    e = _c(0)
    for x, s in zip(index, strides):
        e = e + x * _c(s)
    return e



def _unit_dims(offset, rank):
    """The domain dims along which an offset map moves by exactly one element."""
    return [d for d in range(rank) if stride_along(offset, d) == 1]


def _tile_block(n):
    return min(TILE_BLOCK, max(TILE_MIN, 1 << max(0, (n - 1).bit_length())))


def gpu_tile(domain, reads, results):
    """(p, q, BP, BQ, num_warps) of a pointwise kernel's 2-D GPU tile, or None (the 1-D
    block over the results' linear index). q: the one dim every result is contiguous
    along (each result of the domain's shape, identity map); p: a dim some read is
    contiguous along while it moves more than one element (or by div/mod) along q. Both
    dims have at least TILE_MIN elements; no read is computed (a gather)."""
    rank = len(domain)
    ident = str(ir.AffineMap.get_identity(rank))
    if rank < 2 or not results or any(r.map is None or str(r.map) != ident for r in results):
        return None
    qs = set(_unit_dims(results[0].offset, rank))
    for r in results[1:]:
        qs &= set(_unit_dims(r.offset, rank))
    if len(qs) != 1 or any(r.map is None for r in reads):
        return None
    (q,) = qs
    for r in reads:
        if stride_along(r.offset, q) in (0, 1):
            continue   # contiguous or broadcast along q: the 1-D block reads it well
        for p in _unit_dims(r.offset, rank):
            if p != q and domain[p] >= TILE_MIN and domain[q] >= TILE_MIN:
                bp, bq = _tile_block(domain[p]), _tile_block(domain[q])
                warps = 8 if bp * bq >= 4096 else (4 if bp * bq >= 1024 else 2)
                return p, q, bp, bq, warps
    return None


# ----------------------------------------------------------------------------- IR queries

def _shape(v):
    return list(ir.RankedTensorType(v.type).shape)


def _ints(op, name):
    return [int(x) for x in ir.DenseI64ArrayAttr(op.attributes[name])]


def _int(op, name):
    return ir.IntegerAttr(op.attributes[name]).value


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def loop_order(shape, strides) -> tuple:
    """The order (outermost first) a pointwise kernel walks its domain for an output of
    `strides`: its dims by decreasing stride, so the innermost loop (the vectorized one on
    the CPU, the fastest lanes on the GPU) moves along the output's stride-1 dim. A
    row-major output (strides not increasing over its non-size-1 dims) keeps the identity
    order, so every contiguous kernel's loops stay as they were. Ties keep dim order."""
    rank = len(shape)
    # size-1 and stride-0 dims move nothing in memory: they go outermost, in dim order
    moving = [d for d in range(rank) if shape[d] > 1 and strides[d] != 0]
    if all(strides[a] >= strides[b] for a, b in zip(moving, moving[1:])):
        return tuple(range(rank))
    return tuple(sorted(range(rank), key=lambda d: (d in moving,
                                                    -strides[d] if d in moving else 0, d)))


def _reduction_signature(op):
    """kernel_ir.reduction_signature, with the op's keepdim."""
    S, D = reduction_signature(op)
    keep = op.attributes["keepdim"] if "keepdim" in op.attributes else None
    return S, D, ir.BoolAttr(keep).value if keep is not None else False


def _reshape_map(src, dst):
    """Index map of a reshape from `dst` coordinates (the result) to `src` coordinates,
    simplified over dst's bounds: linearize, then floordiv/mod per src dim."""
    n = len(dst)
    lin = _offset([_d(i) for i in range(n)], contiguous_strides(dst))
    out = []
    for m, st in enumerate(contiguous_strides(src)):
        e = lin if st == 1 else _floordiv(lin, st)
        if m > 0:
            e = _mod(e, src[m])
        out.append(simplify(e, dst) if src[m] != 1 else _c(0))
    return ir.AffineMap.get(n, 0, out)


def _view_map(op):
    """The map from a view's result coordinates to its operand's."""
    src, dst = _shape(op.operands[0]), _shape(op.results[0])
    n = len(dst)
    if op.name == "stax.broadcast_in_dim":
        dims = _ints(op, "dims")
        return ir.AffineMap.get(n, 0, [_d(k) if src[i] == dst[k] and src[i] != 1 else _c(0)
                                       for i, k in enumerate(dims)])
    if op.name == "stax.permute":
        perm = _ints(op, "perm")
        inv = [perm.index(j) for j in range(len(perm))]
        return ir.AffineMap.get(n, 0, [_d(inv[j]) for j in range(len(perm))])
    if op.name == "stax.slice":
        start, step = _ints(op, "start"), _ints(op, "step")
        return ir.AffineMap.get(n, 0, [_c(a) + _d(k) * _c(s)
                                       for k, (a, s) in enumerate(zip(start, step))])
    return _reshape_map(src, dst)




def _forward_map(op):
    """The map from a view's operand coordinates to its result's, or None when the view
    is not one-to-one with its operand (a partial slice, an expanding broadcast)."""
    src, dst = _shape(op.operands[0]), _shape(op.results[0])
    n = len(src)
    if op.name == "stax.permute":
        perm = _ints(op, "perm")
        return ir.AffineMap.get(n, 0, [_d(p) for p in perm])
    if op.name == "stax.reshape":
        return _reshape_map(dst, src)
    if op.name == "stax.slice":
        if _ints(op, "start") == [0] * n and _ints(op, "step") == [1] * n and src == dst:
            return ir.AffineMap.get_identity(n)
        return None
    dims = _ints(op, "dims")
    if any(dst[k] != 1 for k in range(len(dst)) if k not in dims) or \
            any(src[i] != dst[k] for i, k in enumerate(dims)):
        return None
    out = [_c(0)] * len(dst)
    for i, k in enumerate(dims):
        out[k] = _d(i)
    return ir.AffineMap.get(n, 0, out)


# ----------------------------------------------------------------------------- the analysis

def reduction_phases(body) -> dict:
    """Each reduction of a kernel body (its ops, yield excluded; Operations or OpViews,
    the keys are the objects given) -> its phase: 1 + the deepest phase of the reductions
    its operand depends on (softmax: max 1, sum 2). The one phase analysis: the schedule's
    `phases` and both code generators read it."""
    defining = {}
    for o in body:
        for r in o.results:
            defining[r] = o

    def is_reduction(o):
        return getattr(o, "operation", o).name in REDUCTION_OPS

    def deps(v, seen):
        o = defining.get(v)
        if o is None or id(o) in seen:
            return []
        seen.add(id(o))
        if is_reduction(o):
            return [o]
        out = []
        for x in o.operands:
            out += deps(x, seen)
        return out

    phase = {}
    for o in body:
        if is_reduction(o):
            phase[o] = 1 + max((phase[d] for d in deps(o.operands[0], set())), default=0)
    return phase


class _Analysis:
    def __init__(self, kernel_op, input_strides, output_strides):
        self.op = op = getattr(kernel_op, "operation", kernel_op)
        self.name = ir.StringAttr(op.attributes["name"]).value if "name" in op.attributes \
            else "?"
        block = op.regions[0].blocks[0]
        self.block = block
        self.args = list(block.arguments)
        ops = [o.operation for o in block.operations]
        self.body, self.yielded = ops[:-1], list(ops[-1].operands)
        self.pos = {o: i for i, o in enumerate(self.body)}
        # the `where` conditions of concat/pad pieces that read no input (a full or
        # iota): no Read carries them, but their boundaries still split the lanes
        self.generated_wheres = []
        # the coordinates each gather reads its index at (cpu_tiling: per-lane indices)
        self.gather_coords = []
        self.defining = {}
        for o in self.body:
            for r in o.results:
                self.defining[r] = o
        for v in self.args + self.yielded:
            t = ir.RankedTensorType(v.type)
            if not t.has_static_shape:
                self.fail(f"has a dynamic shape ({t}); stax-schedule handles static shapes "
                          "only")
        self.in_strides = [list(s) for s in input_strides] if input_strides is not None \
            else [contiguous_strides(_shape(a)) for a in self.args]
        self.out_strides = [list(s) for s in output_strides] if output_strides is not None \
            else [contiguous_strides(_shape(v)) for v in self.yielded]
        if len(self.in_strides) != len(self.args) or len(self.out_strides) != len(self.yielded):
            self.fail(f"got {len(self.in_strides)}/{len(self.out_strides)} stride lists for "
                      f"{len(self.args)} inputs / {len(self.yielded)} results")

    def fail(self, why):
        raise ScheduleError(f"kernel '{self.name}' cannot be scheduled: {why}")

    # --------------------------------------------------------------- domain and spaces
    def domain(self):
        reds = [o for o in self.body if o.name in REDUCTION_OPS]
        if reds:
            S, D, keep = _reduction_signature(reds[0])
            for r in reds[1:]:
                S2, D2, _ = _reduction_signature(r)
                if (S2, D2) != (S, D):
                    self.fail(f"its reductions differ in signature: op #{self.pos[r]} "
                              f"'{r.name}' reduces {S2} over {D2}, op #{self.pos[reds[0]]} "
                              f"reduces {S} over {D}")
            self.kind, self.S, self.D, self.keepdim = "reduction", S, D, keep
        else:
            shapes = [_shape(o.results[0]) for o in self.body
                      if o.name not in VIEW_OPS | GEN_OPS and o.results]
            if not shapes:
                shapes = sorted((_shape(v) for v in self.yielded), key=_numel, reverse=True)
            self.kind, self.S, self.D, self.keepdim = "pointwise", shapes[0] if shapes else [], \
                [], False
        self.P = [d for d in range(len(self.S)) if d not in self.D]
        self.row_shapes = ([1 if i in self.D else s for i, s in enumerate(self.S)],
                           [self.S[i] for i in self.P]) if self.D else ()

    def space_of(self, v):
        """"full" or "row" for a value computed at domain points."""
        shp = _shape(v)
        if shp == self.S:
            return "full"
        if self.D and shp in self.row_shapes:
            return "row"
        o = self.defining.get(v)
        what = f"op #{self.pos[o]} '{o.name}'" if o is not None else "a kernel input"
        self.fail(f"{what} has shape {shp}, which is neither the domain {self.S}"
                  + (" nor its rows" if self.D else ""))

    def index_of(self, space, v=None):
        """The coordinates of a value of this space at domain point (d0, ...)."""
        if space == "full":
            return [_d(i) for i in range(len(self.S))]
        if v is not None and _shape(v) == self.row_shapes[1] and \
                _shape(v) != self.row_shapes[0]:
            return [_d(i) for i in self.P]
        return [_c(0) if i in self.D else _d(i) for i in range(len(self.S))]

    # --------------------------------------------------------------- reads
    def trace(self, v, index, space, where, path, out):
        """Follow `v`, read at `index`, back to kernel inputs through views and index ops."""
        n = len(self.S)
        if isinstance(v, ir.BlockArgument) and v.owner == self.block:
            out.append((v.arg_number, [simplify(e, self.S) for e in index], space,
                        [simplify(e, self.S) for e in where], None, ".".join(path) or "direct"))
            return
        o = self.defining.get(v)
        if o is None or o.name in GEN_OPS:
            if where:
                self.generated_wheres.append([simplify(e, self.S) for e in where])
            return
        name = o.name.split(".", 1)[1]
        if o.name in VIEW_OPS:
            self.trace(o.operands[0], _compose(_view_map(o), index, n), space, where,
                       path + [name], out)
        elif o.name == "stax.concat":
            k, split = _int(o, "dim"), _shape(o.operands[0])[_int(o, "dim")]
            self.trace(o.operands[0], index, space, where + [_c(split - 1) - index[k]],
                       path + ["concat.lhs"], out)
            rhs = list(index)
            rhs[k] = index[k] - _c(split)
            self.trace(o.operands[1], rhs, space, where + [rhs[k]], path + ["concat.rhs"], out)
        elif o.name == "stax.pad":
            low, size = _ints(o, "low"), _shape(o.operands[0])
            shifted = [e - _c(lo) for e, lo in zip(index, low)]
            conds = []
            for e, s in zip(shifted, size):
                conds += [e, _c(s - 1) - e]
            self.trace(o.operands[0], shifted, space, where + conds, path + ["pad"], out)
        elif o.name == "stax.gather":
            k = _int(o, "dim")
            self.gather_coords.append(simplify(index[k], self.S))
            self._trace_gather_index(o.operands[1], [index[k]], space, where,
                                     path + ["gather.indices"], out)
            self._computed_reads(o.operands[0], space, path + ["gather.input"],
                                 f"gather along dim {k}: that coordinate is the value of the "
                                 "indices operand, not affine", out)

    def _trace_gather_index(self, v, index, space, where, path, out):
        """trace() of a gather's index operand, through elementwise ops computed in the
        kernel too (a flat index `i * n + j`, a wrapped `t % s`: their operands are read
        at the same coordinates), so every input the index is computed from is labelled
        a gather's index read (path `gather.indices`). The lanes do not depend on the
        label: cpu_tiling reads `gather_coords`, which also covers generated indices."""
        o = self.defining.get(v)
        if o is not None and o.name not in VIEW_OPS | INDEX_OPS | GEN_OPS | REDUCTION_OPS:
            for x in o.operands:
                self._trace_gather_index(x, index, space, where, path, out)
            return
        self.trace(v, index, space, where, path, out)

    def _computed_reads(self, v, space, path, why, out):
        if isinstance(v, ir.BlockArgument) and v.owner == self.block:
            out.append((v.arg_number, None, space, [], why, ".".join(path)))
            return
        o = self.defining.get(v)
        if o is None or o.name in GEN_OPS:
            return
        for x in o.operands:
            self._computed_reads(x, space, path + [o.name.split(".", 1)[1]], why, out)

    def reads(self):
        raw = []
        for o in self.body:
            if o.name in VIEW_OPS | INDEX_OPS | GEN_OPS:
                continue
            if o.name in REDUCTION_OPS:  # reads its operand at every full-space point
                self.trace(o.operands[0], self.index_of("full"), "full", [], [], raw)
                continue
            space = self.space_of(o.results[0])
            idx = self.index_of(space, o.results[0])
            for x in o.operands:
                self.trace(x, idx, space, [], [], raw)
        for v in self.yielded:
            root = self._root(v)[0]
            if root is not None and root.name not in INDEX_OPS:
                continue  # computed by a body op: its reads are traced above
            if root is not None:  # a concat/pad/gather: evaluated at its own space
                space = self.space_of(root.results[0])
                self.trace(root.results[0], self.index_of(space, root.results[0]), space,
                           [], [], raw)
            elif _shape(v) == self.S or (self.D and _shape(v) in self.row_shapes):
                space = self.space_of(v)
                self.trace(v, self.index_of(space, v), space, [], [], raw)
            else:  # a view of an input in another shape: read per result element
                self._computed_reads(v, "full", [], f"read for a result of shape {_shape(v)},"
                                     f" which the domain {self.S} does not index", raw)
        n = len(self.S)
        out, seen = [], {}
        for arg, index, space, where, why, path in raw:
            key = (arg, tuple(map(str, index or ())), tuple(map(str, where)), why)
            if key in seen:
                # the same read as a gather's index too (`t` and `t % s` in one kernel):
                # one read, labelled by its gather use (the label only; see gather_coords)
                k = seen[key]
                if path.endswith("gather.indices") and not out[k].path.endswith(
                        "gather.indices"):
                    out[k] = dataclasses.replace(out[k], path=path)
                continue
            seen[key] = len(out)
            if index is None:
                out.append(Read(arg, space, None, None, None, why, path))
                continue
            # a size-1 input dim adds nothing, whatever its stride (its coordinate is 0
            # wherever the read applies, e.g. a concat's rhs of extent 1)
            offset = simplify(_offset([_c(0) if n == 1 else e for e, n in zip(
                index, _shape(self.args[arg]))], self.in_strides[arg]), self.S)
            out.append(Read(arg, space, ir.AffineMap.get(n, 0, index),
                            ir.AffineMap.get(n, 0, [offset]),
                            ir.AffineMap.get(n, 0, where) if where else None, None, path))
        return out

    # --------------------------------------------------------------- results
    def _root(self, v):
        """(the op computing `v` at domain points or None, the views from it to `v`)."""
        views = []
        while True:
            o = self.defining.get(v)
            if o is None or o.name in GEN_OPS:
                return None, views
            if o.name not in VIEW_OPS:
                return o, views
            views.append(o)
            v = o.operands[0]

    def results(self):
        n = len(self.S)
        out = []
        for i, v in enumerate(self.yielded):
            root, views = self._root(v)
            if root is None:
                if _shape(v) == self.S or (self.D and _shape(v) in self.row_shapes):
                    space = self.space_of(v)
                    index = self.index_of(space, v)
                else:
                    out.append(Result("full", None, None,
                                      f"a view of a kernel input of shape {_shape(v)}, "
                                      f"neither the domain {self.S} nor its rows"))
                    continue
            else:
                rv = root.results[0]
                space = self.space_of(rv)
                index = self.index_of(space, rv)
                bad = None
                for view in reversed(views):
                    fwd = _forward_map(view)
                    if fwd is None:
                        bad = view
                        break
                    index = _compose(fwd, index, n)
                if bad is not None:
                    out.append(Result(space, None, None,
                                      f"a '{bad.name}' of a domain value is not one-to-one "
                                      "with the domain; the generator evaluates it per "
                                      "result element"))
                    continue
            index = [simplify(e, self.S) for e in index]
            offset = simplify(_offset(index, self.out_strides[i]), self.S)
            out.append(Result(space, ir.AffineMap.get(n, 0, index),
                              ir.AffineMap.get(n, 0, [offset])))
        return out

    # --------------------------------------------------------------- phases
    def phases(self):
        phase = reduction_phases(self.body)
        groups = {}
        for o, p in phase.items():
            groups.setdefault(p, []).append(self.pos[o])
        return tuple(tuple(sorted(groups[p])) for p in sorted(groups))

    def row_values(self):
        if not self.D:
            return ()
        out = []
        for o in self.body:
            if o.name in REDUCTION_OPS | VIEW_OPS | GEN_OPS or not o.results:
                continue
            if self.space_of(o.results[0]) == "row":
                out.append(self.pos[o])
        return tuple(out)

    # --------------------------------------------------------------- tiling
    def gpu_tiling(self, reads=(), results=()):
        """The Triton generator's tiling (triton_configs.default_gpu_tiling), which the
        generator reads back; None when the Triton target is not importable."""
        try:
            from stax.targets.triton_configs import default_gpu_tiling
        except ImportError:  # the Triton generator is not importable here
            return None
        tile = gpu_tile(self.S, reads, results) if not self.D else None
        return default_gpu_tiling(self.op, self.S, tuple(self.D),
                                  [(_shape(v), st) for v, st in
                                   zip(self.yielded, self.out_strides)], tile)

    def cpu_tiling(self, reads=(), results=()):
        try:
            from stax.passes.cpu_tiling import cpu_tiling
            return cpu_tiling(self.op, self.kind, self.S, self.D, reads, results,
                              [_shape(v) for v in self.args + self.yielded], self.out_strides,
                              boundaries=self.generated_wheres,
                              gather_coords=self.gather_coords)
        except ImportError:
            return None

    def run(self) -> KernelSchedule:
        self.domain()
        for o in self.body:  # every computed value lives in the domain or its rows
            if o.name not in VIEW_OPS | GEN_OPS and o.results and o.name not in REDUCTION_OPS:
                self.space_of(o.results[0])
        reads, results = tuple(self.reads()), tuple(self.results())
        return KernelSchedule(
            kind=self.kind, domain=tuple(self.S), parallel_dims=tuple(self.P),
            reduced_dims=tuple(self.D), keepdim=self.keepdim,
            input_strides=tuple(tuple(s) for s in self.in_strides),
            output_strides=tuple(tuple(s) for s in self.out_strides),
            reads=reads, results=results,
            phases=self.phases(), row_values=self.row_values(),
            gpu=self.gpu_tiling(reads, results), cpu=self.cpu_tiling(reads, results))


def analyze(kernel_op, input_strides=None, output_strides=None) -> KernelSchedule:
    """The schedule of one `stax_graph.kernel` for these strides (contiguous when None).
    Raises ScheduleError naming the kernel when it cannot be described."""
    op = getattr(kernel_op, "operation", kernel_op)
    with op.context:
        return _Analysis(op, input_strides, output_strides).run()


# public names for the code generators that compose index maps the same way (Triton)
# public for the code generators, which compose their index through the body's views with
# the analysis' own maps (llvm.py, triton_index.py): the algebra exists once
view_map = _view_map
reshape_map = _reshape_map
compose = _compose
linear_offset = _offset
sum_terms = _terms
