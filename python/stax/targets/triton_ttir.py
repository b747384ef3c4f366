"""GPU target, part 1: one `stax_graph.kernel` -> Triton IR (TTIR, the `tt` dialect) as text.

The analysis follows the CPU target (`llvm.py`): a kernel is either pointwise (every
non-view op has the domain shape) or a reduction kernel (every reduction reduces a
tensor of shape S over dims D; values live in "full" space S or "row" space). Values
are computed by evaluating the yielded SSA values at a multi-index; views
(broadcast_in_dim, permute, slice, reshape) are index arithmetic, never copies.

Block shapes:
* pointwise: 1-D blocks of BLOCK elements over the output's linear index
  (`offs = pid * BLOCK + make_range`), masked by `offs < numel`; each output is
  delinearized by its own (constant) dims and stored at its own strides.
* reduction: 2-D blocks [XBLOCK rows, RBLOCK reduced elements]. Row index
  `r = pid * XBLOCK + range` ([XBLOCK, 1]), reduced index `k` ([1, RBLOCK]);
  the kept dims are delinearized from r and the reduced dims from k.
  - persistent (RBLOCK >= reduced size): one block holds whole rows; every phase and
    the outputs reuse the values held in registers (loads happen once).
  - looped: each phase is an scf.for over RBLOCK chunks with an [XBLOCK, RBLOCK]
    accumulator, reduced with tt.reduce after the loop; a last loop writes the
    full-space outputs (re-reading the inputs).
  Row values (1/sum, rstd, ...) are computed once per row block, outside the loops.

Numerics: bf16/f16/fp8 are computed in f32 (extf / tt.fp_to_fp after the load) and
rounded once: at the store (truncf, or tt.fp_to_fp rounding = rtne), a stored value's
uses inside the kernel see the same rounded value (`_round_if_stored`), and explicit
`stax.convert`s round where the graph says so. Division and sqrt are IEEE
(tt.precise_divf / tt.precise_sqrt); exp/log/erf/rsqrt use the math dialect;
tanh/expm1/log1p/trunc/round/pow/atan2 call libdevice through tt.extern_elementwise
(Triton 3.6 rejects math.tanh & co. in TTIR and links libdevice itself).

Offsets are i32 unless a tensor (its storage extent) or the iteration space reaches
2^31 elements; then all index math is i64.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import torch

from stax._mlir import ir
from stax.dialects.stax_dialect import scalar_attr_value
from stax.targets.llvm import KernelLoweringError
from stax.targets.kernel_ir import REDUCTION_OPS as _REDUCTIONS
from stax.targets.kernel_ir import ROUNDED_RESULT_OPS
from stax.targets.kernel_ir import VIEW_OPS as _VIEWS
from stax.targets.kernel_ir import arith_binary, python_remainder, with_deep_stack
from stax.targets.kernel_ir import contiguous_strides as _contig
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

__all__ = ["emit_ttir", "TTIRKernel", "TritonConfig", "default_config", "candidate_configs",
           "analyze_kernel", "KernelLoweringError"]


PERSISTENT_MAX = 4096          # reduced sizes up to this many elements stay in registers
I32_LIMIT = (1 << 31) - 1


# ----------------------------------------------------------------------------- config / result

def fp8_e4m3fn_overflow() -> str:
    """How torch's float -> e4m3fn cast treats overflow where the kernels will run:
    probed on the CUDA device when there is one, else the installed torch's CPU cast."""
    from stax.passes.legalize_fp8 import probe_device_e4m3fn_overflow
    try:
        import torch
        dev = "cuda" if torch.cuda.is_available() else "cpu"
    except Exception:
        dev = "cpu"
    return probe_device_e4m3fn_overflow(dev)


@dataclass(frozen=True)

class TritonConfig:
    block: int        # pointwise: BLOCK; reduction: XBLOCK (rows per program)
    rblock: int       # reduction: RBLOCK (reduced elements per step); 1 for pointwise
    num_warps: int
    num_stages: int
    split: int = 1    # reduction: programs sharing one row block's reduced range (a
    #                   two-stage reduction: partials to a workspace, then a final kernel)


@dataclass
class TTIRKernel:
    name: str
    text: str
    kind: str                       # "pointwise" | "reduction-persistent" | "reduction-looped"
    grid: tuple
    num_warps: int
    num_stages: int
    arg_dtypes: tuple               # element type of each pointer argument (inputs, outputs)
    config: TritonConfig = None
    aligned: tuple = ()
    # a split reduction: `stage2` finishes what this kernel starts; both take the
    # arguments (inputs, outputs, workspaces), one workspace (numel, element type) per
    # reduction, allocated by the launcher
    stage2: "TTIRKernel | None" = None
    workspace: tuple = ()

    @property
    def full_text(self):
        if self.stage2 is None:
            return self.text
        return self.text + f"// stage 2 of the split reduction: @{self.stage2.name}\n" + \
            self.stage2.text


@dataclass(frozen=True)
class KernelShape:
    """What the config choice depends on."""
    kind: str                # "pointwise" | "reduction"
    numel: int               # pointwise: elements per output; reduction: rows
    rnumel: int = 1          # reduction: reduced elements per row
    inner_reduced: bool = True   # the innermost dim of S is reduced (rows contiguous)
    max_bytes: int = 4       # widest element size touched
    splittable: bool = False     # the reduced range may be split over programs


# A looped reduction with fewer row-block programs than this splits its reduced range
# (an H100/H200 has 132 SMs; 12 programs summing a bias gradient over 16384 rows leave
# the GPU idle), aiming at about SPLIT_TARGET programs in all.
SPLIT_BELOW = 128
SPLIT_TARGET = 264


def _p2(n):
    return 1 << max(0, (max(1, n) - 1).bit_length())


def default_config(shape: KernelShape) -> TritonConfig:
    if shape.kind == "pointwise":
        block = min(1024, max(128, _p2(shape.numel)))
        return TritonConfig(block, 1, 4 if block >= 512 else 2, 1)
    R = _p2(shape.rnumel)
    if R <= PERSISTENT_MAX:
        if not shape.inner_reduced:   # column reduction: many neighbouring rows per block
            xb = max(1, min(_p2(shape.numel), max(1, 4096 // R), 64))
        elif R >= 512:
            # one row per program: measured on the H200 (softmax over [262144, 1024] f32,
            # benchmarks/results/gpu-h200-verify.jsonl) 1x1024 w4 takes 0.51 ms, 2x1024 w4
            # 0.63 ms; rows of 512: 1x512 w4 0.51 ms, 4x512 w4 0.70 ms
            xb = 1
        else:
            xb = max(1, min(_p2(shape.numel), max(1, 2048 // R)))
        total = xb * R
        warps = 8 if total >= 4096 and R >= 2048 else (4 if total >= 512 else 2)
        return TritonConfig(xb, R, warps, 1)
    rb = 2048 if shape.inner_reduced else 64
    xb = 1 if shape.inner_reduced else 64
    return TritonConfig(xb, rb, 8 if shape.inner_reduced else 4, 1,
                        _default_split(shape, xb, rb))


def _default_split(shape: KernelShape, xb, rb) -> int:
    programs = -(-shape.numel // xb)
    if not shape.splittable or programs >= SPLIT_BELOW or shape.rnumel < 4 * rb:
        return 1
    return max(1, min(-(-SPLIT_TARGET // programs), shape.rnumel // (2 * rb)))


def candidate_configs(shape: KernelShape) -> list[TritonConfig]:
    """A small search space around the default (the default is always first)."""
    out = [default_config(shape)]

    def add(c):
        if c not in out:
            out.append(c)

    if shape.kind == "pointwise":
        top = max(128, _p2(shape.numel))
        for b in (256, 512, 1024, 2048, 4096):
            if b > top:
                continue
            for w in (2, 4, 8):
                if b // (32 * w) >= 1:
                    add(TritonConfig(b, 1, w, 1))
        return out
    R = _p2(shape.rnumel)
    rows = _p2(shape.numel)
    if R <= PERSISTENT_MAX:
        for xb in (1, 2, 4, 8, 16, 32, 64):
            if xb > rows or xb * R > 16384:
                continue
            for w in (2, 4, 8, 16):
                if w * 32 <= xb * R:
                    add(TritonConfig(xb, R, w, 1))
    for rb in (512, 1024, 2048, 4096):
        if rb >= R:
            continue
        for xb in (1, 2, 4):
            if xb > rows:
                continue
            for w in (4, 8):
                for st in (1, 2):
                    add(TritonConfig(xb, rb, w, st))
    d = out[0]
    if d.split > 1:   # the split factor and the tile of a split reduction
        for sp in (d.split // 2, d.split * 2, d.split * 4):
            if sp > 1:
                add(TritonConfig(d.block, d.rblock, d.num_warps, d.num_stages, sp))
        for xb, rb in ((d.block, d.rblock * 2), (d.block * 2, d.rblock), (d.block // 2,
                                                                           d.rblock * 2)):
            if xb >= 1 and rb <= 4096:
                add(TritonConfig(xb, rb, d.num_warps, d.num_stages,
                                 _default_split(shape, xb, rb)))
    return out


# ----------------------------------------------------------------------------- types

@dataclass(frozen=True)
class DT:
    mem: str          # element type of the pointer
    comp: str         # type the kernel computes in
    unsigned: bool = False
    bool_: bool = False
    fp8: bool = False
    nbytes: int = 4


_DT = {
    "f32": DT("f32", "f32"), "f64": DT("f64", "f64", nbytes=8),
    "bf16": DT("bf16", "f32", nbytes=2), "f16": DT("f16", "f32", nbytes=2),
    "f8E4M3FN": DT("f8E4M3FN", "f32", fp8=True, nbytes=1),
    "f8E5M2": DT("f8E5M2", "f32", fp8=True, nbytes=1),
    "i64": DT("i64", "i64", nbytes=8), "i32": DT("i32", "i32"), "i16": DT("i16", "i16", nbytes=2),
    "i8": DT("i8", "i8", nbytes=1), "ui8": DT("i8", "i8", unsigned=True, nbytes=1),
    "i1": DT("i8", "i1", bool_=True, nbytes=1),
}


def _dt(t) -> DT:
    s = str(t)
    if s not in _DT:
        raise KernelLoweringError(f"element type {s} is not supported by the Triton target")
    return _DT[s]


def _isf(t):
    return t.startswith("f") or t.startswith("bf")


def _fmt_const(v, t):
    if _isf(t):
        v = float(v)
        if t == "f64":
            if v != v:
                return "0x7FF8000000000000"
            if v in (math.inf, -math.inf):
                return "0x7FF0000000000000" if v > 0 else "0xFFF0000000000000"
            return _float_literal(v)
        if v != v:
            return "0x7FC00000"
        if v == math.inf:
            return "0x7F800000"
        if v == -math.inf:
            return "0xFF800000"
        return _float_literal(v)
    if t == "i1":
        return "true" if v else "false"
    v = int(v)
    b = _ibits(t)
    v &= (1 << b) - 1
    if v >= 1 << (b - 1):
        v -= 1 << b
    return str(v)


# ----------------------------------------------------------------------------- values

@dataclass(frozen=True)
class V:
    """A block value: `ssa` of type tensor<shape x elem> (shape () = scalar), or a
    constant `cval` materialized at whatever shape it is combined with."""
    ssa: str | None
    shape: tuple
    elem: str
    cval: object = None
    hi: int | None = None    # index values: exclusive upper bound of the meaningful lanes

    @property
    def is_const(self):
        return self.ssa is None


def _common(*shapes):
    shapes = [s for s in shapes if s]
    if not shapes:
        return ()
    rank = len(shapes[0])
    out = []
    for d in range(rank):
        out.append(max(s[d] for s in shapes))
    return tuple(out)


class _Emitter:
    def __init__(self):
        self.lines = []
        self.indent = 4
        self.n = 0
        self.consts = {}       # key -> (name, text)
        self.memo = [{}]

    def fresh(self, hint="v"):
        self.n += 1
        return f"%{hint}{self.n}"

    def emit(self, text):
        self.lines.append(" " * self.indent + text)

    def op(self, text, hint="v"):
        key = text
        got = self.lookup(("op", key))
        if got is not None:
            return got
        r = self.fresh(hint)
        self.emit(f"{r} = {text}")
        self.remember(("op", key), r)
        return r

    def push(self):
        self.memo.append({})
        self.indent += 2

    def pop(self):
        self.memo.pop()
        self.indent -= 2

    def lookup(self, key):
        for m in reversed(self.memo):
            if key in m:
                return m[key]
        return None

    def remember(self, key, val):
        self.memo[-1][key] = val

    @staticmethod
    def ty(shape, elem):
        if not shape:
            return elem
        return "tensor<" + "x".join(str(s) for s in shape) + "x" + elem + ">"

    def const(self, value, elem, shape=()):
        key = (_fmt_const(value, elem), elem, tuple(shape))
        if key not in self.consts:
            name = f"%cst{len(self.consts)}"
            lit = key[0]
            if shape:
                text = f"arith.constant dense<{lit}> : {self.ty(shape, elem)}"
            elif elem == "i1":
                text = f"arith.constant {lit}"
            else:
                text = f"arith.constant {lit} : {elem}"
            self.consts[key] = (name, text)
        return self.consts[key][0]

    def mat(self, v: V, shape) -> str:
        """v as an SSA value of block shape `shape` (splat/broadcast as needed)."""
        shape = tuple(shape)
        if v.is_const:
            return self.const(v.cval, v.elem, shape)
        if v.shape == shape:
            return v.ssa
        if not v.shape:
            return self.op(f"tt.splat {v.ssa} : {v.elem} -> {self.ty(shape, v.elem)}")
        return self.op(f"tt.broadcast {v.ssa} : {self.ty(v.shape, v.elem)} -> "
                       f"{self.ty(shape, v.elem)}")


# ----------------------------------------------------------------------------- analysis

@dataclass
class _Arg:
    name: str
    shape: list
    strides: list
    dt: DT
    extent: int


def _reduction_signature(op):
    shp = _shape(op.operands[0])
    if op.operation.name in ("stax.argmax", "stax.argmin"):
        dims = [ir.IntegerAttr(op.attributes["dim"]).value]
    else:
        dims = sorted(_ints(op, "dims"))
    return shp, dims


def analyze_kernel(kernel_op) -> KernelShape:
    """The numbers the config choice depends on (no strides needed)."""
    block = kernel_op.regions[0].blocks[0]
    ops = list(block.operations)
    reds = [o for o in ops[:-1] if o.operation.name in _REDUCTIONS]
    mb = max([_dt(_etype(a)).nbytes for a in block.arguments] +
             [_dt(_etype(v)).nbytes for v in ops[-1].operands] + [1])
    if not reds:
        n = max([_numel(_shape(v)) for v in ops[-1].operands] + [0])
        return KernelShape("pointwise", n, 1, True, mb)
    S, D = _reduction_signature(reds[0])
    rn = _numel([S[d] for d in D])
    rows = _numel([S[d] for d in range(len(S)) if d not in D])
    inner = (len(S) - 1) in D or all(S[d] == 1 for d in range(max(D) + 1, len(S)))
    return KernelShape("reduction", rows, rn, inner, mb,
                       _splittable(ops[:-1], list(ops[-1].operands), S))


def _value_facts(defining, size):
    """A memoized v -> (reads a reduction, is full space) over a kernel body (`defining`:
    result -> op). Full space: v varies along the reduced dims, i.e. it is computed per
    element of the domain (`size` elements). A kernel input (or a full / iota) with as
    many elements as the domain is full space whatever its shape: an input [B*T, C]
    reshaped to the domain [B, T, C] is full space, not a row value."""
    memo = {}

    def walk(v):
        if v in memo:
            return memo[v]
        o = defining.get(v)
        if o is None:
            res = (False, _numel(_shape(v)) == size)
        elif o.operation.name in _REDUCTIONS:
            res = (True, False)
        elif not o.operands:
            res = (False, _numel(_shape(v)) == size)
        else:
            parts = [walk(x) for x in o.operands]
            res = (any(p[0] for p in parts), any(p[1] for p in parts))
        memo[v] = res
        return res
    return walk


def _splittable(body, yielded, S) -> bool:
    """Can programs share a row block's reduced range (partials, then a final kernel)?
    Yes when every reduction is a plain one (no argmax/argmin, not over i1) that reads no
    other reduction (one phase), and no full-space output reads a reduction (it would
    need the finished row value in every part)."""
    walk = _value_facts({r: o for o in body for r in o.results}, _numel(S))
    size = _numel(S)
    for o in body:
        if o.operation.name not in _REDUCTIONS:
            continue
        if o.operation.name in ("stax.argmax", "stax.argmin"):
            return False
        if _dt(_etype(o.operands[0])).comp == "i1" or walk(o.operands[0])[0]:
            return False
    for v in yielded:
        reads, full = walk(v)
        if reads and (full or _numel(_shape(v)) == size):
            return False
    return True


# ----------------------------------------------------------------------------- lowering

class _Lowering:
    def __init__(self, kernel_op, in_strides, out_strides, name, config, aligned,
                 final_of_split=0):
        self.name = name
        self.kernel_op = kernel_op
        self.strides = (in_strides, out_strides)
        # > 0: this is the final kernel of a split reduction over that many parts
        self.final_of_split = final_of_split
        self.ws = []              # split reduction: one workspace _Arg per reduction
        self.stage2 = None
        block = kernel_op.regions[0].blocks[0]
        self.args = list(block.arguments)
        ops = list(block.operations)
        self.body = ops[:-1]
        self.yielded = list(ops[-1].operands)
        self.stored_vals = set(self.yielded)
        if len(in_strides) != len(self.args) or len(out_strides) != len(self.yielded):
            raise KernelLoweringError(
                f"kernel {name}: {len(self.args)} inputs / {len(self.yielded)} outputs but "
                f"{len(in_strides)} / {len(out_strides)} stride lists")
        self.inputs = []
        for i, (a, st) in enumerate(zip(self.args, in_strides)):
            shp = _shape(a)
            self.inputs.append(_Arg(f"%in{i}", shp, list(st), _dt(_etype(a)), _extent(shp, st)))
        self.outputs = []
        for i, (v, st) in enumerate(zip(self.yielded, out_strides)):
            shp = _shape(v)
            self.outputs.append(_Arg(f"%out{i}", shp, list(st), _dt(_etype(v)), _extent(shp, st)))
        nargs = len(self.inputs) + len(self.outputs)
        self.aligned = tuple(aligned) if aligned is not None else (False,) * nargs
        if len(self.aligned) != nargs:
            raise KernelLoweringError(f"kernel {name}: aligned has {len(self.aligned)} entries, "
                                      f"expected {nargs}")
        self.arg_index = {a: i for i, a in enumerate(self.args)}
        self.reductions = [o for o in self.body if o.operation.name in _REDUCTIONS]
        self.defining = {}
        for o in self.body:
            for r in o.results:
                self.defining[r] = o
        self.shape_info = analyze_kernel(kernel_op)
        self.config = config or default_config(self.shape_info)
        self.em = _Emitter()
        self.cond = ()            # extra load masks (concat / pad branches)
        self.mask_ctx = None      # pointwise: the numel whose mask is active
        self.row_vals = {}
        self.delin = {}
        self.rounded = {}
        self.raw = set()         # mem-typed SSA values that are bytes as loaded

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
        mty = em.ty(shape, arg.dt.mem)
        if mask is not None:
            x = em.op(f"tt.load {ptr}, {em.mat(mask, shape)} : {em.ty(shape, '!tt.ptr<' + arg.dt.mem + '>')}", "x")
        else:
            x = em.op(f"tt.load {ptr} : {em.ty(shape, '!tt.ptr<' + arg.dt.mem + '>')}", "x")
        return self._from_mem(V(x, shape, arg.dt.mem), arg.dt)

    def _from_mem(self, x: V, dt: DT) -> V:
        em = self.em
        if dt.bool_:
            z = em.mat(V(None, (), dt.mem, cval=0), x.shape)
            return V(em.op(f"arith.cmpi ne, {x.ssa}, {z} : {em.ty(x.shape, dt.mem)}"), x.shape, "i1")
        if dt.mem == dt.comp:
            return x
        if dt.fp8:
            e = self._fp8_decode(x.ssa, x.shape, dt.mem, dt.comp)
        else:
            e = em.op(f"arith.extf {x.ssa} : {em.ty(x.shape, dt.mem)} to "
                      f"{em.ty(x.shape, dt.comp)}")
        # the value's bits in memory are x itself: a store or a bitcast of it uses them
        # (decode + encode is no bit-identity: e5m2 NaN payloads, bf16/f16 signaling NaNs)
        self.rounded[(e, dt.mem)] = x.ssa
        self.raw.add(x.ssa)
        return V(e, x.shape, dt.comp)

    def _fp8_decode(self, b, shape, mem, comp) -> str:
        """fp8 -> comp with torch's NaN sign. The hardware cvt behind tt.fp_to_fp decodes
        both NaN codes (0x7F, 0xFF) to one positive NaN; torch's decode keeps the sign,
        so an e4m3fn -> e5m2 cast of 0xFF gave 0x7F where eager gives 0xFF (H200, found
        by test_gpu_fp8_to_fp8_and_int once its NaN filter went). The sign comes from the
        byte."""
        em = self.em
        cty, ity = em.ty(shape, comp), em.ty(shape, "i8")
        e = em.op(f"tt.fp_to_fp {b} : {em.ty(shape, mem)} -> {cty}")
        if comp != "f32":
            raise KernelLoweringError(f"fp8 decodes to f32, not {comp}")
        # the sign bit by integer ops (a float negate of a NaN may come back canonical)
        i32 = em.ty(shape, "i32")
        bits = em.op(f"tt.bitcast {b} : {em.ty(shape, mem)} -> {ity}")
        neg = em.op(f"arith.cmpi slt, {bits}, {em.mat(V(None, (), 'i8', cval=0), shape)} : {ity}")
        u = em.op(f"tt.bitcast {e} : {cty} -> {i32}")
        u = em.op(f"arith.andi {u}, {em.mat(V(None, (), 'i32', cval=0x7FFFFFFF), shape)} : {i32}")
        sgn = em.op(f"arith.select {neg}, {em.mat(V(None, (), 'i32', cval=-0x80000000), shape)}, "
                    f"{em.mat(V(None, (), 'i32', cval=0), shape)} : {em.ty(shape, 'i1')}, {i32}")
        u = em.op(f"arith.ori {u}, {sgn} : {i32}")
        return em.op(f"tt.bitcast {u} : {i32} -> {cty}")

    def _to_mem(self, v: V, dt: DT, shape) -> str:
        em = self.em
        if not v.is_const and v.shape == tuple(shape) and (v.ssa, dt.mem) in self.rounded:
            return self.rounded[(v.ssa, dt.mem)]
        s = em.mat(v, shape)
        if dt.bool_:
            return em.op(f"arith.extui {s} : {em.ty(shape, 'i1')} to {em.ty(shape, 'i8')}")
        if dt.mem == dt.comp:
            return s
        if dt.fp8:
            return self._fp8_encode(s, shape, dt.mem)
        return em.op(f"arith.truncf {s} : {em.ty(shape, dt.comp)} to {em.ty(shape, dt.mem)}")

    def _fp8_encode(self, s, shape, mem) -> str:
        """f32 -> fp8 bit-identical to torch's cast on the device. The hardware
        conversion (`cvt.rn.satfinite`) rounds to nearest even but saturates: torch gives
        ±inf for e5m2 past 57344 (from 61440, the rounding midpoint) and, on CUDA in torch
        2.11, NaN for e4m3fn past 464 and for ±inf; and NaN keeps its sign (0x7F/0xFF)."""
        em = self.em
        fty, bty, ity = em.ty(shape, "f32"), em.ty(shape, mem), em.ty(shape, "i8")
        i1 = em.ty(shape, "i1")
        t = em.op(f"tt.fp_to_fp {s}, rounding = rtne : {fty} -> {bty}")
        bits = em.op(f"tt.bitcast {t} : {bty} -> {ity}")
        ax = em.op(f"math.absf {s} : {fty}")
        mode = "inf" if mem == "f8E5M2" else fp8_e4m3fn_overflow()
        special = em.op(f"arith.cmpf uno, {s}, {s} : {fty}")  # NaN -> 0x7F | sign
        if mode == "inf":
            over = em.op(f"arith.cmpf oge, {ax}, {em.mat(V(None, (), 'f32', cval=61440.0), shape)} : {fty}")
        elif mode == "nan":
            over = em.op(f"arith.cmpf ogt, {ax}, {em.mat(V(None, (), 'f32', cval=464.0), shape)} : {fty}")
        else:
            over = None  # saturate: what the hardware does
        xi = em.op(f"tt.bitcast {s} : {fty} -> {em.ty(shape, 'i32')}")
        neg = em.op(f"arith.cmpi slt, {xi}, {em.mat(V(None, (), 'i32', cval=0), shape)} : "
                    f"{em.ty(shape, 'i32')}")
        sign = em.op(f"arith.select {neg}, {em.mat(V(None, (), 'i8', cval=-128), shape)}, "
                     f"{em.mat(V(None, (), 'i8', cval=0), shape)} : {i1}, {ity}")
        nanb = em.op(f"arith.ori {sign}, {em.mat(V(None, (), 'i8', cval=0x7F), shape)} : {ity}")
        fixed = em.op(f"arith.select {special}, {nanb}, {bits} : {i1}, {ity}")
        if over is not None:
            big = 0x7C if mode == "inf" else 0x7F
            overb = em.op(f"arith.ori {sign}, {em.mat(V(None, (), 'i8', cval=big), shape)} : {ity}")
            fixed = em.op(f"arith.select {over}, {overb}, {fixed} : {i1}, {ity}")
        return em.op(f"tt.bitcast {fixed} : {ity} -> {bty}")

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

    # --------------------------------------------------------------- top level
    def lower(self) -> TTIRKernel:
        return with_deep_stack(self.kernel_op, self._lower)

    def _lower(self) -> TTIRKernel:
        cfg = self.config
        em = self.em
        if self.reductions:
            body_kind = self._emit_reduction()
        else:
            body_kind = self._emit_pointwise()
        if body_kind == "reduction-split":
            nsplit = self.grid[1]
            sb = _p2(nsplit)
            rows = self.shape_info.numel
            xb = max(1, min(_p2(rows), max(1, 4096 // sb), 64))
            final_cfg = TritonConfig(xb, sb, 4 if xb * sb >= 1024 else 2, 1)
            self.stage2 = _Lowering(self.kernel_op, *self.strides, self.name + "_final",
                                    final_cfg, self.aligned, final_of_split=nsplit).lower()
        params = []
        for a, al in zip(self.inputs + self.outputs, self.aligned):
            attr = " {tt.divisibility = 16 : i32}" if al else ""
            params.append(f"{a.name}: !tt.ptr<{a.dt.mem}>{attr}")
        for a in self.ws:   # fresh torch allocations: always 16-byte aligned
            params.append(f"{a.name}: !tt.ptr<{a.dt.mem}> {{tt.divisibility = 16 : i32}}")
        consts = [" " * 4 + f"{n} = {t}" for n, t in em.consts.values()]
        lines = [f"module {{", f"  tt.func public @{self.name}({', '.join(params)}) "
                 f"attributes {{noinline = false}} {{"]
        lines += consts + em.lines + ["    tt.return", "  }", "}"]
        text = _dce("\n".join(lines) + "\n")
        return TTIRKernel(self.name, text, body_kind, self.grid, cfg.num_warps, cfg.num_stages,
                          tuple(a.dt.mem for a in self.inputs + self.outputs), cfg, self.aligned,
                          self.stage2, tuple((a.extent, a.dt.mem) for a in self.ws))

    # --------------------------------------------------------------- pointwise
    def _emit_pointwise(self):
        em = self.em
        B = self.config.block
        numels = [_numel(o.shape) for o in self.outputs]
        n = max(numels + [0])
        self._choose_index_type(n + B)
        self.grid = (max(1, -(-n // B)), 1, 1)
        self.masks = {}
        if n == 0:
            return "pointwise"
        it = self.it
        pid = self._program_id("x", "pid")
        base = em.op(f"arith.muli {pid}, {em.const(B, it)} : {it}", "i")
        rng = self._arange(B, "r")
        offs = em.op(f"arith.addi {em.mat(V(base, (), it), (B,))}, {rng} : tensor<{B}x{it}>", "offs")
        shape = (B,)
        for i, out in enumerate(self.outputs):
            numel = numels[i]
            lin = V(offs, shape, it, hi=numel)
            key = ("mask", numel)
            if key not in self.masks:
                self.masks[key] = V(em.op(f"arith.cmpi slt, {offs}, {em.const(numel, it, shape)} : "
                                          f"tensor<{B}x{it}>", "mask"), shape, "i1")
            self.masks[shape] = self.masks[key]
            self.mask_ctx = numel
            self.masks[()] = None
            idx = self.delinearize(lin, out.shape)
            val = self._eval(self.yielded[i], idx)
            self._store(out, val, idx, shape)
        return "pointwise"

    # --------------------------------------------------------------- reductions
    def _emit_reduction(self):
        em = self.em
        S, D = _reduction_signature(self.reductions[0])
        for r in self.reductions[1:]:
            if _reduction_signature(r) != (S, D):
                raise KernelLoweringError(
                    f"kernel {self.name} mixes reductions of different signatures ({S} over {D} "
                    f"and {_reduction_signature(r)}); stax-fuse should have split them")
        self.S, self.D = S, D
        self.facts = _value_facts(self.defining, _numel(S))
        kept = [d for d in range(len(S)) if d not in D]
        self.kept = kept
        rows = _numel([S[d] for d in kept])
        rn = _numel([S[d] for d in D])
        if rn == 0:
            raise KernelLoweringError(f"kernel {self.name}: reduction over an empty dim")
        XB, RB = self.config.block, self.config.rblock
        if self.final_of_split:
            return self._emit_split_final(rows)
        persistent = RB >= rn
        kind = "reduction-persistent" if persistent else "reduction-looped"
        nsplit, chunk = 1, rn
        if self.config.split > 1:
            if not self.shape_info.splittable:
                raise KernelLoweringError(
                    f"kernel {self.name}: config {self.config} splits the reduced range, but "
                    "this kernel's reductions cannot be split (an arg-reduction, a bool "
                    "reduction, a reduction of a reduction, or a full-space output reading one); "
                    "use split=1 (stax-translate: leave out --split)")
            chunk = -(-(-(-rn // self.config.split)) // RB) * RB   # a multiple of RBLOCK
            nsplit = -(-rn // chunk)
        if nsplit > 1:
            persistent, kind = False, "reduction-split"
        self._choose_index_type(max(rows + XB, _numel(S) + XB * RB, nsplit * rows + XB))
        self.grid = (max(1, -(-rows // XB)), nsplit, 1)
        it = self.it
        self.XB, self.RB = XB, RB
        if rows == 0:
            self.masks = {}
            return kind
        colsh = (1, RB)
        self._setup_rows(rows)
        rmask = self.rmask
        kr = self._arange(RB, "k", axis=0)
        self.krange = kr

        # phases: 1 + the deepest reduction each depends on
        phase = {}
        for red in self.reductions:
            ds = self._red_deps(red.operands[0])
            phase[red] = 1 + max((phase[d] for d in ds), default=0)
        phases = sorted(set(phase.values()))
        full_outs, row_outs = self._classify_outputs(rows)

        if nsplit > 1:
            return self._emit_split_partial(rows, rn, chunk, nsplit, full_outs, row_outs)

        if persistent:
            k = V(kr, colsh, it, hi=rn)
            kmask = V(em.op(f"arith.cmpi slt, {kr}, {em.const(rn, it, colsh)} : "
                            f"tensor<1x{RB}x{it}>", "kmask"), colsh, "i1")
            self._set_masks(rmask, kmask)
            self.cur_k = k
            for p in phases:
                self._prepare_rows()
                self._emit_phase([red for red in self.reductions if phase[red] == p], k, None)
            self._prepare_rows()
            for i in row_outs:
                self._store_row(i)
            if full_outs:
                idx = self._full_index(k)
                for i in full_outs:
                    self._store_full(i, idx)
            return kind

        for p in phases:
            self._prepare_rows()
            reds = [red for red in self.reductions if phase[red] == p]
            self._loop(rn, lambda k, reds=reds: self._emit_phase(reds, k, True), reds)
        self._prepare_rows()
        for i in row_outs:
            self._store_row(i)
        if full_outs:
            def body(k):
                idx = self._full_index(k)
                for i in full_outs:
                    self._store_full(i, idx)
            self._loop(rn, body, [])
        return kind

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

    def _setup_rows(self, rows):
        """The program's row block: self.r ([XB, 1] row index), self.rmask, the kept-dim
        indices (computed once, top scope) and the row-only masks."""
        em, it, XB = self.em, self.it, self.XB
        rowsh = (XB, 1)
        pid = self._program_id("x", "pid")
        base = em.op(f"arith.muli {pid}, {em.const(XB, it)} : {it}", "i")
        rr = self._arange(XB, "r", axis=1)
        r = em.op(f"arith.addi {em.mat(V(base, (), it), rowsh)}, {rr} : tensor<{XB}x1x{it}>", "row")
        self.r = V(r, rowsh, it, hi=rows)
        self.rmask = V(em.op(f"arith.cmpi slt, {r}, {em.const(rows, it, rowsh)} : "
                             f"tensor<{XB}x1x{it}>", "rmask"), rowsh, "i1")
        self.masks = {rowsh: self.rmask, (): None}
        kept_idx = self.delinearize(self.r, [self.S[d] for d in self.kept])
        self.kept_idx = dict(zip(self.kept, kept_idx))

    def _classify_outputs(self, rows):
        """(full-space outputs, row-space outputs), checked against the domain.
        An output of the domain's shape is stored over the full [rows, reduced] space even
        when it does not vary along the reduced dims (a row value broadcast back to S):
        storing it as a row value would write only `rows` of its elements. An output with
        as many elements as the domain is a full-space output of the domain's shape or of
        a reshape of it (its index is the domain's, re-linearized)."""
        S, D = self.S, self.D
        full_outs = [i for i, v in enumerate(self.yielded)
                     if self._is_full(v) or _numel(_shape(v)) == _numel(S)]
        row_outs = [i for i in range(len(self.yielded)) if i not in full_outs]
        for i in full_outs:
            if _numel(_shape(self.yielded[i])) != _numel(S):
                raise KernelLoweringError(
                    f"kernel {self.name}: output {i} has shape {_shape(self.yielded[i])}, not "
                    f"the reduction domain {S} or a reshape of it")
        for i in row_outs:
            if _numel(_shape(self.yielded[i])) != rows:
                raise KernelLoweringError(
                    f"kernel {self.name}: row-space output {i} has shape "
                    f"{_shape(self.yielded[i])} ({_numel(_shape(self.yielded[i]))} elements), "
                    f"not one element per row of the domain {S} over {D} ({rows} rows)")
        return full_outs, row_outs

    def _workspaces(self, nsplit, rows):
        """One [nsplit, rows] workspace per reduction, in the reduction's compute type."""
        self.ws = []
        for j, red in enumerate(self.reductions):
            dt = _DT[_dt(_etype(red.operands[0])).comp]
            self.ws.append(_Arg(f"%ws{j}", [nsplit, rows], [rows, 1], dt, nsplit * rows))

    def _emit_split_partial(self, rows, rn, chunk, nsplit, full_outs, row_outs):
        """Stage 1 of a split reduction: program (x, y) reduces row block x over the
        reduced range [y*chunk, min((y+1)*chunk, rn)) and stores one partial per row and
        reduction into ws[y, row]; full-space outputs (which read no reduction) are stored
        for the same range. Row outputs are left to the final kernel."""
        em, it = self.em, self.it
        self._workspaces(nsplit, rows)
        part = self._program_id("y", "part")
        lo = em.op(f"arith.muli {part}, {em.const(chunk, it)} : {it}", "lo")
        hi = em.op(f"arith.addi {lo}, {em.const(chunk, it)} : {it}", "hi")
        hi = em.op(f"arith.minsi {hi}, {em.const(rn, it)} : {it}", "hi")
        self._prepare_rows()
        self._loop(rn, lambda k: self._emit_phase(self.reductions, k, True), self.reductions,
                   bounds=(lo, hi))
        pv = V(part, (), it, hi=nsplit)
        for ws, red in zip(self.ws, self.reductions):
            self._store(ws, self.row_vals[red.results[0]], [pv, self.r], (self.XB, 1))
        if full_outs:
            def body(k):
                idx = self._full_index(k)
                for i in full_outs:
                    self._store_full(i, idx)
            self._loop(rn, body, [], bounds=(lo, hi))
        return "reduction-split"

    def _emit_split_final(self, rows):
        """Stage 2 of a split reduction: combine the [nsplit] partials of each row (one
        [XB, SB] tile per reduction, SB >= nsplit), then evaluate and store the row
        outputs, exactly as an unsplit kernel does after its reductions."""
        em = self.em
        nsplit, XB, SB = self.final_of_split, self.config.block, self.config.rblock
        if SB < nsplit:
            raise KernelLoweringError(f"kernel {self.name}: the final kernel's tile ({SB}) "
                                      f"is narrower than the {nsplit} partials")
        self._choose_index_type(max(rows + XB, nsplit * rows + XB * SB))
        self.grid = (max(1, -(-rows // XB)), 1, 1)
        self.XB, self.RB = XB, SB
        self._workspaces(nsplit, rows)
        if rows == 0:
            self.masks = {}
            return "reduction-split-final"
        it = self.it
        self._setup_rows(rows)
        colsh = (1, SB)
        sr = self._arange(SB, "s", axis=0)
        smask = V(em.op(f"arith.cmpi slt, {sr}, {em.const(nsplit, it, colsh)} : "
                        f"tensor<1x{SB}x{it}>", "smask"), colsh, "i1")
        self._set_masks(self.rmask, smask)
        full = (XB, SB)
        fmask = self.masks[full]
        sv = V(sr, colsh, it, hi=nsplit)
        vals = []
        for ws, red in zip(self.ws, self.reductions):
            kind, dt = self._spec(red)
            x = em.mat(self._load(ws, [sv, self.r]), full)
            neutral = em.const(self._neutral(kind, dt), dt.comp, full)
            vals.append(em.op(f"arith.select {fmask.ssa}, {x}, {neutral} : "
                              f"{em.ty(full, 'i1')}, {em.ty(full, dt.comp)}"))
        self._finish_reductions(self.reductions, vals)
        self.masks = {(XB, 1): self.rmask, (): None}
        _, row_outs = self._classify_outputs(rows)
        self._prepare_rows()
        for i in row_outs:
            self._store_row(i)
        return "reduction-split-final"

    def _store_full(self, i, idx):
        """Store full-space output i at the domain index idx (over [XB, RB])."""
        shp = _shape(self.yielded[i])
        if shp != list(self.S):   # a reshape of the domain: same element order
            idx = self.delinearize(self.linearize(idx, self.S), shp)
        self._store(self.outputs[i], self._eval(self.yielded[i], idx), idx, (self.XB, self.RB))

    def _set_masks(self, rmask, kmask):
        full = (self.XB, self.RB)
        fm = V(self._and(rmask, kmask, full), full, "i1")
        self.masks = {(self.XB, 1): rmask, (1, self.RB): kmask, full: fm, (): None}

    def _loop(self, rn, body, reds, bounds=None):
        """scf.for over RBLOCK chunks of the reduced index (all of [0, rn), or the SSA
        bounds (lo, hi) of a split reduction's part). With reductions, carries [XB, RB]
        accumulators and reduces them after the loop."""
        em = self.em
        it, RB = self.it, self.RB
        accs, types = self._acc_init(reds)
        kv = em.fresh("k0")
        iters = [em.fresh("acc") for _ in accs]
        res = em.fresh("red") if accs else None
        head = (f"{res}:{len(accs)} = " if len(accs) > 1 else (f"{res} = " if accs else ""))
        ia = (" iter_args(" + ", ".join(f"{a} = {b}" for a, b in zip(iters, accs)) + ") -> ("
              + ", ".join(types) + ")") if accs else ""
        lo, hi = bounds if bounds else (em.const(0, it), em.const(rn, it))
        em.emit(f"{head}scf.for {kv} = {lo} to {hi} step {em.const(RB, it)}{ia} : {it} {{")
        saved_masks = self.masks
        em.push()
        colsh = (1, RB)
        ks = em.op(f"tt.splat {kv} : {it} -> tensor<1x{RB}x{it}>", "k")
        k = em.op(f"arith.addi {ks}, {self.krange} : tensor<1x{RB}x{it}>", "k")
        kmask = V(em.op(f"arith.cmpi slt, {k}, {em.const(rn, it, colsh)} : tensor<1x{RB}x{it}>",
                        "kmask"), colsh, "i1")
        self._set_masks(self.rmask, kmask)
        kvv = V(k, colsh, it, hi=rn)
        self.loop_accs = iters
        new = body(kvv)
        if accs:
            em.emit("scf.yield " + ", ".join(new) + " : " + ", ".join(types))
        em.pop()
        em.emit("}")
        self.masks = saved_masks
        if accs:
            outs = [res] if len(accs) == 1 else [f"{res}#{j}" for j in range(len(accs))]
            self._finish_reductions(reds, outs)

    # accumulator plumbing ---------------------------------------------------
    def _spec(self, red):
        kind = red.operation.name.split(".")[1]
        dt = _dt(_etype(red.operands[0]))
        return kind, dt

    def _neutral(self, kind, dt):
        c = dt.comp
        if kind == "reduce_sum":
            return 0.0 if _isf(c) else 0
        if kind == "reduce_prod":
            return 1.0 if _isf(c) else 1
        if kind in ("reduce_max", "argmax"):
            return _lowest(c, dt.unsigned)
        return _highest(c, dt.unsigned)

    def _acc_init(self, reds):
        em = self.em
        full = (self.XB, self.RB)
        accs, types = [], []
        for red in reds:
            kind, dt = self._spec(red)
            accs.append(em.const(self._neutral(kind, dt), dt.comp, full))
            types.append(em.ty(full, dt.comp))
            if kind in ("argmax", "argmin"):
                accs.append(em.const(0, "i64", full))
                types.append(em.ty(full, "i64"))
        return accs, types

    def _combine(self, kind, dt, a, b, ty):
        """Scalar or tensor combine for sum/prod/max/min (NaN-propagating max/min)."""
        em = self.em
        c = dt.comp
        fl = _isf(c)
        u = dt.unsigned
        if c == "i1":
            o = {"reduce_sum": "ori", "reduce_max": "ori", "reduce_prod": "andi",
                 "reduce_min": "andi"}[kind]
        elif kind == "reduce_sum":
            o = "addf" if fl else "addi"
        elif kind == "reduce_prod":
            o = "mulf" if fl else "muli"
        elif kind == "reduce_max":
            o = "maximumf" if fl else ("maxui" if u else "maxsi")
        else:
            o = "minimumf" if fl else ("minui" if u else "minsi")
        return em.op(f"arith.{o} {a}, {b} : {ty}")

    def _better(self, kind, dt, x, xi, b, bi, shape, ties):
        """i1: is (x, xi) preferred over (b, bi)? NaN counts as the extreme; with `ties`
        an equal value with a smaller index wins (first index)."""
        em = self.em
        c = dt.comp
        ty, bty = em.ty(shape, c), em.ty(shape, "i1")
        if _isf(c):
            pred = "ogt" if kind == "argmax" else "olt"
            g = em.op(f"arith.cmpf {pred}, {x}, {b} : {ty}")
            xn = em.op(f"arith.cmpf uno, {x}, {x} : {ty}")
            bn = em.op(f"arith.cmpf uno, {b}, {b} : {ty}")
            nb = em.op(f"arith.xori {bn}, {em.const(1, 'i1', shape)} : {bty}")
            g = em.op(f"arith.ori {g}, {em.op(f'arith.andi {xn}, {nb} : {bty}')} : {bty}")
            if ties:
                eq = em.op(f"arith.cmpf oeq, {x}, {b} : {ty}")
                both = em.op(f"arith.andi {xn}, {bn} : {bty}")
                eq = em.op(f"arith.ori {eq}, {both} : {bty}")
                lt = em.op(f"arith.cmpi slt, {xi}, {bi} : {em.ty(shape, 'i64')}")
                g = em.op(f"arith.ori {g}, {em.op(f'arith.andi {eq}, {lt} : {bty}')} : {bty}")
            return g
        u = dt.unsigned or dt.bool_
        pred = ("ugt" if u else "sgt") if kind == "argmax" else ("ult" if u else "slt")
        g = em.op(f"arith.cmpi {pred}, {x}, {b} : {ty}")
        if ties:
            eq = em.op(f"arith.cmpi eq, {x}, {b} : {ty}")
            lt = em.op(f"arith.cmpi slt, {xi}, {bi} : {em.ty(shape, 'i64')}")
            g = em.op(f"arith.ori {g}, {em.op(f'arith.andi {eq}, {lt} : {bty}')} : {bty}")
        return g

    def _emit_phase(self, reds, k, looped):
        """Evaluate each reduction's input over the current chunk. Persistent: reduce it
        now. Looped: combine into the loop's accumulators and return the new ones."""
        em = self.em
        full = (self.XB, self.RB)
        fmask = self.masks[full]
        idx = self._full_index(k)
        new = []
        j = 0
        vals = []
        for red in reds:
            kind, dt = self._spec(red)
            ty = em.ty(full, dt.comp)
            x = em.mat(self._eval(red.operands[0], idx), full)
            neutral = em.const(self._neutral(kind, dt), dt.comp, full)
            xm = em.op(f"arith.select {fmask.ssa}, {x}, {neutral} : {em.ty(full, 'i1')}, {ty}")
            if kind in ("argmax", "argmin"):
                lin = self.linearize(self._red_idx(k), [self.S[d] for d in self.D])
                li = em.mat(lin, full)
                if self.it != "i64":
                    li = em.op(f"arith.extsi {li} : {em.ty(full, self.it)} to {em.ty(full, 'i64')}")
                if looped:
                    bv, bi = self.loop_accs[j], self.loop_accs[j + 1]
                    g = self._better(kind, dt, xm, li, bv, bi, full, ties=False)
                    new.append(em.op(f"arith.select {g}, {xm}, {bv} : {em.ty(full, 'i1')}, {ty}"))
                    new.append(em.op(f"arith.select {g}, {li}, {bi} : {em.ty(full, 'i1')}, "
                                     f"{em.ty(full, 'i64')}"))
                    j += 2
                else:
                    vals += [xm, li]
            else:
                if looped:
                    new.append(self._combine(kind, dt, self.loop_accs[j], xm, ty))
                    j += 1
                else:
                    vals.append(xm)
        if looped:
            return new
        self._finish_reductions(reds, vals)
        return None

    def _finish_reductions(self, reds, accs):
        """tt.reduce each [XB, RB] accumulator along axis 1 into a [XB, 1] row value."""
        em = self.em
        XB, RB = self.XB, self.RB
        j = 0
        for red in reds:
            kind, dt = self._spec(red)
            c = dt.comp
            if kind in ("argmax", "argmin"):
                v, vi = accs[j], accs[j + 1]
                j += 2
                res = em.fresh("red")
                a, ai, b, bi = (em.fresh("a"), em.fresh("ai"), em.fresh("b"), em.fresh("bi"))
                em.emit(f"{res}:2 = \"tt.reduce\"({v}, {vi}) <{{axis = 1 : i32}}> ({{")
                em.emit(f"^bb0({a}: {c}, {ai}: i64, {b}: {c}, {bi}: i64):")
                em.push()
                g = self._better(kind, dt, a, ai, b, bi, (), ties=True)
                rv = em.op(f"arith.select {g}, {a}, {b} : {c}")
                ri = em.op(f"arith.select {g}, {ai}, {bi} : i64")
                em.emit(f"tt.reduce.return {rv}, {ri} : {c}, i64")
                em.pop()
                em.emit(f"}}) : (tensor<{XB}x{RB}x{c}>, tensor<{XB}x{RB}xi64>) -> "
                        f"(tensor<{XB}x{c}>, tensor<{XB}xi64>)")
                out, oc = f"{res}#1", "i64"
            else:
                v = accs[j]
                j += 1
                res = em.fresh("red")
                a, b = em.fresh("a"), em.fresh("b")
                em.emit(f"{res} = \"tt.reduce\"({v}) <{{axis = 1 : i32}}> ({{")
                em.emit(f"^bb0({a}: {c}, {b}: {c}):")
                em.push()
                rv = self._combine(kind, dt, a, b, c)
                em.emit(f"tt.reduce.return {rv} : {c}")
                em.pop()
                em.emit(f"}}) : (tensor<{XB}x{RB}x{c}>) -> tensor<{XB}x{c}>")
                out, oc = res, c
            e = em.op(f"tt.expand_dims {out} {{axis = 1 : i32}} : tensor<{XB}x{oc}> -> "
                      f"tensor<{XB}x1x{oc}>", "row")
            rt = str(_etype(red.results[0]))
            val = V(e, (XB, 1), oc)
            if kind not in ("argmax", "argmin") and _dt(rt).comp != oc:
                raise KernelLoweringError(f"reduction result type {rt} differs from its input")
            self.row_vals[red.results[0]] = val

    def _red_deps(self, v):
        out, seen, stack = set(), set(), [v]
        while stack:
            x = stack.pop()
            o = self.defining.get(x)
            if o is None or id(o) in seen:
                continue
            seen.add(id(o))
            if o.operation.name in _REDUCTIONS:
                out.add(o)
                continue
            stack.extend(o.operands)
        return out

    def _is_full(self, v):
        """Does v vary along the reduced dims (see _value_facts)?"""
        return self.facts(v)[1]

    def _red_idx(self, k):
        return self.delinearize(k, [self.S[d] for d in self.D])

    def _full_index(self, k):
        red = dict(zip(self.D, self._red_idx(k)))
        return [self.kept_idx[d] if d in self.kept_idx else red[d] for d in range(len(self.S))]

    def _row_index(self, shape):
        """Index of the current rows in a row-space value of this shape."""
        return self.delinearize(self.r, shape)

    def _prepare_rows(self):
        """Evaluate, at the top scope, every row value that enters full space through a
        view and whose reductions are done: computed once per row block."""
        for o in self.body:
            if o.operation.name not in _VIEWS:
                continue
            x = o.operands[0]
            if not self._is_full(o.results[0]) and _shape(o.results[0]) != self.S:
                continue
            if self._is_full(x):
                continue
            if any(d.results[0] not in self.row_vals for d in self._red_deps(x)):
                continue
            self._eval(x, self._row_index(_shape(x)))

    def _store_row(self, i):
        v = self.yielded[i]
        shp = _shape(v)
        idx = self._row_index(shp)
        self._store(self.outputs[i], self._eval(v, idx), idx, (self.XB, 1))

    # --------------------------------------------------------------- evaluation
    def _eval(self, v, idx) -> V:
        em = self.em
        shp = _shape(v)
        idx = [self.ix_const(0) if s == 1 else i for i, s in zip(idx, shp)]
        if v in self.row_vals:
            key = ("row", v, tuple(c.ssa for c in self.cond), self.mask_ctx)
            got = em.lookup(key)
            if got is None:
                got = self._round_if_stored(v, self.row_vals[v])
                em.remember(key, got)
            return got
        key = ("val", v, self._ikey(idx), tuple(c.ssa for c in self.cond), self.mask_ctx)
        got = em.lookup(key)
        if got is not None:
            return got
        if v in self.arg_index:
            res = self._load(self.inputs[self.arg_index[v]], idx)
        else:
            o = self.defining[v]
            if o.operation.name in _REDUCTIONS:
                raise KernelLoweringError(
                    f"kernel {self.name}: reduction result used before it is computed, or at "
                    "another row than the current one (unsupported)")
            res = self._eval_op(o, v, idx)
            if o.operation.name not in ROUNDED_RESULT_OPS:
                res = self._round_if_stored(v, res)
        em.remember(key, res)
        return res

    def _round_if_stored(self, v, res: V) -> V:
        """A bf16/f16 value the kernel stores, rounded to its type for its uses inside the
        kernel too, so that one value has one precision: rounding only at the store, a
        bf16 product stored rounded but normalized unrounded gave layer_norm's backward
        x - mean != 0 over a row of one, times rstd = 316: input gradients off by 44 on
        the H200 (stax-fuzz). Values the kernel does not store stay in f32 (rounding
        each stax op would round inside one eager op, e.g. add with alpha, where eager
        does not). Partial sums of a split reduction are stored unrounded."""
        dt = _dt(_etype(v))
        if v not in self.stored_vals or dt.mem == dt.comp or dt.fp8 or res.is_const or \
                not _isf(res.elem):
            return res
        return V(self._round_to(res.ssa, res.shape, dt), res.shape, res.elem)

    def _eval_gather(self, o, idx) -> V:
        """input[..., indices[i_d], ...]: load the index (where the result is read), wrap
        a negative one, clamp into range (an out-of-range index must not read outside
        the buffer; torch raises there), and read the input at it."""
        em = self.em
        d = ir.IntegerAttr(o.attributes["dim"]).value
        n = _shape(o.operands[0])[d]
        k = self._eval(o.operands[1], [idx[d]])
        sh = k.shape
        kty, ity = em.ty(sh, k.elem), em.ty(sh, self.it)
        kv = em.mat(k, sh)
        kb, ib = int(k.elem[1:]), int(self.it[1:])
        if kb < ib:
            kv = em.op(f"arith.extsi {kv} : {kty} to {ity}", "i")
        elif kb > ib:
            kv = em.op(f"arith.trunci {kv} : {kty} to {ity}", "i")
        zero = em.mat(V(None, (), self.it, cval=0), sh)
        neg = em.op(f"arith.cmpi slt, {kv}, {zero} : {ity}", "c")
        wrapped = em.op(f"arith.addi {kv}, {em.mat(V(None, (), self.it, cval=n), sh)} : {ity}", "i")
        kv = em.op(f"arith.select {neg}, {wrapped}, {kv} : {em.ty(sh, 'i1')}, {ity}", "i")
        kv = em.op(f"arith.maxsi {kv}, {zero} : {ity}", "i")
        kv = em.op(f"arith.minsi {kv}, {em.mat(V(None, (), self.it, cval=n - 1), sh)} : {ity}", "i")
        new = list(idx)
        new[d] = V(kv, sh, self.it, hi=n)
        return self._eval(o.operands[0], new)

    def _eval_op(self, o, v, idx) -> V:
        em = self.em
        name = o.operation.name
        rdt = _dt(_etype(v))
        if name == "stax.broadcast_in_dim":
            dims = _ints(o, "dims")
            src = _shape(o.operands[0])
            return self._eval(o.operands[0], [idx[d] if src[i] != 1 else self.ix_const(0)
                                              for i, d in enumerate(dims)])
        if name == "stax.permute":
            perm = _ints(o, "perm")
            inv = [0] * len(perm)
            for i, p in enumerate(perm):
                inv[p] = i
            return self._eval(o.operands[0], [idx[inv[d]] for d in range(len(perm))])
        if name == "stax.slice":
            start, step = _ints(o, "start"), _ints(o, "step")
            return self._eval(o.operands[0], [self.ix_add(self.ix_mul(i, s), self.ix_const(a))
                                              for i, a, s in zip(idx, start, step)])
        if name == "stax.gather":
            return self._eval_gather(o, idx)
        if name == "stax.reshape":
            src = _shape(o.operands[0])
            lin = self.linearize(idx, _shape(v))
            return self._eval(o.operands[0], self.delinearize(lin, src))
        if name == "stax.full":
            val = scalar_attr_value(o.attributes["value"])
            if rdt.bool_:
                return V(None, (), "i1", cval=1 if val else 0)
            if _isf(rdt.comp) and rdt.mem in ("bf16", "f16"):
                val = float(torch.tensor(val, dtype=getattr(torch, {"bf16": "bfloat16",
                                                                     "f16": "float16"}[rdt.mem])).float())
            return V(None, (), rdt.comp, cval=val)
        if name == "stax.iota":
            d = ir.IntegerAttr(o.attributes["dim"]).value
            i = idx[d]
            if i.is_const:
                return V(None, (), rdt.comp, cval=i.cval if not _isf(rdt.comp) else float(i.cval))
            return self._convert(V(i.ssa, i.shape, self.it), _DT[self.it], rdt)
        if name == "stax.concat":
            return self._eval_concat(o, v, idx)
        if name == "stax.pad":
            return self._eval_pad(o, v, idx)
        ins = [self._eval(x, idx) for x in o.operands]
        if name == "stax.convert":
            return self._convert(ins[0], _dt(_etype(o.operands[0])), rdt)
        if name == "stax.bitcast":
            return self._bitcast(ins[0], _dt(_etype(o.operands[0])), rdt)
        if name == "stax.select":
            return self._select(*ins)
        kind = name.split(".")[1]
        idt = _dt(_etype(o.operands[0]))
        if kind.startswith("cmp_"):
            return self._compare(kind[4:], ins, idt)
        if len(ins) == 2:
            return self._binary(kind, ins, idt, o)
        if len(ins) == 1:
            return self._unary(kind, ins[0], idt)
        raise KernelLoweringError(f"op {name} is not supported by the Triton target")

    def _cond_ix(self, pred, a: V, c: int) -> V:
        em = self.em
        if a.is_const:
            val = {"ult": a.cval < c, "uge": a.cval >= c, "slt": a.cval < c, "sge": a.cval >= c}[pred]
            return V(None, (), "i1", cval=int(val))
        return V(em.op(f"arith.cmpi {pred}, {a.ssa}, {em.mat(self.ix_const(c), a.shape)} : "
                       f"{em.ty(a.shape, self.it)}", "m"), a.shape, "i1")

    def _not(self, c: V) -> V:
        if c.is_const:
            return V(None, (), "i1", cval=1 - c.cval)
        return V(self.em.op(f"arith.xori {c.ssa}, {self.em.const(1, 'i1', c.shape)} : "
                            f"{self.em.ty(c.shape, 'i1')}", "m"), c.shape, "i1")

    def _with_cond(self, c: V, fn):
        if c.is_const:
            return fn() if c.cval else None
        saved = self.cond
        self.cond = saved + (c,)
        try:
            return fn()
        finally:
            self.cond = saved

    def _select(self, c: V, a: V, b: V) -> V:
        em = self.em
        if c.is_const:
            return a if c.cval else b
        shape = _common(c.shape, a.shape, b.shape)
        return V(em.op(f"arith.select {em.mat(c, shape)}, {em.mat(a, shape)}, {em.mat(b, shape)} : "
                       f"{em.ty(shape, 'i1')}, {em.ty(shape, a.elem)}"), shape, a.elem)

    def _eval_concat(self, o, v, idx):
        """Each input is loaded under a mask restricting it to its range, then selected."""
        d = ir.IntegerAttr(o.attributes["dim"]).value
        n0 = _shape(o.operands[0])[d]
        i = idx[d]
        c = self._cond_ix("slt", i, n0)
        sub0 = list(idx)
        sub1 = list(idx)
        sub1[d] = self.ix_add(i, self.ix_const(-n0))
        if c.is_const:
            return self._eval(o.operands[0], sub0) if c.cval else self._eval(o.operands[1], sub1)
        a = self._with_cond(c, lambda: self._eval(o.operands[0], sub0))
        b = self._with_cond(self._not(c), lambda: self._eval(o.operands[1], sub1))
        return self._select(c, a, b)

    def _eval_pad(self, o, v, idx):
        low, high = _ints(o, "low"), _ints(o, "high")
        src = _shape(o.operands[0])
        rdt = _dt(_etype(v))
        conds = None
        sub = []
        for d, (lo, n) in enumerate(zip(low, src)):
            sub.append(self.ix_add(idx[d], self.ix_const(-lo)) if lo else idx[d])
            if lo == 0 and high[d] <= 0:
                continue
            c1 = self._cond_ix("sge", idx[d], lo) if lo > 0 else V(None, (), "i1", cval=1)
            c2 = self._cond_ix("slt", idx[d], lo + n)
            for c in (c1, c2):
                if c.is_const and c.cval:
                    continue
                if conds is None:
                    conds = c
                elif c.is_const or conds.is_const:
                    conds = c if (conds.is_const and conds.cval) else conds
                    if c.is_const and not c.cval:
                        conds = c
                else:
                    sh = _common(conds.shape, c.shape)
                    conds = V(self._and(conds, c, sh), sh, "i1")
        pv = scalar_attr_value(o.attributes["value"])
        padv = V(None, (), rdt.comp, cval=(int(bool(pv)) if rdt.bool_ else pv))
        if conds is None:
            return self._eval(o.operands[0], sub)
        if conds.is_const:
            return self._eval(o.operands[0], sub) if conds.cval else padv
        x = self._with_cond(conds, lambda: self._eval(o.operands[0], sub))
        return self._select(conds, x, padv)

    # --------------------------------------------------------------- scalar semantics
    def _convert(self, x: V, src: DT, dst: DT) -> V:
        em = self.em
        s, d = x.elem, dst.comp
        if src.mem == dst.mem and src.unsigned == dst.unsigned and src.bool_ == dst.bool_:
            return x
        if x.is_const:
            return self._convert_const(x, src, dst)
        sh = x.shape
        sty, dty = em.ty(sh, s), em.ty(sh, d)
        if dst.bool_:
            if _isf(s):
                return V(em.op(f"arith.cmpf une, {x.ssa}, {em.const(0.0, s, sh)} : {sty}"), sh, "i1")
            return V(em.op(f"arith.cmpi ne, {x.ssa}, {em.const(0, s, sh)} : {sty}"), sh, "i1")
        if _isf(s) and _isf(d):
            r = x.ssa
            if s != d:
                r = em.op(f"arith.{'extf' if _fbits(s) < _fbits(d) else 'truncf'} {x.ssa} : "
                          f"{sty} to {dty}")
            r = self._round_to(r, sh, dst) if src.mem != dst.mem else r
            return V(r, sh, d)
        if _isf(s):
            o = "fptoui" if dst.unsigned else "fptosi"
            return V(em.op(f"arith.{o} {x.ssa} : {sty} to {dty}"), sh, d)
        if _isf(d):
            o = "uitofp" if (src.unsigned or src.bool_) else "sitofp"
            r = em.op(f"arith.{o} {x.ssa} : {sty} to {dty}")
            return V(self._round_to(r, sh, dst), sh, d)
        sb, db = _ibits(s), _ibits(d)
        if sb == db:
            return V(x.ssa, sh, d)
        if sb < db:
            o = "extui" if (src.unsigned or src.bool_) else "extsi"
            return V(em.op(f"arith.{o} {x.ssa} : {sty} to {dty}"), sh, d)
        return V(em.op(f"arith.trunci {x.ssa} : {sty} to {dty}"), sh, d)

    def _round_to(self, r, sh, dst: DT):
        """Round an f32 value to dst's storage type and back (an explicit cast)."""
        em = self.em
        if dst.mem == dst.comp:
            return r
        cty, mty = em.ty(sh, dst.comp), em.ty(sh, dst.mem)
        if dst.fp8:
            t = self._fp8_encode(r, sh, dst.mem)
            # decoded with its NaN sign: a select/store after this cast re-encodes it
            e = self._fp8_decode(t, sh, dst.mem, dst.comp)
            self.rounded[(e, dst.mem)] = t
            return e
        t = em.op(f"arith.truncf {r} : {cty} to {mty}")
        e = em.op(f"arith.extf {t} : {mty} to {cty}")
        self.rounded[(e, dst.mem)] = t   # storing e as dst.mem is just t (no 2nd rounding)
        return e

    def _convert_const(self, x: V, src: DT, dst: DT) -> V:
        tmap = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16,
                "f16": torch.float16, "i64": torch.int64, "i32": torch.int32, "i16": torch.int16,
                "i8": torch.int8, "f8E4M3FN": torch.float8_e4m3fn, "f8E5M2": torch.float8_e5m2}
        st = torch.bool if src.bool_ else (torch.uint8 if src.unsigned else tmap[src.mem])
        dtt = torch.bool if dst.bool_ else (torch.uint8 if dst.unsigned else tmap[dst.mem])
        t = torch.tensor(x.cval).to(st).to(dtt)
        val = t.float().item() if _isf(dst.comp) else int(t.to(torch.int64).item())
        return V(None, (), dst.comp, cval=val)

    def _bitcast(self, x: V, src: DT, dst: DT) -> V:
        """The bits of x (as stored: a loaded or bitcast value's own bits, see _from_mem)
        reinterpreted as dst."""
        em = self.em
        sh = x.shape if not x.is_const else ()
        m = self._to_mem(x, src, sh)
        if src.fp8 and not x.is_const and m not in self.raw and dst.mem == "i8":
            # an fp8 value computed in this kernel (an encode): its bits by integer
            # arithmetic. On sm_90 Triton 3.6 loses the odd element of each pair when the
            # bytes of a tt.fp_to_fp f32 -> fp8 go through integer ops and are decoded
            # again in registers (benchmarks/fp8_bitcast_probe.py, issue 8)
            return self._from_mem(V(self._fp8_encode_bits(em.mat(x, sh), sh, src.mem),
                                    sh, "i8"), dst)
        r = em.op(f"tt.bitcast {m} : {em.ty(sh, src.mem)} -> {em.ty(sh, dst.mem)}")
        return self._from_mem(V(r, sh, dst.mem), dst)

    def _fp8_encode_bits(self, s, shape, mem) -> str:
        """f32 -> fp8 bits (an i8 SSA value) in integer arithmetic, the same rounding
        (nearest even) and overflow as `_fp8_encode`: normal results shift the f32
        mantissa and re-bias the exponent, subnormal ones are rint(|x| * 2^(bias-1+M))."""
        em = self.em
        E4 = mem == "f8E4M3FN"
        M, bias, maxb = (3, 7, 0x7E) if E4 else (2, 15, 0x7B)
        mode = "inf" if not E4 else fp8_e4m3fn_overflow()
        over_b = {"inf": 0x7C, "nan": 0x7F}.get(mode, maxb)
        ity, fty, bty = em.ty(shape, "i32"), em.ty(shape, "f32"), em.ty(shape, "i1")

        def c(v, t="i32"):
            return em.mat(V(None, (), t, cval=v), shape)

        def op(text):
            return em.op(text)
        u = op(f"tt.bitcast {s} : {fty} -> {ity}")
        neg = op(f"arith.cmpi slt, {u}, {c(0)} : {ity}")
        a = op(f"arith.andi {u}, {c(0x7FFFFFFF)} : {ity}")
        nan = op(f"arith.cmpi sgt, {a}, {c(0x7F800000)} : {ity}")
        sh = 23 - M
        q = op(f"arith.shrui {a}, {c(sh)} : {ity}")
        bn = op(f"arith.subi {q}, {c((127 - bias) << M)} : {ity}")
        rem = op(f"arith.andi {a}, {c((1 << sh) - 1)} : {ity}")
        gt = op(f"arith.cmpi sgt, {rem}, {c(1 << (sh - 1))} : {ity}")
        tie = op(f"arith.cmpi eq, {rem}, {c(1 << (sh - 1))} : {ity}")
        odd = op(f"arith.trunci {q} : {ity} to {bty}")
        up = op(f"arith.ori {gt}, {op(f'arith.andi {tie}, {odd} : {bty}')} : {bty}")
        bn = op(f"arith.addi {bn}, {op(f'arith.extui {up} : {bty} to {ity}')} : {ity}")
        ax = op(f"tt.bitcast {a} : {ity} -> {fty}")
        sc = op(f"arith.mulf {ax}, {c(float(2 ** (bias - 1 + M)), 'f32')} : {fty}")
        rs = self._extern("__nv_rintf", [V(sc, tuple(shape), "f32")], tuple(shape), "f32")
        bs = op(f"arith.fptosi {rs.ssa} : {fty} to {ity}")
        e32 = op(f"arith.shrui {a}, {c(23)} : {ity}")
        sub = op(f"arith.cmpi slt, {e32}, {c(128 - bias)} : {ity}")
        bits = op(f"arith.select {sub}, {bs}, {bn} : {bty}, {ity}")
        over = op(f"arith.cmpi sgt, {bits}, {c(maxb)} : {ity}")
        bits = op(f"arith.select {over}, {c(over_b)}, {bits} : {bty}, {ity}")
        bits = op(f"arith.select {nan}, {c(0x7F)}, {bits} : {bty}, {ity}")
        sign = op(f"arith.select {neg}, {c(0x80)}, {c(0)} : {bty}, {ity}")
        bits = op(f"arith.ori {bits}, {sign} : {ity}")
        return op(f"arith.trunci {bits} : {ity} to {em.ty(shape, 'i8')}")

    def _compare(self, kind, ins, dt: DT) -> V:
        em = self.em
        a, b = ins
        sh = _common(a.shape, b.shape)
        ty = em.ty(sh, a.elem)
        if _isf(a.elem):
            pred = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}[kind]
            return V(em.op(f"arith.cmpf {pred}, {em.mat(a, sh)}, {em.mat(b, sh)} : {ty}"), sh, "i1")
        u = dt.unsigned or dt.bool_
        pred = {"eq": "eq", "ne": "ne", "lt": "ult" if u else "slt", "le": "ule" if u else "sle",
                "gt": "ugt" if u else "sgt", "ge": "uge" if u else "sge"}[kind]
        return V(em.op(f"arith.cmpi {pred}, {em.mat(a, sh)}, {em.mat(b, sh)} : {ty}"), sh, "i1")

    def _full_value(self, v):
        o = self.defining.get(v)
        while o is not None and o.operation.name in _VIEWS:
            o = self.defining.get(o.operands[0])
        if o is not None and o.operation.name == "stax.full":
            return scalar_attr_value(o.attributes["value"])
        return None

    def _extern(self, sym, args, sh, elem):
        em = self.em
        ty = em.ty(sh, elem)
        ops = ", ".join(em.mat(a, sh) for a in args)
        return V(em.op(f"tt.extern_elementwise {ops} {{libname = \"\", libpath = \"\", pure = true, "
                       f"symbol = \"{sym}\"}} : ({', '.join([ty] * len(args))}) -> {ty}"), sh, elem)

    def _binary(self, kind, ins, dt: DT, o) -> V:
        em = self.em
        a, b = ins
        comp = a.elem
        fl = _isf(comp)
        sh = _common(a.shape, b.shape)
        ty = em.ty(sh, comp)
        if kind == "pow" and fl:
            e = self._full_value(o.operands[1])
            if e in (2.0, 1.0, 0.5, -1.0, -0.5, 3.0):
                x = a
                xs = em.mat(x, x.shape)
                t = em.ty(x.shape, comp)
                if e == 1.0:
                    return x
                if e == 2.0:
                    return V(em.op(f"arith.mulf {xs}, {xs} : {t}"), x.shape, comp)
                if e == 3.0:
                    q = em.op(f"arith.mulf {xs}, {xs} : {t}")
                    return V(em.op(f"arith.mulf {q}, {xs} : {t}"), x.shape, comp)
                if e == 0.5:
                    return self._unary("sqrt", x, dt)
                if e == -1.0:
                    return self._unary("reciprocal", x, dt)
                return self._unary("reciprocal", self._unary("sqrt", x, dt), dt)
        A, Bs = em.mat(a, sh), em.mat(b, sh)
        u = dt.unsigned or dt.bool_

        def r(text):
            return V(em.op(text), sh, comp)

        if kind == "div" and fl and comp == "f32" and sh:
            return r(f"tt.precise_divf {A}, {Bs} : {ty}")   # IEEE division, like eager
        simple = arith_binary(kind, comp, u)
        if simple is not None:
            return r(f"{simple} {A}, {Bs} : {ty}")
        if kind == "remainder":
            z = em.const(0.0 if fl else 0, comp, sh)
            return r(python_remainder(lambda text, _t: em.op(text), A, Bs, z, ty,
                                      em.ty(sh, "i1"), fl, u))
        if kind == "pow":
            if not fl:
                raise KernelLoweringError("integer pow is not supported by the Triton target")
            return self._extern("__nv_powf" if comp == "f32" else "__nv_pow", [a, b], sh, comp)
        if kind == "atan2":
            return self._extern("__nv_atan2f" if comp == "f32" else "__nv_atan2", [a, b], sh, comp)
        raise KernelLoweringError(f"binary op stax.{kind} is not supported by the Triton target")

    def _unary(self, kind, x: V, dt: DT) -> V:
        em = self.em
        comp = x.elem
        sh = x.shape
        ty = em.ty(sh, comp)
        bty = em.ty(sh, "i1")
        fl = _isf(comp)
        a = em.mat(x, sh)

        def r(text):
            return V(em.op(text), sh, comp)

        def c(v):
            return em.const(v, comp, sh)

        if kind == "neg":
            # Triton 3.6 TTIR rejects arith.negf; -0.0 - x is the same bits (signs of 0 too).
            return r(f"arith.subf {c(-0.0)}, {a} : {ty}") if fl else r(f"arith.subi {c(0)}, {a} : {ty}")
        if kind == "abs":
            if fl:
                return r(f"math.absf {a} : {ty}")
            return x if dt.unsigned else r(f"math.absi {a} : {ty}")
        if kind == "sign":
            if fl:
                p = em.op(f"arith.cmpf ogt, {a}, {c(0.0)} : {ty}")
                n = em.op(f"arith.cmpf olt, {a}, {c(0.0)} : {ty}")
                # eager's (0 < x) - (x < 0): sign(nan) = 0 and sign(-0.0) = +0.0
                t = em.op(f"arith.select {n}, {c(-1.0)}, {c(0.0)} : {bty}, {ty}")
                return r(f"arith.select {p}, {c(1.0)}, {t} : {bty}, {ty}")
            gt = "ugt" if dt.unsigned else "sgt"
            lt = "ult" if dt.unsigned else "slt"
            p = em.op(f"arith.cmpi {gt}, {a}, {c(0)} : {ty}")
            n = em.op(f"arith.cmpi {lt}, {a}, {c(0)} : {ty}")
            t = em.op(f"arith.select {n}, {c(-1)}, {c(0)} : {bty}, {ty}")
            return r(f"arith.select {p}, {c(1)}, {t} : {bty}, {ty}")
        if kind == "not":
            return r(f"arith.xori {a}, {c(1)} : {ty}")
        if kind == "bitwise_not":
            return r(f"arith.xori {a}, {c(-1 if comp != 'i1' else 1)} : {ty}")
        if kind == "isnan":
            return V(em.op(f"arith.cmpf uno, {a}, {a} : {ty}"), sh, "i1")
        if not fl:
            raise KernelLoweringError(f"stax.{kind} needs a float operand, got {comp}")
        f32 = comp == "f32"
        simple = {"exp": "math.exp", "exp2": "math.exp2", "log": "math.log", "log2": "math.log2",
                  "erf": "math.erf", "floor": "math.floor", "ceil": "math.ceil",
                  "sin": "math.sin", "cos": "math.cos"}
        if kind in simple:
            return r(f"{simple[kind]} {a} : {ty}")
        if kind == "sqrt":
            return r(f"tt.precise_sqrt {a} : {ty}") if f32 else r(f"math.sqrt {a} : {ty}")
        if kind == "rsqrt":
            return r(f"math.rsqrt {a} : {ty}")
        if kind == "reciprocal":
            if f32 and sh:
                return r(f"tt.precise_divf {c(1.0)}, {a} : {ty}")
            return r(f"arith.divf {c(1.0)}, {a} : {ty}")
        if kind == "sigmoid":
            n = em.op(f"arith.subf {c(-0.0)}, {a} : {ty}")
            e = em.op(f"math.exp {n} : {ty}")
            d = em.op(f"arith.addf {e}, {c(1.0)} : {ty}")
            if f32 and sh:
                return r(f"tt.precise_divf {c(1.0)}, {d} : {ty}")
            return r(f"arith.divf {c(1.0)}, {d} : {ty}")
        libdev = {"tanh": "tanh", "expm1": "expm1", "log1p": "log1p", "trunc": "trunc",
                  "round": "rint"}
        if kind in libdev:
            sym = "__nv_" + libdev[kind] + ("f" if f32 else "")
            return self._extern(sym, [x], sh, comp)
        raise KernelLoweringError(f"unary op stax.{kind} is not supported by the Triton target")


# ----------------------------------------------------------------------------- cleanup

_DEF = re.compile(r"^\s*(%[\w]+)(?::\d+)? = (.*)$")
_SIDE_EFFECTS = ("tt.store", "scf.for", "\"tt.reduce\"", "scf.if")


def _dce(text: str) -> str:
    """Drop single-line pure definitions whose result is never used (to a fixpoint)."""
    lines = text.split("\n")
    while True:
        uses = {}
        for ln in lines:
            for m in re.finditer(r"%[\w]+", ln):
                uses[m.group(0)] = uses.get(m.group(0), 0) + 1
        keep, dropped = [], False
        for ln in lines:
            m = _DEF.match(ln)
            if m and uses.get(m.group(1), 0) == 1 and not ln.rstrip().endswith("{") and \
                    not any(m.group(2).startswith(s) for s in _SIDE_EFFECTS):
                dropped = True
                continue
            keep.append(ln)
        lines = keep
        if not dropped:
            return "\n".join(lines)


# ----------------------------------------------------------------------------- entry point

def emit_ttir(kernel_op, input_strides, output_strides, name="kernel",
              config: TritonConfig | None = None, aligned=None) -> TTIRKernel:
    """The kernel as TTIR text: `tt.func public @name(in0.., out0..)`, one !tt.ptr per
    input then per output. `aligned[i]` puts `tt.divisibility = 16` on pointer i (a
    promise: the caller must only launch with 16-byte aligned pointers there)."""
    op = kernel_op.operation if hasattr(kernel_op, "operation") else kernel_op
    with op.context:
        return _Lowering(op, input_strides, output_strides, name, config, aligned).lower()
