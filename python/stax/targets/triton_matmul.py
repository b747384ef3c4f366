"""Triton matmul with a fused pointwise epilogue: stax emits the TTIR (`tt.dot`) itself.

Used under `max-autotune` (see `stax.autotune`): every shape gets a search over
`MatmulConfig`s plus the library call ("cublas"); by default matmul goes to cuBLAS.

The kernel (all shapes and strides are static, so they are constants in the IR):

- program_id x walks the (M/BLOCK_M) x (N/BLOCK_N) output tiles, in *grouped* order
  when `group_m > 1` (GROUP_M row-tiles share the same B columns while they are hot in
  L2); program_id y walks the flattened batch dims;
- an `scf.for` over K in BLOCK_K steps carries the f32 accumulator and the A/B tile
  pointers; A is [BLOCK_M, BLOCK_K], B is [BLOCK_K, BLOCK_N], `tt.dot` accumulates in
  f32 for f32/bf16/f16 inputs (f32 uses `inputPrecision = ieee` unless `allow_tf32`,
  matching torch's default `torch.backends.cuda.matmul.allow_tf32 = False`);
- loads are masked only where a dim does not divide its block (M, N edges: row/col
  masks hoisted out of the loop; K edge: `k + rk < K`), with `other = 0`;
- the epilogue runs on the f32 accumulator tile (bias, activation, residual, ...), and
  every output is rounded once, at its store (`arith.truncf` for bf16/f16).

Kernel arguments, in order: `a, b, *epilogue.inputs, out, *epilogue.extra outputs`
(all pointers). Offsets are i32 unless some tensor spans 2**31 elements or more, then
i64. `aligned[i]` (one bool per pointer argument) adds `tt.divisibility = 16` to
argument i: the caller must derive it from the runtime data pointers (`ptr % 16 == 0`)
and make it part of its cache key; `None` adds no hints.
"""
from __future__ import annotations

import math
import os
import struct
import tempfile
from dataclasses import dataclass, field
from typing import Sequence

# the search space and the epilogue live in their own modules; their names are part of
# this module's interface (callers and tests import them from here)
from stax.targets import triton_division
from stax.targets.triton_matmul_config import (CUBLAS, SMEM_BUDGET, MatmulConfig, _mlir_dtype,
                                               matmul_candidates, matmul_config_valid,
                                               smem_bytes)
from stax.targets.triton_matmul_epilogue import (ACC, BINARY, UNARY, Epilogue, EpilogueBuilder,
                                                 EpilogueInput, EpilogueOp, EpilogueOutput,
                                                 epilogue_from_kernel)

__all__ = [
    "MatmulConfig", "CUBLAS", "Epilogue", "EpilogueBuilder", "EpilogueInput",
    "EpilogueOp", "EpilogueOutput", "MatmulTTIR", "emit_matmul_ttir", "matmul_candidates",
    "matmul_config_valid", "smem_bytes", "compile_matmul", "TTIRBuilder", "ACC",
    "epilogue_from_kernel", "SMEM_BUDGET",
]


# ----------------------------------------------------------------------------- TTIR text

def _fconst(v: float) -> str:
    v = float(v)
    if math.isfinite(v):
        return f"{v:.9e}"
    return "0x%08X" % struct.unpack("<I", struct.pack("<f", v))[0]


class TTIRBuilder:
    """Tiny SSA text builder (also handed to Epilogue.hook)."""

    def __init__(self, indent: str = "    "):
        self.lines: list = []
        self.n = 0
        self.indent = indent
        self._consts: dict = {}

    def fresh(self) -> str:
        self.n += 1
        return f"%{self.n}"

    def emit(self, rhs: str) -> str:
        name = self.fresh()
        self.lines.append(f"{self.indent}{name} = {rhs}")
        return name

    def raw(self, line: str) -> None:
        self.lines.append(f"{self.indent}{line}")

    def const(self, value, ty: str) -> str:
        """arith.constant of a scalar type or a splat tensor type (cached per block
        level only when emitted at function level: callers inside regions use emit)."""
        k = (value, ty, self.indent)
        if k in self._consts:
            return self._consts[k]
        elt = ty.rsplit("x", 1)[-1].rstrip(">") if ty.startswith("tensor<") else ty
        lit = _fconst(value) if elt.startswith(("f", "bf")) else str(int(value))
        if ty.startswith("tensor<"):
            name = self.emit(f"arith.constant dense<{lit}> : {ty}")
        else:
            name = self.emit(f"arith.constant {lit} : {ty}")
        self._consts[k] = name
        return name


def _tt(shape, elt) -> str:
    return "tensor<" + "x".join(str(s) for s in shape) + f"x{elt}>"


def _ptr(elt) -> str:
    return f"!tt.ptr<{elt}>"


@dataclass
class MatmulTTIR:
    """What emit_matmul_ttir returns (duck-compatible with the TTIR target's TTIRKernel:
    text, name, grid, num_warps, num_stages)."""
    text: str
    name: str
    grid: tuple
    num_warps: int
    num_stages: int
    config: MatmulConfig
    arg_names: list = field(default_factory=list)
    index_bits: int = 32


def _max_offset(shape, strides) -> int:
    return sum((d - 1) * abs(s) for d, s in zip(shape, strides) if d > 0)


def emit_matmul_ttir(M: int, N: int, K: int, batch, a_strides, b_strides, out_strides,
                     dtype, epilogue: Epilogue | None, config: MatmulConfig, name: str, *,
                     aligned: Sequence[bool] | None = None, allow_tf32: bool = False,
                     a_dtype=None) -> MatmulTTIR:
    """TTIR text of out[batch..., M, N] = epilogue(A[batch..., M, K] @ B[batch..., K, N]).

    batch: tuple of batch dims (or an int, or () for a plain mm). *_strides are element
    strides with one entry per dim (batch dims first). dtype: the output element type
    (and the inputs' unless a_dtype is given): "f32" / "bf16" / "f16" or a torch dtype."""
    cfg = config
    batch = (batch,) if isinstance(batch, int) else tuple(batch)
    batch = tuple(b for b in batch)
    nb = len(batch)
    odt = _mlir_dtype(dtype)
    idt = _mlir_dtype(a_dtype) if a_dtype is not None else odt
    if idt not in ("f32", "bf16", "f16"):
        raise ValueError(f"matmul input dtype {idt} is not supported (f32, bf16, f16)")
    ep = epilogue or Epilogue()
    a_strides, b_strides, out_strides = (tuple(int(s) for s in x)
                                         for x in (a_strides, b_strides, out_strides))
    for nm, st in (("a", a_strides), ("b", b_strides), ("out", out_strides)):
        if len(st) != nb + 2:
            raise ValueError(f"{nm}_strides {st} needs {nb + 2} entries (batch {batch})")
    for i, inp in enumerate(ep.inputs):
        if len(inp.strides) != nb + 2:
            raise ValueError(f"epilogue input {i} strides {inp.strides} need {nb + 2} entries")
    BM, BN, BK = cfg.block_m, cfg.block_n, cfg.block_k
    nbatch = math.prod(batch) if batch else 1
    if nbatch > 65535:
        raise ValueError(f"batch {nbatch} exceeds grid dim y (65535)")

    # index width: i64 when any addressed tensor reaches 2**31 elements
    spans = [_max_offset(batch + (M, K), a_strides), _max_offset(batch + (K, N), b_strides),
             _max_offset(batch + (M, N), out_strides)]
    spans += [_max_offset(batch + (M, N), i.strides) for i in ep.inputs]
    spans += [_max_offset(batch + (M, N), o.strides) for o in ep.extra_outputs]
    # padded tiles address up to one block past the edge before masking
    spans += [M + BM, N + BN, K + BK]
    ity = "i64" if max(spans) + max(BM, BN, BK) * max(
        [abs(s) for s in a_strides + b_strides + out_strides] + [1]) >= 2**31 - 1 else "i32"

    # ---- signature
    args = [("a", idt), ("b", idt)]
    args += [(f"in{i}", inp.dtype) for i, inp in enumerate(ep.inputs)]
    args += [("out", odt)]
    args += [(f"out{i + 1}", o.dtype) for i, o in enumerate(ep.extra_outputs)]
    if aligned is not None and len(aligned) != len(args):
        raise ValueError(f"aligned has {len(aligned)} entries for {len(args)} pointer args")
    sig = []
    for i, (an, at) in enumerate(args):
        hint = " {tt.divisibility = 16 : i32}" if aligned is not None and aligned[i] else ""
        sig.append(f"%{an}: {_ptr(at)}{hint}")

    B = TTIRBuilder()
    c = B.const
    npm, npn = -(-M // BM), -(-N // BN)
    gm = cfg.group_m if npm > 1 else 1

    # ---- which tile
    pid = B.emit("tt.get_program_id x : i32")
    if gm > 1:
        in_group = gm * npn
        gid = B.emit(f"arith.divsi {pid}, {c(in_group, 'i32')} : i32")
        first = B.emit(f"arith.muli {gid}, {c(gm, 'i32')} : i32")
        rest = B.emit(f"arith.subi {c(npm, 'i32')}, {first} : i32")
        gsize = B.emit(f"arith.minsi {rest}, {c(gm, 'i32')} : i32")
        pig = B.emit(f"arith.remsi {pid}, {c(in_group, 'i32')} : i32")
        t = B.emit(f"arith.remsi {pig}, {gsize} : i32")
        pid_m = B.emit(f"arith.addi {first}, {t} : i32")
        pid_n = B.emit(f"arith.divsi {pig}, {gsize} : i32")
    else:
        pid_m = B.emit(f"arith.divsi {pid}, {c(npn, 'i32')} : i32")
        pid_n = B.emit(f"arith.remsi {pid}, {c(npn, 'i32')} : i32")

    def to_ity(v):  # scalar i32 -> index type
        return v if ity == "i32" else B.emit(f"arith.extsi {v} : i32 to i64")

    # batch offsets: one scalar per pointer argument
    bidx = []
    if nb and nbatch > 1:
        pb = to_ity(B.emit("tt.get_program_id y : i32"))
        rem = pb
        for d in reversed(range(nb)):
            if batch[d] == 1:
                bidx.insert(0, None)
                continue
            bidx.insert(0, B.emit(f"arith.remsi {rem}, {c(batch[d], ity)} : {ity}"))
            rem = B.emit(f"arith.divsi {rem}, {c(batch[d], ity)} : {ity}")
    else:
        bidx = [None] * nb

    def base(argname, elt, strides):
        p = f"%{argname}"
        off = None
        for d in range(nb):
            if bidx[d] is None or strides[d] == 0:
                continue
            term = bidx[d] if strides[d] == 1 else \
                B.emit(f"arith.muli {bidx[d]}, {c(strides[d], ity)} : {ity}")
            off = term if off is None else B.emit(f"arith.addi {off}, {term} : {ity}")
        if off is None:
            return p
        return B.emit(f"tt.addptr {p}, {off} : {_ptr(elt)}, {ity}")

    # ---- row/col/k ranges
    def rng(n, pid_s):
        r = B.emit(f"tt.make_range {{end = {n} : i32, start = 0 : i32}} : {_tt([n], 'i32')}")
        if ity == "i64":
            r = B.emit(f"arith.extsi {r} : {_tt([n], 'i32')} to {_tt([n], 'i64')}")
        if pid_s is None:
            return r
        start = B.emit(f"arith.muli {to_ity(pid_s)}, {c(n, ity)} : {ity}")
        s = B.emit(f"tt.splat {start} : {ity} -> {_tt([n], ity)}")
        return B.emit(f"arith.addi {s}, {r} : {_tt([n], ity)}")

    rm = rng(BM, pid_m)
    rn = rng(BN, pid_n)
    rk = rng(BK, None)

    def expand(v, n, axis):
        shp = [n, 1] if axis == 1 else [1, n]
        return B.emit(f"tt.expand_dims {v} {{axis = {axis} : i32}} : {_tt([n], ity)} -> "
                      f"{_tt(shp, ity)}")

    rm2 = expand(rm, BM, 1)   # [BM,1]
    rn2 = expand(rn, BN, 0)   # [1,BN]
    rk_row = expand(rk, BK, 0)  # [1,BK]
    rk_col = expand(rk, BK, 1)  # [BK,1]

    def scaled(v, shp, stride):
        if stride == 1:
            return v
        return B.emit(f"arith.muli {v}, {c(stride, _tt(shp, ity))} : {_tt(shp, ity)}")

    def tile_offsets(row, rshape, rstride, col, cshape, cstride, shape):
        """[R,1]*rs + [1,C]*cs broadcast to shape; a 0 stride drops its term."""
        terms = []
        if rstride != 0:
            terms.append(B.emit(f"tt.broadcast {scaled(row, rshape, rstride)} : "
                                f"{_tt(rshape, ity)} -> {_tt(shape, ity)}"))
        if cstride != 0:
            terms.append(B.emit(f"tt.broadcast {scaled(col, cshape, cstride)} : "
                                f"{_tt(cshape, ity)} -> {_tt(shape, ity)}"))
        if not terms:
            return c(0, _tt(shape, ity))
        if len(terms) == 1:
            return terms[0]
        return B.emit(f"arith.addi {terms[0]}, {terms[1]} : {_tt(shape, ity)}")

    def ptr_tile(basep, elt, offs, shape):
        s = B.emit(f"tt.splat {basep} : {_ptr(elt)} -> {_tt(shape, _ptr(elt))}")
        return B.emit(f"tt.addptr {s}, {offs} : {_tt(shape, _ptr(elt))}, {_tt(shape, ity)}")

    def lt_mask(v, shp, bound):
        return B.emit(f"arith.cmpi slt, {v}, {c(bound, _tt(shp, ity))} : {_tt(shp, ity)}")

    # edge masks (hoisted)
    m_mask = lt_mask(rm2, [BM, 1], M) if M % BM else None
    n_mask = lt_mask(rn2, [1, BN], N) if N % BN else None
    k_edge = K % BK != 0

    a_shape, b_shape, o_shape = [BM, BK], [BK, BN], [BM, BN]
    a_base = base("a", idt, a_strides)
    b_base = base("b", idt, b_strides)
    a_ptrs = ptr_tile(a_base, idt,
                      tile_offsets(rm2, [BM, 1], a_strides[-2], rk_row, [1, BK], a_strides[-1],
                                   a_shape), a_shape)
    b_ptrs = ptr_tile(b_base, idt,
                      tile_offsets(rk_col, [BK, 1], b_strides[-2], rn2, [1, BN], b_strides[-1],
                                   b_shape), b_shape)
    a_step = c(BK * a_strides[-1], _tt(a_shape, ity))
    b_step = c(BK * b_strides[-2], _tt(b_shape, ity))
    a_mask_m = (B.emit(f"tt.broadcast {m_mask} : {_tt([BM, 1], 'i1')} -> {_tt(a_shape, 'i1')}")
                if m_mask else None)
    b_mask_n = (B.emit(f"tt.broadcast {n_mask} : {_tt([1, BN], 'i1')} -> {_tt(b_shape, 'i1')}")
                if n_mask else None)
    a_zero = c(0.0, _tt(a_shape, idt)) if (m_mask or k_edge) else None
    b_zero = c(0.0, _tt(b_shape, idt)) if (n_mask or k_edge) else None
    acc0 = c(0.0, _tt(o_shape, "f32"))
    lo, hi, step = c(0, "i32"), c(K, "i32"), c(BK, "i32")

    # ---- the K loop
    acc_t, ap_t, bp_t = _tt(o_shape, "f32"), _tt(a_shape, _ptr(idt)), _tt(b_shape, _ptr(idt))
    res = B.fresh()
    B.raw(f"{res}:3 = scf.for %k = {lo} to {hi} step {step} iter_args(%acc = {acc0}, "
          f"%pa = {a_ptrs}, %pb = {b_ptrs}) -> ({acc_t}, {ap_t}, {bp_t})  : i32 {{")
    outer_indent = B.indent
    B.indent = outer_indent + "  "
    a_mask, b_mask = a_mask_m, b_mask_n
    if k_edge:
        krem = B.emit(f"arith.subi {c(K, 'i32')}, %k : i32")
        krem = to_ity(krem)
        kr_row = B.emit(f"tt.splat {krem} : {ity} -> {_tt([1, BK], ity)}")
        km_row = B.emit(f"arith.cmpi slt, {rk_row}, {kr_row} : {_tt([1, BK], ity)}")
        km_a = B.emit(f"tt.broadcast {km_row} : {_tt([1, BK], 'i1')} -> {_tt(a_shape, 'i1')}")
        kr_col = B.emit(f"tt.splat {krem} : {ity} -> {_tt([BK, 1], ity)}")
        km_col = B.emit(f"arith.cmpi slt, {rk_col}, {kr_col} : {_tt([BK, 1], ity)}")
        km_b = B.emit(f"tt.broadcast {km_col} : {_tt([BK, 1], 'i1')} -> {_tt(b_shape, 'i1')}")
        a_mask = km_a if a_mask is None else \
            B.emit(f"arith.andi {a_mask}, {km_a} : {_tt(a_shape, 'i1')}")
        b_mask = km_b if b_mask is None else \
            B.emit(f"arith.andi {b_mask}, {km_b} : {_tt(b_shape, 'i1')}")

    def load(ptrs, mask, other, shape, elt):
        if mask is None:
            return B.emit(f"tt.load {ptrs} : {_tt(shape, _ptr(elt))}")
        return B.emit(f"tt.load {ptrs}, {mask}, {other} : {_tt(shape, _ptr(elt))}")

    x = load("%pa", a_mask, a_zero, a_shape, idt)
    y = load("%pb", b_mask, b_zero, b_shape, idt)
    prec = ""
    if idt == "f32":
        prec = ", inputPrecision = tf32" if allow_tf32 else ", inputPrecision = ieee"
    acc = B.emit(f"tt.dot {x}, {y}, %acc{prec} : {_tt(a_shape, idt)} * {_tt(b_shape, idt)} "
                 f"-> {acc_t}")
    pa2 = B.emit(f"tt.addptr %pa, {a_step} : {ap_t}, {_tt(a_shape, ity)}")
    pb2 = B.emit(f"tt.addptr %pb, {b_step} : {bp_t}, {_tt(b_shape, ity)}")
    B.raw(f"scf.yield {acc}, {pa2}, {pb2} : {acc_t}, {ap_t}, {bp_t}")
    B.indent = outer_indent
    B.raw("}")
    accv = f"{res}#0"

    # ---- epilogue
    o_mask = None
    if m_mask and n_mask:
        mb = B.emit(f"tt.broadcast {m_mask} : {_tt([BM, 1], 'i1')} -> {_tt(o_shape, 'i1')}")
        nbm = B.emit(f"tt.broadcast {n_mask} : {_tt([1, BN], 'i1')} -> {_tt(o_shape, 'i1')}")
        o_mask = B.emit(f"arith.andi {mb}, {nbm} : {_tt(o_shape, 'i1')}")
    elif m_mask:
        o_mask = B.emit(f"tt.broadcast {m_mask} : {_tt([BM, 1], 'i1')} -> {_tt(o_shape, 'i1')}")
    elif n_mask:
        o_mask = B.emit(f"tt.broadcast {n_mask} : {_tt([1, BN], 'i1')} -> {_tt(o_shape, 'i1')}")

    def out_ptrs(argname, elt, strides):
        bp_ = base(argname, elt, strides)
        return ptr_tile(bp_, elt, tile_offsets(rm2, [BM, 1], strides[-2], rn2, [1, BN],
                                               strides[-1], o_shape), o_shape)

    f32t = _tt(o_shape, "f32")
    loads = []
    for i, inp in enumerate(ep.inputs):
        p = out_ptrs(f"in{i}", inp.dtype, inp.strides)
        other = c(0.0 if inp.dtype.startswith(("f", "bf")) else 0, _tt(o_shape, inp.dtype)) \
            if o_mask else None
        v = load(p, o_mask, other, o_shape, inp.dtype)
        loads.append(_to_f32(B, v, inp.dtype, o_shape))

    if ep.hook is not None:
        result = ep.hook(B, accv, rm2, rn2, loads)
        vals = []
    else:
        vals = []

        def ref(r):
            if r == ACC:
                return accv
            if isinstance(r, (int, float)) and not isinstance(r, bool):
                return c(float(r), f32t)
            kind, i = r
            return loads[i] if kind == "in" else vals[i]

        for op in ep.ops:
            recip = triton_division.scalar_reciprocal(op.args[1]) if op.op == "div" else None
            if recip is not None:   # eager CUDA's division by a scalar
                vals.append(B.emit(f"arith.mulf {ref(op.args[0])}, {c(recip, f32t)} : {f32t}"))
                continue
            vals.append(_emit_op(B, op.op, [ref(a) for a in op.args], f32t))
        result = vals[-1] if vals else accv

    def store(value, argname, elt, strides):
        p = out_ptrs(argname, elt, strides)
        v = _from_f32(B, value, elt, o_shape)
        if o_mask is None:
            B.raw(f"tt.store {p}, {v} : {_tt(o_shape, _ptr(elt))}")
        else:
            B.raw(f"tt.store {p}, {v}, {o_mask} : {_tt(o_shape, _ptr(elt))}")

    store(result, "out", odt, out_strides)
    for i, o in enumerate(ep.extra_outputs):
        r = o.value
        v = accv if r == ACC else (loads[r[1]] if r[0] == "in" else vals[r[1]])
        store(v, f"out{i + 1}", o.dtype, o.strides)
    B.raw("tt.return")

    body = "\n".join(B.lines)
    text = (f"module {{\n  tt.func public @{name}({', '.join(sig)}) attributes "
            f"{{noinline = false}} {{\n{body}\n  }}\n}}\n")
    return MatmulTTIR(text=text, name=name, grid=(npm * npn, nbatch, 1),
                      num_warps=cfg.num_warps, num_stages=cfg.num_stages, config=cfg,
                      arg_names=[a for a, _ in args], index_bits=64 if ity == "i64" else 32)


def _to_f32(B: TTIRBuilder, v, elt, shape):
    if elt == "f32":
        return v
    if elt in ("bf16", "f16"):
        return B.emit(f"arith.extf {v} : {_tt(shape, elt)} to {_tt(shape, 'f32')}")
    if elt == "f64":
        return B.emit(f"arith.truncf {v} : {_tt(shape, elt)} to {_tt(shape, 'f32')}")
    if elt == "i1" or elt == "ui8":
        return B.emit(f"arith.uitofp {v} : {_tt(shape, elt)} to {_tt(shape, 'f32')}")
    return B.emit(f"arith.sitofp {v} : {_tt(shape, elt)} to {_tt(shape, 'f32')}")


def _from_f32(B: TTIRBuilder, v, elt, shape):
    if elt == "f32":
        return v
    if elt in ("bf16", "f16"):
        return B.emit(f"arith.truncf {v} : {_tt(shape, 'f32')} to {_tt(shape, elt)}")
    if elt == "f64":
        return B.emit(f"arith.extf {v} : {_tt(shape, 'f32')} to {_tt(shape, elt)}")
    raise ValueError(f"epilogue output dtype {elt} is not supported")


def _emit_op(B: TTIRBuilder, op: str, a: list, t: str) -> str:
    e, c = B.emit, B.const
    binop = {"add": "arith.addf", "sub": "arith.subf", "mul": "arith.mulf",
             "div": "tt.precise_divf", "maximum": "arith.maximumf", "minimum": "arith.minimumf",
             }
    if op == "pow":
        return e(f'tt.extern_elementwise {a[0]}, {a[1]} {{libname = "", libpath = "", '
                 f'pure = true, symbol = "__nv_powf"}} : ({t}, {t}) -> {t}')
    if op in binop:
        return e(f"{binop[op]} {a[0]}, {a[1]} : {t}")
    x = a[0]
    if op == "neg":  # arith.negf does not legalize in Triton 3.6; x * -1 keeps -0 and NaN
        return e(f"arith.mulf {x}, {c(-1.0, t)} : {t}")
    simple = {"abs": "math.absf", "exp": "math.exp", "exp2": "math.exp2",
              "log": "math.log", "log2": "math.log2", "sqrt": "tt.precise_sqrt",
              "rsqrt": "math.rsqrt", "sin": "math.sin", "cos": "math.cos", "erf": "math.erf",
              "floor": "math.floor", "ceil": "math.ceil"}
    if op in simple:
        return e(f"{simple[op]} {x} : {t}")
    if op == "identity":
        return x
    if op in ("round_bf16", "round_f16"):  # an intermediate rounding eager would do
        lo = "bf16" if op == "round_bf16" else "f16"
        tl_ = t.replace("xf32>", f"x{lo}>")
        r = e(f"arith.truncf {x} : {t} to {tl_}")
        return e(f"arith.extf {r} : {tl_} to {t}")
    if op == "reciprocal":
        return e(f"tt.precise_divf {c(1.0, t)}, {x} : {t}")
    if op == "relu":
        # max(x, 0) but NaN stays NaN (torch.relu)
        return e(f"arith.maximumf {x}, {c(0.0, t)} : {t}")
    if op == "sigmoid":
        n = e(f"arith.mulf {x}, {c(-1.0, t)} : {t}")
        ex = e(f"math.exp {n} : {t}")
        d = e(f"arith.addf {c(1.0, t)}, {ex} : {t}")
        return e(f"tt.precise_divf {c(1.0, t)}, {d} : {t}")
    if op == "silu":
        return e(f"arith.mulf {x}, {_emit_op(B, 'sigmoid', [x], t)} : {t}")
    if op == "tanh":
        return _tanh(B, x, t)
    if op == "gelu":  # 0.5 x (1 + erf(x / sqrt 2))
        s = e(f"arith.mulf {x}, {c(0.7071067811865476, t)} : {t}")
        er = e(f"math.erf {s} : {t}")
        one = e(f"arith.addf {er}, {c(1.0, t)} : {t}")
        h = e(f"arith.mulf {x}, {c(0.5, t)} : {t}")
        return e(f"arith.mulf {h}, {one} : {t}")
    if op == "gelu_tanh":  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        x2 = e(f"arith.mulf {x}, {x} : {t}")
        x3 = e(f"arith.mulf {x2}, {x} : {t}")
        k = e(f"arith.mulf {x3}, {c(0.044715, t)} : {t}")
        inner = e(f"arith.addf {x}, {k} : {t}")
        u = e(f"arith.mulf {inner}, {c(0.7978845608028654, t)} : {t}")
        th = _tanh(B, u, t)
        one = e(f"arith.addf {th}, {c(1.0, t)} : {t}")
        h = e(f"arith.mulf {x}, {c(0.5, t)} : {t}")
        return e(f"arith.mulf {h}, {one} : {t}")
    raise ValueError(f"epilogue op {op!r} is not supported")


def _tanh(B: TTIRBuilder, x, t):
    """libdevice tanhf (Triton 3.6 rejects math.tanh in TTIR and links libdevice)."""
    return B.emit(f'tt.extern_elementwise {x} {{libname = "", libpath = "", pure = true, '
                  f'symbol = "__nv_tanhf"}} : ({t}) -> {t}')


# ----------------------------------------------------------------------------- compile

def compile_matmul(kern: MatmulTTIR, arch: int = 90):
    """Compile to a triton CompiledKernel (launch: compiled[kern.grid](*tensors)).
    Goes through the TTIR target's disk-cached compile_ttir when it is available."""
    try:
        from stax.targets.triton import compile_ttir  # noqa: WPS433
    except Exception:  # the TTIR target is not there (yet): compile directly
        compile_ttir = None
    if compile_ttir is not None:
        try:
            compiled, _ = compile_ttir(kern, arch)
            return compiled
        except TypeError:
            pass
    return _compile_direct(kern.text, kern.name, kern.num_warps, kern.num_stages, arch)


def _compile_direct(text: str, name: str, num_warps: int, num_stages: int, arch: int = 90):
    import triton
    from triton.backends.compiler import GPUTarget

    from stax.targets.triton import COMPILE_OPTIONS
    with tempfile.TemporaryDirectory(prefix="stax_mm_") as d:
        path = os.path.join(d, f"{name}.ttir")
        with open(path, "w") as f:
            f.write(text)
        return triton.compile(path, target=GPUTarget("cuda", arch, 32),
                              options={"num_warps": num_warps, "num_stages": num_stages,
                                       **COMPILE_OPTIONS})
