"""Element conversions of the Triton code generator: memory <-> compute type at loads and
stores, `stax.convert` and `stax.bitcast`, rounding to a storage type, and fp8 encode /
decode bit-identical to torch's casts on the device.

`_ConvertMixin` is one part of `triton_ttir._Lowering`: it reads the lowering's `em` and
`stored_vals` and keeps `rounded` ((value, storage type) -> its bits as stored) and `raw`
(values that are bytes as loaded). Guarantees: bf16 / f16 / fp8 are computed in f32 and
rounded once -- at a store, at an explicit convert, or where the kernel stores the value
(`_round_if_stored`); storing or bitcasting a rounded or loaded value uses its bits, never
a second rounding.
"""
from __future__ import annotations

from stax.targets.kernel_ir import etype as _etype
from stax.targets.kernel_ir import float_bits as _fbits
from stax.targets.kernel_ir import int_bits as _ibits
from stax.targets.lowering_errors import KernelLoweringError
from stax.targets.triton_dtypes import DT, _dt, _isf, fp8_e4m3fn_overflow
from stax.targets.triton_emitter import V


class _ConvertMixin:
    """Loads' and stores' conversions, converts, bitcasts and fp8 of `_Lowering`."""

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
        import torch  # here only: folding a constant's convert is the one use of torch
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
