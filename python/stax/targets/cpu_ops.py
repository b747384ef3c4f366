"""The CPU target's per-op evaluation: each kernel op's value at an index, as MLIR text.

`_eval_op` computes one op's value at a multi-index from its operands' values at
(transformed) indices: views (broadcast, permute, slice, reshape) map the index; gather
loads its index and clamps it into range; concat and pad branch on the position (a
boundary inside a vector makes the kernel 1-lane); full and iota are constants and
ramps; the rest are elementwise: converts (rounding to bf16/f16 where eager does),
bitcast, compare, select, binary and unary ops, the transcendentals in f32 through
cpu_math's polynomials. Values are computed in the compute type of cpu_dtypes."""
import math


from stax._mlir import ir
from stax.dialects.stax_dialect import gather_wraps_negative, scalar_attr_value
from stax.dialects.symbolic import dim_sum
from stax.targets import cpu_math, cpu_sleef
from stax.targets.cpu_dtypes import DTYPES, DType, dtype_of
from stax.targets.cpu_emitter import Val
from stax.targets.cpu_errors import KernelLoweringError, NeedScalar
from stax.targets.cpu_index import Aff, Var, row_major_linear
from stax.targets.kernel_ir import LIBM_UNARY_OPS
from stax.targets.kernel_ir import REDUCTION_OPS as _REDUCTIONS
from stax.targets.kernel_ir import VIEW_OPS as _VIEWS
from stax.targets.kernel_ir import arith_binary, python_remainder
from stax.targets.kernel_ir import etype as _etype
from stax.targets.kernel_ir import float_bits as _fbits
from stax.targets.kernel_ir import int_array as _ints
from stax.targets.kernel_ir import int_bits as _ibits
from stax.targets.kernel_ir import round_half
from stax.targets.kernel_ir import shape as _shape


#: without SLEEF (a CPU without AVX2: cpu_sleef.available), the math library's functions
#: that are LLVM intrinsics, which LLVM calls libm for per lane (`_EXTERNAL_OK` in
#: runtime/cpu_kernel.py names them); asinh, acosh, atanh and erfc are none, and
#: convert-math-to-libm would make calls of every math op, sqrt and floor included
LIBM_UNARY = {k: "math." + k for k in LIBM_UNARY_OPS
              if k not in ("asinh", "acosh", "atanh", "erfc")}


def _atan2(em, a, b, ty, vec, comp) -> str:
    """atan2(a, b) whose zeros are C's and eager's: +-0 or +-pi by the signs. MLIR folds
    math.atan2 of two constant zeros to NaN (the sum of an empty dim is a constant 0:
    fuzz seed 31005), so where both are zero the result is picked by the signs, which
    folds right: copysign(b's sign bit set ? pi : 0, a)."""
    ity = {"f32": "i32", "f64": "i64", "f16": "i16", "bf16": "i16"}[comp]
    mask_ty, int_ty = em.vt("i1", vec), em.vt(ity, vec)
    zero = em.splat(0.0, ty)
    both = em.op(f"arith.andi {em.op(f'arith.cmpf oeq, {a}, {zero} : {ty}', mask_ty)}, "
                 f"{em.op(f'arith.cmpf oeq, {b}, {zero} : {ty}', mask_ty)} : {mask_ty}",
                 mask_ty)
    b_bits = em.op(f"arith.bitcast {b} : {ty} to {int_ty}", int_ty)
    b_neg = em.op(f"arith.cmpi slt, {b_bits}, {em.splat(0, int_ty)} : {int_ty}", mask_ty)
    mag = em.op(f"arith.select {b_neg}, {em.splat(math.pi, ty)}, {zero} : {mask_ty}, {ty}",
                ty)
    at_zero = em.op(f"math.copysign {mag}, {a} : {ty}", ty)
    general = em.op(f"math.atan2 {a}, {b} : {ty}", ty)
    return f"arith.select {both}, {at_zero}, {general} : {mask_ty}, {ty}"


class OpsMixin:
    """The per-op half of the kernel lowering (llvm._KernelLowering). It uses the
    lowering's `em`, `defining`, `row_vals`, `name` and its `_eval` (an operand's value
    at an index), `_to_mem` and `_from_mem`."""

    def _eval_op(self, o, v, idx) -> Val:
        em = self.em
        name = o.operation.name
        rdt = dtype_of(_etype(v))
        if name in _VIEWS:
            return self._eval(o.operands[0], self._view_index(o, idx))
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
                return Val(em.const(1 if val else 0, "i1"), False, "i1")
            if rdt.comp.startswith("f") and rdt.mem in ("bf16", "f16"):
                val = round_half(val, rdt.mem)
            return Val(em.const(val, rdt.comp), False, rdt.comp)
        if name == "stax.iota":
            d = ir.IntegerAttr(o.attributes["dim"]).value
            a = self._index_aff(idx[d])
            c = em.lane_coeff(a)
            base = em.index(a)
            bi = em.op(f"arith.index_cast {base} : index to i64", "i64")
            if c and em.W > 1:
                lanes = ", ".join(str(k * c) for k in range(em.W))
                ramp = em.op(f"arith.constant dense<[{lanes}]> : vector<{em.W}xi64>", "")
                bv = em.op(f"vector.broadcast {bi} : i64 to vector<{em.W}xi64>", "")
                iv = em.op(f"arith.addi {bv}, {ramp} : vector<{em.W}xi64>", "")
                return self._convert(Val(iv, True, "i64"), DTYPES["i64"], rdt)
            return self._convert(Val(bi, False, "i64"), DTYPES["i64"], rdt)
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
            return Val(em.op(f"arith.select {c}, {a}, {b} : {em.vt('i1', vec)}, {ty}", ty),
                        vec, ins[1].comp)
        kind = name.split(".")[1]
        idt = dtype_of(_etype(o.operands[0]))
        if kind.startswith("cmp_"):
            return self._compare(kind[4:], ins, idt)
        if len(ins) == 2:
            return self._binary(kind, ins, idt, o)
        return self._unary(kind, ins[0], idt)

    def _view_index_aff(self, o, idx):
        """A view's operand index for its result index `idx` in cpu_index's algebra (the
        kernels not addressed from a schedule)."""
        em = self.em
        name = o.operation.name
        if name == "stax.broadcast_in_dim":
            src = _shape(o.operands[0])
            return [idx[d] if src[i] != 1 else Aff() for i, d in enumerate(_ints(o, "dims"))]
        if name == "stax.permute":
            perm = _ints(o, "perm")
            inv = [0] * len(perm)
            for i, p in enumerate(perm):
                inv[p] = i
            return [idx[inv[d]] for d in range(len(perm))]
        if name == "stax.slice":
            start, step = _ints(o, "start"), _ints(o, "step")
            return [i.scale(s) + self._slice_start(o, d, a)
                    for d, (i, a, s) in enumerate(zip(idx, start, step))]
        lin = row_major_linear(idx, _shape(o.results[0]))
        return em.delinearize(lin, _shape(o.operands[0]))

    def _eval_gather(self, o, idx):
        """input[..., indices[i_d], ...]. The index is loaded where the result is read; a
        negative one counts from the end; one out of range is recorded (the runtime
        raises IndexError after the call, as eager does) and clamped, so it cannot read
        outside the buffer (Emitter.gather_index). An index that differs between vector
        lanes makes the kernel 1-lane."""
        em = self.em
        d = ir.IntegerAttr(o.attributes["dim"]).value
        n = _shape(o.operands[0])[d]
        if em.lane_coeff(idx[d]):
            raise NeedScalar()
        k = self._eval(o.operands[1], [idx[d]])
        if k.vec:
            raise NeedScalar()
        kv = em.gather_index(k, em.const(n, "index"), em.const(n - 1, "index"),
                             dtype_of(_etype(o.operands[1])).unsigned,
                             wrap=gather_wraps_negative(o.operation))
        em.vars[kv] = Var(kv, n)
        new = list(idx)
        new[d] = Aff.var(kv)
        return self._eval(o.operands[0], new)

    def _eval_concat(self, o, v, idx):
        em = self.em
        d = ir.IntegerAttr(o.attributes["dim"]).value
        a = idx[d]
        pos_aff = self._index_aff(a)
        if em.lane_coeff(pos_aff):
            raise NeedScalar()
        starts = self._concat_starts(o, d)
        rdt = dtype_of(_etype(v))
        pos = em.index(pos_aff)
        ty = em.vt(rdt.comp, em.W > 1 and em.lane_var is not None)
        vec = ty.startswith("vector")

        def branch(k):
            if k == len(starts) - 1:
                sub = list(idx)
                sub[d] = self._shift_back(a, starts[k])
                x = self._eval(o.operands[k], sub)
                return em.to_vec(x) if vec else x.ssa
            cond = em.op(f"arith.cmpi ult, {pos}, {self._concat_bound(starts[k + 1])} : index",
                         "i1")
            r = em.fresh()
            em.emit(f"{r} = scf.if {cond} -> ({ty}) {{")
            em.push()
            sub = list(idx)
            sub[d] = self._shift_back(a, starts[k])
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
        return Val(branch(0), vec, rdt.comp)

    # where each concat operand starts along `dim` (ints here; the runtime-size generator
    # makes them size expressions, cpu_symbolic), as a bound and as a shift of the index
    def _concat_starts(self, o, d):
        starts, acc = [], 0
        for x in o.operands:
            starts.append(acc)
            acc += _shape(x)[d]
        return starts

    def _concat_bound(self, start) -> str:
        return self.em.const(start, "index")

    def _shift_back(self, a, start):
        return self._shift(a, -start)

    def _slice_start(self, o, d, start) -> Aff:
        """Where a slice's dim d starts reading (static here; from the end of a runtime
        size in the runtime-size generator)."""
        return Aff(start)

    def _dims_of(self, v):
        """A value's dims (ints here; the runtime-size generator's may be expressions)."""
        return _shape(v)

    def _eval_pad(self, o, v, idx):
        em = self.em
        low, high = _ints(o, "low"), _ints(o, "high")
        src = self._dims_of(o.operands[0])
        rdt = dtype_of(_etype(v))
        conds = []
        for d, (lo, n) in enumerate(zip(low, src)):
            if lo == 0 and high[d] == 0:
                continue
            coord = self._index_aff(idx[d])
            if em.lane_coeff(coord):
                raise NeedScalar()
            p = em.index(coord)
            c1 = em.op(f"arith.cmpi uge, {p}, {em.const(lo, 'index')} : index", "i1")
            c2 = em.op(f"arith.cmpi ult, {p}, {self._concat_bound(dim_sum([lo, n]))} : index",
                       "i1")
            conds.append(em.op(f"arith.andi {c1}, {c2} : i1", "i1"))
        a = o.attributes["value"]
        pv = scalar_attr_value(a)
        vec = em.W > 1 and em.lane_var is not None
        ty = em.vt(rdt.comp, vec)
        padv = em.splat(pv if not rdt.is_bool else int(bool(pv)), ty)
        if not conds:
            x = self._eval(o.operands[0], [self._shift(i, -lo) for i, lo in zip(idx, low)])
            return x
        cond = conds[0]
        for c in conds[1:]:
            cond = em.op(f"arith.andi {cond}, {c} : i1", "i1")
        r = em.fresh()
        em.emit(f"{r} = scf.if {cond} -> ({ty}) {{")
        em.push()
        x = self._eval(o.operands[0], [self._shift(i, -lo) for i, lo in zip(idx, low)])
        em.emit(f"scf.yield {em.to_vec(x) if vec else x.ssa} : {ty}")
        em.pop()
        em.emit("} else {")
        em.emit(f"  scf.yield {padv} : {ty}")
        em.emit("}")
        return Val(r, vec, rdt.comp)

    # --------------------------------------------------------------- scalar semantics
    def _convert(self, x: Val, src: DType, dst: DType) -> Val:
        em = self.em
        vec = x.vec
        s, d = x.comp, dst.comp
        sty, dty = em.vt(s, vec), em.vt(d, vec)
        if src.mem == dst.mem and src.unsigned == dst.unsigned:
            return x
        if dst.is_bool:
            if s.startswith("f"):
                z = em.splat(0.0, sty)
                return Val(em.op(f"arith.cmpf une, {x.ssa}, {z} : {sty}", dty), vec, "i1")
            return Val(em.op(f"arith.cmpi ne, {x.ssa}, {em.splat(0, sty)} : {sty}", dty), vec, "i1")
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
            return Val(r, vec, d)
        if s.startswith("f"):
            o = "fptoui" if dst.unsigned else "fptosi"
            return Val(em.op(f"arith.{o} {x.ssa} : {sty} to {dty}", dty), vec, d)
        if d.startswith("f"):
            o = "uitofp" if (src.unsigned or src.is_bool) else "sitofp"
            r = em.op(f"arith.{o} {x.ssa} : {sty} to {dty}", dty)
            if dst.mem in ("bf16", "f16"):
                mty = em.vt(dst.mem, vec)
                t = em.op(f"arith.truncf {r} : {dty} to {mty}", mty)
                r = em.op(f"arith.extf {t} : {mty} to {dty}", dty)
            return Val(r, vec, d)
        sb, db = _ibits(s), _ibits(d)
        if sb == db:
            return Val(x.ssa, vec, d)
        if sb < db:
            o = "extui" if (src.unsigned or src.is_bool) else "extsi"
            return Val(em.op(f"arith.{o} {x.ssa} : {sty} to {dty}", dty), vec, d)
        return Val(em.op(f"arith.trunci {x.ssa} : {sty} to {dty}", dty), vec, d)

    def _bitcast(self, x: Val, src: DType, dst: DType) -> Val:
        em = self.em
        vec = x.vec
        v = self._to_mem(x, src)
        mty_s, mty_d = em.vt(src.mem, vec), em.vt(dst.mem, vec)
        r = em.op(f"arith.bitcast {v} : {mty_s} to {mty_d}", mty_d)
        return self._from_mem(r, dst, vec)

    def _compare(self, kind, ins, dt: DType) -> Val:
        em = self.em
        (a, b), vec = em.unify(ins)
        ty = em.vt(ins[0].comp, vec)
        bty = em.vt("i1", vec)
        if dt.is_float:
            pred = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}[kind]
            return Val(em.op(f"arith.cmpf {pred}, {a}, {b} : {ty}", bty), vec, "i1")
        u = dt.unsigned or dt.is_bool
        pred = {"eq": "eq", "ne": "ne", "lt": "ult" if u else "slt", "le": "ule" if u else "sle",
                "gt": "ugt" if u else "sgt", "ge": "uge" if u else "sge"}[kind]
        return Val(em.op(f"arith.cmpi {pred}, {a}, {b} : {ty}", bty), vec, "i1")

    def _full_value(self, v):
        o = self.defining.get(v)
        while o is not None and o.operation.name in _VIEWS:
            o = self.defining.get(o.operands[0])
        if o is not None and o.operation.name == "stax.full":
            a = o.attributes["value"]
            return scalar_attr_value(a)
        return None

    def _binary(self, kind, ins, dt: DType, o) -> Val:
        em = self.em
        comp = ins[0].comp
        fl = comp.startswith("f")
        if kind == "pow" and fl:
            e = self._full_value(o.operands[1])
            # exact rewrites of std::pow only: sqrt is not pow by 0.5 at -inf and -0
            # (eager's pow by a Python 0.5 is imported as stax.sqrt instead)
            special = {2.0: "sq", 1.0: "id", -1.0: "rcp", 3.0: "cube"}
            if e in special:
                x = ins[0]
                ty = em.vt(comp, x.vec)
                s = special[e]
                if s == "id":
                    return x
                if s == "sq":
                    return Val(em.op(f"arith.mulf {x.ssa}, {x.ssa} : {ty}", ty), x.vec, comp)
                if s == "cube":
                    t = em.op(f"arith.mulf {x.ssa}, {x.ssa} : {ty}", ty)
                    return Val(em.op(f"arith.mulf {t}, {x.ssa} : {ty}", ty), x.vec, comp)
                return Val(em.op(f"arith.divf {em.splat(1.0, ty)}, {x.ssa} : {ty}", ty), x.vec, comp)
        (a, b), vec = em.unify(ins)
        ty = em.vt(comp, vec)
        u = dt.unsigned or dt.is_bool

        def r(text):
            return Val(em.op(text, ty), vec, comp)

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
            return r(_atan2(em, a, b, ty, vec, comp))
        if kind == "copysign" and fl:
            return r(f"math.copysign {a}, {b} : {ty}")
        raise KernelLoweringError(f"binary op stax.{kind} is not supported by the CPU target")

    def _unary(self, kind, x: Val, dt: DType) -> Val:
        em = self.em
        comp = x.comp
        ty = em.vt(comp, x.vec)
        ity = em.vt("i32", x.vec)
        fl = comp.startswith("f")
        f32 = comp == "f32"

        def r(text, c=comp):
            return Val(em.op(text, em.vt(c, x.vec)), x.vec, c)

        def val(s):
            return Val(s, x.vec, comp)

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
        if kind in cpu_sleef.SLEEF_UNARY and cpu_sleef.available(comp):
            return val(cpu_sleef.call(em, kind, a, comp, x.vec))
        simple = {"sqrt": "math.sqrt", "floor": "math.floor", "ceil": "math.ceil",
                  "round": "math.roundeven", "trunc": "math.trunc", "sin": "math.sin",
                  "cos": "math.cos", **LIBM_UNARY}
        if kind in simple:
            return r(f"{simple[kind]} {a} : {ty}")
        if kind == "rsqrt":
            s = em.op(f"math.sqrt {a} : {ty}", ty)
            return r(f"arith.divf {em.splat(1.0, ty)}, {s} : {ty}")
        if kind == "reciprocal":
            return r(f"arith.divf {em.splat(1.0, ty)}, {a} : {ty}")
        if kind in LIBM_UNARY_OPS:
            raise KernelLoweringError(f"stax.{kind} needs SLEEF's vector functions, which "
                                      f"this CPU ({cpu_sleef.capability()}) has none of")
        raise KernelLoweringError(f"unary op stax.{kind} is not supported by the CPU target")
