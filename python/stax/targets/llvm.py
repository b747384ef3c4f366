"""CPU target: one `stax.kernel` -> scf/vector/memref MLIR -> LLVM dialect -> native code.

How a kernel is lowered:

* Every kernel operand and result is passed as a flat 1-D memref over its storage
  (bare-pointer calling convention), and element addresses are computed from the
  strides the driver says the tensor has. Views inside the kernel (broadcast, reshape,
  permute, slice) are index arithmetic, never copies.
* Values are computed by evaluating the yielded SSA values at an index: each op knows
  how to compute its value at a multi-index from its operands at (transformed)
  indices. Index expressions are affine over the loop variables, and reshapes stay
  affine whenever the dims merge/split cleanly (the common case).
* The innermost loop is vectorized (16 lanes). A load whose address moves by 1 per
  lane is a vector load, by 0 a scalar broadcast, otherwise a gather of scalars. When
  something is not expressible per lane (a reshape that needs div/mod on the vector
  index, a concat or pad boundary that falls inside a vector), the whole kernel is
  emitted with 1 lane instead: slower, never wrong.
* Reduction kernels loop over rows (the kept dims). Per row, reductions run in
  dependency order ("phases", sharing one loop when independent) with vector
  accumulators, per-row values (1/sum, rstd) are computed once per row, then the
  full-row outputs are written. So softmax/layernorm are one loop nest.
* bf16/f16 are computed in f32 and rounded once when stored (and where the graph
  converts explicitly); a stored value's uses inside the kernel see the same rounded
  value (`_round_if_stored`); exp/log/tanh/erf/sigmoid use our own vectorizable polynomial
  forms (cpu_math.py).
"""
import math
from dataclasses import dataclass, field

import torch

from stax._mlir import ExecutionEngine, PassManager, ir
from stax.dialects.stax_dialect import scalar_attr_value
from stax.targets import cpu_math
from stax.targets.kernel_ir import REDUCTION_OPS as _REDUCTIONS
from stax.targets.kernel_ir import ROUNDED_RESULT_OPS
from stax.targets.kernel_ir import VIEW_OPS as _VIEWS
from stax.targets.kernel_ir import arith_binary, python_remainder, with_deep_stack
from stax.targets.kernel_ir import contiguous_strides as _contig_strides
from stax.targets.kernel_ir import etype as _etype
from stax.targets.kernel_ir import extent as _extent
from stax.targets.kernel_ir import float_bits as _fbits
from stax.targets.kernel_ir import float_literal as _float_literal
from stax.targets.kernel_ir import highest as _highest
from stax.targets.kernel_ir import int_array as _ints
from stax.targets.kernel_ir import int_bits as _ibits
from stax.targets.kernel_ir import lowest as _lowest
from stax.targets.kernel_ir import numel as _numel
from stax.targets.kernel_ir import shape as _shape
# the kernel object and its launch are runtime code (a loaded artifact needs them)
from stax.runtime import cpu_kernel as _cpu_kernel
from stax.runtime.cpu_kernel import CpuKernel

PARALLEL_MIN_ELEMENTS = _cpu_kernel.PARALLEL_MIN_ELEMENTS   # the names tests and tools read here
cpu_parallelism = _cpu_kernel.cpu_parallelism
_worker_pool = _cpu_kernel._worker_pool

VECTOR_WIDTH = 16

#: a reduction loop level of more trips than this (per accumulator lane) is blocked
#: when it carries a float sum (see _Kernel._acc_loops)
_BLOCK_TRIPS = 1024


def _sums_float(specs) -> bool:
    """Do these reductions (r, kind, dtype) include a float sum?"""
    return any(kind == "reduce_sum" and dt.comp.startswith("f") for _, kind, dt in specs)

__all__ = ["compile_kernel", "CpuKernel", "KernelLoweringError", "lower_kernel_to_mlir"]


class KernelLoweringError(Exception):
    """The kernel uses something the CPU target cannot lower (the message says what)."""


class _NeedScalar(Exception):
    """Raised while emitting 16-lane code when an index is not per-lane affine."""


# ----------------------------------------------------------------------------- types

@dataclass(frozen=True)
class DType:
    mem: str      # element type in memory (memref element type)
    comp: str     # type computations use
    unsigned: bool = False
    torch_dtype: object = None

    @property
    def is_float(self):
        return self.comp.startswith("f") or self.comp.startswith("bf")

    @property
    def is_bool(self):
        return self.comp == "i1"

    @property
    def bits(self):
        return {"f64": 64, "f32": 32, "f16": 16, "bf16": 16, "i64": 64, "i32": 32, "i16": 16,
                "i8": 8, "i1": 1}[self.mem if self.mem != "i8" or self.comp != "i1" else "i1"]


_DTYPES = {
    "f32": DType("f32", "f32", torch_dtype=torch.float32),
    "f64": DType("f64", "f64", torch_dtype=torch.float64),
    "bf16": DType("bf16", "f32", torch_dtype=torch.bfloat16),
    "f16": DType("f16", "f32", torch_dtype=torch.float16),
    "i64": DType("i64", "i64", torch_dtype=torch.int64),
    "i32": DType("i32", "i32", torch_dtype=torch.int32),
    "i16": DType("i16", "i16", torch_dtype=torch.int16),
    "i8": DType("i8", "i8", torch_dtype=torch.int8),
    "ui8": DType("i8", "i8", unsigned=True, torch_dtype=torch.uint8),
    "i1": DType("i8", "i1", torch_dtype=torch.bool),
}


def dtype_of(t: ir.Type) -> DType:
    s = str(t)
    if s not in _DTYPES:
        raise KernelLoweringError(f"element type {s} is not supported by the CPU target")
    return _DTYPES[s]


def _fmt_float(v: float) -> str:
    if v != v:
        return "0x7FC00000"
    if v == math.inf:
        return "0x7F800000"
    if v == -math.inf:
        return "0xFF800000"
    return _float_literal(v)


def _fmt_float_for(v, ctype):
    if ctype == "f64":
        if v != v:
            return "0x7FF8000000000000"
        if v in (math.inf, -math.inf):
            return "0x7FF0000000000000" if v > 0 else "0xFFF0000000000000"
        return _float_literal(v)
    return _fmt_float(v)


# ----------------------------------------------------------------------------- index algebra

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
    def of(c=0, **_):
        return Aff(c, ())

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


# ----------------------------------------------------------------------------- the emitter

@dataclass
class _Val:
    ssa: str
    vec: bool      # a vector<W x comp> value; otherwise a scalar (uniform across lanes)
    comp: str      # compute type


class _Emitter:
    def __init__(self, width):
        self.W = width
        self.lines = []
        self.indent = 2
        self.n = 0
        self.consts = {}
        self.vars = {}
        self.memo = [{}]
        self.idx_memo = [{}]
        self.lane_var = None

    # --- raw text
    def fresh(self):
        self.n += 1
        return f"%v{self.n}"

    def emit(self, text):
        self.lines.append(" " * self.indent + text)

    def op(self, text, ty):
        r = self.fresh()
        self.emit(f"{r} = {text}")
        return r

    def bool_of(self, ty):
        return f"vector<{self.W}xi1>" if ty.startswith("vector") else "i1"

    def vt(self, comp, vec):
        return f"vector<{self.W}x{comp}>" if vec else comp

    def const(self, value, ctype):
        # Constants live at function scope (hoisted) so loops can share them.
        key = (repr(value), ctype)
        if key not in self.consts:
            name = f"%c{len(self.consts)}"
            if ctype == "index" or ctype.startswith("i"):
                text = f"arith.constant {int(value)} : {ctype}"
            else:
                text = f"arith.constant {_fmt_float_for(value, ctype)} : {ctype}"
            self.consts[key] = (name, text)
        return self.consts[key][0]

    def splat(self, value, ty):
        """A constant of type `ty` (scalar or vector)."""
        if ty.startswith("vector"):
            elem = ty[ty.index("x") + 1:-1]
            s = self.const(value if not isinstance(value, str) else float(value), elem)
            key = ("splat", s, ty)
            if key not in self.consts:
                name = f"%c{len(self.consts)}"
                self.consts[key] = (name, f"vector.broadcast {s} : {elem} to {ty}")
            return self.consts[key][0]
        return self.const(value if not isinstance(value, str) else float(value), ty)

    # --- scopes (values defined inside a loop body are not visible after it)
    def push(self):
        self.memo.append({})
        self.idx_memo.append({})
        self.indent += 2

    def pop(self):
        self.memo.pop()
        self.idx_memo.pop()
        self.indent -= 2

    def lookup(self, key):
        for m in reversed(self.memo):
            if key in m:
                return m[key]
        return None

    def remember(self, key, val):
        self.memo[-1][key] = val

    # --- index values
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
        return a.coeff(self.lane_var) if self.lane_var else 0

    def max_of(self, a: Aff):
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
            raise _NeedScalar()
        v = self.index(a)
        if p != 1:
            v = self.op(f"arith.divui {v}, {self.const(p, 'index')} : index", "index")
        if s is not None:
            v = self.op(f"arith.remui {v}, {self.const(s, 'index')} : index", "index")
        ext = s if s is not None else (hi // p + 1 if hi is not None else 1 << 62)
        self.vars[v] = Var(v, ext)
        return Aff.var(v)

    # --- value plumbing
    def to_vec(self, v: _Val) -> str:
        if v.vec or self.W == 1:
            return v.ssa
        return self.op(f"vector.broadcast {v.ssa} : {v.comp} to vector<{self.W}x{v.comp}>",
                       self.vt(v.comp, True))

    def unify(self, vals):
        vec = any(v.vec for v in vals) and self.W > 1
        return [self.to_vec(v) if vec else v.ssa for v in vals], vec


# ----------------------------------------------------------------------------- kernel analysis



def _row_major_linear(idx, shape):
    lin = Aff()
    for i, st in zip(idx, _contig_strides(shape)):
        lin = lin + i.scale(st)
    return lin


@dataclass
class _Arg:
    name: str        # memref SSA name
    shape: list
    strides: list
    dtype: DType
    extent: int      # elements of the flat memref

    @property
    def memref(self):
        return f"memref<{max(self.extent, 1)}x{self.dtype.mem}>"


class _KernelLowering:
    def __init__(self, kernel_op, in_strides, out_strides, name):
        self.op = kernel_op
        self.name = name
        block = kernel_op.regions[0].blocks[0]
        self.block = block
        self.args = list(block.arguments)
        ops = list(block.operations)
        self.body = ops[:-1]
        self.yielded = list(ops[-1].operands)
        self.stored_vals = set(self.yielded)
        self.inputs = []
        for i, (a, st) in enumerate(zip(self.args, in_strides)):
            shp = _shape(a)
            self.inputs.append(_Arg(f"%in{i}", shp, list(st), dtype_of(_etype(a)), _extent(shp, st)))
        self.outputs = []
        for i, (v, st) in enumerate(zip(self.yielded, out_strides)):
            shp = _shape(v)
            self.outputs.append(_Arg(f"%out{i}", shp, list(st), dtype_of(_etype(v)), _extent(shp, st)))
        self.arg_index = {a: i for i, a in enumerate(self.args)}
        self.reductions = [o for o in self.body if o.operation.name in _REDUCTIONS]
        self.defining = {}
        for o in self.body:
            for r in o.results:
                self.defining[r] = o

    # --------------------------------------------------------------- top level
    def lower(self) -> str:
        return with_deep_stack(self.op, self._lower_any_width)

    def _lower_any_width(self) -> str:
        try:
            return self._lower(VECTOR_WIDTH)
        except _NeedScalar:
            return self._lower(1)

    def _lower(self, width):
        self.em = em = _Emitter(width)
        self.row_vals = {}
        self.stash = None
        self.stash_active = False
        self.splittable = True
        params = ", ".join(f"{a.name}: {a.memref}" for a in self.inputs + self.outputs)
        params += ", %part: index, %nparts: index"
        if any(a.extent == 0 for a in self.outputs):
            body_lines = []
        elif self.reductions:
            self._emit_reduction_kernel()
            body_lines = em.lines
        else:
            self._emit_pointwise_kernel()
            body_lines = em.lines
        consts = ["    " + f"{n} = {t}" for n, t in em.consts.values()]
        text = [f"func.func @{self.name}({params}) attributes {{llvm.emit_c_interface}} {{"]
        text += consts + body_lines + ["    return", "  }"]
        return "module {\n  " + "\n".join(text) + "\n}\n"

    # --------------------------------------------------------------- loops
    def _part_range(self, n, align):
        """[lo, hi) of the outermost loop for this call's part (%part of %nparts): the
        caller may split a kernel across threads. lo/hi are multiples of `align`,
        except hi == n for the last part."""
        em = self.em
        c = lambda v: em.const(v, "index")  # noqa: E731
        a = em.op(f"arith.muli %part, {c(n)} : index", "index")
        lo = em.op(f"arith.divui {a}, %nparts : index", "index")
        p1 = em.op(f"arith.addi %part, {c(1)} : index", "index")
        b = em.op(f"arith.muli {p1}, {c(n)} : index", "index")
        hi = em.op(f"arith.divui {b}, %nparts : index", "index")
        if align > 1:
            lo = em.op(f"arith.muli {em.op(f'arith.divui {lo}, {c(align)} : index', 'index')}, "
                       f"{c(align)} : index", "index")
            hi = em.op(f"arith.muli {em.op(f'arith.divui {hi}, {c(align)} : index', 'index')}, "
                       f"{c(align)} : index", "index")
            last = em.op(f"arith.cmpi eq, {p1}, %nparts : index", "i1")
            hi = em.op(f"arith.select {last}, {c(n)}, {hi} : index", "index")
        return lo, hi

    def _loop_nest(self, shape, body, vectorize=True):
        """for idx in shape: body(idx), innermost dim vectorized; tail in 1 lane.
        The outermost dim covers only this call's part (see _part_range)."""
        em = self.em
        idx = []
        opened = 0
        top = self.em.indent == 2  # only top-level nests are split across threads
        if not shape or not top:
            if top:
                self.splittable = False
        for d, n in enumerate(shape[:-1] if shape else []):
            iv = em.fresh()
            lo, hi = (self._part_range(n, 1) if (d == 0 and top)
                      else (em.const(0, 'index'), em.const(n, 'index')))
            em.emit(f"scf.for {iv} = {lo} to {hi} "
                    f"step {em.const(1, 'index')} {{")
            em.push()
            opened += 1
            em.vars[iv] = Var(iv, n)
            idx.append(Aff.var(iv))
        if not shape:
            body([])
        else:
            n = shape[-1]
            W = em.W if vectorize else 1
            if len(shape) == 1 and top:
                self._split_vector_loop(n, W, idx, body)
                return
            main = (n // W) * W if W > 1 else 0
            if main:
                self._lane_loop(em.const(0, 'index'), em.const(main, 'index'), W, main, idx, body)
            if main < n:
                self._tail_loop(em.const(main, 'index'), em.const(n, 'index'), n, idx, body)
        for _ in range(opened):
            em.pop()
            em.emit("}")

    def _split_vector_loop(self, n, W, idx, body):
        """A rank-1 nest: this part's [lo, hi) in W-wide steps, then a 1-lane tail."""
        em = self.em
        lo, hi = self._part_range(n, W)
        if W > 1:
            span = em.op(f"arith.subi {hi}, {lo} : index", "index")
            q = em.op(f"arith.divui {span}, {em.const(W, 'index')} : index", "index")
            q = em.op(f"arith.muli {q}, {em.const(W, 'index')} : index", "index")
            mid = em.op(f"arith.addi {lo}, {q} : index", "index")
            self._lane_loop(lo, mid, W, n, idx, body)
        else:
            mid = lo
        self._tail_loop(mid, hi, n, idx, body)

    def _lane_loop(self, lo, hi, W, n, idx, body):
        """scf.for over [lo, hi) in W-lane steps (the vector body); n bounds the index."""
        em = self.em
        iv = em.fresh()
        em.emit(f"scf.for {iv} = {lo} to {hi} step {em.const(W, 'index')} {{")
        em.push()
        em.vars[iv] = Var(iv, n, lane=True)
        em.lane_var = iv
        body(idx + [Aff.var(iv)])
        em.lane_var = None
        em.pop()
        em.emit("}")

    def _tail_loop(self, lo, hi, n, idx, body):
        """scf.for over [lo, hi) one element at a time (the vector loop's tail)."""
        em = self.em
        saved_w = em.W
        em.W = 1
        iv = em.fresh()
        em.emit(f"scf.for {iv} = {lo} to {hi} step {em.const(1, 'index')} {{")
        em.push()
        em.vars[iv] = Var(iv, n)
        body(idx + [Aff.var(iv)])
        em.pop()
        em.emit("}")
        em.W = saved_w

    # --------------------------------------------------------------- pointwise
    def _emit_pointwise_kernel(self):
        groups = {}
        for i, v in enumerate(self.yielded):
            groups.setdefault(tuple(_shape(v)), []).append(i)
        for shape, outs in groups.items():
            def body(idx, outs=outs):
                for i in outs:
                    self._store(i, self._eval(self.yielded[i], idx), idx)
            self._loop_nest(list(shape), body)

    # --------------------------------------------------------------- reductions
    def _reduction_signature(self, op):
        shp = _shape(op.operands[0])
        if op.operation.name in ("stax.argmax", "stax.argmin"):
            dims = [ir.IntegerAttr(op.attributes["dim"]).value]
        else:
            dims = sorted(_ints(op, "dims"))
        return shp, dims

    def _emit_reduction_kernel(self):
        em = self.em
        S, D = self._reduction_signature(self.reductions[0])
        for r in self.reductions[1:]:
            if self._reduction_signature(r) != (S, D):
                raise KernelLoweringError(
                    f"kernel {self.name} mixes reductions of different signatures "
                    f"({S} over {D} and {self._reduction_signature(r)}); stax-fuse should "
                    "have split them")
        self.S, self.D = S, D
        outer_dims = [d for d in range(len(S)) if d not in D]
        self.outer_dims = outer_dims
        # Phase of each reduction: 1 + the deepest reduction it depends on.
        phase = {}

        def deps(v, seen):
            o = self.defining.get(v)
            if o is None or o in seen:
                return set()
            seen.add(o)
            out = set()
            if o.operation.name in _REDUCTIONS:
                out.add(o)
                return out
            for x in o.operands:
                out |= deps(x, seen)
            return out

        for r in self.reductions:
            ds = deps(r.operands[0], set())
            phase[r] = 1 + max((phase[d] for d in ds), default=0)
        phases = sorted(set(phase.values()))
        # An output with the domain's element count is written per element (it may be a
        # reshape of the domain, or a row value broadcast back); the rest are per row.
        full_outs = [i for i, v in enumerate(self.yielded) if _numel(_shape(v)) == _numel(S)]
        row_outs = [i for i in range(len(self.yielded)) if i not in full_outs]

        inner_shape = [S[d] for d in D]
        column = (em.W > 1 and outer_dims and D[-1] < outer_dims[-1]
                  and S[outer_dims[-1]] >= em.W
                  and not any(r.operation.name in ("stax.argmax", "stax.argmin")
                              for r in self.reductions))
        # Row mode: one row (all kept indices fixed) at a time, vectorized along the
        # innermost reduced dim. Column mode (the reduced dims precede the last kept
        # dim, e.g. a sum over the batch dim): W neighbouring rows at once, vectorized
        # along the last kept dim, so loads stay contiguous.
        loop_dims = outer_dims[:-1] if column else outer_dims
        opened = 0
        outer_idx = {}
        if not outer_dims:
            self.splittable = False
        for k, d in enumerate(loop_dims):
            iv = em.fresh()
            lo, hi = (self._part_range(S[d], 1) if k == 0
                      else (em.const(0, 'index'), em.const(S[d], 'index')))
            em.emit(f"scf.for {iv} = {lo} to {hi} "
                    f"step {em.const(1, 'index')} {{")
            em.push()
            opened += 1
            em.vars[iv] = Var(iv, S[d])
            outer_idx[d] = Aff.var(iv)
        self.outer_idx = outer_idx

        def full_index(inner):
            idx = []
            it = iter(inner)
            for d in range(len(S)):
                idx.append(outer_idx[d] if d in outer_idx else next(it))
            return idx

        self.full_index = full_index

        # Stash: in the last reduction phase, the per-element value it reduces (softmax's
        # exp(x - max)) is also written to a full-row output buffer, and the output phase
        # reads it back instead of recomputing it (one exp per element, not two). Only
        # where the output's memory type is the stashed value's compute type exactly
        # (an f32 output for an f32 value, an i64 output for an i64 value), so the buffer
        # holds it bit for bit: an i64 sum's operand cannot live in the f32 buffer of
        # the float cast that follows it, nor an f32 value in an f64 buffer.
        self.stash = None
        self.stash_active = False
        if not column and phases:
            last_inputs = [r.operands[0] for r in self.reductions if phase[r] == phases[-1]]
            for i in full_outs:
                out = self.outputs[i]
                if out.dtype.mem != out.dtype.comp or _shape(self.yielded[i]) != S:
                    continue
                for c in last_inputs:
                    if c in self.defining and _shape(c) == S and \
                            dtype_of(_etype(c)).comp == out.dtype.mem and \
                            self.defining[c].operation.name not in _VIEWS and \
                            self._depends_on(self.yielded[i], c):
                        self.stash = (c, i)
                        break
                if self.stash:
                    break

        def rows_body(column_mode):
            for p in phases:
                reds = [r for r in self.reductions if phase[r] == p]
                if column_mode:
                    self._emit_phase_column(reds, inner_shape, full_index)
                else:
                    self._emit_phase(reds, inner_shape, full_index)
            for i in row_outs:
                self._store_row(i)
            if full_outs:
                def body(inner):
                    idx = full_index(inner)
                    for i in full_outs:
                        yidx = self._domain_to_output_index(i, idx)
                        self._store(i, self._eval(self.yielded[i], yidx), yidx)
                self.stash_active = self.stash is not None and not column_mode
                if column_mode:
                    self._plain_loops(inner_shape, body)
                else:
                    self._loop_nest(inner_shape, body)

        if not column:
            rows_body(False)
        else:
            last = outer_dims[-1]
            n = S[last]
            W = em.W
            if loop_dims:
                lo, hi = em.const(0, "index"), em.const(n, "index")
                mid = em.const((n // W) * W, "index")
            else:
                lo, hi = self._part_range(n, W)
                span = em.op(f"arith.subi {hi}, {lo} : index", "index")
                q = em.op(f"arith.divui {span}, {em.const(W, 'index')} : index", "index")
                q = em.op(f"arith.muli {q}, {em.const(W, 'index')} : index", "index")
                mid = em.op(f"arith.addi {lo}, {q} : index", "index")
            for a, b, step, lane in ((lo, mid, W, True), (mid, hi, 1, False)):
                iv = em.fresh()
                em.emit(f"scf.for {iv} = {a} to {b} step {em.const(step, 'index')} {{")
                em.push()
                em.vars[iv] = Var(iv, n, lane=lane)
                outer_idx[last] = Aff.var(iv)
                saved = em.W
                if lane:
                    em.lane_var = iv
                else:
                    em.W = 1
                rows_body(True)
                em.lane_var = None
                em.W = saved
                em.pop()
                em.emit("}")
        for _ in range(opened):
            em.pop()
            em.emit("}")

    def _depends_on(self, v, target):
        seen = set()
        stack = [v]
        while stack:
            x = stack.pop()
            if x == target:
                return True
            o = self.defining.get(x)
            if o is None or o.operation.name in _REDUCTIONS or id(o) in seen:
                continue
            seen.add(id(o))
            stack.extend(o.operands)
        return False

    def _plain_loops(self, shape, body):
        """Step-1 loops over `shape` that keep the current lane setting."""
        em = self.em
        idx = []
        for n in shape:
            iv = em.fresh()
            em.emit(f"scf.for {iv} = {em.const(0, 'index')} to {em.const(n, 'index')} "
                    f"step {em.const(1, 'index')} {{")
            em.push()
            em.vars[iv] = Var(iv, n)
            idx.append(Aff.var(iv))
        body(idx)
        for _ in shape:
            em.pop()
            em.emit("}")

    def _emit_phase_column(self, reds, inner_shape, full_index):
        """Reductions along step-1 loops, one accumulator lane per kept-dim neighbour."""
        em = self.em
        vec = em.lane_var is not None and em.W > 1
        specs = [(r, r.operation.name.split(".")[1], dtype_of(_etype(r.operands[0]))) for r in reds]
        types = [em.vt(dt.comp, vec) for _, _, dt in specs]
        cur = []
        for (r, kind, dt), ty in zip(specs, types):
            fl = dt.comp.startswith("f")
            start = {"reduce_sum": 0.0 if fl else 0, "reduce_prod": 1.0 if fl else 1,
                     "reduce_max": _lowest(dt.comp, dt.unsigned),
                     "reduce_min": _highest(dt.comp, dt.unsigned)}[kind]
            cur.append(em.splat(start, ty))

        def kind_op(kind, dt):
            fl = dt.comp.startswith("f")
            u = dt.unsigned or dt.comp == "i1"
            op = {"reduce_sum": "addf" if fl else "addi", "reduce_prod": "mulf" if fl else "muli",
                  "reduce_max": "maximumf" if fl else ("maxui" if u else "maxsi"),
                  "reduce_min": "minimumf" if fl else ("minui" if u else "minsi")}[kind]
            if dt.comp == "i1":
                op = {"reduce_sum": "ori", "reduce_max": "ori", "reduce_prod": "andi",
                      "reduce_min": "andi"}[kind]
            return op

        def merge(accs_, parts):
            return [em.op(f"arith.{kind_op(kind, dt)} {x}, {y} : {ty}", ty)
                    for (_, kind, dt), ty, x, y in zip(specs, types, accs_, parts)]

        def body(ivs, cur):
            idx = full_index([Aff.var(v) for v in ivs])
            new = []
            for (r, kind, dt), acc, ty in zip(specs, cur, types):
                x = self._eval(r.operands[0], idx)
                xs = em.to_vec(x) if vec else x.ssa
                new.append(em.op(f"arith.{kind_op(kind, dt)} {acc}, {xs} : {ty}", ty))
            return new

        new = self._acc_loops([(0, n, 1, False) for n in inner_shape], cur, types,
                              lambda: list(cur), merge, body, blocked=_sums_float(specs))
        for (r, kind, dt), v in zip(specs, new):
            self.row_vals[r.results[0]] = _Val(v, vec, dt.comp)

    def _acc_loops(self, loops, accs, types, fresh, merge, body, blocked):
        """A loop nest carrying accumulators; returns their final values.

        `loops`: (lo, hi, step, lane) per level, outermost first (Python ints; `lane`: the
        level is the vectorized one). `body(ivs, cur)` emits one step and returns the new
        accumulator values. With `blocked` (a float sum is among them), each level sums
        into its own partial (from `fresh()`, the identity values) that `merge(acc, part)`
        adds to its parent's accumulator once the level's loop ends, and a level of more
        than _BLOCK_TRIPS trips runs as blocks of about sqrt(trips) trips, each its own
        partial: an accumulator lane then takes O(sqrt(n)) additions, not n, so a sum of
        4M values near 100 keeps ~6 digits (one running f32 sum kept ~3), close to
        eager's cascade sum; max/min/int partials merge exactly."""
        em = self.em
        levels = []
        for lo, hi, st, lane in loops:
            trips = -(-(hi - lo) // st)
            if blocked and trips > _BLOCK_TRIPS:
                bt = 1 << max(5, math.ceil(math.log2(math.sqrt(trips))))
                levels.append(dict(lo=lo, hi=hi, step=st * bt, index=False, lane=False))
                levels.append(dict(lo=None, hi=hi, step=st, index=True, lane=lane,
                                   span=st * bt))
            else:
                levels.append(dict(lo=lo, hi=hi, step=st, index=True, lane=lane))
        cur = accs
        parents, res_names, ivs = [], [], []
        block_iv = None
        for k, lev in enumerate(levels):
            iv = em.fresh()
            start = cur if (k == 0 or not blocked) else fresh()
            res = [em.fresh() for _ in cur]
            iters = [em.fresh() for _ in cur]
            if lev["lo"] is None:  # the trips of one block: [block, min(block + span, hi))
                lo = block_iv
                hi = em.op(f"arith.addi {block_iv}, {em.const(lev['span'], 'index')} : index",
                           "index")
                hi = em.op(f"arith.minui {hi}, {em.const(lev['hi'], 'index')} : index", "index")
            else:
                lo, hi = em.const(lev["lo"], "index"), em.const(lev["hi"], "index")
            lhs = (", ".join(res) + " = ") if res else ""
            em.emit(f"{lhs}scf.for {iv} = {lo} to {hi} step {em.const(lev['step'], 'index')} "
                    "iter_args(" + ", ".join(f"{i} = {c}" for i, c in zip(iters, start))
                    + ") -> (" + ", ".join(types) + ") {")
            em.push()
            if lev["index"]:
                em.vars[iv] = Var(iv, lev["hi"], lane=lev["lane"])
                ivs.append(iv)
            else:
                block_iv = iv
            parents.append(cur)
            res_names.append(res)
            cur = iters
        new = body(ivs, cur)
        for k in reversed(range(len(levels))):
            em.emit("scf.yield " + ", ".join(new) + (" : " + ", ".join(types) if new else ""))
            em.pop()
            em.emit("}")
            new = res_names[k]
            if blocked and k > 0:
                new = merge(parents[k], new)
        return new

    def _is_full_space(self, v):
        """Does v vary along the reduced dims (i.e. is it computed per element)?"""
        o = self.defining.get(v)
        n_s = _numel(self.S)
        if o is None:
            # an input reshaped into the domain inside the kernel is still per element
            return _numel(_shape(v)) == n_s
        if o.operation.name in _REDUCTIONS:
            return False
        if not o.operands:  # full / iota / constants
            return _numel(_shape(v)) == n_s
        return any(self._is_full_space(x) for x in o.operands)

    def _emit_phase(self, reds, inner_shape, full_index):
        """One pass over the row computing several independent reductions."""
        em = self.em
        scalar_red = any(r.operation.name in ("stax.argmax", "stax.argmin") for r in reds)
        specs = []
        for r in reds:
            kind = r.operation.name.split(".")[1]
            dt = dtype_of(_etype(r.operands[0]))
            specs.append((r, kind, dt))
        # Accumulators: for each reduction, value (and index for arg reductions).
        n_inner = 1
        for s in inner_shape:
            n_inner *= s
        if n_inner == 0:
            raise KernelLoweringError("reduction over an empty dim is not supported")
        W = 1 if scalar_red else em.W
        n = inner_shape[-1]
        main = (n // W) * W if W > 1 else 0
        outer_inner = inner_shape[:-1]

        def init(kind, comp, vec, unsigned):
            ty = em.vt(comp, vec)
            if kind == "reduce_sum":
                return em.splat(0, ty) if not comp.startswith("f") else em.splat(0.0, ty)
            if kind == "reduce_prod":
                return em.splat(1, ty) if not comp.startswith("f") else em.splat(1.0, ty)
            if kind in ("reduce_max", "argmax"):
                return em.splat(_lowest(comp, unsigned), ty)
            return em.splat(_highest(comp, unsigned), ty)

        def combine(kind, comp, unsigned, acc, x, ty):
            if kind == "reduce_sum":
                return em.op(f"arith.{'addf' if comp.startswith('f') else 'addi'} {acc}, {x} : {ty}", ty)
            if kind == "reduce_prod":
                return em.op(f"arith.{'mulf' if comp.startswith('f') else 'muli'} {acc}, {x} : {ty}", ty)
            if kind == "reduce_max":
                o = "maximumf" if comp.startswith("f") else ("maxui" if unsigned else "maxsi")
                if comp == "i1":
                    o = "ori"
                return em.op(f"arith.{o} {acc}, {x} : {ty}", ty)
            o = "minimumf" if comp.startswith("f") else ("minui" if unsigned else "minsi")
            if comp == "i1":
                o = "andi"
            return em.op(f"arith.{o} {acc}, {x} : {ty}", ty)

        # Loop-carried accumulators per segment (vector main loop, scalar tail).
        def run_segment(lo, hi, step, vec):
            """Emit loops over outer_inner x [lo, hi) with accumulators; returns final accs."""
            accs = []
            for r, kind, dt in specs:
                comp = dt.comp
                if kind in ("argmax", "argmin"):
                    accs.append(init(kind, comp, False, dt.unsigned))
                    accs.append(em.const(0, "i64"))
                else:
                    accs.append(init(kind, comp, vec, dt.unsigned))
            types = []
            for r, kind, dt in specs:
                if kind in ("argmax", "argmin"):
                    types += [dt.comp, "i64"]
                else:
                    types.append(em.vt(dt.comp, vec))
            loops = [(0, s, 1, False) for s in outer_inner] + [(lo, hi, step, vec)]

            def fresh():
                return [init(kind, dt.comp, vec, dt.unsigned) for _, kind, dt in specs]

            def merge(accs_, parts):
                return [combine(kind, dt.comp, dt.unsigned, x, y, em.vt(dt.comp, vec))
                        for (_, kind, dt), x, y in zip(specs, accs_, parts)]

            def body(ivs, cur):
                if vec:
                    em.lane_var = ivs[-1]
                inner = [Aff.var(v) for v in ivs]
                idx = full_index(inner)
                new = []
                j = 0
                lin = None
                for r, kind, dt in specs:
                    x = self._eval(r.operands[0], idx)
                    if self.stash is not None and r.operands[0] == self.stash[0]:
                        self._write(self.outputs[self.stash[1]], x, idx)
                    if kind in ("argmax", "argmin"):
                        if lin is None:
                            lin = em.index(_row_major_linear(inner, inner_shape))
                            lin = em.op(f"arith.index_cast {lin} : index to i64", "i64")
                        bv, bi = cur[j], cur[j + 1]
                        better = _arg_better(em, kind, dt, x.ssa, bv)
                        nv = em.op(f"arith.select {better}, {x.ssa}, {bv} : {dt.comp}", dt.comp)
                        ni = em.op(f"arith.select {better}, {lin}, {bi} : i64", "i64")
                        new += [nv, ni]
                        j += 2
                    else:
                        ty = em.vt(dt.comp, vec)
                        xs = em.to_vec(x) if vec else x.ssa
                        new.append(combine(kind, dt.comp, dt.unsigned, cur[j], xs, ty))
                        j += 1
                em.lane_var = None
                return new

            return self._acc_loops(loops, accs, types, fresh, merge, body,
                                   blocked=not scalar_red and _sums_float(specs))

        seg_results = []
        if main:
            seg_results.append(("vec", run_segment(0, main, W, True)))
        if main < n:
            saved = em.W
            em.W = 1
            seg_results.append(("sca", run_segment(main, n, 1, False)))
            em.W = saved
        # Combine segments into one scalar per reduction.
        for k, (r, kind, dt) in enumerate(specs):
            comp = dt.comp
            final = None
            # arg reductions take two accumulator slots (value, index)
            slot = 0
            for kk in range(k):
                slot += 2 if specs[kk][1] in ("argmax", "argmin") else 1
            if kind in ("argmax", "argmin"):
                final = seg_results[0][1][slot + 1]  # only scalar segment exists for arg reductions
                self.row_vals[r.results[0]] = _Val(final, False, "i64")
                continue
            for tag, vals in seg_results:
                v = vals[slot]
                if tag == "vec":
                    v = em.op(f"vector.reduction <{_vred(kind, comp, dt.unsigned)}>, {v} : "
                              f"vector<{em.W}x{comp}> into {comp}", comp)
                final = v if final is None else combine(kind, comp, dt.unsigned, final, v, comp)
            self.row_vals[r.results[0]] = _Val(final, False, comp)

    def _store_row(self, i):
        """Store a per-row value of result i at the output position of this row."""
        em = self.em
        v = self.yielded[i]
        val = self._eval_row(v)
        out = self.outputs[i]
        # Row-major linear index of this row over the kept dims, re-split by the output shape.
        kept = [self.S[d] for d in self.outer_dims]
        lin = _row_major_linear([self.outer_idx[d] for d in self.outer_dims], kept)
        idx = []
        st = _contig_strides(out.shape)
        for s, p in zip(out.shape, st):
            idx.append(em.floordiv_mod(lin, p, s) if s != 1 else Aff())
        self._write(out, val, idx)

    def _eval_row(self, v):
        """Evaluate a row-space value (its index is implied by the current row)."""
        o = self.defining.get(v)
        if o is not None and o.operation.name in _REDUCTIONS:
            return self.row_vals[v]
        # Use any index of the value's shape that maps to this row: walk views generically
        # by evaluating at an index built from the outer loop variables.
        shp = _shape(v)
        kept = [self.S[d] for d in self.outer_dims]
        lin = _row_major_linear([self.outer_idx[d] for d in self.outer_dims], kept)
        idx = [self.em.floordiv_mod(lin, p, s) if s != 1 else Aff()
               for s, p in zip(shp, _contig_strides(shp))]
        return self._eval(v, idx)

    # --------------------------------------------------------------- evaluation
    def _eval(self, v, idx) -> _Val:
        em = self.em
        key = (v, tuple(idx), em.W, em.lane_var)
        got = em.lookup(key)
        if got is not None:
            return got
        if v in self.row_vals:
            res = self._round_if_stored(v, self.row_vals[v])
            em.remember(key, res)
            return res
        if self.stash_active and v == self.stash[0]:
            res = self._load(self.outputs[self.stash[1]], idx)
            em.remember(key, res)
            return res
        if v in self.arg_index:
            res = self._load(self.inputs[self.arg_index[v]], idx)
        else:
            o = self.defining[v]
            res = self._eval_op(o, v, idx)
            if o.operation.name not in ROUNDED_RESULT_OPS:
                res = self._round_if_stored(v, res)
        em.remember(key, res)
        return res

    def _round_if_stored(self, v, res: _Val) -> _Val:
        """A bf16/f16 value the kernel stores, rounded for its uses inside the kernel too:
        one value, one precision (see triton_ttir._round_if_stored)."""
        dt = dtype_of(_etype(v))
        if v not in self.stored_vals or dt.mem == dt.comp or not dt.is_float or \
                dt.mem not in ("bf16", "f16"):
            return res
        em = self.em
        mty, cty = em.vt(dt.mem, res.vec), em.vt(dt.comp, res.vec)
        t = em.op(f"arith.truncf {res.ssa} : {cty} to {mty}", mty)
        return _Val(em.op(f"arith.extf {t} : {mty} to {cty}", cty), res.vec, dt.comp)

    def _load(self, arg: _Arg, idx) -> _Val:
        em = self.em
        off = Aff()
        for i, s, st in zip(idx, arg.shape, arg.strides):
            if s != 1:
                off = off + i.scale(st)
        c = em.lane_coeff(off)
        dt = arg.dtype
        mem = dt.mem
        if c == 0 or em.W == 1:
            base = em.index(off)
            x = em.op(f"memref.load {arg.name}[{base}] : {arg.memref}", mem)
            return self._from_mem(x, dt, False)
        vty = f"vector<{em.W}x{mem}>"
        if c == 1:
            base = em.index(off)
            x = em.op(f"vector.load {arg.name}[{base}] : {arg.memref}, {vty}", vty)
            return self._from_mem(x, dt, True)
        # Strided across lanes: gather W scalars.
        base = em.index(off)
        elems = []
        for lane in range(em.W):
            a = base if lane == 0 else em.op(
                f"arith.addi {base}, {em.const(lane * c, 'index')} : index", "index")
            elems.append(em.op(f"memref.load {arg.name}[{a}] : {arg.memref}", mem))
        x = em.op(f"vector.from_elements {', '.join(elems)} : {vty}", vty)
        return self._from_mem(x, dt, True)

    def _from_mem(self, x, dt: DType, vec):
        em = self.em
        if dt.mem == dt.comp:
            return _Val(x, vec, dt.comp)
        mty, cty = em.vt(dt.mem, vec), em.vt(dt.comp, vec)
        if dt.comp == "i1":
            return _Val(em.op(f"arith.cmpi ne, {x}, {em.splat(0, mty)} : {mty}", cty), vec, "i1")
        return _Val(em.op(f"arith.extf {x} : {mty} to {cty}", cty), vec, dt.comp)

    def _to_mem(self, val: _Val, dt: DType):
        em = self.em
        ssa, vec = val.ssa, val.vec
        if dt.mem == dt.comp:
            return ssa
        mty, cty = em.vt(dt.mem, vec), em.vt(dt.comp, vec)
        if dt.comp == "i1":
            return em.op(f"arith.extui {ssa} : {cty} to {mty}", mty)
        return em.op(f"arith.truncf {ssa} : {cty} to {mty}", mty)

    def _domain_to_output_index(self, i, idx):
        """The index of output i (same element count as the domain S, maybe another
        shape) at domain index idx: row-major linearize, then split by its shape."""
        shp = _shape(self.yielded[i])
        if shp == self.S:
            return idx
        lin = _row_major_linear(idx, self.S)
        return [self.em.floordiv_mod(lin, p, s) if s != 1 else Aff()
                for s, p in zip(shp, _contig_strides(shp))]

    def _store(self, i, val: _Val, idx):
        self._write(self.outputs[i], val, idx)

    def _write(self, out: _Arg, val: _Val, idx):
        em = self.em
        if val.comp != out.dtype.comp:  # a buffer holds only values of its own type
            raise KernelLoweringError(
                f"internal error: kernel {self.name} would store a {val.comp} value into "
                f"{out.name}, a buffer of {out.dtype.mem} (computed as {out.dtype.comp})")
        off = Aff()
        for i, s, st in zip(idx, out.shape, out.strides):
            if s != 1:
                off = off + i.scale(st)
        c = em.lane_coeff(off)
        if em.W > 1 and em.lane_var and (val.vec or c):
            v = self._to_mem(_Val(em.to_vec(val), True, val.comp), out.dtype)
            vty = f"vector<{em.W}x{out.dtype.mem}>"
            base = em.index(off)
            if c == 1:
                em.emit(f"vector.store {v}, {out.name}[{base}] : {out.memref}, {vty}")
                return
            for lane in range(em.W):
                e = em.op(f"vector.extract {v}[{lane}] : {out.dtype.mem} from {vty}", out.dtype.mem)
                a = base if lane == 0 else em.op(
                    f"arith.addi {base}, {em.const(lane * c, 'index')} : index", "index")
                em.emit(f"memref.store {e}, {out.name}[{a}] : {out.memref}")
            return
        v = self._to_mem(val, out.dtype)
        em.emit(f"memref.store {v}, {out.name}[{em.index(off)}] : {out.memref}")

    def _eval_op(self, o, v, idx) -> _Val:
        em = self.em
        name = o.operation.name
        rdt = dtype_of(_etype(v))
        if name == "stax.broadcast_in_dim":
            dims = _ints(o, "dims")
            src = _shape(o.operands[0])
            return self._eval(o.operands[0], [idx[d] if src[i] != 1 else Aff()
                                              for i, d in enumerate(dims)])
        if name == "stax.permute":
            perm = _ints(o, "perm")
            inv = [0] * len(perm)
            for i, p in enumerate(perm):
                inv[p] = i
            return self._eval(o.operands[0], [idx[inv[d]] for d in range(len(perm))])
        if name == "stax.slice":
            start, step = _ints(o, "start"), _ints(o, "step")
            return self._eval(o.operands[0], [i.scale(s) + Aff(a) for i, a, s in zip(idx, start, step)])
        if name == "stax.reshape":
            src = _shape(o.operands[0])
            lin = _row_major_linear(idx, _shape(v))
            st = _contig_strides(src)
            return self._eval(o.operands[0], [em.floordiv_mod(lin, p, s) if s != 1 else Aff()
                                              for s, p in zip(src, st)])
        if name == "stax.gather":
            return self._eval_gather(o, idx)
        if name in _REDUCTIONS:
            if v in self.row_vals:
                return self.row_vals[v]
            raise KernelLoweringError(f"kernel {self.name}: reduction used before computed")
        if name == "stax.full":
            a = o.attributes["value"]
            val = scalar_attr_value(a)
            if rdt.is_bool:
                return _Val(em.const(1 if val else 0, "i1"), False, "i1")
            if rdt.comp.startswith("f") and rdt.mem in ("bf16", "f16"):
                val = float(torch.tensor(val, dtype=rdt.torch_dtype).float())
            return _Val(em.const(val, rdt.comp), False, rdt.comp)
        if name == "stax.iota":
            d = ir.IntegerAttr(o.attributes["dim"]).value
            a = idx[d]
            c = em.lane_coeff(a)
            base = em.index(a)
            bi = em.op(f"arith.index_cast {base} : index to i64", "i64")
            if c and em.W > 1:
                lanes = ", ".join(str(k * c) for k in range(em.W))
                ramp = em.op(f"arith.constant dense<[{lanes}]> : vector<{em.W}xi64>", "")
                bv = em.op(f"vector.broadcast {bi} : i64 to vector<{em.W}xi64>", "")
                iv = em.op(f"arith.addi {bv}, {ramp} : vector<{em.W}xi64>", "")
                return self._convert(_Val(iv, True, "i64"), _DTYPES["i64"], rdt)
            return self._convert(_Val(bi, False, "i64"), _DTYPES["i64"], rdt)
        if name == "stax.concat":
            return self._eval_concat(o, v, idx)
        if name == "stax.pad":
            return self._eval_pad(o, v, idx)
        ins = [self._eval(x, idx) for x in o.operands]
        if name == "stax.convert":
            return self._convert(ins[0], dtype_of(_etype(o.operands[0])), rdt)
        if name == "stax.bitcast":
            return self._bitcast(ins[0], dtype_of(_etype(o.operands[0])), rdt)
        if name == "stax.select":
            (c, a, b), vec = em.unify(ins)
            ty = em.vt(ins[1].comp, vec)
            return _Val(em.op(f"arith.select {c}, {a}, {b} : {em.vt('i1', vec)}, {ty}", ty),
                        vec, ins[1].comp)
        kind = name.split(".")[1]
        idt = dtype_of(_etype(o.operands[0]))
        if kind.startswith("cmp_"):
            return self._compare(kind[4:], ins, idt)
        if len(ins) == 2:
            return self._binary(kind, ins, idt, o)
        return self._unary(kind, ins[0], idt)

    def _eval_gather(self, o, idx):
        """input[..., indices[i_d], ...]. The index is loaded where the result is read; a
        negative one counts from the end, and it is clamped into range so a bad index
        cannot read outside the buffer (torch raises there). An index that differs
        between vector lanes makes the kernel 1-lane."""
        em = self.em
        d = ir.IntegerAttr(o.attributes["dim"]).value
        n = _shape(o.operands[0])[d]
        if em.lane_coeff(idx[d]):
            raise _NeedScalar()
        k = self._eval(o.operands[1], [idx[d]])
        if k.vec:
            raise _NeedScalar()
        cast = "index_castui" if dtype_of(_etype(o.operands[1])).unsigned else "index_cast"
        kv = em.op(f"arith.{cast} {k.ssa} : {k.comp} to index", "index")
        if not dtype_of(_etype(o.operands[1])).unsigned:
            # negative: from the end (compare as signed in the index type)
            neg = em.op(f"arith.cmpi slt, {kv}, {em.const(0, 'index')} : index", "i1")
            wrapped = em.op(f"arith.addi {kv}, {em.const(n, 'index')} : index", "index")
            kv = em.op(f"arith.select {neg}, {wrapped}, {kv} : index", "index")
            kv = em.op(f"arith.maxsi {kv}, {em.const(0, 'index')} : index", "index")
        kv = em.op(f"arith.minsi {kv}, {em.const(n - 1, 'index')} : index", "index")
        em.vars[kv] = Var(kv, n)
        new = list(idx)
        new[d] = Aff.var(kv)
        return self._eval(o.operands[0], new)

    def _eval_concat(self, o, v, idx):
        em = self.em
        d = ir.IntegerAttr(o.attributes["dim"]).value
        a = idx[d]
        if em.lane_coeff(a):
            raise _NeedScalar()
        sizes = [_shape(x)[d] for x in o.operands]
        rdt = dtype_of(_etype(v))
        pos = em.index(a)
        ty = em.vt(rdt.comp, em.W > 1 and em.lane_var is not None)
        vec = ty.startswith("vector")
        starts = []
        acc = 0
        for s in sizes:
            starts.append(acc)
            acc += s

        def branch(k):
            if k == len(sizes) - 1:
                sub = list(idx)
                sub[d] = a + Aff(-starts[k])
                x = self._eval(o.operands[k], sub)
                return em.to_vec(x) if vec else x.ssa
            cond = em.op(f"arith.cmpi ult, {pos}, {em.const(starts[k + 1], 'index')} : index", "i1")
            r = em.fresh()
            em.emit(f"{r} = scf.if {cond} -> ({ty}) {{")
            em.push()
            sub = list(idx)
            sub[d] = a + Aff(-starts[k])
            x = self._eval(o.operands[k], sub)
            em.emit(f"scf.yield {em.to_vec(x) if vec else x.ssa} : {ty}")
            em.pop()
            em.emit("} else {")
            em.push()
            y = branch(k + 1)
            em.emit(f"scf.yield {y} : {ty}")
            em.pop()
            em.emit("}")
            return r

        # Offsets into later inputs are negative in the affine algebra; clamp var range use.
        return _Val(branch(0), vec, rdt.comp)

    def _eval_pad(self, o, v, idx):
        em = self.em
        low, high = _ints(o, "low"), _ints(o, "high")
        src = _shape(o.operands[0])
        rdt = dtype_of(_etype(v))
        conds = []
        for d, (lo, n) in enumerate(zip(low, src)):
            if lo == 0 and high[d] == 0:
                continue
            if em.lane_coeff(idx[d]):
                raise _NeedScalar()
            p = em.index(idx[d])
            c1 = em.op(f"arith.cmpi uge, {p}, {em.const(lo, 'index')} : index", "i1")
            c2 = em.op(f"arith.cmpi ult, {p}, {em.const(lo + n, 'index')} : index", "i1")
            conds.append(em.op(f"arith.andi {c1}, {c2} : i1", "i1"))
        a = o.attributes["value"]
        pv = scalar_attr_value(a)
        vec = em.W > 1 and em.lane_var is not None
        ty = em.vt(rdt.comp, vec)
        padv = em.splat(pv if not rdt.is_bool else int(bool(pv)), ty)
        if not conds:
            x = self._eval(o.operands[0], [i + Aff(-lo) for i, lo in zip(idx, low)])
            return x
        cond = conds[0]
        for c in conds[1:]:
            cond = em.op(f"arith.andi {cond}, {c} : i1", "i1")
        r = em.fresh()
        em.emit(f"{r} = scf.if {cond} -> ({ty}) {{")
        em.push()
        x = self._eval(o.operands[0], [i + Aff(-lo) for i, lo in zip(idx, low)])
        em.emit(f"scf.yield {em.to_vec(x) if vec else x.ssa} : {ty}")
        em.pop()
        em.emit("} else {")
        em.emit(f"  scf.yield {padv} : {ty}")
        em.emit("}")
        return _Val(r, vec, rdt.comp)

    # --------------------------------------------------------------- scalar semantics
    def _convert(self, x: _Val, src: DType, dst: DType) -> _Val:
        em = self.em
        vec = x.vec
        s, d = x.comp, dst.comp
        sty, dty = em.vt(s, vec), em.vt(d, vec)
        if src.mem == dst.mem and src.unsigned == dst.unsigned:
            return x
        if dst.is_bool:
            if s.startswith("f"):
                z = em.splat(0.0, sty)
                return _Val(em.op(f"arith.cmpf une, {x.ssa}, {z} : {sty}", dty), vec, "i1")
            return _Val(em.op(f"arith.cmpi ne, {x.ssa}, {em.splat(0, sty)} : {sty}", dty), vec, "i1")
        if s.startswith("f") and d.startswith("f"):
            if s == d:
                r = x.ssa
            elif _fbits(s) < _fbits(d):
                r = em.op(f"arith.extf {x.ssa} : {sty} to {dty}", dty)
            else:
                r = em.op(f"arith.truncf {x.ssa} : {sty} to {dty}", dty)
            if dst.mem in ("bf16", "f16") and src.mem != dst.mem:
                # Round to the narrow type here, as eager does at an explicit cast.
                mty = em.vt(dst.mem, vec)
                t = em.op(f"arith.truncf {r} : {dty} to {mty}", mty)
                r = em.op(f"arith.extf {t} : {mty} to {dty}", dty)
            return _Val(r, vec, d)
        if s.startswith("f"):
            o = "fptoui" if dst.unsigned else "fptosi"
            return _Val(em.op(f"arith.{o} {x.ssa} : {sty} to {dty}", dty), vec, d)
        if d.startswith("f"):
            o = "uitofp" if (src.unsigned or src.is_bool) else "sitofp"
            r = em.op(f"arith.{o} {x.ssa} : {sty} to {dty}", dty)
            if dst.mem in ("bf16", "f16"):
                mty = em.vt(dst.mem, vec)
                t = em.op(f"arith.truncf {r} : {dty} to {mty}", mty)
                r = em.op(f"arith.extf {t} : {mty} to {dty}", dty)
            return _Val(r, vec, d)
        sb, db = _ibits(s), _ibits(d)
        if sb == db:
            return _Val(x.ssa, vec, d)
        if sb < db:
            o = "extui" if (src.unsigned or src.is_bool) else "extsi"
            return _Val(em.op(f"arith.{o} {x.ssa} : {sty} to {dty}", dty), vec, d)
        return _Val(em.op(f"arith.trunci {x.ssa} : {sty} to {dty}", dty), vec, d)

    def _bitcast(self, x: _Val, src: DType, dst: DType) -> _Val:
        em = self.em
        vec = x.vec
        v = self._to_mem(x, src)
        mty_s, mty_d = em.vt(src.mem, vec), em.vt(dst.mem, vec)
        r = em.op(f"arith.bitcast {v} : {mty_s} to {mty_d}", mty_d)
        return self._from_mem(r, dst, vec)

    def _compare(self, kind, ins, dt: DType) -> _Val:
        em = self.em
        (a, b), vec = em.unify(ins)
        ty = em.vt(ins[0].comp, vec)
        bty = em.vt("i1", vec)
        if dt.is_float:
            pred = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}[kind]
            return _Val(em.op(f"arith.cmpf {pred}, {a}, {b} : {ty}", bty), vec, "i1")
        u = dt.unsigned or dt.is_bool
        pred = {"eq": "eq", "ne": "ne", "lt": "ult" if u else "slt", "le": "ule" if u else "sle",
                "gt": "ugt" if u else "sgt", "ge": "uge" if u else "sge"}[kind]
        return _Val(em.op(f"arith.cmpi {pred}, {a}, {b} : {ty}", bty), vec, "i1")

    def _full_value(self, v):
        o = self.defining.get(v)
        while o is not None and o.operation.name in _VIEWS:
            o = self.defining.get(o.operands[0])
        if o is not None and o.operation.name == "stax.full":
            a = o.attributes["value"]
            return scalar_attr_value(a)
        return None

    def _binary(self, kind, ins, dt: DType, o) -> _Val:
        em = self.em
        comp = ins[0].comp
        fl = comp.startswith("f")
        if kind == "pow" and fl:
            e = self._full_value(o.operands[1])
            special = {2.0: "sq", 1.0: "id", 0.5: "sqrt", -1.0: "rcp", -0.5: "rsqrt", 3.0: "cube"}
            if e in special:
                x = ins[0]
                ty = em.vt(comp, x.vec)
                s = special[e]
                if s == "id":
                    return x
                if s == "sq":
                    return _Val(em.op(f"arith.mulf {x.ssa}, {x.ssa} : {ty}", ty), x.vec, comp)
                if s == "cube":
                    t = em.op(f"arith.mulf {x.ssa}, {x.ssa} : {ty}", ty)
                    return _Val(em.op(f"arith.mulf {t}, {x.ssa} : {ty}", ty), x.vec, comp)
                if s == "sqrt":
                    return _Val(em.op(f"math.sqrt {x.ssa} : {ty}", ty), x.vec, comp)
                if s == "rcp":
                    return _Val(em.op(f"arith.divf {em.splat(1.0, ty)}, {x.ssa} : {ty}", ty), x.vec, comp)
                t = em.op(f"math.sqrt {x.ssa} : {ty}", ty)
                return _Val(em.op(f"arith.divf {em.splat(1.0, ty)}, {t} : {ty}", ty), x.vec, comp)
        (a, b), vec = em.unify(ins)
        ty = em.vt(comp, vec)
        u = dt.unsigned or dt.is_bool

        def r(text):
            return _Val(em.op(text, ty), vec, comp)

        simple = arith_binary(kind, comp, u)
        if simple is not None:
            return r(f"{simple} {a}, {b} : {ty}")
        if kind == "remainder":
            z = em.splat(0.0 if fl else 0, ty)
            return r(python_remainder(em.op, a, b, z, ty, em.vt("i1", vec), fl, u))
        if kind == "pow":
            if not fl:
                raise KernelLoweringError("integer pow is not supported by the CPU target")
            return r(f"math.powf {a}, {b} : {ty}")
        if kind == "atan2":
            return r(f"math.atan2 {a}, {b} : {ty}")
        raise KernelLoweringError(f"binary op stax.{kind} is not supported by the CPU target")

    def _unary(self, kind, x: _Val, dt: DType) -> _Val:
        em = self.em
        comp = x.comp
        ty = em.vt(comp, x.vec)
        ity = em.vt("i32", x.vec)
        fl = comp.startswith("f")
        f32 = comp == "f32"

        def r(text, c=comp):
            return _Val(em.op(text, em.vt(c, x.vec)), x.vec, c)

        def val(s):
            return _Val(s, x.vec, comp)

        a = x.ssa
        if kind == "neg":
            return r(f"arith.negf {a} : {ty}") if fl else r(f"arith.subi {em.splat(0, ty)}, {a} : {ty}")
        if kind == "abs":
            if fl:
                return r(f"math.absf {a} : {ty}")
            return x if dt.unsigned else r(f"math.absi {a} : {ty}")
        if kind == "sign":
            bty = em.vt("i1", x.vec)
            z = em.splat(0.0 if fl else 0, ty)
            one = em.splat(1.0 if fl else 1, ty)
            m1 = em.splat(-1.0 if fl else -1, ty)
            cmp = "arith.cmpf ogt" if fl else ("arith.cmpi ugt" if dt.unsigned else "arith.cmpi sgt")
            lt = "arith.cmpf olt" if fl else ("arith.cmpi ult" if dt.unsigned else "arith.cmpi slt")
            p = em.op(f"{cmp}, {a}, {z} : {ty}", bty)
            n = em.op(f"{lt}, {a}, {z} : {ty}", bty)
            # eager's (0 < x) - (x < 0): sign(nan) = 0 and sign(-0.0) = +0.0
            t = em.op(f"arith.select {n}, {m1}, {z} : {bty}, {ty}", ty)
            return r(f"arith.select {p}, {one}, {t} : {bty}, {ty}")
        if kind == "not":
            return r(f"arith.xori {a}, {em.splat(1, ty)} : {ty}")
        if kind == "bitwise_not":
            return r(f"arith.xori {a}, {em.splat(-1 if comp != 'i1' else 1, ty)} : {ty}")
        if kind == "isnan":
            return r(f"arith.cmpf uno, {a}, {a} : {ty}", "i1")
        if not fl:
            raise KernelLoweringError(f"stax.{kind} needs a float operand, got {comp}")
        if kind == "exp":
            return val(cpu_math.exp_f32(em, a, ty, ity)) if f32 else r(f"math.exp {a} : {ty}")
        if kind == "exp2":
            return val(cpu_math.exp2_f32(em, a, ty, ity)) if f32 else r(f"math.exp2 {a} : {ty}")
        if kind == "log":
            return val(cpu_math.log_f32(em, a, ty, ity)) if f32 else r(f"math.log {a} : {ty}")
        if kind == "log2":
            if f32:
                lg = cpu_math.log_f32(em, a, ty, ity)
                return r(f"arith.mulf {lg}, {em.splat(1.0 / math.log(2.0), ty)} : {ty}")
            return r(f"math.log2 {a} : {ty}")
        if kind == "tanh":
            return val(cpu_math.tanh_f32(em, a, ty, ity)) if f32 else r(f"math.tanh {a} : {ty}")
        if kind == "sigmoid":
            if f32:
                return val(cpu_math.sigmoid_f32(em, a, ty, ity))
            n = em.op(f"arith.negf {a} : {ty}", ty)
            e = em.op(f"math.exp {n} : {ty}", ty)
            d = em.op(f"arith.addf {e}, {em.splat(1.0, ty)} : {ty}", ty)
            return r(f"arith.divf {em.splat(1.0, ty)}, {d} : {ty}")
        if kind == "erf":
            return val(cpu_math.erf_f32(em, a, ty, ity)) if f32 else r(f"math.erf {a} : {ty}")
        if kind == "expm1":
            ex = ((lambda e, t: cpu_math.exp_f32(e, t, ty, ity)) if f32
                  else (lambda e, t: e.op(f"math.exp {t} : {ty}", ty)))
            return val(cpu_math.expm1(em, a, ty, ex))
        if kind == "log1p":
            lg = ((lambda e, t: cpu_math.log_f32(e, t, ty, ity)) if f32
                  else (lambda e, t: e.op(f"math.log {t} : {ty}", ty)))
            return val(cpu_math.log1p(em, a, ty, lg))
        simple = {"sqrt": "math.sqrt", "floor": "math.floor", "ceil": "math.ceil",
                  "round": "math.roundeven", "trunc": "math.trunc", "sin": "math.sin",
                  "cos": "math.cos"}
        if kind in simple:
            return r(f"{simple[kind]} {a} : {ty}")
        if kind == "rsqrt":
            s = em.op(f"math.sqrt {a} : {ty}", ty)
            return r(f"arith.divf {em.splat(1.0, ty)}, {s} : {ty}")
        if kind == "reciprocal":
            return r(f"arith.divf {em.splat(1.0, ty)}, {a} : {ty}")
        raise KernelLoweringError(f"unary op stax.{kind} is not supported by the CPU target")


def _vred(kind, comp, unsigned):
    fl = comp.startswith("f")
    if kind == "reduce_sum":
        return "add"
    if kind == "reduce_prod":
        return "mul"
    if kind == "reduce_max":
        return "maximumf" if fl else ("maxui" if unsigned or comp == "i1" else "maxsi")
    return "minimumf" if fl else ("minui" if unsigned or comp == "i1" else "minsi")


def _arg_better(em, kind, dt, x, best):
    """Is x strictly better than best (first index wins ties; NaN counts as the max)?"""
    comp = dt.comp
    if comp.startswith("f"):
        # argmax: x > best, or x is nan and best is not.
        pred = "ogt" if kind == "argmax" else "olt"
        c = em.op(f"arith.cmpf {pred}, {x}, {best} : {comp}", "i1")
        xn = em.op(f"arith.cmpf uno, {x}, {x} : {comp}", "i1")
        bn = em.op(f"arith.cmpf uno, {best}, {best} : {comp}", "i1")
        nb = em.op(f"arith.xori {bn}, {em.const(1, 'i1')} : i1", "i1")
        xnew = em.op(f"arith.andi {xn}, {nb} : i1", "i1")
        return em.op(f"arith.ori {c}, {xnew} : i1", "i1")
    u = dt.unsigned or dt.is_bool
    pred = ("ugt" if u else "sgt") if kind == "argmax" else ("ult" if u else "slt")
    return em.op(f"arith.cmpi {pred}, {x}, {best} : {comp}", "i1")


# ----------------------------------------------------------------------------- compile + run

_PIPELINE = ("builtin.module(func.func(arith-expand{include-bf16=true include-f8e8m0=false}),"
             "convert-vector-to-scf,convert-scf-to-cf,expand-strided-metadata,lower-affine,"
             "convert-vector-to-llvm,convert-math-to-llvm,convert-arith-to-llvm,"
             "finalize-memref-to-llvm,convert-func-to-llvm{use-bare-ptr-memref-call-conv=1},"
             "convert-cf-to-llvm,reconcile-unrealized-casts)")


def lower_kernel_to_mlir(kernel_op, input_strides, output_strides, name="kernel") -> str:
    """The kernel as scf/vector/memref MLIR text (what gets JIT-compiled)."""
    return _KernelLowering(kernel_op, input_strides, output_strides, name).lower()


def compile_kernel(kernel_op, input_strides, output_strides, name="kernel", ctx=None) -> CpuKernel:
    """Lower one stax.kernel for the CPU and JIT it.

    `input_strides[i]` / `output_strides[j]` are the element strides of the tensors
    that will be passed (the code is specialized for them)."""
    low = _KernelLowering(kernel_op, input_strides, output_strides, name)
    text = low.lower()
    width = low.em.W
    context = ctx or kernel_op.context
    with context, ir.Location.unknown():
        try:
            m = ir.Module.parse(text)
        except ir.MLIRError as e:
            raise KernelLoweringError(f"internal error: generated MLIR for {name} does not "
                                      f"parse: {e}\n{text}") from None
        PassManager.parse(_PIPELINE).run(m.operation)
        llvm_ir = None
        try:
            from torch_mlir.dialects.llvm import translate_module_to_llvmir
            llvm_ir = translate_module_to_llvmir(m.operation)
        except Exception:  # only for dumps
            llvm_ir = None
        engine = ExecutionEngine(m, opt_level=3)
    work = max([_numel(a.shape) for a in low.inputs + low.outputs] + [0])
    k = CpuKernel(name, text, llvm_ir, engine, len(low.inputs) + len(low.outputs), width,
                  low.splittable, work)
    k.llvm_dialect_module = m  # printed only when the kernel is saved (runtime.cpu_kernel.kernel_text)
    return k
