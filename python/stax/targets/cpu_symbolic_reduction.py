"""Reduction kernels with runtime sizes: the row loops, the phases and their accumulators.

The reduction half of cpu_symbolic's lowering. A reduction kernel reduces one domain S
(dims ints or size expressions) over dims D; every reduction of the kernel shares (S, D).
A phase with argmax/argmin is one 1-lane loop over its reduced dim (`_emit_arg_phase`);
in column mode such a kernel runs its columns one lane at a time.
Two modes, as the static generator (cpu_reduction) has:

* row mode (the last dim is reduced: softmax, layer_norm, `sum(-1)`, `sum((1, 2))`): a
  loop per kept dim (the first split over threads), and per row the reductions run in
  dependency order ("phases"), each phase one nest over the reduced dims whose innermost
  (the last dim) is a 16-lane vector loop to n - n % 16 with vector accumulators and a
  1-lane tail, combined once per row;
* column mode (the last dim is kept: `sum(0)` of [s0, 768], a bias gradient): W
  neighbouring rows at once, vectorized along the last kept dim (then a 1-lane tail),
  with one accumulator lane per row, the reduced dims step-1 loops.

A float sum over a loop of runtime (or more than _BLOCK_STEPS) trips is blocked: each
loop level sums into a fresh partial merged into its parent's accumulator, and a long
level runs as blocks of _BLOCK_STEPS**2 trips made of blocks of _BLOCK_STEPS trips, so
a lane adds about 2 * _BLOCK_STEPS + n / _BLOCK_STEPS**2 values, not n. The value the last phase reduces may be written to a
full-domain output and read back by the output loop (the stash, row mode only). A
reduction's value is only ever read at the current row; any other index is refused.
"""
from stax._mlir import ir
from stax.dialects import symbolic
from stax.dialects.schedule import split_loop
from stax.targets.cpu_dtypes import dtype_of
from stax.targets.cpu_emitter import Val
from stax.targets.cpu_index import Aff, Var
from stax.targets.cpu_reduction import _arg_best_value, _arg_better, _vred
from stax.targets.kernel_ir import (REDUCTION_OPS, SIZE_VALUE_OPS, VIEW_OPS, etype, highest,
                                    int_array, lowest, size_value_expr)

#: trips of one block of a blocked float sum, and the levels of blocks a long loop gets
#: (see the module docstring): 64 * 64 * 64 trips keep ~6 digits near eager's
_BLOCK_STEPS = 64
_BLOCK_DEPTH = 2
_ARG_OPS = ("stax.argmax", "stax.argmin")
#: the vector.reduction of each reduction on i1 (as the accumulators combine: or / and)
_I1_VRED = {"reduce_sum": "or", "reduce_max": "or", "reduce_prod": "and", "reduce_min": "and"}


def _dims(v):
    return list(symbolic.dims_of(v.type))


class RuntimeReductionMixin:
    """Reduction kernels for cpu_symbolic._RuntimeSizeLowering. Uses its `em`, `_size`,
    `_vector_main`, `_extent_of`, `_open_loop`, `_close_loops`, `_runtime_part_range`,
    `_runtime_loop_nest`, `_refuse` and the static lowering's `_eval`, `_store`,
    `_write`, `_result_offset`, `_depends_on`, `_phases`."""

    def _signature(self, r):
        if r.operation.name in _ARG_OPS:
            return _dims(r.operands[0]), [ir.IntegerAttr(r.attributes["dim"]).value]
        return _dims(r.operands[0]), sorted(int_array(r, "dims"))

    def _eval_op(self, o, v, idx) -> Val:
        if o.operation.name in REDUCTION_OPS:
            # a coordinate of a size-1 dim is 0 whatever it is written as
            ones = [n == 1 for n in _dims(v)]

            def norm(index):
                return tuple(Aff() if one else a for a, one in zip(index, ones))
            want = [norm(self.row_index(True)), norm(self.row_index(False))]
            if v not in self.row_vals or len(idx) != len(ones) or norm(idx) not in want:
                self._refuse("a reduction's value read at another row (through a reshape "
                             "or a permute of the row values)")
            return self.row_vals[v]
        if o.operation.name in SIZE_VALUE_OPS:
            return self._size_value(o, v)
        return super()._eval_op(o, v, idx)

    def _size_value(self, o, v) -> Val:
        """stax.size_value: the product of its operand's dims (the runtime sizes this
        kernel takes) as a scalar of the result's type; stax.symbol_value: its size
        expression, of the same symbols."""
        from stax.targets.cpu_dtypes import DTYPES
        d = size_value_expr(o)
        i = self.em.op(f"arith.index_cast {self._size(d)} : index to i64", "i64")
        return self._convert(Val(i, False, "i64"), DTYPES["i64"], dtype_of(etype(v)))

    def row_index(self, keepdim):
        """The current row's index in the row-value shape (keepdim: reduced dims as 0)."""
        if keepdim:
            return [Aff() if d in self.D else self.outer_idx[d] for d in range(len(self.S))]
        return [self.outer_idx[d] for d in range(len(self.S)) if d not in self.D]

    # --------------------------------------------------------------- the kernel
    def _emit_runtime_reduction_kernel(self):
        em = self.em
        S, D = self._signature(self.reductions[0])
        for r in self.reductions[1:]:
            if self._signature(r) != (S, D):
                self._refuse(f"reductions of different signatures ({S} over {D} and "
                             f"{self._signature(r)})")
        if not D:
            self._refuse("a reduction over no dim")
        self.S, self.D = S, D
        keep = [S[d] if d not in D else 1 for d in range(len(S))]
        drop = [S[d] for d in range(len(S)) if d not in D]
        row_outs, full_outs = [], []
        for i, v in enumerate(self.yielded):
            dv = _dims(v)
            if dv == S:
                full_outs.append(i)
            elif dv in (keep, drop):
                row_outs.append((i, dv == keep))
            else:
                self._refuse(f"a reduction kernel's output of shape {symbolic.fmt_dims(dv)} "
                             f"(its domain is {symbolic.fmt_dims(S)})")
        phase = self._phases()
        phases = sorted(set(phase.values()))
        kept = [d for d in range(len(S)) if d not in D]
        self.column = bool(kept) and kept[-1] == len(S) - 1
        args = [r.operation.name for r in self.reductions if r.operation.name in _ARG_OPS]
        if args and self.column:
            # a column argmax/argmin (`x.argmax(0)`): the arg phase carries one (value,
            # index) pair per column, so the columns run one lane at a time
            self.em.W = 1
        loop_dims = kept[:-1] if self.column else kept
        if not kept:
            self.splittable = False
        self.outer_idx = {}
        # the outermost loop of more than one iteration (a static 1 is not split); in
        # column mode the columns when no other kept dim may have more than one
        split = split_loop([S[d] for d in loop_dims] + ([S[kept[-1]]] if self.column else []))
        for k, d in enumerate(loop_dims):
            lo, hi = (self._runtime_part_range(S[d], 1) if k == split
                      else (em.const(0, "index"), self._size(S[d])))
            self.outer_idx[d] = self._open_loop(lo, hi, S[d])
        self.stash = (self._choose_stash(full_outs, phase, phases[-1])
                      if phases and not self.column else None)

        def rows_body():
            for p in phases:
                self._emit_runtime_phase([r for r in self.reductions if phase[r] == p])
            for i, keepdim in row_outs:
                index = self.row_index(keepdim)
                self._store(i, self._eval(self.yielded[i], index), index)
            if full_outs:
                def body(inner):
                    idx = self._full_index(inner)
                    # every value before any store: the stash buffer is an output, and
                    # once its own value is stored a later output would read that
                    # instead of the stash (stax-fuzz seed 3010, program 3010009048)
                    vals = [(i, self._eval(self.yielded[i], idx)) for i in full_outs]
                    for i, val in vals:
                        self._store(i, val, idx)
                self.stash_active = self.stash is not None
                if self.column:
                    self._plain_runtime_loops([S[d] for d in D], body)
                else:
                    self._runtime_loop_nest([S[d] for d in D], body, split=False)
                self.stash_active = False

        if self.column:
            self._column_lanes(kept[-1], split=split == len(loop_dims), body=rows_body)
        else:
            rows_body()
        self._close_loops(len(loop_dims))

    def _full_index(self, inner):
        """The domain index of the current row at reduced-dim coordinates `inner`."""
        it = iter(inner)
        return [self.outer_idx[d] if d in self.outer_idx else next(it)
                for d in range(len(self.S))]

    def _column_lanes(self, d, split, body):
        """Column mode: the last kept dim d in W-lane steps to n - n % W (one row per
        lane), then 1 lane; `body()` emits one (group of) row(s)."""
        em = self.em
        n = self.S[d]
        W = em.W
        if split:
            lo, hi = self._runtime_part_range(n, W)
            mid = em.vector_end(lo, hi, W) if W > 1 else lo
        else:
            lo, hi = em.const(0, "index"), self._size(n)
            mid = self._vector_main(n) if W > 1 else lo
        # a 1-lane kernel (a runtime stride along the lanes) has no W-wide loop: the
        # 1-lane loop covers [lo, hi) (it began at the W-wide loop's end, hi, and wrote
        # nothing: stax-fuzz --dynamic seed 7373, program 7373022141)
        for a, b, step, lane in ((lo, mid, W, True), (mid, hi, 1, False)):
            if lane and W == 1:
                continue
            iv = em.fresh()
            em.emit(f"scf.for {iv} = {a} to {b} step {em.const(step, 'index')} {{")
            em.push()
            em.vars[iv] = Var(iv, self._extent_of(n), lane=lane)
            self.outer_idx[d] = Aff.var(iv)
            saved = em.W
            if lane:
                em.lane_var = iv
            else:
                em.W = 1
            body()
            em.lane_var = None
            em.W = saved
            em.pop()
            em.emit("}")

    def _plain_runtime_loops(self, shape, body):
        """Step-1 loops over `shape` that keep the current lane setting (column mode)."""
        idx = [self._open_loop(self.em.const(0, "index"), self._size(n), n) for n in shape]
        body(idx)
        self._close_loops(len(shape))

    def _choose_stash(self, full_outs, phase, last):
        """(value, output): a value the last phase reduces that a full-domain output of
        exactly its compute type depends on (softmax's exp(x - max)). The phase writes it
        there and the output loop reads it back instead of computing it again; the
        output's own value overwrites it element by element after the read."""
        last_inputs = [r.operands[0] for r in self.reductions if phase[r] == last]
        for i in full_outs:
            out = self.outputs[i]
            if out.dtype.mem != out.dtype.comp:
                continue
            for c in last_inputs:
                if c in self.defining and _dims(c) == self.S and \
                        dtype_of(etype(c)).comp == out.dtype.mem and \
                        self.defining[c].operation.name not in VIEW_OPS and \
                        self._depends_on(self.yielded[i], c):
                    return (c, i)
        return None

    # --------------------------------------------------------------- one phase
    def _emit_runtime_phase(self, reds):
        """The reductions of one phase in one loop nest over the reduced dims. Row mode:
        a vector segment and a 1-lane tail of the innermost dim, each reduced to one
        scalar per row. Column mode: one nest, one accumulator lane per row."""
        em = self.em
        S, D = self.S, self.D
        specs = [(r, r.operation.name.split(".")[1], dtype_of(etype(r.operands[0])))
                 for r in reds]
        if any(r.operation.name in _ARG_OPS for r in reds):
            return self._emit_arg_phase(specs)
        W = em.W
        sums = any(kind == "reduce_sum" and dt.comp.startswith("f") for _, kind, dt in specs)
        c0 = em.const(0, "index")

        def level(d, lo, hi, step, lane, trips):
            return dict(d=d, lo=lo, hi=hi, step=step, lane=lane,
                        long=trips is None or trips > _BLOCK_STEPS)

        plain = [level(d, c0, self._size(S[d]), 1, False,
                       S[d] if isinstance(S[d], int) else None) for d in D]
        segments = []   # (levels, vector accumulators, emitted with 1 lane)
        if self.column:
            segments.append((plain, em.lane_var is not None and W > 1, False))
        else:
            n = S[D[-1]]
            static = isinstance(n, int)
            main = self._vector_main(n) if W > 1 else c0
            if W > 1 and (not static or n >= W):
                segments.append((plain[:-1] + [level(D[-1], c0, main, W, True,
                                                     n // W if static else None)], True, False))
            if not static or W == 1 or n % W:
                # the tail has fewer than W trips, except in a 1-lane kernel (the row)
                trips = (n if static else None) if W == 1 else 0
                segments.append((plain[:-1] + [level(D[-1], main, self._size(n), 1, False,
                                                     trips)], False, True))
        results = []
        for levels, vec, one_lane in segments:
            if one_lane:
                em.W = 1
            types = [em.vt(dt.comp, vec) for _, _, dt in specs]
            accs = [self._acc_init(kind, dt, ty) for (_, kind, dt), ty in zip(specs, types)]
            results.append((vec and not self.column,
                            self._acc_nest(levels, accs, types, specs, vec, blocked=sums)))
            em.W = W
        for k, (r, kind, dt) in enumerate(specs):
            final = None
            for reduce_lanes, vals in results:
                v = vals[k]
                if reduce_lanes:
                    red = _I1_VRED[kind] if dt.comp == "i1" else _vred(kind, dt.comp, dt.unsigned)
                    v = em.op(f"vector.reduction <{red}>, {v} : vector<{W}x{dt.comp}> "
                              f"into {dt.comp}", dt.comp)
                final = v if final is None else self._acc_combine(kind, dt, final, v, dt.comp)
            vec_row = self.column and em.lane_var is not None and W > 1
            self.row_vals[r.results[0]] = Val(final, vec_row, dt.comp)

    def _emit_arg_phase(self, specs):
        """A phase with argmax/argmin (one reduced dim, the last): one 1-lane loop over
        the row carrying (best value, its index) per arg reduction, an accumulator per
        other reduction; the first index wins ties, NaN counts as the maximum."""
        em = self.em
        (d,) = self.D
        n = self.S[d]
        saved, em.W = em.W, 1
        types, accs = [], []
        for _, kind, dt in specs:
            if kind in ("argmax", "argmin"):
                start = lowest if kind == "argmax" else highest
                types += [dt.comp, "i64"]
                accs += [em.splat(start(dt.comp, dt.unsigned), dt.comp), em.const(0, "i64")]
            else:
                types.append(dt.comp)
                accs.append(self._acc_init(kind, dt, dt.comp))

        def body(iv, iters):
            em.vars[iv] = Var(iv, self._extent_of(n))
            idx = self._full_index([Aff.var(iv)])
            pos = None
            new = []
            for r, kind, dt in specs:
                x = self._eval(r.operands[0], idx)
                if self.stash is not None and r.operands[0] == self.stash[0]:
                    self._write(self.outputs[self.stash[1]], x,
                                self._result_offset(self.stash[1], idx))
                cur = iters[len(new)]
                if kind in ("argmax", "argmin"):
                    if pos is None:
                        pos = em.op(f"arith.index_cast {iv} : index to i64", "i64")
                    best_i = iters[len(new) + 1]
                    better = _arg_better(em, kind, dt, x.ssa, cur)
                    new += [_arg_best_value(em, kind, dt, x.ssa, cur),
                            em.op(f"arith.select {better}, {pos}, {best_i} : i64", "i64")]
                else:
                    new.append(self._acc_combine(kind, dt, cur, x.ssa, dt.comp))
            return new
        res = self._loop_with_accs(em.const(0, "index"), self._size(n), 1, accs, types, body)
        em.W = saved
        j = 0
        for r, kind, dt in specs:
            if kind in ("argmax", "argmin"):
                self.row_vals[r.results[0]] = Val(res[j + 1], False, "i64")
                j += 2
            else:
                self.row_vals[r.results[0]] = Val(res[j], False, dt.comp)
                j += 1

    def _acc_nest(self, levels, accs, types, specs, vec, blocked):
        """Loops over `levels` (outermost first) carrying the accumulators; returns their
        final values. With `blocked` (a float sum is among them) each level starts from
        fresh partials merged into its parent's after it, and a long level runs in
        _BLOCK_DEPTH levels of blocks."""
        em = self.em
        ivs = {}

        def fresh():
            return [self._acc_init(kind, dt, ty) for (_, kind, dt), ty in zip(specs, types)]

        def merge(cur, part):
            return [self._acc_combine(kind, dt, a, b, ty)
                    for (_, kind, dt), a, b, ty in zip(specs, cur, part, types)]

        def step_body(cur):
            idx = self._full_index([ivs[d] for d in self.D])
            new = []
            for (r, kind, dt), acc, ty in zip(specs, cur, types):
                x = self._eval(r.operands[0], idx)
                if self.stash is not None and r.operands[0] == self.stash[0]:
                    self._write(self.outputs[self.stash[1]], x,
                                self._result_offset(self.stash[1], idx))
                new.append(self._acc_combine(kind, dt, acc, em.to_vec(x) if vec else x.ssa, ty))
            return new

        def run(k, cur):
            if k == len(levels):
                return step_body(cur)
            lev = levels[k]

            def loop(lo, hi, start):
                def body(iv, iters):
                    em.vars[iv] = Var(iv, self._extent_of(self.S[lev["d"]]), lane=lev["lane"])
                    ivs[lev["d"]] = Aff.var(iv)
                    if lev["lane"]:
                        em.lane_var = iv
                    out = run(k + 1, iters)
                    if lev["lane"]:
                        em.lane_var = None
                    return out
                return self._loop_with_accs(lo, hi, lev["step"], start, types, body)

            if not blocked:
                return loop(lev["lo"], lev["hi"], cur)
            def blocks(lo, hi, depth):
                """[lo, hi) in blocks of step * _BLOCK_STEPS**depth trips, each a partial."""
                if depth == 0:
                    return loop(lo, hi, fresh())
                span = lev["step"] * _BLOCK_STEPS ** depth

                def block(blk, outer):
                    bhi = em.op(f"arith.addi {blk}, {em.const(span, 'index')} : index", "index")
                    bhi = em.op(f"arith.minui {bhi}, {hi} : index", "index")
                    return merge(outer, blocks(blk, bhi, depth - 1))
                return self._loop_with_accs(lo, hi, span, fresh(), types, block)
            return merge(cur, blocks(lev["lo"], lev["hi"], _BLOCK_DEPTH if lev["long"] else 0))
        return run(0, accs)

    def _loop_with_accs(self, lo, hi, step, accs, types, body):
        """scf.for over [lo, hi) carrying `accs`; body(iv, iters) returns the new values."""
        em = self.em
        iv = em.fresh()
        res = [em.fresh() for _ in accs]
        iters = [em.fresh() for _ in accs]
        em.emit(f"{', '.join(res)} = scf.for {iv} = {lo} to {hi} step "
                f"{em.const(step, 'index')} iter_args("
                + ", ".join(f"{a} = {c}" for a, c in zip(iters, accs))
                + ") -> (" + ", ".join(types) + ") {")
        em.push()
        new = body(iv, iters)
        em.emit("scf.yield " + ", ".join(new) + " : " + ", ".join(types))
        em.pop()
        em.emit("}")
        return res

    def _acc_init(self, kind, dt, ty):
        fl = dt.comp.startswith("f")
        v = {"reduce_sum": 0.0 if fl else 0, "reduce_prod": 1.0 if fl else 1,
             "reduce_max": lowest(dt.comp, dt.unsigned),
             "reduce_min": highest(dt.comp, dt.unsigned)}[kind]
        return self.em.splat(v, ty)

    def _acc_combine(self, kind, dt, acc, x, ty):
        fl = dt.comp.startswith("f")
        u = dt.unsigned
        o = {"reduce_sum": "addf" if fl else "addi", "reduce_prod": "mulf" if fl else "muli",
             "reduce_max": "maximumf" if fl else ("maxui" if u else "maxsi"),
             "reduce_min": "minimumf" if fl else ("minui" if u else "minsi")}[kind]
        if dt.comp == "i1":
            o = {"reduce_sum": "ori", "reduce_max": "ori", "reduce_prod": "andi",
                 "reduce_min": "andi"}[kind]
        return self.em.op(f"arith.{o} {acc}, {x} : {ty}", ty)
