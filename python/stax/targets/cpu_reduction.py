"""The CPU target's reduction kernels: the loops that emit them, phase by phase.

A reduction kernel reduces one domain S over dims D (all its reductions share that
signature; stax-fuse splits the rest). It loops over rows (the kept dims) and, per row,
runs its reductions in dependency order, in the phases the kernel schedule records
(`passes/kernel_schedule`: a reduction's phase is 1 + the deepest reduction it depends
on), and the reductions of one phase share one loop over the row,
with vector accumulators (`_emit_phase`), or, where the reduced dims precede the last
kept dim (a sum over the batch dim), W neighbouring rows at once with one accumulator
lane each (column mode, `_emit_phase_column`). Then the per-row results are stored
(`_store_row`) and the full-domain outputs written in one loop over the row. A float
sum is blocked (`_acc_loops`) so each accumulator lane adds O(sqrt(n)) values. In the
last phase, the value it reduces may be stashed in a full-row output and read back by
the output loop instead of being recomputed. Its loads and stores are addressed from the
schedule too (llvm.py), and row or column mode is the schedule's `tiling.cpu.mode`; the
stash is still decided here."""
import math

from stax.dialects.schedule import split_loop
from stax.passes import kernel_schedule
from stax.targets.cpu_dtypes import dtype_of
from stax.targets.cpu_emitter import Val
from stax.targets.cpu_errors import KernelLoweringError
from stax.targets.cpu_index import Aff, Var, row_major_linear, strided_offset
from stax.targets.kernel_ir import REDUCTION_OPS as _REDUCTIONS
from stax.targets.kernel_ir import reduction_signature as _reduction_signature
from stax.targets.kernel_ir import VIEW_OPS as _VIEWS
from stax.targets.kernel_ir import etype as _etype
from stax.targets.kernel_ir import highest as _highest
from stax.targets.kernel_ir import lowest as _lowest
from stax.targets.kernel_ir import numel as _numel
from stax.targets.kernel_ir import shape as _shape

#: a reduction loop level of more trips than this (per accumulator lane) is blocked
#: when it carries a float sum (see ReductionMixin._acc_loops)
_BLOCK_TRIPS = 1024


def _sums_float(specs) -> bool:
    """Do these reductions (r, kind, dtype) include a float sum?"""
    return any(kind == "reduce_sum" and dt.comp.startswith("f") for _, kind, dt in specs)


class ReductionMixin:
    """The reduction half of the kernel lowering (llvm._KernelLowering). It uses the
    lowering's `em`, `reductions`, `defining`, `yielded`, `outputs`, `row_vals` and
    `stash`, and its `_eval`, `_write`, `_store`, `_part_range`, `_loop_nest` and
    `_plain_loops`; it sets `S`, `D`, `outer_dims`, `outer_idx`, `full_index`, `stash`,
    `stash_active` and, for a kernel with no kept dim, `splittable`."""

    def _phases(self) -> dict:
        """Phase of each reduction (1 + the deepest reduction it depends on): the one
        phase analysis, `kernel_schedule.reduction_phases`, which the schedule records."""
        return kernel_schedule.reduction_phases(self.body)

    def _emit_reduction_kernel(self):
        em = self.em
        S, D = _reduction_signature(self.reductions[0])
        for r in self.reductions[1:]:
            if _reduction_signature(r) != (S, D):
                raise KernelLoweringError(
                    f"kernel {self.name} mixes reductions of different signatures "
                    f"({S} over {D} and {_reduction_signature(r)}); stax-fuse should "
                    "have split them")
        self.S, self.D = S, D
        outer_dims = [d for d in range(len(S)) if d not in D]
        self.outer_dims = outer_dims
        phase = self._phases()
        phases = sorted(set(phase.values()))
        # An output with the domain's element count is written per element (it may be a
        # reshape of the domain, or a row value broadcast back); the rest are per row.
        full_outs = [i for i, v in enumerate(self.yielded) if _numel(_shape(v)) == _numel(S)]
        row_outs = [i for i in range(len(self.yielded)) if i not in full_outs]

        inner_shape = [S[d] for d in D]
        if self.tiling is not None:  # the schedule's choice (passes/cpu_tiling.py)
            column = self.tiling.mode == "column"
            want = outer_dims[-1] if column else D[-1]
            if self.tiling.vector_dim != want:
                raise KernelLoweringError(
                    f"internal error: kernel {self.name}: tiling.cpu.vector_dim = "
                    f"{self.tiling.vector_dim}, but mode \"{self.tiling.mode}\" vectorizes "
                    f"dim {want}")
        else:
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
        if not outer_dims and self.tiling is None:
            self.splittable = False
        # the threads split the outermost loop of more than one iteration; in column
        # mode the columns when no kept dim but the last has more than one
        split = split_loop([S[d] for d in loop_dims] + ([S[outer_dims[-1]]] if column else []))
        for k, d in enumerate(loop_dims):
            iv = em.fresh()
            lo, hi = (self._part_range(S[d], 1) if k == split
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
                    idx = self._at_domain(full_index(inner))
                    # every value before any store: the stash buffer is an output, and
                    # once its own value is stored a later output (a layer norm's
                    # output and its cos) would read that instead of the stashed
                    # x - mean (stax-fuzz seed 3010, program 3010009048)
                    vals = []
                    for i in full_outs:
                        yidx = self._domain_to_output_index(i, idx)
                        vals.append((i, yidx, self._eval(self.yielded[i], yidx)))
                    for i, yidx, val in vals:
                        self._store(i, val, yidx)
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
            segments = [True, False]
            if split < len(loop_dims):
                lo, hi = em.const(0, "index"), em.const(n, "index")
                mid = em.const((n // W) * W, "index")
                if not self._tail(n, W):
                    segments = [True]   # n is a multiple of W: no 1-lane columns
            else:   # the threads' part of the columns (runtime bounds: always a remainder)
                lo, hi = self._part_range(n, W)
                mid = em.vector_end(lo, hi, W)
            for a, b, step, lane in [(lo, mid, W, True), (mid, hi, 1, False)][:len(segments)]:
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
            idx = self._at_domain(full_index([Aff.var(v) for v in ivs]))
            new = []
            for (r, kind, dt), acc, ty in zip(specs, cur, types):
                x = self._eval(r.operands[0], idx)
                xs = em.to_vec(x) if vec else x.ssa
                new.append(em.op(f"arith.{kind_op(kind, dt)} {acc}, {xs} : {ty}", ty))
            return new

        new = self._acc_loops([(0, n, 1, False) for n in inner_shape], cur, types,
                              lambda: list(cur), merge, body, blocked=_sums_float(specs))
        for (r, kind, dt), v in zip(specs, new):
            self.row_vals[r.results[0]] = Val(v, vec, dt.comp)

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
                idx = self._at_domain(full_index(inner))
                new = []
                j = 0
                lin = None
                for r, kind, dt in specs:
                    x = self._eval(r.operands[0], idx)
                    if self.stash is not None and r.operands[0] == self.stash[0]:
                        self._write(self.outputs[self.stash[1]], x,
                                    self._result_offset(self.stash[1], idx))
                    if kind in ("argmax", "argmin"):
                        if lin is None:
                            lin = em.index(row_major_linear(inner, inner_shape))
                            lin = em.op(f"arith.index_cast {lin} : index to i64", "i64")
                        bv, bi = cur[j], cur[j + 1]
                        better = _arg_better(em, kind, dt, x.ssa, bv)
                        nv = _arg_best_value(em, kind, dt, x.ssa, bv)
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
        if (self._tail(n, W) if W > 1 else main < n):
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
                self.row_vals[r.results[0]] = Val(final, False, "i64")
                continue
            for tag, vals in seg_results:
                v = vals[slot]
                if tag == "vec":
                    v = em.op(f"vector.reduction <{_vred(kind, comp, dt.unsigned)}>, {v} : "
                              f"vector<{em.W}x{comp}> into {comp}", comp)
                final = v if final is None else combine(kind, comp, dt.unsigned, final, v, comp)
            self.row_vals[r.results[0]] = Val(final, False, comp)

    def _store_row(self, i):
        """Store a per-row value of result i at the output position of this row."""
        em = self.em
        v = self.yielded[i]
        out = self.outputs[i]
        if self.sched is not None:  # the row's output coordinates: the result's map
            self._at_domain([self.outer_idx.get(d) for d in range(len(self.S))])
            index = self._result_index(i)
            self._store(i, self._eval_row(v, index), index)
            return
        val = self._eval_row(v)
        # Row-major linear index of this row over the kept dims, re-split by the output shape.
        kept = [self.S[d] for d in self.outer_dims]
        lin = row_major_linear([self.outer_idx[d] for d in self.outer_dims], kept)
        self._write(out, val, strided_offset(em.delinearize(lin, out.shape), out.shape,
                                             out.strides))

    def _eval_row(self, v, index=None):
        """Evaluate a row-space value (its index is implied by the current row; with a
        schedule, `index` is its coordinates there)."""
        o = self.defining.get(v)
        if o is not None and o.operation.name in _REDUCTIONS:
            return self.row_vals[v]
        if index is not None:
            return self._eval(v, index)
        # Use any index of the value's shape that maps to this row: walk views generically
        # by evaluating at an index built from the outer loop variables.
        shp = _shape(v)
        kept = [self.S[d] for d in self.outer_dims]
        lin = row_major_linear([self.outer_idx[d] for d in self.outer_dims], kept)
        return self._eval(v, self.em.delinearize(lin, shp))

    def _domain_to_output_index(self, i, idx):
        """The index of output i (same element count as the domain S, maybe another
        shape) at domain index idx: row-major linearize, then split by its shape."""
        if self.sched is not None:
            return self._result_index(i)
        shp = _shape(self.yielded[i])
        if shp == self.S:
            return idx
        lin = row_major_linear(idx, self.S)
        return self.em.delinearize(lin, shp)


def _vred(kind, comp, unsigned):
    fl = comp.startswith("f")
    if kind == "reduce_sum":
        return "add"
    if kind == "reduce_prod":
        return "mul"
    if kind == "reduce_max":
        return "maximumf" if fl else ("maxui" if unsigned or comp == "i1" else "maxsi")
    return "minimumf" if fl else ("minui" if unsigned or comp == "i1" else "minsi")


def _arg_best_value(em, kind, dt, x, best):
    """The best value after x: only the comparisons read it (the result is the index).
    It is a max / min (maximumf / minimumf for floats: NaN-propagating, so NaN stays
    best as in _arg_better; +0 and -0 compare equal; for integers and bools the
    signedness _arg_better compares with), not a select on `better`: unrolled, a chain
    of selects whose conditions compare the previous select takes LLVM's O3 exponential
    time (an argmin over [24, 1] or [32, 1] never finished compiling; 3x per row from
    13 rows, floats and bools alike)."""
    if dt.comp.startswith("f"):
        op = "maximumf" if kind == "argmax" else "minimumf"
    else:
        u = "u" if dt.unsigned or dt.is_bool else "s"
        op = f"max{u}i" if kind == "argmax" else f"min{u}i"
    return em.op(f"arith.{op} {best}, {x} : {dt.comp}", dt.comp)


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

