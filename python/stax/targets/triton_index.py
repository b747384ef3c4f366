"""Index algebra of the Triton code generator: the index type (i32, or i64 once a tensor
or the iteration space reaches 2^31 elements), index arithmetic that folds constants and
tracks bounds (`ix_add / ix_mul / ix_div / ix_rem`), the block index (`delinearize` of a
linear index over a shape), index maps (`Ix`: affine expressions over the block index,
composed through views with the kernel schedule's view maps), the emission of an affine
expression as index arithmetic, program ids and ranges, bounds masks, pointers, and the
masked loads and stores at the schedule's offsets.

`_IndexMixin` is one part of `triton_ttir._Lowering`: it reads the lowering's `em`,
`inputs` / `outputs`, `masks`, `cond` and `kernel_op`, keeps `delin` and `check`, and sets
`it`. Guarantees: an index value's `hi` bounds its meaningful lanes (exclusive), and a
div / rem by a divisor the index stays under folds away; a load or store offset is
`kernel_schedule.simplify(sum stride * map)` (the analysis' offset), and at the domain
point it is one of the schedule's offsets, or one of them on its read's region (the terms
its `where` pins replaced by their value: a concat or pad operand of extent 1), else an
internal KernelLoweringError; dims of a
delinearized index summed with its row-major strides are emitted from the linear index
(no div / rem). The view algebra itself lives in `passes/kernel_schedule.py` only.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from stax._mlir import ir
from stax.dialects.schedule import has_schedule, read_schedule
from stax.passes import kernel_schedule
from stax.targets.kernel_ir import contiguous_strides as _contig
from stax.targets.kernel_ir import numel as _numel
from stax.targets.triton_dtypes import DT
from stax.targets.lowering_errors import KernelLoweringError
from stax.targets.triton_emitter import V, _common

I32_LIMIT = (1 << 31) - 1
_NO_BOUND = 1 << 40          # simplifier bound of an index value with no known bound
_DIM = re.compile(r"\bd(\d+)\b")


def _c(v):
    return ir.AffineConstantExpr.get(int(v))


def _d(i):
    return ir.AffineDimExpr.get(i)


def _const_of(e):
    e = e.maybe_downcast()
    return e.value if isinstance(e, ir.AffineConstantExpr) else None


@dataclass(frozen=True)
class Ix:
    """Where a value is read: one affine expression per coordinate of the value over
    `base`, the block index values the kernel iterates (a delinearized linear index,
    rows, the reduced index, a gathered index): dim i is base[i]. Views compose their
    index map onto the expressions (the schedule's maps); nothing is emitted until an
    offset or a coordinate is needed."""
    base: tuple
    exprs: tuple

    def sizes(self):
        return [b.hi if b.hi is not None else _NO_BOUND for b in self.base]


@dataclass
class _Arg:
    """A pointer argument (an input, output or workspace) and the tensor it holds."""
    name: str
    shape: list
    strides: list
    dt: DT
    extent: int      # elements its strided view spans in storage (kernel_ir.extent)


class _IndexMixin:
    """Index arithmetic, masks and memory access of `triton_ttir._Lowering`."""

    # --------------------------------------------------------------- index type
    def _choose_index_type(self, work):
        big = max([a.extent for a in self.inputs + self.outputs] + [work])
        self.it = "i64" if big > I32_LIMIT else "i32"

    # --------------------------------------------------------------- index algebra
    def ix_const(self, c):
        return V(None, (), self.it, cval=int(c), hi=int(c) + 1)

    def ix_add(self, a: V, b: V) -> V:
        if a.is_const and b.is_const:
            return self.ix_const(a.cval + b.cval)
        if a.is_const and a.cval == 0:
            return b
        if b.is_const and b.cval == 0:
            return a
        shape = _common(a.shape, b.shape)
        hi = a.hi + b.hi - 1 if a.hi is not None and b.hi is not None else None
        if b.is_const and b.cval < 0:
            hi = a.hi
        x, y = self.em.mat(a, shape), self.em.mat(b, shape)
        if a.is_const:
            x, y = y, x
        return V(self.em.op(f"arith.addi {x}, {y} : {self.em.ty(shape, self.it)}", "i"),
                 shape, self.it, hi=hi)

    def ix_mul(self, a: V, c: int) -> V:
        if a.is_const:
            return self.ix_const(a.cval * c)
        if c == 1:
            return a
        if c == 0:
            return self.ix_const(0)
        hi = (a.hi - 1) * c + 1 if a.hi is not None and c > 0 else None
        return V(self.em.op(f"arith.muli {a.ssa}, {self.em.mat(self.ix_const(c), a.shape)} : "
                            f"{self.em.ty(a.shape, self.it)}", "i"), a.shape, self.it, hi=hi)

    def ix_div(self, a: V, p: int) -> V:
        if p == 1:
            return a
        if p == 0:   # a dim of size 0 in the divisor: the tensor has no element to index
            return self.ix_const(0)
        if a.is_const:
            return self.ix_const(a.cval // p)
        if a.hi is not None and a.hi <= p:
            return self.ix_const(0)
        hi = (a.hi - 1) // p + 1 if a.hi is not None else None
        return V(self.em.op(f"arith.divui {a.ssa}, {self.em.mat(self.ix_const(p), a.shape)} : "
                            f"{self.em.ty(a.shape, self.it)}", "i"), a.shape, self.it, hi=hi)

    def ix_rem(self, a: V, s: int) -> V:
        if s == 0:   # a dim of size 0: no element to index (as ix_div)
            return self.ix_const(0)
        if a.is_const:
            return self.ix_const(a.cval % s)
        if a.hi is not None and a.hi <= s:
            return a
        return V(self.em.op(f"arith.remui {a.ssa}, {self.em.mat(self.ix_const(s), a.shape)} : "
                            f"{self.em.ty(a.shape, self.it)}", "i"), a.shape, self.it, hi=s)

    def delinearize(self, lin: V, shape):
        idx = [self.ix_rem(self.ix_div(lin, p), s) if s != 1 else self.ix_const(0)
               for s, p in zip(shape, _contig(shape))]
        # Remember where this index came from: an offset summing its dims with the
        # shape's row-major strides is `lin` again, without div/rem (`_ix_sum`). Only
        # true when lin stays below numel(shape): delinearizing the row index over a
        # smaller shape (a 0-dim or [C] value broadcast over the rows) wraps it
        # (lin % numel). An all-constant index needs no memo.
        if lin.hi is not None and lin.hi <= _numel(shape) and \
                not all(i.is_const for i in idx):
            self.delin.setdefault((tuple((i.ssa, i.cval) for i in idx), tuple(shape)),
                                  (tuple(idx), tuple(shape), lin))
        return idx

    # --------------------------------------------------------------- index maps
    def ix_of(self, idx) -> Ix:
        """A list of index values as an Ix: the identity over its (distinct) values."""
        if isinstance(idx, Ix):
            return idx
        base, pos, exprs = [], {}, []
        for i in idx:
            if i.is_const:
                exprs.append(_c(i.cval))
                continue
            if i.ssa not in pos:
                pos[i.ssa] = len(base)
                base.append(i)
            exprs.append(_d(pos[i.ssa]))
        return Ix(tuple(base), tuple(exprs))

    def ix_with(self, ix: Ix, exprs) -> Ix:
        """`exprs` over ix's base, simplified with its bounds (the schedule's simplifier)."""
        sizes = ix.sizes()
        return Ix(ix.base, tuple(kernel_schedule.simplify(e, sizes) for e in exprs))

    def ix_view(self, ix: Ix, view_op) -> Ix:
        """Where a view's operand is read when the view is read at `ix`."""
        return self.ix_with(ix, kernel_schedule.compose(kernel_schedule.view_map(view_op),
                                                        ix.exprs, len(ix.base)))

    def _ix_key(self, ix: Ix):
        names = [b.ssa for b in ix.base]
        return tuple(_DIM.sub(lambda m: names[int(m.group(1))], str(e)) for e in ix.exprs)

    def ix_expr(self, e, ix: Ix) -> V:
        """Emit the affine expression `e` over ix's base as index arithmetic."""
        e = e.maybe_downcast()
        if isinstance(e, ir.AffineConstantExpr):
            return self.ix_const(e.value)
        if isinstance(e, ir.AffineDimExpr):
            return ix.base[e.position]
        if isinstance(e, ir.AffineAddExpr):
            return self._ix_sum(e, ix)
        if isinstance(e, (ir.AffineMulExpr, ir.AffineFloorDivExpr, ir.AffineModExpr)):
            c, x = _const_of(e.rhs), e.lhs
            if c is None and isinstance(e, ir.AffineMulExpr):
                c, x = _const_of(e.lhs), e.rhs
            if c is not None:
                a = self.ix_expr(x, ix)
                if isinstance(e, ir.AffineMulExpr):
                    return self.ix_mul(a, c)
                return self.ix_div(a, c) if isinstance(e, ir.AffineFloorDivExpr) \
                    else self.ix_rem(a, c)
        raise KernelLoweringError(f"kernel {self.name}: index expression {e} is not "
                                  "affine in a constant")

    def _ix_sum(self, e, ix: Ix) -> V:
        """A sum of terms; consecutive dims of a delinearized
        index summed with its row-major strides (times a common factor) are one div/rem
        of its linear index (all of them: the linear index itself)."""
        terms, const = kernel_schedule.sum_terms(e)
        dims = {}
        for t, c in terms:
            t = t.maybe_downcast()
            if isinstance(t, ir.AffineDimExpr) and t.position not in dims:
                dims[t.position] = c
        pos = {b.ssa: p for p, b in enumerate(ix.base)}
        items, done = [], set()   # (coefficient, emit)
        for idx, shape, lin in self.delin.values():
            for run, c, st, n in self._runs(idx, shape, pos, dims, done):
                # sum of dims i..j of lin over shape, times c: (lin / st_j) % numel(i..j)
                items.append((abs(dims[run[0]]), lambda lin=lin, st=st, n=n, c=c:
                              self.ix_mul(self.ix_rem(self.ix_div(lin, st), n), c)))
                done |= set(run)
        for t, c in terms:
            t = t.maybe_downcast()
            if not (isinstance(t, ir.AffineDimExpr) and t.position in done):
                items.append((abs(c), lambda t=t, c=c: self.ix_mul(self.ix_expr(t, ix), c)))
        # smallest stride first, each larger one added in front: (x*64 + (y*4 + z)) shares
        # its inner sums with other offsets of the same index
        items.sort(key=lambda item: item[0])
        vals = [emit() for _, emit in items]
        # add terms of one block shape first: each partial sum is broadcast once
        by_shape = {}
        for x in vals:
            by_shape.setdefault(x.shape, []).append(x)
        acc = self.ix_const(0)
        for group in by_shape.values():
            part = self.ix_const(0)
            for x in group:
                part = self.ix_add(x, part)
            acc = self.ix_add(part, acc)
        return self.ix_add(acc, self.ix_const(const))

    @staticmethod
    def _runs(idx, shape, pos, dims, done):
        """Runs of two or more consecutive dims of a delinearized index whose
        coefficients in a sum are c times their row-major strides over a suffix: (base
        positions, c, stride of the last dim, elements the run spans)."""
        out, run = [], []
        contig = _contig(shape)

        def close():
            if len(run) >= 2:
                (p_last, m_last) = run[-1]
                n = 1
                for _, m in run:
                    n *= shape[m]
                out.append(([p for p, _ in run], dims[p_last], contig[m_last], n))
            run.clear()

        for m, (i, s) in enumerate(zip(idx, shape)):
            if s == 1:
                continue
            p = None if i.is_const else pos.get(i.ssa)
            if p is None or p not in dims or p in done:
                close()
                continue
            if run:
                p_prev, m_prev = run[-1]
                if dims[p_prev] * contig[m] != dims[p] * contig[m_prev] or m != m_prev + 1 \
                        and any(shape[x] != 1 for x in range(m_prev + 1, m)):
                    close()
            run.append((p, m))
        close()
        return out

    # --------------------------------------------------------------- schedule
    def _schedule(self):
        """The kernel's schedule for these strides: its stax.schedule attribute when it
        was made for them, else the analysis; None when the kernel has none."""
        if not hasattr(self, "_sched"):
            k = self.kernel_op
            ins, outs = self.strides
            want = (tuple(tuple(int(x) for x in s) for s in ins),
                    tuple(tuple(int(x) for x in s) for s in outs))
            try:
                s = read_schedule(k) if has_schedule(k) else None
            except (KeyError, ValueError, IndexError, TypeError) as e:
                raise KernelLoweringError(f"kernel {self.name}: its stax.schedule attribute "
                                          f"cannot be read ({e}); verify the module") from e
            if s is not None and len(s.results) != len(outs):
                raise KernelLoweringError(f"kernel {self.name}: its stax.schedule attribute "
                                          f"has {len(s.results)} results for {len(outs)} "
                                          "kernel results; verify the module")
            try:
                if s is None or (s.input_strides, s.output_strides) != want:
                    s = kernel_schedule.analyze(k, ins, outs)
            except kernel_schedule.ScheduleError:
                s = None
            self._sched = s
        return self._sched

    def _check_domain(self, ix: Ix, shape, result=None):
        """Check offsets against the schedule while `ix` is the domain point (ix.exprs:
        the domain's dims over ix's base) and the value evaluated there is the one the
        schedule traces: a reduction's operand (result None), or kernel result `result`
        whose map is the identity."""
        self.check = None
        s = self._schedule()
        if s is None or tuple(shape) != tuple(s.domain):
            return
        if result is not None:
            r = s.results[result]
            if r.map is None or str(r.map) != str(ir.AffineMap.get_identity(len(s.domain))):
                return
        self.check = (ix.base, ir.AffineMap.get(len(ix.base), 0, list(ix.exprs)))

    def _check_offset(self, arg: _Arg, reads, ix: Ix, off):
        """The offset of a read or store at the domain point is the schedule's: a read's
        offset, or that offset on the read's own region (its `where` conditions): there a
        concat or pad operand of extent 1 has one coordinate along its dim, which the
        generator reads at 0 as it reads every size-1 dim, while the schedule's map keeps
        the dim's expression. Any other offset is an internal error."""
        if self.check is None or self.check[0] != ix.base:
            return
        sizes, dom = ix.sizes(), self.check[1]
        domain = list(self._schedule().domain)

        def at(e):
            return str(kernel_schedule.simplify(e.compose(dom), sizes))

        got = set()
        for r in reads:
            if r.offset is None:
                continue
            e = r.offset.results[0]
            got.add(at(e))
            where = getattr(r, "where", None)
            if where is not None:
                got.add(at(kernel_schedule.restrict_to_where(e, where.results, domain)))
        if str(off) not in got:
            raise KernelLoweringError(f"internal error: kernel {self.name}: {arg.name[1:]} is "
                                      f"read at offset {off}, none of the schedule's "
                                      f"{sorted(got)}")

    # --------------------------------------------------------------- masks
    def _and(self, a, b, shape):
        if a is None:
            return b
        if b is None:
            return a
        return self.em.op(f"arith.andi {self.em.mat(a, shape)}, {self.em.mat(b, shape)} : "
                          f"{self.em.ty(shape, 'i1')}", "m")

    def _mask_for(self, shape):
        """The bounds mask (a V of i1) for values of block shape `shape`."""
        return self.masks.get(tuple(shape))

    def _full_mask(self, shape):
        """Bounds mask for `shape`, and-ed with the active concat/pad conditions."""
        m = self._mask_for(shape)
        for c in self.cond:
            if m is None:
                m = c
            else:
                sh = _common(m.shape, c.shape)
                m = V(self._and(m, c, sh), sh, "i1")
        return m

    # --------------------------------------------------------------- memory
    def _ptr(self, arg: _Arg, off: V, shape):
        em = self.em
        pty = f"!tt.ptr<{arg.dt.mem}>"
        if not shape:
            if off.is_const and off.cval == 0:
                return arg.name, pty
            return em.op(f"tt.addptr {arg.name}, {em.mat(off, ())} : {pty}, {self.it}", "p"), pty
        tpty = em.ty(shape, pty)
        base = em.op(f"tt.splat {arg.name} : {pty} -> {tpty}", "p")
        if off.is_const and off.cval == 0:
            return base, tpty
        return em.op(f"tt.addptr {base}, {em.mat(off, shape)} : {tpty}, "
                     f"{em.ty(shape, self.it)}", "p"), tpty

    def _offset(self, arg: _Arg, ix: Ix) -> V:
        """The storage offset of arg read at ix: the schedule's linear offset, checked
        against the schedule at the domain point, emitted."""
        kept = [(e, st) for e, s, st in zip(ix.exprs, arg.shape, arg.strides) if s != 1]
        off = kernel_schedule.simplify(
            kernel_schedule.linear_offset([e for e, _ in kept], [st for _, st in kept]),
            ix.sizes())
        s = self._schedule()
        if s is not None:
            if arg.name.startswith("%in"):
                self._check_offset(arg, s.reads_of(int(arg.name[3:])), ix, off)
            elif arg.name.startswith("%out"):
                self._check_offset(arg, [s.results[int(arg.name[4:])]], ix, off)
        return self.ix_expr(off, ix)

    def _load(self, arg: _Arg, idx) -> V:
        em = self.em
        off = self._offset(arg, self.ix_of(idx))
        shape = off.shape
        mask = self._full_mask(shape) if shape else None
        if mask is not None and mask.shape != shape:
            shape = _common(shape, mask.shape)
        ptr, _ = self._ptr(arg, off, shape)
        if mask is not None:
            x = em.op(f"tt.load {ptr}, {em.mat(mask, shape)} : {em.ty(shape, '!tt.ptr<' + arg.dt.mem + '>')}", "x")
        else:
            x = em.op(f"tt.load {ptr} : {em.ty(shape, '!tt.ptr<' + arg.dt.mem + '>')}", "x")
        return self._from_mem(V(x, shape, arg.dt.mem), arg.dt)

    def _store(self, out: _Arg, val: V, idx, shape):
        """Store val at out[idx] over the block shape `shape`, masked by its bounds."""
        em = self.em
        off = self._offset(out, self.ix_of(idx))
        mask = self._mask_for(shape)
        ptr, tpty = self._ptr(out, off, shape)
        v = self._to_mem(val, out.dt, shape)
        if mask is not None:
            em.emit(f"tt.store {ptr}, {v}, {em.mat(mask, shape)} : {tpty}")
        else:
            em.emit(f"tt.store {ptr}, {v} : {tpty}")

    def _program_id(self, axis, hint):
        """The program id along `axis` ("x" / "y") in the index type."""
        pid = self.em.op(f"tt.get_program_id {axis} : i32", hint)
        if self.it == "i64":
            pid = self.em.op(f"arith.extsi {pid} : i32 to i64", hint)
        return pid

    def _arange(self, n, hint, axis=None):
        """tt.make_range [0, n) in the index type; with `axis`, expanded to [1, n]
        (axis 0) or [n, 1] (axis 1)."""
        em, it = self.em, self.it
        v = em.op(f"tt.make_range {{end = {n} : i32, start = 0 : i32}} : tensor<{n}xi32>", hint)
        if it == "i64":
            v = em.op(f"arith.extsi {v} : tensor<{n}xi32> to tensor<{n}xi64>", hint)
        if axis is None:
            return v
        shape = f"1x{n}" if axis == 0 else f"{n}x1"
        return em.op(f"tt.expand_dims {v} {{axis = {axis} : i32}} : tensor<{n}x{it}> -> "
                     f"tensor<{shape}x{it}>", hint)
