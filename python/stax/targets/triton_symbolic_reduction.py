"""Reductions with runtime sizes for the Triton generator (`triton_symbolic`).

A reduction kernel whose reductions share one domain S (dims static or symbolic) and
its reduced dims D (softmax, layer_norm and its mean / rstd outputs, rms_norm, sum / amax
over the last dim; column sums over a symbolic batch) is emitted over [XBLOCK rows, RBLOCK reduced] tiles:

* rows: `r = pid * XBLOCK + range`, masked by `r < rows` (a runtime size); the kept dims
  are delinearized from r by runtime sizes. The reduced dims may be the innermost (row
  mode) or not (column mode: `x.sum(0)` of `[s0, 768]`, a bias gradient; the tile's
  XBLOCK kept elements are then neighbours in memory);
* persistent (the variant's RBLOCK >= the row, which the launcher checks): one block
  holds the row, masked by `k < rnumel`; every phase reuses the loaded values;
* looped: each phase is an scf.for from 0 to rnumel (a runtime bound) in RBLOCK steps.

The phases, accumulators, combines, tt.reduce and the per-row values are the static
generator's (`triton_reduction._ReductionMixin._emit_phase`, `triton_combine`); this mixin
replaces the row setup, the loop bounds and masks, and the indices of outputs.
Guarantees: a persistent variant launched for a row longer than its RBLOCK reads and
writes only in bounds (every lane is masked by `k < rnumel` and `r < rows`); it would be
wrong, never out of bounds, and the launcher never picks it then. Refused
(KernelLoweringError): reductions of different signatures, an output that is neither
the domain (or a reshape of it) nor one value per row.
"""
from __future__ import annotations

from stax.dialects import symbolic
from stax.targets.kernel_ir import (SIZE_VALUE_OPS, etype, reduction_signature,
                                    size_value_expr)
from stax.targets.kernel_ir import int_array as _ints
from stax.targets.triton_configs import _value_facts
from stax.targets.triton_dtypes import _DT, _dt, _isf
from stax.targets.triton_emitter import V


def _dims(v):
    return list(symbolic.dims_of(v.type))


class _SizedReductionMixin:
    """The row-reduction kernel of `triton_symbolic._SizedLowering`, and (for its
    pointwise kernels too) the value of a stax.size_value."""

    def _eval_op(self, o, v, idx) -> V:
        if o.operation.name in SIZE_VALUE_OPS:
            return self._size_value(o, v)
        return super()._eval_op(o, v, idx)

    def _size_value(self, o, v) -> V:
        """The product of the operand's dims (this kernel's runtime sizes, computed once
        at entry) as a scalar of the result's type: a mean's divisor."""
        rdt = _dt(etype(v))
        n = size_value_expr(o)
        if isinstance(n, int):
            return V(None, (), rdt.comp, cval=float(n) if _isf(rdt.comp) else n)
        return self._convert(self._size(n), _DT[self.it], rdt)

    def _check_reductions(self):
        sig = None
        for r in self.reductions:
            s = (tuple(_dims(r.operands[0])), tuple(reduction_signature(r)[1]))
            if sig is not None and s != sig:
                self._refuse(f"reductions of different signatures ({list(sig[0])} over "
                             f"{list(sig[1])} and {list(s[0])} over {list(s[1])})")
            sig = s
        S, D = list(sig[0]), list(sig[1])
        self.S, self.D = S, D
        # rows (the reduced dims innermost) or columns (a kept dim inside: the tile's
        # XBLOCK neighbouring kept elements are contiguous); the launcher tiles each
        self.inner_reduced = all(S[d] == 1 for d in range(max(D) + 1, len(S)))
        self.kept = [d for d in range(len(S)) if d not in D]
        size = symbolic.dim_product(S)
        rows = symbolic.dim_product([S[d] for d in self.kept])
        self.facts = _value_facts(self.defining, S, D, _dims)
        self.full_outs, self.row_outs = [], []
        for i, v in enumerate(self.yielded):
            n = symbolic.dim_product(_dims(v))
            if self._is_full(v) or n == size:
                if n != size:
                    self._refuse(f"output {i} of dims {_dims(v)} (not the reduction domain "
                                 f"{S} or a reshape of it)")
                self.full_outs.append(i)
            elif n == rows:
                self.row_outs.append(i)
            else:
                self._refuse(f"output {i} of dims {_dims(v)} (neither the domain {S} nor "
                             f"one value per row)")

    # --------------------------------------------------------------- kernel
    def _emit_sized_reduction(self):
        em, it, var = self.em, self.it, self.variant
        XB, RB = var.xblock, var.rblock
        self.XB, self.RB = XB, RB
        S, D = self.S, self.D
        rn = symbolic.dim_product([S[d] for d in D])
        self._setup_sized_rows(symbolic.dim_product([S[d] for d in self.kept]))
        colsh = (1, RB)
        self.krange = self._arange(RB, "k", axis=0)
        phase = self._phases()
        phases = sorted(set(phase.values()))
        if var.strategy == "persistent":
            k = V(self.krange, colsh, it)
            kmask = V(em.op(f"arith.cmpi slt, {self.krange}, {em.mat(self._size(rn), colsh)} : "
                            f"tensor<1x{RB}x{it}>", "kmask"), colsh, "i1")
            self._set_masks(self.rmask, kmask)
            for p in phases:
                self._prepare_rows()
                self._emit_phase([red for red in self.reductions if phase[red] == p], k, None)
            self._prepare_rows()
            for i in self.row_outs:
                self._store_row(i)
            if self.full_outs:
                idx = self._full_index(k)
                for i in self.full_outs:
                    self._store_full(i, idx)
            return "reduction-persistent"
        for p in phases:
            self._prepare_rows()
            reds = [red for red in self.reductions if phase[red] == p]
            self._loop(rn, lambda k, reds=reds: self._emit_phase(reds, k, True), reds)
        self._prepare_rows()
        for i in self.row_outs:
            self._store_row(i)
        if self.full_outs:
            def body(k):
                idx = self._full_index(k)
                for i in self.full_outs:
                    self._store_full(i, idx)
            self._loop(rn, body, [])
        return "reduction-looped"

    def _setup_sized_rows(self, rows):
        em, it, XB = self.em, self.it, self.XB
        rowsh = (XB, 1)
        base = self.ix_mul(V(self._program_id("x", "pid"), (), it), XB)
        rr = self._arange(XB, "r", axis=1)
        r = em.op(f"arith.addi {em.mat(base, rowsh)}, {rr} : tensor<{XB}x1x{it}>", "row")
        self.r = V(r, rowsh, it)
        self.rmask = V(em.op(f"arith.cmpi slt, {r}, {em.mat(self._size(rows), rowsh)} : "
                             f"tensor<{XB}x1x{it}>", "rmask"), rowsh, "i1")
        self.masks = {rowsh: self.rmask, (): None}
        kept_idx = self.s_delinearize(self.r, [self.S[d] for d in self.kept])
        self.kept_idx = dict(zip(self.kept, kept_idx))

    def _red_idx(self, k):
        return self.s_delinearize(k, [self.S[d] for d in self.D])

    def _row_index(self, shape):
        return self.s_delinearize(self.r, list(shape))

    def _value_dims(self, v):
        """A value's dims over symbolic sizes (the static generator's `_prepare_rows` and
        `_store_row` read them through this)."""
        return _dims(v)

    def _one_value_per_row(self, x) -> bool:
        """Only a value with the rows' kept dims: `s_delinearize` does not wrap the row
        index, so an operand broadcast along a kept dim ([1, 1, 1] over rows [s, 1]) is
        read at the full index instead (read at offset `row`, it was out of bounds and
        wrong on the H200: fuzz seed 4405, program 4405013250)."""
        xd = self._value_dims(x)
        return len(xd) == len(self.S) and all(xd[d] == self.S[d] for d in self.kept)

    def _store_full(self, i, idx):
        v = self.yielded[i]
        dims = _dims(v)
        if dims != self.S:   # a reshape of the domain: the same element order
            idx = self.s_delinearize(self.s_linearize(idx, self.S), dims)
        self._store(self.outputs[i], self._eval(v, idx), idx, (self.XB, self.RB))

    def _loop(self, rn, body, reds, bounds=None):
        """scf.for over RBLOCK chunks of [0, rn), rn a runtime size; with reductions,
        [XB, RB] accumulators reduced after the loop (the static `_loop`'s structure)."""
        em = self.em
        it, RB = self.it, self.RB
        accs, types = self._acc_init(reds)
        kv = em.fresh("k0")
        iters = [em.fresh("acc") for _ in accs]
        res = em.fresh("red") if accs else None
        head = (f"{res}:{len(accs)} = " if len(accs) > 1 else (f"{res} = " if accs else ""))
        ia = (" iter_args(" + ", ".join(f"{a} = {b}" for a, b in zip(iters, accs)) + ") -> ("
              + ", ".join(types) + ")") if accs else ""
        n = self._size(rn)
        hi = em.mat(n, ())
        em.emit(f"{head}scf.for {kv} = {em.const(0, it)} to {hi} step {em.const(RB, it)}{ia} : "
                f"{it} {{")
        saved_masks = self.masks
        em.push()
        colsh = (1, RB)
        ks = em.op(f"tt.splat {kv} : {it} -> tensor<1x{RB}x{it}>", "k")
        k = em.op(f"arith.addi {ks}, {self.krange} : tensor<1x{RB}x{it}>", "k")
        kmask = V(em.op(f"arith.cmpi slt, {k}, {em.mat(n, colsh)} : tensor<1x{RB}x{it}>",
                        "kmask"), colsh, "i1")
        self._set_masks(self.rmask, kmask)
        self.loop_accs = iters
        new = body(V(k, colsh, it))
        if accs:
            em.emit("scf.yield " + ", ".join(new) + " : " + ", ".join(types))
        em.pop()
        em.emit("}")
        self.masks = saved_masks
        if accs:
            outs = [res] if len(accs) == 1 else [f"{res}#{j}" for j in range(len(accs))]
            self._finish_reductions(reds, outs)
