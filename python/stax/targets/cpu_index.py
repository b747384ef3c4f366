"""The CPU target's index algebra: element indices as affine forms over loop variables.

An index is an `Aff` (const + sum of coeff * loop variable). Views are index maps on it:
`row_major_linear` linearizes a multi-index, `IndexAlgebra.delinearize` splits a linear
index by a shape (reshape, a row's output position), `IndexAlgebra.floordiv_mod` keeps
(a // p) % s affine whenever the variables' ranges allow and otherwise materializes it
as a new opaque variable, and `strided_offset` is an operand's element offset from its
strides. `IndexAlgebra.index` materializes a form as an `index` SSA value (memoized per
scope); `lane_coeff` says how it moves per vector lane. Anything not per-lane affine
raises NeedScalar, so the kernel is re-emitted with 1 lane.

`IndexAlgebra.from_affine` turns a kernel schedule's offset (an AffineExpr over the
domain dims) into an Aff over the loop variables: that is how a kernel with a schedule is
addressed (llvm._KernelLowering._addressing_schedule). The view algebra here
(`row_major_linear`, `delinearize`, `floordiv_mod`) remains only for the kernels the
schedule does not address yet: gathers, computed reads or results, kernels the analysis
refuses, and pointwise kernels whose results have other shapes (issue 9)."""
from dataclasses import dataclass

from stax._mlir import ir
from stax.targets.cpu_errors import KernelLoweringError, NeedScalar
from stax.targets.kernel_ir import contiguous_strides as _contig_strides


@dataclass
class Var:
    ssa: str
    extent: int          # values in [0, extent)
    lane: bool = False   # the vectorized loop variable (value is ssa + lane)


@dataclass(frozen=True)
class Aff:
    """const + sum(coeff * var); vars named by their SSA name."""
    const: int = 0
    terms: tuple = ()   # sorted tuple of (var_name, coeff)

    @staticmethod
    def var(name, coeff=1):
        return Aff(0, ((name, coeff),)) if coeff else Aff(0, ())

    def __add__(self, o):
        d = dict(self.terms)
        for k, v in o.terms:
            d[k] = d.get(k, 0) + v
        return Aff(self.const + o.const, tuple(sorted((k, v) for k, v in d.items() if v)))

    def scale(self, k):
        return Aff(self.const * k, tuple(sorted((n, c * k) for n, c in self.terms if c * k)))

    def coeff(self, name):
        return dict(self.terms).get(name, 0)


class IndexAlgebra:
    """The emitter's index methods. They use the emitter's `vars` (SSA name -> Var),
    `idx_memo` (a stack of scopes), `lane_var`, `op` and `const`."""

    def index(self, a: Aff) -> str:
        """Materialize an affine index (its lane-0 value) as an `index` SSA value."""
        if not a.terms:
            return self.const(a.const, "index")
        for m in reversed(self.idx_memo):
            if a in m:
                return m[a]
        acc = None
        for name, c in a.terms:
            t = name if c == 1 else self.op(f"arith.muli {name}, {self.const(c, 'index')} : index", "index")
            acc = t if acc is None else self.op(f"arith.addi {acc}, {t} : index", "index")
        if a.const:
            acc = self.op(f"arith.addi {acc}, {self.const(a.const, 'index')} : index", "index")
        self.idx_memo[-1][a] = acc
        return acc

    def lane_coeff(self, a: Aff) -> int:
        """How far `a` moves from one vector lane to the next (0 outside the lane loop)."""
        return a.coeff(self.lane_var) if self.lane_var else 0

    def max_of(self, a: Aff):
        """The largest value `a` takes over its variables' ranges, or None where a
        coefficient or the constant is negative (no bound is claimed then)."""
        hi = a.const
        for name, c in a.terms:
            if c < 0:
                return None
            hi += c * (self.vars[name].extent - 1)
        return hi if a.const >= 0 else None

    def floordiv_mod(self, a: Aff, p: int, s: int) -> Aff:
        """(a // p) % s, kept affine when the algebra allows, else an opaque variable."""
        if p == 1 and s is None:
            return a
        hi = self.max_of(a)
        if hi is not None:
            q_terms, r_terms = [], []
            for name, c in a.terms:
                (q_terms if c % p == 0 else r_terms).append((name, c))
            k, rc = divmod(a.const, p)
            r_aff = Aff(rc, tuple(r_terms))
            rhi = self.max_of(r_aff)
            if rhi is not None and rhi < p:
                q = Aff(k, tuple((n, c // p) for n, c in q_terms))
                if s is None:
                    return q
                qhi = self.max_of(q)
                if qhi is not None and qhi < s:
                    return q
                keep = [(n, c) for n, c in q.terms if c % s != 0]
                q2 = Aff(q.const % s, tuple(keep))
                q2hi = self.max_of(q2)
                if q2hi is not None and q2hi < s:
                    return q2
        if self.lane_coeff(a):
            raise NeedScalar()
        v = self.index(a)
        if p != 1:
            v = self.op(f"arith.divui {v}, {self.const(p, 'index')} : index", "index")
        if s is not None:
            v = self.op(f"arith.remui {v}, {self.const(s, 'index')} : index", "index")
        ext = s if s is not None else (hi // p + 1 if hi is not None else 1 << 62)
        self.vars[v] = Var(v, ext)
        return Aff.var(v)

    def from_affine(self, e, dims) -> Aff:
        """An AffineExpr over the domain dims (a schedule offset) as an Aff over the loop
        variables, `dims[i]` being domain dim i's. A floordiv or mod the schedule kept
        becomes an opaque variable (memoized per scope); one whose operand moves per
        lane makes the kernel 1-lane."""
        e = e.maybe_downcast()
        if isinstance(e, ir.AffineDimExpr):
            return dims[e.position]
        if isinstance(e, ir.AffineConstantExpr):
            return Aff(e.value)
        if isinstance(e, ir.AffineAddExpr):
            return self.from_affine(e.lhs, dims) + self.from_affine(e.rhs, dims)
        rhs = e.rhs.maybe_downcast() if isinstance(e, ir.AffineBinaryExpr) else None
        if not isinstance(rhs, ir.AffineConstantExpr) or \
                not isinstance(e, (ir.AffineMulExpr, ir.AffineFloorDivExpr, ir.AffineModExpr)):
            raise KernelLoweringError(f"internal error: index expression {e} is not "
                                      "affine with constant factors")
        a = self.from_affine(e.lhs, dims)
        if isinstance(e, ir.AffineMulExpr):
            return a.scale(rhs.value)
        mod = isinstance(e, ir.AffineModExpr)
        key = ("remui" if mod else "divui", a, rhs.value)
        for m in reversed(self.idx_memo):
            if key in m:
                return m[key]
        if self.lane_coeff(a):
            raise NeedScalar()
        v = self.op(f"arith.{key[0]} {self.index(a)}, {self.const(rhs.value, 'index')} : index",
                    "index")
        hi = self.max_of(a)
        self.vars[v] = Var(v, rhs.value if mod else (hi // rhs.value + 1 if hi is not None
                                                     else 1 << 62))
        self.idx_memo[-1][key] = Aff.var(v)
        return Aff.var(v)

    def delinearize(self, lin: Aff, shape) -> list:
        """The row-major multi-index of `shape` at linear index `lin`."""
        return [self.floordiv_mod(lin, p, s) if s != 1 else Aff()
                for s, p in zip(shape, _contig_strides(shape))]


def row_major_linear(idx, shape) -> Aff:
    """The row-major linear index of multi-index `idx` in `shape`."""
    lin = Aff()
    for i, st in zip(idx, _contig_strides(shape)):
        lin = lin + i.scale(st)
    return lin


def strided_offset(idx, shape, strides) -> Aff:
    """The element offset of `idx` in an operand of `shape` laid out with `strides`
    (a size-1 dim adds nothing, whatever its stride)."""
    off = Aff()
    for i, s, st in zip(idx, shape, strides):
        if s != 1:
            off = off + i.scale(st)
    return off
