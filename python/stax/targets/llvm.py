"""CPU target: one `stax.kernel` -> scf/vector/memref MLIR -> LLVM dialect -> native code.

How a kernel is lowered:

* Every kernel operand and result is passed as a flat 1-D memref over its storage
  (bare-pointer calling convention), and element addresses are computed from the
  strides the driver says the tensor has. Views inside the kernel (broadcast, reshape,
  permute, slice) are index arithmetic, never copies.
* Values are computed by evaluating the yielded SSA values at an index: each op knows
  how to compute its value at a multi-index from its operands at (transformed)
  indices. The loops run over the kernel schedule's domain (passes/kernel_schedule.py,
  read from the kernel's stax.schedule attribute when it was computed for these
  strides): an index is a tuple of AffineExprs over the domain dims, a view composes
  the analysis' own view map, and a load or store uses its read's or result's offset
  from the schedule, walked into an Aff over the loop variables (cpu_index). Kernels
  the schedule does not address yet (`_addressing_schedule`) keep cpu_index's algebra.
* The loops follow the schedule's `tiling.cpu` (passes/cpu_tiling.py decides it): the
  mode, the lanes (16, or 1 in mode "scalar" where an index is not affine per lane),
  the loop order, the tail and the loop threads split; the generator decides none of
  them (a kernel the analysis refuses, with no schedule, still tries 16 lanes then 1).
  The innermost loop is vectorized: a load whose address moves by 1 per lane is a
  vector load, by 0 a scalar broadcast, otherwise a gather of scalars, except in mode
  "tiled", where a transposed read is loaded along its own stride-1 dim and transposed
  in registers (`_emit_tiled_kernel`).
* Reduction kernels loop over rows (the kept dims). Per row, reductions run in
  dependency order ("phases", sharing one loop when independent) with vector
  accumulators, per-row values (1/sum, rstd) are computed once per row, then the
  full-row outputs are written. So softmax/layernorm are one loop nest.
* bf16/f16 are computed in f32 and rounded once when stored (and where the graph
  converts explicitly); a stored value's uses inside the kernel see the same rounded
  value (`_round_if_stored`); exp/log/tanh/erf/sigmoid use our own vectorizable polynomial
  forms (cpu_math.py).

The lowering is split by job: cpu_dtypes (element types), cpu_index (the affine index
algebra), cpu_emitter (the SSA text emitter), cpu_reduction (reduction phases: analysis
and emission), cpu_tiled (mode "tiled": the 2-D tile and its transposed loads), cpu_ops
(per-op evaluation), cpu_math (the polynomials), cpu_errors.
This module is the driver: the kernel's operands, its loop nests, value evaluation,
loads and stores, and the JIT compile; it re-exports the names callers read here.
"""
from dataclasses import dataclass

from stax._mlir import ExecutionEngine, PassManager, ir
from stax.dialects.schedule import (dims_used, has_schedule, merged_extent, read_schedule,
                                    split_candidates, split_loop)
# the one shared index analysis (not a pass): used when the kernel has no schedule for
# these strides, and to compose an index through a view
from stax.passes import cpu_tiling, kernel_schedule
from stax.targets.cpu_dtypes import DType, dtype_of, with_libcall_helpers
from stax.targets.cpu_emitter import Emitter, Val
from stax.targets.cpu_errors import KernelLoweringError, NeedScalar
from stax.targets.cpu_index import Aff, Var, strided_offset
from stax.targets.cpu_ops import OpsMixin
from stax.targets.cpu_reduction import ReductionMixin
from stax.targets.cpu_tiled import TiledMixin
from stax.targets.kernel_ir import ROUNDED_RESULT_OPS
from stax.targets.kernel_ir import REDUCTION_OPS as _REDUCTIONS
from stax.targets.kernel_ir import etype as _etype
from stax.targets.kernel_ir import extent as _extent
from stax.targets.kernel_ir import numel as _numel
from stax.targets.kernel_ir import shape as _shape
from stax.targets.kernel_ir import with_deep_stack
# the kernel object and its launch are runtime code (a loaded artifact needs them)
from stax.runtime import cpu_kernel as _cpu_kernel
from stax.runtime.cpu_kernel import CpuKernel

PARALLEL_MIN_ELEMENTS = _cpu_kernel.PARALLEL_MIN_ELEMENTS   # the names tests and tools read here
cpu_parallelism = _cpu_kernel.cpu_parallelism
_worker_pool = _cpu_kernel._worker_pool

VECTOR_WIDTH = cpu_tiling.VECTOR_WIDTH   # the tiling pass chooses the lanes

__all__ = ["compile_kernel", "CpuKernel", "KernelLoweringError", "lower_kernel_to_mlir"]


@dataclass
class _Arg:
    """A kernel operand or result: a flat 1-D memref over its storage, with the strides
    the driver says the tensor has."""
    name: str        # memref SSA name
    shape: list
    strides: list
    dtype: DType
    extent: int      # elements of the flat memref

    @property
    def memref(self):
        return f"memref<{max(self.extent, 1)}x{self.dtype.mem}>"


class _KernelLowering(TiledMixin, ReductionMixin, OpsMixin):
    """One stax.kernel lowered to one func.func: operands, loop nests, evaluation at an
    index, loads and stores here; reductions (ReductionMixin) and per-op values
    (OpsMixin) in their modules."""

    tiling = None   # the schedule's tiling.cpu (set by lower)
    tile_row = None  # in a tiled kernel's tile: (row i, the tile's p loop variable)
    on_domain = True   # the loops being emitted run over the schedule's domain

    def __init__(self, kernel_op, in_strides, out_strides, name):
        self.op = kernel_op
        self.name = name
        block = kernel_op.regions[0].blocks[0]
        self.block = block
        self.args = list(block.arguments)
        ops = list(block.operations)
        self.body = ops[:-1]
        self.yielded = list(ops[-1].operands)
        self.stored_vals = set(self.yielded)
        self.inputs = []
        for i, (a, st) in enumerate(zip(self.args, in_strides)):
            shp = _shape(a)
            self.inputs.append(_Arg(f"%in{i}", shp, list(st), dtype_of(_etype(a)), _extent(shp, st)))
        self.in_strides = [list(st) for st in in_strides]
        self.out_strides = [list(st) for st in out_strides]
        self.outputs = []
        for i, (v, st) in enumerate(zip(self.yielded, out_strides)):
            shp = _shape(v)
            self.outputs.append(_Arg(f"%out{i}", shp, list(st), dtype_of(_etype(v)), _extent(shp, st)))
        self.arg_index = {a: i for i, a in enumerate(self.args)}
        self.reductions = [o for o in self.body if o.operation.name in _REDUCTIONS]
        self.defining = {}
        for o in self.body:
            for r in o.results:
                self.defining[r] = o

    # --------------------------------------------------------------- top level
    def lower(self) -> str:
        with self.op.context:
            full = self._full_schedule()
            # the loops' decisions (lanes, mode, order, tail, thread split): the schedule's
            # tiling.cpu (passes/cpu_tiling.py); None only for a kernel the analysis refuses
            self.tiling = full.cpu if full is not None else None
            self.full_sched = full
            self.sched = self._addressing_schedule(full)
            return with_deep_stack(self.op, self._lower_any_width)

    # --------------------------------------------------------------- the schedule
    def _schedule(self):
        """The kernel's schedule for these strides: its stax.schedule attribute when that
        was computed for them, else the one shared analysis."""
        if has_schedule(self.op):
            s = read_schedule(self.op)
            if [list(x) for x in s.input_strides] == self.in_strides and \
                    [list(x) for x in s.output_strides] == self.out_strides:
                return s
        return kernel_schedule.analyze(self.op, self.in_strides, self.out_strides)

    def _full_schedule(self):
        """The kernel's schedule for these strides, or None where the analysis refuses it."""
        try:
            return self._schedule()
        except kernel_schedule.ScheduleError:
            return None

    def _addressing_schedule(self, s):
        """The schedule the kernel's loads and stores are addressed from, or None for a
        kernel still indexed by cpu_index's algebra: a gather (its read is
        data-dependent), a kernel the analysis cannot describe, or one with a computed
        read or result or a full-space result not written at its own domain point (a
        pointwise kernel then loops over each result's shape)."""
        if s is None or any(o.operation.name == "stax.gather" for o in self.body):
            return None
        identity = [str(ir.AffineDimExpr.get(d)) for d in range(len(s.domain))]
        if any(r.computed for r in s.reads) or any(
                r.computed or r.space == "full" and (
                    tuple(_shape(v)) != s.domain or [str(e) for e in r.map.results] != identity)
                for v, r in zip(self.yielded, s.results)):
            return None
        return s

    def _at_domain(self, idx):
        """The index the body is evaluated at for loop index `idx`: with a schedule, the
        domain point itself (maps over the domain dims, whose loop variables are `idx`)."""
        if self.sched is None:
            return idx
        # a size-1 dim's variable is 0 (the schedule's offset may still name it)
        self.dims = [Aff() if n == 1 else a for a, n in zip(idx, self.sched.domain)]
        return tuple(ir.AffineDimExpr.get(d) for d in range(len(idx)))

    def _result_index(self, i):
        """Result i's coordinates at the current domain point (its schedule map)."""
        return tuple(self.sched.results[i].map.results)

    def _index_aff(self, e) -> Aff:
        """One coordinate of an index as an Aff over the loop variables."""
        return self.em.from_affine(e, self.dims) if self.sched is not None else e

    def _shift(self, e, k):
        """Coordinate `e` plus the constant `k`."""
        return e + (ir.AffineConstantExpr.get(k) if self.sched is not None else Aff(k))

    def _view_index(self, o, idx):
        """The index of view `o`'s operand for its result's index `idx`: with a schedule,
        the view's map composed (the analysis' own), else cpu_index's algebra."""
        if self.sched is not None:
            return tuple(kernel_schedule.compose(kernel_schedule.view_map(o.operation), idx,
                                                 len(self.sched.domain)))
        return self._view_index_aff(o, idx)

    def _input_offset(self, i, idx) -> Aff:
        """The element offset of kernel input i read at `idx`: with a schedule, its read's
        offset (the read whose map is `idx`; its offset must be the strides applied)."""
        arg = self.inputs[i]
        if self.sched is None:
            return strided_offset(idx, arg.shape, arg.strides)
        S = list(self.sched.domain)
        index = [str(kernel_schedule.simplify(e, S)) for e in idx]
        # a size-1 dim adds nothing, whatever its stride
        off = kernel_schedule.simplify(kernel_schedule.linear_offset(
            [ir.AffineConstantExpr.get(0) if n == 1 else kernel_schedule.simplify(e, S)
             for e, n in zip(idx, arg.shape)], arg.strides), S)
        reads = [r for r in self.sched.reads_of(i) if r.map is not None]
        for r in reads:
            if [str(e) for e in r.map.results] == index:
                if str(r.offset.results[0]) != str(off):
                    raise KernelLoweringError(
                        f"internal error: kernel {self.name} input {i} read at ({index}): the "
                        f"schedule's offset {r.offset} is not the strides' {off}")
                return self.em.from_affine(r.offset.results[0], self.dims)
        # No read has this map as written, e.g. a size-1 dim the generator's index holds
        # as 0 and the schedule's map as its dim (`d1 + d2` over a domain whose d2 has
        # size 1): the same address, with the unit dims at 0, is the same read.
        want = str(kernel_schedule.simplify(kernel_schedule.without_unit_dims(off, S), S))
        for r in reads:
            got = kernel_schedule.without_unit_dims(r.offset.results[0], S)
            if str(kernel_schedule.simplify(got, S)) == want:
                return self.em.from_affine(off, self.dims)
        raise KernelLoweringError(f"internal error: kernel {self.name} reads input {i} at "
                                  f"({', '.join(index)}) (offset {off}), which its schedule "
                                  "has no read for")

    def _result_offset(self, i, idx) -> Aff:
        """The element offset result i is written at for index `idx` (with a schedule, the
        domain point: the result's offset)."""
        out = self.outputs[i]
        if self.sched is None:
            return strided_offset(idx, out.shape, out.strides)
        return self.em.from_affine(self.sched.results[i].offset.results[0], self.dims)

    def _lower_any_width(self) -> str:
        tiling = self.tiling
        if tiling is not None:  # the schedule's lanes: 1 in mode "scalar"
            try:
                return self._lower(tiling.vector_width)
            except NeedScalar:
                raise KernelLoweringError(
                    f"internal error: kernel {self.name}: the schedule's tiling.cpu gives "
                    f"{tiling.vector_width} lanes along dim {tiling.vector_dim}, but an "
                    "index is not affine per lane there (passes/cpu_tiling.one_lane_reason "
                    "missed it)") from None
        # no schedule (the analysis refuses the kernel; the runtime-size generator): try
        # the vector width, and 1 lane where an index is not affine per lane
        try:
            return self._lower(VECTOR_WIDTH)
        except NeedScalar:
            return self._lower(1)

    def _tail(self, n, W) -> bool:
        """Does a loop over the vector dim's n elements, W lanes wide, need a 1-lane loop
        after its last full vector? The schedule's `tail` says so; without one, n % W."""
        main = (n // W) * W if W > 1 else 0
        tiling = self.tiling
        if tiling is None or not self.on_domain:
            return main < n
        tail = tiling.tail == "scalar"
        if tail != (main < n):
            raise KernelLoweringError(
                f"internal error: kernel {self.name}: tiling.cpu.tail = \"{tiling.tail}\" "
                f"but the vector loop over {n} elements in steps of {W} ends at {main}")
        return tail

    def _lower(self, width):
        self.em = em = Emitter(width, self.name)
        self.dims = None   # with a schedule: the Aff of each domain dim, in the loop body
        self.row_vals = {}
        self.stash = None
        self.stash_active = False
        # threads split the outermost loop where the schedule gives a split dim
        self.splittable = self.tiling is None or self.tiling.split_dim >= 0
        params = ", ".join(f"{a.name}: {a.memref}" for a in self.inputs + self.outputs)
        params += ", %part: index, %nparts: index"
        if any(a.extent == 0 for a in self.outputs):
            body_lines = []
        elif self.reductions:
            self._emit_reduction_kernel()
            body_lines = em.lines
        elif self.tiling is not None and self.tiling.mode == "tiled":
            self._emit_tiled_kernel()
            body_lines = em.lines
        else:
            self._emit_pointwise_kernel()
            body_lines = em.lines
        consts = ["    " + f"{n} = {t}" for n, t in em.consts.values()]
        text = [f"func.func @{self.name}({params}) attributes {{llvm.emit_c_interface}} {{"]
        text += consts + body_lines + ["    return", "  }"]
        return em.module_text(text)

    # --------------------------------------------------------------- loops
    def _part_range(self, n, align):
        """[lo, hi) of the outermost loop over n for this call's part (Emitter.part_range)."""
        return self.em.part_range(self.em.const(n, "index"), align)

    def _loop_nest(self, shape, body, vectorize=True):
        """for idx in shape: body(idx), innermost dim vectorized; tail in 1 lane.
        The outermost loop of more than one iteration (schedule.split_loop) covers only
        this call's part (see _part_range)."""
        em = self.em
        idx = []
        opened = 0
        top = self.em.indent == 2  # only top-level nests are split across threads
        if not shape and top and self.tiling is None:
            self.splittable = False
        W = em.W if vectorize else 1
        split = split_loop(split_candidates(shape, W)) if top else -1
        for d, n in enumerate(shape[:-1] if shape else []):
            iv = em.fresh()
            lo, hi = (self._part_range(n, 1) if d == split
                      else (em.const(0, 'index'), em.const(n, 'index')))
            em.emit(f"scf.for {iv} = {lo} to {hi} "
                    f"step {em.const(1, 'index')} {{")
            em.push()
            opened += 1
            em.vars[iv] = Var(iv, n)
            idx.append(Aff.var(iv))
        if not shape:
            body([])
        else:
            n = shape[-1]
            if split == len(shape) - 1:
                self._split_vector_loop(n, W, idx, body)
                for _ in range(opened):
                    em.pop()
                    em.emit("}")
                return
            main = (n // W) * W if W > 1 else 0
            if main:
                self._lane_loop(em.const(0, 'index'), em.const(main, 'index'), W, main, idx, body)
            if self._tail(n, W):
                self._tail_loop(em.const(main, 'index'), em.const(n, 'index'), n, idx, body)
        for _ in range(opened):
            em.pop()
            em.emit("}")

    def _split_vector_loop(self, n, W, idx, body):
        """A rank-1 nest: this part's [lo, hi) in W-wide steps, then a 1-lane tail."""
        lo, hi = self._part_range(n, W)
        self._split_lanes(lo, hi, W, n, idx, body)

    def _split_lanes(self, lo, hi, W, n, idx, body):
        """[lo, hi) (SSA index values) in W-wide steps, then a 1-lane tail; n bounds the
        index."""
        em = self.em
        if W > 1:
            mid = em.vector_end(lo, hi, W)
            self._lane_loop(lo, mid, W, n, idx, body)
        else:
            mid = lo
        self._tail_loop(mid, hi, n, idx, body)

    def _lane_loop(self, lo, hi, W, n, idx, body):
        """scf.for over [lo, hi) in W-lane steps (the vector body); n bounds the index."""
        em = self.em
        iv = em.fresh()
        em.emit(f"scf.for {iv} = {lo} to {hi} step {em.const(W, 'index')} {{")
        em.push()
        em.vars[iv] = Var(iv, n, lane=True)
        em.lane_var = iv
        body(idx + [Aff.var(iv)])
        em.lane_var = None
        em.pop()
        em.emit("}")

    def _tail_loop(self, lo, hi, n, idx, body):
        """scf.for over [lo, hi) one element at a time (the vector loop's tail)."""
        em = self.em
        saved_w = em.W
        em.W = 1
        iv = em.fresh()
        em.emit(f"scf.for {iv} = {lo} to {hi} step {em.const(1, 'index')} {{")
        em.push()
        em.vars[iv] = Var(iv, n)
        body(idx + [Aff.var(iv)])
        em.pop()
        em.emit("}")
        em.W = saved_w

    def _plain_loops(self, shape, body):
        """Step-1 loops over `shape` that keep the current lane setting."""
        em = self.em
        idx = []
        for n in shape:
            iv = em.fresh()
            em.emit(f"scf.for {iv} = {em.const(0, 'index')} to {em.const(n, 'index')} "
                    f"step {em.const(1, 'index')} {{")
            em.push()
            em.vars[iv] = Var(iv, n)
            idx.append(Aff.var(iv))
        body(idx)
        for _ in shape:
            em.pop()
            em.emit("}")

    # --------------------------------------------------------------- pointwise
    def _emit_pointwise_kernel(self):
        groups = {}
        for i, v in enumerate(self.yielded):
            groups.setdefault(tuple(_shape(v)), []).append(i)
        for shape, outs in groups.items():
            # the loops walk the schedule's loop order (the first output's storage order:
            # a channels-last or transposed output is written, and mostly read, along
            # its stride-1 dim); results of another shape than the domain (a kernel
            # addressed by cpu_index) walk their own output's order
            self.on_domain = self.tiling is not None and shape == tuple(self._domain_shape())
            if self.on_domain:
                order = self.tiling.loop_order
            else:
                order = kernel_schedule.loop_order(shape, self.outputs[outs[0]].strides)

            # the innermost `merged` loops walked as one (tiling.cpu.merged): every access
            # is addressed by the vector dim's stride alone, the group's other dims at 0
            cut = len(order) - (self.tiling.merged if self.on_domain else 1)
            outer, group = order[:cut], order[cut:]
            # the run's variable goes to the group's innermost dim of more than one
            # element (a size-1 dim's variable is 0: _at_domain), whose stride is the
            # vector dim's (cpu_tiling._merged_loops: the dims inside it hold one element)
            run_dim = next((d for d in reversed(group) if shape[d] > 1),
                           group[-1] if group else None)

            def body(loop_idx, outs=outs, outer=outer, run_dim=run_dim):
                idx = [Aff()] * len(shape)
                for k, d in enumerate(outer):
                    idx[d] = loop_idx[k]
                if run_dim is not None:   # (none in a rank-0 kernel)
                    idx[run_dim] = loop_idx[-1]
                point = self._at_domain(idx)
                for i in outs:
                    self._store(i, self._eval(self.yielded[i], point), point)
            run = [merged_extent(self.tiling, shape)] if cut < len(order) - 1 else \
                [shape[d] for d in group]   # (one loop, or none at rank 0)
            self._loop_nest([shape[d] for d in outer] + run, body)

    def _domain_shape(self):
        """The schedule's domain (the tiling's loops run over it)."""
        return self.full_sched.domain

    def _eval(self, v, idx) -> Val:
        em = self.em
        key = (v, tuple(idx), em.W, em.lane_var)
        if self.sched is not None:  # the loop variables the domain dims of idx stand for
            key += tuple(self.dims[d] for d in sorted(set().union(*map(dims_used, idx))))
        got = em.lookup(key)
        if got is not None:
            return got
        if v in self.row_vals:
            res = self._round_if_stored(v, self.row_vals[v])
            em.remember(key, res)
            return res
        if self.stash_active and v == self.stash[0]:
            res = self._load(self.outputs[self.stash[1]], self._result_offset(self.stash[1], idx))
            em.remember(key, res)
            return res
        if v in self.arg_index:
            i = self.arg_index[v]
            res = self._load(self.inputs[i], self._input_offset(i, idx))
        else:
            o = self.defining[v]
            res = self._eval_op(o, v, idx)
            if o.operation.name not in ROUNDED_RESULT_OPS:
                res = self._round_if_stored(v, res)
        em.remember(key, res)
        return res

    def _round_if_stored(self, v, res: Val) -> Val:
        """A bf16/f16 value the kernel stores, rounded for its uses inside the kernel too:
        one value, one precision (see triton_ttir._round_if_stored)."""
        dt = dtype_of(_etype(v))
        if v not in self.stored_vals or dt.mem == dt.comp or not dt.is_float or \
                dt.mem not in ("bf16", "f16"):
            return res
        em = self.em
        mty, cty = em.vt(dt.mem, res.vec), em.vt(dt.comp, res.vec)
        t = em.op(f"arith.truncf {res.ssa} : {cty} to {mty}", mty)
        return Val(em.op(f"arith.extf {t} : {mty} to {cty}", cty), res.vec, dt.comp)

    def _load(self, arg: _Arg, off: Aff) -> Val:
        """The element of `arg` at offset `off` (a vector load, a broadcast or a gather,
        by how `off` moves per lane)."""
        em = self.em
        c = em.lane_coeff(off)
        dt = arg.dtype
        mem = dt.mem
        if c == 0 or em.W == 1:
            base = em.index(off)
            x = em.op(f"memref.load {arg.name}[{base}] : {arg.memref}", mem)
            return self._from_mem(x, dt, False)
        vty = f"vector<{em.W}x{mem}>"
        if c == 1:
            base = em.index(off)
            x = em.op(f"vector.load {arg.name}[{base}] : {arg.memref}, {vty}", vty)
            return self._from_mem(x, dt, True)
        if self.tile_row is not None and off.coeff(self.tile_row[1]) == 1:
            return self._tile_load(arg, off, c)   # a transposed read in a 2-D tile
        # Strided across lanes: gather W scalars.
        base = em.index(off)
        elems = []
        for lane in range(em.W):
            a = base if lane == 0 else em.op(
                f"arith.addi {base}, {em.const(lane * c, 'index')} : index", "index")
            elems.append(em.op(f"memref.load {arg.name}[{a}] : {arg.memref}", mem))
        x = em.op(f"vector.from_elements {', '.join(elems)} : {vty}", vty)
        return self._from_mem(x, dt, True)

    def _from_mem(self, x, dt: DType, vec):
        em = self.em
        if dt.mem == dt.comp:
            return Val(x, vec, dt.comp)
        mty, cty = em.vt(dt.mem, vec), em.vt(dt.comp, vec)
        if dt.comp == "i1":
            return Val(em.op(f"arith.cmpi ne, {x}, {em.splat(0, mty)} : {mty}", cty), vec, "i1")
        return Val(em.op(f"arith.extf {x} : {mty} to {cty}", cty), vec, dt.comp)

    def _to_mem(self, val: Val, dt: DType):
        em = self.em
        ssa, vec = val.ssa, val.vec
        if dt.mem == dt.comp:
            return ssa
        mty, cty = em.vt(dt.mem, vec), em.vt(dt.comp, vec)
        if dt.comp == "i1":
            return em.op(f"arith.extui {ssa} : {cty} to {mty}", mty)
        return em.op(f"arith.truncf {ssa} : {cty} to {mty}", mty)

    def _store(self, i, val: Val, idx):
        self._write(self.outputs[i], val, self._result_offset(i, idx))

    def _write(self, out: _Arg, val: Val, off: Aff):
        em = self.em
        if val.comp != out.dtype.comp:  # a buffer holds only values of its own type
            raise KernelLoweringError(
                f"internal error: kernel {self.name} would store a {val.comp} value into "
                f"{out.name}, a buffer of {out.dtype.mem} (computed as {out.dtype.comp})")
        c = em.lane_coeff(off)
        if em.W > 1 and em.lane_var and (val.vec or c):
            v = self._to_mem(Val(em.to_vec(val), True, val.comp), out.dtype)
            vty = f"vector<{em.W}x{out.dtype.mem}>"
            base = em.index(off)
            if c == 1:
                em.emit(f"vector.store {v}, {out.name}[{base}] : {out.memref}, {vty}")
                return
            for lane in range(em.W):
                e = em.op(f"vector.extract {v}[{lane}] : {out.dtype.mem} from {vty}", out.dtype.mem)
                a = base if lane == 0 else em.op(
                    f"arith.addi {base}, {em.const(lane * c, 'index')} : index", "index")
                em.emit(f"memref.store {e}, {out.name}[{a}] : {out.memref}")
            return
        v = self._to_mem(val, out.dtype)
        em.emit(f"memref.store {v}, {out.name}[{em.index(off)}] : {out.memref}")


# ----------------------------------------------------------------------------- compile + run

_PIPELINE = ("builtin.module(func.func(arith-expand{include-bf16=true include-f8e8m0=false}),"
             "convert-vector-to-scf,convert-scf-to-cf,expand-strided-metadata,lower-affine,"
             # a tiled kernel's 16x16 vector.transpose as AVX-512 shuffles (other tiles:
             # element shuffles, whose ub.poison convert-ub-to-llvm lowers)
             "convert-vector-to-llvm{vector-transpose-lowering=shuffle16x16},convert-math-to-llvm,convert-arith-to-llvm,"
             "finalize-memref-to-llvm,convert-func-to-llvm{use-bare-ptr-memref-call-conv=1},"
             "convert-cf-to-llvm,convert-ub-to-llvm,reconcile-unrealized-casts)")


def lower_kernel_to_mlir(kernel_op, input_strides, output_strides, name="kernel") -> str:
    """The kernel as scf/vector/memref MLIR text (what gets JIT-compiled)."""
    from stax.targets import cpu_symbolic  # `?` dims: one kernel for every size
    if cpu_symbolic.has_runtime_sizes(kernel_op):
        return cpu_symbolic.lower_to_mlir(kernel_op, name, input_strides, output_strides)
    return _KernelLowering(kernel_op, input_strides, output_strides, name).lower()


def compile_kernel(kernel_op, input_strides, output_strides, name="kernel", ctx=None) -> CpuKernel:
    """Lower one stax.kernel for the CPU and JIT it.

    `input_strides[i]` / `output_strides[j]` are the element strides of the tensors
    that will be passed (the code is specialized for them). A kernel with `?` dims is
    compiled once for every size instead (cpu_symbolic: contiguous tensors, the sizes
    passed at each call)."""
    from stax.targets import cpu_symbolic
    if cpu_symbolic.has_runtime_sizes(kernel_op):
        return cpu_symbolic.compile_kernel(kernel_op, name, ctx, input_strides, output_strides)
    low = _KernelLowering(kernel_op, input_strides, output_strides, name)
    text = low.lower()
    width = low.em.W
    context = ctx or kernel_op.context
    with context, ir.Location.unknown():
        try:
            m = ir.Module.parse(with_libcall_helpers(text))
        except ir.MLIRError as e:
            raise KernelLoweringError(f"internal error: generated MLIR for {name} does not "
                                      f"parse: {e}\n{text}") from None
        PassManager.parse(_PIPELINE).run(m.operation)
        llvm_ir = None
        try:
            from torch_mlir.dialects.llvm import translate_module_to_llvmir
            llvm_ir = translate_module_to_llvmir(m.operation)
        except Exception:  # only for dumps
            llvm_ir = None
        engine = ExecutionEngine(m, opt_level=3)
    work = max([_numel(a.shape) for a in low.inputs + low.outputs] + [0])
    k = CpuKernel(name, text, llvm_ir, engine, len(low.inputs) + len(low.outputs), width,
                  low.splittable, work)
    k.llvm_dialect_module = m  # printed only when the kernel is saved (runtime.cpu_kernel.kernel_text)
    # how its loads and stores were addressed: from the kernel schedule, or (a gather, a
    # computed read or result) by cpu_index's own algebra; tests check the route
    k.addressing = "schedule" if low.sched is not None else "cpu_index"
    # the schedule's tiling.cpu its loops were emitted from (None: the analysis refused it)
    k.tiling = low.tiling
    return k
