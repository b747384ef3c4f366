"""Index algebra of the Triton code generator: the index type (i32, or i64 once a tensor
or the iteration space reaches 2^31 elements), index arithmetic that folds constants and
tracks bounds (`ix_add / ix_mul / ix_div / ix_rem`), delinearize / linearize over a
shape, program ids and ranges, bounds masks, pointers and offsets, and the masked loads
and stores built from them.

`_IndexMixin` is one part of `triton_ttir._Lowering`: it reads the lowering's `em`,
`inputs` / `outputs`, `masks` and `cond`, keeps `delin`, and sets `it`. Guarantees: an
index value's `hi` bounds its meaningful lanes (exclusive), and a div / rem by a divisor
the index stays under folds away; linearizing a delinearized index over the same shape
gives the original linear index back, without div / rem, when it stays below numel.
"""
from __future__ import annotations

from dataclasses import dataclass

from stax.targets.kernel_ir import contiguous_strides as _contig
from stax.targets.kernel_ir import numel as _numel
from stax.targets.triton_dtypes import DT
from stax.targets.triton_emitter import V, _common

I32_LIMIT = (1 << 31) - 1


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
        if a.is_const:
            return self.ix_const(a.cval // p)
        if a.hi is not None and a.hi <= p:
            return self.ix_const(0)
        hi = (a.hi - 1) // p + 1 if a.hi is not None else None
        return V(self.em.op(f"arith.divui {a.ssa}, {self.em.mat(self.ix_const(p), a.shape)} : "
                            f"{self.em.ty(a.shape, self.it)}", "i"), a.shape, self.it, hi=hi)

    def ix_rem(self, a: V, s: int) -> V:
        if a.is_const:
            return self.ix_const(a.cval % s)
        if a.hi is not None and a.hi <= s:
            return a
        return V(self.em.op(f"arith.remui {a.ssa}, {self.em.mat(self.ix_const(s), a.shape)} : "
                            f"{self.em.ty(a.shape, self.it)}", "i"), a.shape, self.it, hi=s)

    def delinearize(self, lin: V, shape):
        idx = [self.ix_rem(self.ix_div(lin, p), s) if s != 1 else self.ix_const(0)
               for s, p in zip(shape, _contig(shape))]
        # Remember where this index came from: re-linearizing it over the same shape
        # (a contiguous tensor, a reshape) gives `lin` back without div/rem. Only true
        # when lin stays below numel(shape): delinearizing the row index over a smaller
        # shape (a 0-dim or [C] value broadcast over the rows) wraps it (lin % numel),
        # and re-linearizing must give that index, not lin (a 0-dim input was read at
        # element r of a 1-element buffer). An all-constant index needs no memo.
        if lin.hi is not None and lin.hi <= _numel(shape) and \
                not all(i.is_const for i in idx):
            self.delin.setdefault((self._ikey(idx), tuple(shape)), lin)
        return idx

    def linearize(self, idx, shape):
        got = self.delin.get((self._ikey(idx), tuple(shape)))
        if got is not None:   # SSA names are unique, so a hit is always in scope
            return got
        acc = self.ix_const(0)
        for i, s, st in zip(idx, shape, _contig(shape)):
            if s != 1:
                acc = self.ix_add(acc, self.ix_mul(i, st))
        return acc

    def _ikey(self, idx):
        return tuple((i.ssa, i.cval) for i in idx)

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

    def _offset(self, arg: _Arg, idx):
        contig = _contig(arg.shape)
        if all(st == c for s, st, c in zip(arg.shape, arg.strides, contig) if s != 1):
            return self.linearize(idx, arg.shape)
        off = self.ix_const(0)
        for i, s, st in zip(idx, arg.shape, arg.strides):
            if s != 1 and st != 0:
                off = self.ix_add(off, self.ix_mul(i, st))
        return off

    def _load(self, arg: _Arg, idx) -> V:
        em = self.em
        off = self._offset(arg, idx)
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
        off = self._offset(out, idx)
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
