"""Per-op evaluation of the Triton code generator: a kernel value at an index map
(`_eval`, an `Ix`), views composing their map onto it (the kernel schedule's
`view_map`: broadcast_in_dim, permute, slice, reshape), gather (a computed coordinate),
concat and pad under masks, full / iota, and the scalar semantics of compare, binary
and unary ops (IEEE division and sqrt, libdevice through extern_elementwise).

`_OpsMixin` is one part of `triton_ttir._Lowering`: it reads the lowering's `em`,
`defining`, `arg_index`, `inputs`, `row_vals`, `cond` and `mask_ctx`. Guarantees: a value
is evaluated once per (index map over its block values, active concat / pad
conditions, pointwise mask) in a scope;
a reduction result is only read once its row value is computed (else a
KernelLoweringError); views never copy.
"""
from __future__ import annotations


from stax._mlir import ir
from stax.dialects.stax_dialect import gather_wraps_negative, scalar_attr_value
from stax.targets.kernel_ir import LIBM_UNARY_OPS
from stax.targets.kernel_ir import REDUCTION_OPS as _REDUCTIONS
from stax.targets.kernel_ir import ROUNDED_RESULT_OPS
from stax.targets.kernel_ir import VIEW_OPS as _VIEWS
from stax.targets.kernel_ir import arith_binary, python_remainder
from stax.targets.kernel_ir import etype as _etype
from stax.targets.kernel_ir import int_array as _ints
from stax.targets.kernel_ir import round_half
from stax.targets.kernel_ir import shape as _shape
from stax.targets import triton_division
from stax.targets.lowering_errors import KernelLoweringError
from stax.targets.triton_dtypes import _DT, DT, _dt, _isf
from stax.targets.triton_emitter import V, _common
from stax.targets.triton_index import Ix


def _zero():
    return ir.AffineConstantExpr.get(0)


class _OpsMixin:
    """Evaluation of the kernel body's ops for `triton_ttir._Lowering`."""

    def _eval(self, v, idx) -> V:
        """v read at idx (a list of index values, or an Ix)."""
        em = self.em
        shp = _shape(v)
        ix = self.ix_of(idx)
        if any(s == 1 for s in shp):   # a size-1 dim is read at 0
            ix = Ix(ix.base, tuple(_zero() if s == 1 else e for e, s in zip(ix.exprs, shp)))
        if v in self.row_vals:
            key = ("row", v, tuple(c.ssa for c in self.cond), self.mask_ctx)
            got = em.lookup(key)
            if got is None:
                got = self._round_if_stored(v, self.row_vals[v])
                em.remember(key, got)
            return got
        key = ("val", v, self._ix_key(ix), tuple(c.ssa for c in self.cond), self.mask_ctx)
        got = em.lookup(key)
        if got is not None:
            return got
        if v in self.arg_index:
            res = self._load(self.inputs[self.arg_index[v]], ix)
        else:
            o = self.defining[v]
            if o.operation.name in _REDUCTIONS:
                raise KernelLoweringError(
                    f"kernel {self.name}: reduction result used before it is computed, or at "
                    "another row than the current one (unsupported)")
            res = self._eval_op(o, v, ix)
            if o.operation.name not in ROUNDED_RESULT_OPS:
                res = self._round_if_stored(v, res)
        em.remember(key, res)
        return res

    def _eval_gather(self, o, ix) -> V:
        """input[..., indices[i_d], ...]: load the index (where the result is read), wrap
        a negative one, clamp into range (an out-of-range index must not read outside
        the buffer; torch raises there), and read the input at it: a computed coordinate,
        a new dim of the base."""
        d = ir.IntegerAttr(o.attributes["dim"]).value
        n = _shape(o.operands[0])[d]
        k = self._eval(o.operands[1], Ix(ix.base, (ix.exprs[d],)))
        kv = self._gather_index(k, V(None, (), self.it, cval=n),
                                V(None, (), self.it, cval=n - 1),
                                wrap=gather_wraps_negative(o.operation))
        exprs = list(ix.exprs)
        exprs[d] = ir.AffineDimExpr.get(len(ix.base))
        return self._eval(o.operands[0], Ix(ix.base + (V(kv, k.shape, self.it, hi=n),),
                                            tuple(exprs)))

    def _assert_in_range(self, kv: str, size: str, sh, elem: str):
        """A device-side assert that every wrapped index kv (of type `elem`) of an active
        lane is in [0, size): eager CUDA's gathers assert so too (`device-side assert
        triggered`, the CUDA context lost) where the CPU raises IndexError. Lanes outside
        the block's bounds (their masked index load is undefined) pass."""
        em = self.em
        ty, bty = em.ty(sh, elem), em.ty(sh, "i1")
        ok = em.op(f"arith.cmpi ult, {kv}, {size} : {ty}", "c")
        mask = self._full_mask(sh) if sh else None
        if mask is not None:
            idle = self._not(V(em.mat(mask, sh), sh, "i1"))
            ok = em.op(f"arith.ori {ok}, {em.mat(idle, sh)} : {bty}", "c")
        em.emit(f'tt.assert {ok}, "stax: index out of bounds in a gather (embedding, '
                f'index_select or tensor indexing)" : {bty}')

    def _gather_index(self, k: V, size: V, last: V, wrap: bool = True) -> str:
        """The loaded indices k in the index type: a negative one wrapped by `size` (the
        gathered dim's extent; not with the gather's no_negative_wrap, where it is out of
        range) and asserted in range (_assert_in_range), both at the
        wider of the two widths (a 64-bit index past 2^32 must not truncate into range),
        then clamped into [0, last]: an out-of-range index reads in bounds, never outside
        the buffer. `size` and `last` are constants here and runtime sizes in the
        runtime-size generator."""
        em = self.em
        sh = k.shape
        kty, ity = em.ty(sh, k.elem), em.ty(sh, self.it)
        kv = em.mat(k, sh)
        kb, ib = int(k.elem[1:]), int(self.it[1:])
        if kb < ib:
            kv = em.op(f"arith.extsi {kv} : {kty} to {ity}", "i")
        wide = k.elem if kb > ib else self.it
        wty = em.ty(sh, wide)
        n = em.mat(size, sh)
        if kb > ib:   # the size at the index's width
            n = em.mat(V(None, (), wide, cval=size.cval), sh) if size.is_const else \
                em.op(f"arith.extsi {n} : {ity} to {wty}", "i")
        if wrap:
            zero = em.mat(V(None, (), wide, cval=0), sh)
            neg = em.op(f"arith.cmpi slt, {kv}, {zero} : {wty}", "c")
            wrapped = em.op(f"arith.addi {kv}, {n} : {wty}", "i")
            kv = em.op(f"arith.select {neg}, {wrapped}, {kv} : {em.ty(sh, 'i1')}, {wty}", "i")
        self._assert_in_range(kv, n, sh, wide)
        if kb > ib:   # in range (or asserted): the low bits are the index
            kv = em.op(f"arith.trunci {kv} : {wty} to {ity}", "i")
        zero = em.mat(V(None, (), self.it, cval=0), sh)
        kv = em.op(f"arith.maxsi {kv}, {zero} : {ity}", "i")
        return em.op(f"arith.minsi {kv}, {em.mat(last, sh)} : {ity}", "i")

    def _eval_op(self, o, v, idx) -> V:
        name = o.operation.name
        rdt = _dt(_etype(v))
        if name in _VIEWS:
            return self._eval(o.operands[0], self.ix_view(idx, o))
        if name == "stax.gather":
            return self._eval_gather(o, idx)
        if name == "stax.full":
            val = scalar_attr_value(o.attributes["value"])
            if rdt.bool_:
                return V(None, (), "i1", cval=1 if val else 0)
            if _isf(rdt.comp) and rdt.mem in ("bf16", "f16"):
                val = round_half(val, rdt.mem)
            return V(None, (), rdt.comp, cval=val)
        if name == "stax.iota":
            d = ir.IntegerAttr(o.attributes["dim"]).value
            i = self.ix_expr(idx.exprs[d], idx)
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
        c = self._cond_ix("slt", self.ix_expr(idx.exprs[d], idx), n0)
        sub0 = idx
        sub1 = self.ix_with(idx, [e - n0 if j == d else e for j, e in enumerate(idx.exprs)])
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
            sub.append(idx.exprs[d] - lo)
            if lo == 0 and high[d] <= 0:
                continue
            i = self.ix_expr(idx.exprs[d], idx)
            c1 = self._cond_ix("sge", i, lo) if lo > 0 else V(None, (), "i1", cval=1)
            c2 = self._cond_ix("slt", i, lo + n)
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
        sub = self.ix_with(idx, sub)
        pv = scalar_attr_value(o.attributes["value"])
        padv = V(None, (), rdt.comp, cval=(int(bool(pv)) if rdt.bool_ else pv))
        if conds is None:
            return self._eval(o.operands[0], sub)
        if conds.is_const:
            return self._eval(o.operands[0], sub) if conds.cval else padv
        x = self._with_cond(conds, lambda: self._eval(o.operands[0], sub))
        return self._select(conds, x, padv)

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
            # exact rewrites of std::pow only: sqrt is not pow by 0.5 at -inf and -0
            # (eager's pow by a Python 0.5 is imported as stax.sqrt instead)
            if e in (2.0, 1.0, -1.0, 3.0):
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
                return self._unary("reciprocal", x, dt)
        A, Bs = em.mat(a, sh), em.mat(b, sh)
        u = dt.unsigned or dt.bool_

        def r(text):
            return V(em.op(text), sh, comp)

        if kind == "div" and fl and comp == "f32" and sh:
            recip = triton_division.scalar_reciprocal(self._full_value(o.operands[1]))
            if recip is not None:
                return r(f"arith.mulf {A}, {em.const(recip, comp, sh)} : {ty}")
            return V(triton_division.precise_division(em, A, Bs, sh, ty), sh, comp)
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
        if kind == "copysign" and fl:
            return self._extern("__nv_copysignf" if comp == "f32" else "__nv_copysign", [a, b],
                                sh, comp)
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
                  "round": "rint", **{k: k for k in LIBM_UNARY_OPS}}
        if kind in libdev:
            sym = "__nv_" + libdev[kind] + ("f" if f32 else "")
            return self._extern(sym, [x], sh, comp)
        raise KernelLoweringError(f"unary op stax.{kind} is not supported by the Triton target")
