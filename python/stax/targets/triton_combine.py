"""Reduction arithmetic of the Triton code generator: each reduction kind's neutral element
and accumulators, the combine of sum / prod / max / min (max / min propagate NaN) and of
argmax / argmin (NaN is the extreme; the first index wins a tie), and the tt.reduce that
finishes an [XB, RB] accumulator into an [XB, 1] row value.

`_CombineMixin` is one part of `triton_ttir._Lowering`: it reads the lowering's `em`,
`XB` and `RB` and records each finished reduction in `row_vals`. Guarantees: sum / prod
/ max / min combine the same way inside a loop and in the final tt.reduce; argmax /
argmin keep the first index (a loop over increasing indices only replaces on a strictly
better value, the tt.reduce breaks ties by index); a reduction whose result type differs
from its input's compute type is refused (KernelLoweringError).
"""
from __future__ import annotations

from stax.targets.kernel_ir import etype as _etype
from stax.targets.kernel_ir import highest as _highest
from stax.targets.kernel_ir import lowest as _lowest
from stax.targets.lowering_errors import KernelLoweringError
from stax.targets.triton_dtypes import _dt, _isf
from stax.targets.triton_emitter import V


class _CombineMixin:
    """Accumulators and combines of the reductions of `triton_ttir._Lowering`."""

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
