"""Reduction kernels of the Triton code generator: the phases of a kernel whose reductions
reduce a domain S over dims D, emitted over [XBLOCK rows, RBLOCK reduced] tiles --
persistent (whole rows in registers), looped (scf.for over RBLOCK chunks) or split
(programs reduce parts of the reduced range into a workspace, a final kernel combines
them) -- and where each output is stored (row space or full space).

`_ReductionMixin` is one part of `triton_ttir._Lowering`. The phases are the kernel
schedule's (`passes/kernel_schedule`: a reduction's phase is 1 + the deepest phase of the
reductions it reads); row values a phase needs are computed once per row block,
outside its loop. Guarantees: every reduction of a kernel has one signature (S, D), or
a KernelLoweringError; an output is stored once, over the whole domain (full space) or
once per row (row space), and any other output shape is refused.
"""
from __future__ import annotations

from stax.passes import kernel_schedule
from stax.targets.kernel_ir import VIEW_OPS as _VIEWS
from stax.targets.kernel_ir import REDUCTION_OPS as _REDUCTIONS
from stax.targets.kernel_ir import etype as _etype
from stax.targets.kernel_ir import numel as _numel
from stax.targets.kernel_ir import shape as _shape
from stax.targets.lowering_errors import KernelLoweringError
from stax.targets.triton_configs import _reduction_signature, _value_facts, split_parts
from stax.targets.triton_dtypes import _DT, _dt
from stax.targets.triton_emitter import V
from stax.targets.triton_index import _Arg


class _ReductionMixin:
    """The reduction phases of `triton_ttir._Lowering`."""

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
        self.facts = _value_facts(self.defining, S, D)
        kept = [d for d in range(len(S)) if d not in D]
        self.kept = kept
        rows = _numel([S[d] for d in kept])
        rn = _numel([S[d] for d in D])
        if rn == 0:
            raise KernelLoweringError(f"kernel {self.name}: reduction over an empty dim")
        XB, RB = self.config.block, self.config.rblock
        if self.final_of_split:
            return self._emit_split_final(rows)
        # the schedule's mode decides: persistent holds the whole range in one RBLOCK
        # (the verifier checks RBLOCK covers it), looped steps over it even when one
        # step would do; a split whose parts collapse to one is persistent or looped
        mode = self.gpu.mode
        if mode == "persistent" and RB < rn:
            raise KernelLoweringError(f"kernel {self.name}: tiling.gpu is persistent but "
                                      f"RBLOCK {RB} < the reduced range {rn}")
        persistent = mode == "persistent" or (mode == "split" and RB >= rn)
        kind = "reduction-persistent" if persistent else "reduction-looped"
        order = tuple(self.gpu.loop_order)
        if order and order != tuple(kept) + tuple(D):
            raise KernelLoweringError(
                f"kernel {self.name}: tiling.gpu.loop_order {list(order)}: the Triton "
                f"reduction walks its kept dims then its reduced dims in dim order "
                f"({list(kept) + list(D)}); another order is not implemented")
        nsplit, chunk = 1, rn
        if self.config.split > 1:
            if not self.shape_info.splittable:
                raise KernelLoweringError(
                    f"kernel {self.name}: config {self.config} splits the reduced range, but "
                    "this kernel's reductions cannot be split (an arg-reduction, a bool "
                    "reduction, a reduction of a reduction, or a full-space output reading one); "
                    "use split=1 (stax-translate: leave out --split)")
            chunk, nsplit = split_parts(rn, self.config.split, RB)
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

        phase = self._phases()
        phases = sorted(set(phase.values()))
        full_outs, row_outs = self._classify_outputs(rows)

        if nsplit > 1:
            return self._emit_split_partial(rows, rn, chunk, nsplit, full_outs, row_outs)

        if persistent:
            k = V(kr, colsh, it, hi=rn)
            kmask = None if rn == RB else V(   # a row that fills the block needs no mask
                em.op(f"arith.cmpi slt, {kr}, {em.const(rn, it, colsh)} : tensor<1x{RB}x{it}>",
                      "kmask"), colsh, "i1")
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

        # full-space outputs that read no reduction are stored in the first phase's loop,
        # from the values it loads anyway: a second pass would read every input again
        early = [i for i in full_outs if not self.facts(self.yielded[i])[0]]
        late = [i for i in full_outs if i not in early]
        for n, p in enumerate(phases):
            self._prepare_rows()
            reds = [red for red in self.reductions if phase[red] == p]
            stores = early if n == 0 else []
            self._loop(rn, lambda k, reds=reds, stores=stores:
                       self._phase_and_stores(reds, k, stores), reds)
        self._prepare_rows()
        for i in row_outs:
            self._store_row(i)
        if late:
            def body(k):
                idx = self._full_index(k)
                for i in late:
                    self._store_full(i, idx)
            self._loop(rn, body, [])
        return kind

    def _phase_and_stores(self, reds, k, stores):
        """One looped chunk: the phase's reductions, then the full-space outputs in
        `stores` (none of which reads a reduction) at the same index."""
        new = self._emit_phase(reds, k, True)
        idx = self._full_index(k)
        for i in stores:
            self._store_full(i, idx)
        return new

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
        # the grid covers the rows exactly when XB divides them: no row mask then
        self.rmask = None if rows % XB == 0 else V(
            em.op(f"arith.cmpi slt, {r}, {em.const(rows, it, rowsh)} : tensor<{XB}x1x{it}>",
                  "rmask"), rowsh, "i1")
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
        # the full-space outputs (splittable: none reads a reduction) in the same loop
        self._loop(rn, lambda k: self._phase_and_stores(self.reductions, k, full_outs),
                   self.reductions, bounds=(lo, hi))
        pv = V(part, (), it, hi=nsplit)
        for ws, red in zip(self.ws, self.reductions):
            self._store(ws, self.row_vals[red.results[0]], [pv, self.r], (self.XB, 1))
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
            vals.append(x if fmask is None else em.op(
                f"arith.select {fmask.ssa}, {x}, {neutral} : {em.ty(full, 'i1')}, "
                f"{em.ty(full, dt.comp)}"))
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
        ix = self.ix_of(idx)
        self._check_domain(ix, self.S, i)
        if shp != list(self.S):   # a reshape of the domain: same element order
            ix = self.ix_with(ix, kernel_schedule.compose(
                kernel_schedule.reshape_map(shp, list(self.S)), ix.exprs, len(ix.base)))
        self._store(self.outputs[i], self._eval(self.yielded[i], ix), ix, (self.XB, self.RB))

    def _set_masks(self, rmask, kmask):
        """Masks per block shape; None where every lane is in bounds (then loads and
        stores are unmasked and reductions take every lane)."""
        full = (self.XB, self.RB)
        if rmask is None and kmask is None:
            fm = None
        elif rmask is None or kmask is None:
            m = rmask or kmask
            fm = V(self.em.mat(m, full), full, "i1")
        else:
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

    def _emit_phase(self, reds, k, looped):
        """Evaluate each reduction's input over the current chunk. Persistent: reduce it
        now. Looped: combine into the loop's accumulators and return the new ones."""
        em = self.em
        full = (self.XB, self.RB)
        fmask = self.masks[full]
        idx = self.ix_of(self._full_index(k))
        self._check_domain(idx, self.S)
        new = []
        j = 0
        vals = []
        for red in reds:
            kind, dt = self._spec(red)
            ty = em.ty(full, dt.comp)
            x = em.mat(self._eval(red.operands[0], idx), full)
            neutral = em.const(self._neutral(kind, dt), dt.comp, full)
            xm = x if fmask is None else em.op(
                f"arith.select {fmask.ssa}, {x}, {neutral} : {em.ty(full, 'i1')}, {ty}")
            if kind in ("argmax", "argmin"):
                # the linear reduced index is k (a single element: 0)
                # (a runtime size is a symbol: k is its index too)
                n = _numel([self.S[d] for d in self.D])
                lin = k if not isinstance(n, int) or n > 1 else self.ix_const(0)
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

    def _phases(self) -> dict:
        """Phase of each reduction (1 + the deepest reduction it depends on): the one
        phase analysis, `kernel_schedule.reduction_phases`, which the schedule records."""
        return kernel_schedule.reduction_phases(self.body)

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
        self.check = None
        return self.delinearize(self.r, shape)

    def _prepare_rows(self):
        """Evaluate, at the top scope, every row value that enters full space through a
        view and whose reductions are done: computed once per row block."""
        for o in self.body:
            if o.operation.name not in _VIEWS:
                continue
            x = o.operands[0]
            if not self._is_full(o.results[0]) and self._value_dims(o.results[0]) != self.S:
                continue
            if self._is_full(x):
                continue
            if not self._one_value_per_row(x):
                continue
            if any(d.results[0] not in self.row_vals for d in self._red_deps(x)):
                continue
            self._eval(x, self._row_index(self._value_dims(x)))

    def _value_dims(self, v):
        """A value's dims (ints; the runtime-size generator's are size expressions)."""
        return _shape(v)

    def _one_value_per_row(self, x) -> bool:
        """May x be read at the row index (`_row_index`)? Here always: `delinearize`
        wraps the row index into a smaller shape (lin % numel), which is right for a
        value broadcast over the leading dims ([C], a 0-d scale)."""
        return True

    def _store_row(self, i):
        v = self.yielded[i]
        idx = self._row_index(self._value_dims(v))
        self._store(self.outputs[i], self._eval(v, idx), idx, (self.XB, 1))
