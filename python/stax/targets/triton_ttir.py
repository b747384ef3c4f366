"""GPU target, part 1: one `stax_graph.kernel` -> Triton IR (TTIR, the `tt` dialect) as text.

The analysis follows the CPU target (`llvm.py`): a kernel is either pointwise (every
non-view op has the domain shape) or a reduction kernel (every reduction reduces a
tensor of shape S over dims D; values live in "full" space S or "row" space). Values
are computed by evaluating the yielded SSA values at an index map over the block's
index values; views (broadcast_in_dim, permute, slice, reshape) compose the kernel
schedule's view maps onto it, never copy, and loads and stores use the schedule's
linear offsets (`passes/kernel_schedule.py`, checked against the kernel's schedule).

Block shapes:
* pointwise: 1-D blocks of BLOCK elements over the output's linear index
  (`offs = pid * BLOCK + make_range`), masked by `offs < numel`; each output is
  delinearized by its own (constant) dims and stored at its own strides.
* tiled pointwise (the schedule's `tiling.gpu.mode = "tiled"`, a transposed read): 2-D
  blocks [BP, BQ] over the domain dims (p, q) of the schedule's tile: index `ip = tp * BP
  + range` ([BP, 1]) along p, `iq = tq * BQ + range` ([1, BQ]) along q, every other dim
  one scalar per program; the program id is (tq, tp, the other dims) row-major; the mask
  is `ip < P and iq < Q`. Offsets are the schedule's sums of index * stride (no div/mod
  unless a map has one), so each load is contiguous along its own axis and Triton's
  coalescing converts layouts between them.
* reduction: 2-D blocks [XBLOCK rows, RBLOCK reduced elements]. Row index
  `r = pid * XBLOCK + range` ([XBLOCK, 1]), reduced index `k` ([1, RBLOCK]);
  the kept dims are delinearized from r and the reduced dims from k.
  - persistent (RBLOCK >= reduced size): one block holds whole rows; every phase and
    the outputs reuse the values held in registers (loads happen once).
  - looped: each phase is an scf.for over RBLOCK chunks with an [XBLOCK, RBLOCK]
    accumulator, reduced with tt.reduce after the loop; a last loop writes the
    full-space outputs (re-reading the inputs).
  Row values (1/sum, rstd, ...) are computed once per row block, outside the loops.

Numerics: bf16/f16/fp8 are computed in f32 (extf / tt.fp_to_fp after the load) and
rounded once: at the store (truncf, or tt.fp_to_fp rounding = rtne), a stored value's
uses inside the kernel see the same rounded value (`_round_if_stored`), and explicit
`stax.convert`s round where the graph says so. Division and sqrt are IEEE
(tt.precise_divf / tt.precise_sqrt); exp/log/erf/rsqrt use the math dialect;
tanh/expm1/log1p/trunc/round/pow/atan2 call libdevice through tt.extern_elementwise
(Triton 3.6 rejects math.tanh & co. in TTIR and links libdevice itself).

Offsets are i32 unless a tensor (its storage extent) or the iteration space reaches
2^31 elements; then all index math is i64.

The code generator is split by job (each a flat module of `stax.targets`):
* `triton_configs`: KernelShape / analyze_kernel, TritonConfig, default and candidate
  configs, split heuristics (the tiling choice);
* `triton_dtypes`: element types (DT), constant literals, the fp8 overflow probe;
* `triton_emitter`: the SSA text emitter and block values (V);
* `triton_index`: index algebra, index maps and their emission, masks, pointers,
  offsets (the schedule's), loads and stores;
* `triton_reduction`: the phases of reduction kernels (persistent, looped, split);
* `triton_combine`: accumulators, combines and tt.reduce of each reduction kind;
* `triton_ops`: per-op evaluation (views, gather, concat, pad, compare, binary, unary);
* `triton_convert`: converts, bitcasts, rounding and fp8 encode / decode;
* this module: the driver (`_Lowering`, pointwise kernels, DCE, `emit_ttir`). The names
  other modules import from here (`emit_ttir`, `TTIRKernel`, `TritonConfig`,
  `KernelShape`, `analyze_kernel`, `default_config`, `candidate_configs`,
  `KernelLoweringError`) stay importable from it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from stax._mlir import ir
from stax.passes import kernel_schedule
from stax.targets.kernel_ir import REDUCTION_OPS as _REDUCTIONS
from stax.targets.kernel_ir import etype as _etype
from stax.targets.kernel_ir import extent as _extent
from stax.targets.kernel_ir import numel as _numel
from stax.targets.kernel_ir import shape as _shape
from stax.targets.kernel_ir import with_deep_stack
from stax.targets.lowering_errors import KernelLoweringError
from stax.targets.triton_combine import _CombineMixin
from stax.dialects.schedule import with_gpu_tiling
from stax.targets.triton_configs import (KernelShape, TritonConfig, analyze_kernel,
                                         candidate_configs, config_of, default_config,
                                         gpu_tiling_of, split_final_config)
from stax.targets.triton_convert import _ConvertMixin
from stax.targets.triton_dtypes import _dt
from stax.targets.triton_emitter import V, _Emitter
from stax.targets.triton_index import _Arg, _IndexMixin
from stax.targets.triton_ops import _OpsMixin
from stax.targets.triton_reduction import _ReductionMixin

__all__ = ["emit_ttir", "TTIRKernel", "TritonConfig", "default_config", "candidate_configs",
           "analyze_kernel", "KernelShape", "KernelLoweringError"]


# ----------------------------------------------------------------------------- result

@dataclass
class TTIRKernel:
    name: str
    text: str
    kind: str                       # "pointwise" | "reduction-persistent" | "reduction-looped"
    grid: tuple
    num_warps: int
    num_stages: int
    arg_dtypes: tuple               # element type of each pointer argument (inputs, outputs)
    config: TritonConfig = None
    aligned: tuple = ()
    # a split reduction: `stage2` finishes what this kernel starts; both take the
    # arguments (inputs, outputs, workspaces), one workspace (numel, element type) per
    # reduction, allocated by the launcher
    stage2: "TTIRKernel | None" = None
    workspace: tuple = ()

    @property
    def full_text(self):
        if self.stage2 is None:
            return self.text
        return self.text + f"// stage 2 of the split reduction: @{self.stage2.name}\n" + \
            self.stage2.text


# ----------------------------------------------------------------------------- lowering

class _Lowering(_IndexMixin, _ConvertMixin, _OpsMixin, _ReductionMixin, _CombineMixin):
    """One kernel's lowering: the state the mixins share (arguments, emitter, masks, row
    values, rounding maps) and the top level; each mixin is one job (see the modules)."""

    def __init__(self, kernel_op, in_strides, out_strides, name, config, aligned,
                 final_of_split=0):
        self.name = name
        self.kernel_op = kernel_op
        self.strides = (in_strides, out_strides)
        # > 0: this is the final kernel of a split reduction over that many parts
        self.final_of_split = final_of_split
        self.ws = []              # split reduction: one workspace _Arg per reduction
        self.stage2 = None
        block = kernel_op.regions[0].blocks[0]
        self.args = list(block.arguments)
        ops = list(block.operations)
        self.body = ops[:-1]
        self.yielded = list(ops[-1].operands)
        self.stored_vals = set(self.yielded)
        if len(in_strides) != len(self.args) or len(out_strides) != len(self.yielded):
            raise KernelLoweringError(
                f"kernel {name}: {len(self.args)} inputs / {len(self.yielded)} outputs but "
                f"{len(in_strides)} / {len(out_strides)} stride lists")
        for v in self.args + self.yielded:
            if not ir.RankedTensorType(v.type).has_static_shape:
                raise KernelLoweringError(f"kernel {name}: a dynamic shape ({v.type}); the "
                                          "Triton target needs static shapes (specialize first)")
        self.inputs = []
        for i, (a, st) in enumerate(zip(self.args, in_strides)):
            shp = _shape(a)
            self.inputs.append(_Arg(f"%in{i}", shp, list(st), _dt(_etype(a)), _extent(shp, st)))
        self.outputs = []
        for i, (v, st) in enumerate(zip(self.yielded, out_strides)):
            shp = _shape(v)
            self.outputs.append(_Arg(f"%out{i}", shp, list(st), _dt(_etype(v)), _extent(shp, st)))
        nargs = len(self.inputs) + len(self.outputs)
        self.aligned = tuple(aligned) if aligned is not None else (False,) * nargs
        if len(self.aligned) != nargs:
            raise KernelLoweringError(f"kernel {name}: aligned has {len(self.aligned)} entries, "
                                      f"expected {nargs}")
        self.arg_index = {a: i for i, a in enumerate(self.args)}
        self.reductions = [o for o in self.body if o.operation.name in _REDUCTIONS]
        self.defining = {}
        for o in self.body:
            for r in o.results:
                self.defining[r] = o
        self.shape_info = analyze_kernel(kernel_op)
        self.gpu = self._gpu_tiling(config) if not final_of_split else None
        # every launch decision comes from the schedule's tiling.gpu; a split's final
        # kernel takes the tile its caller derived from the schedule's split
        self.config = config if final_of_split else config_of(self.gpu)
        self.em = _Emitter()
        self.cond = ()            # extra load masks (concat / pad branches)
        self.mask_ctx = None      # pointwise: the numel whose mask is active
        self.row_vals = {}
        self.delin = {}
        self.check = None         # (base, domain map): offsets checked against the schedule
        self.rounded = {}
        self.raw = set()         # mem-typed SSA values that are bytes as loaded

    # --------------------------------------------------------------- top level
    def lower(self) -> TTIRKernel:
        return with_deep_stack(self.kernel_op, self._lower)

    def _lower(self) -> TTIRKernel:
        em = self.em
        if self.reductions:
            body_kind = self._emit_reduction()
        else:
            body_kind = self._emit_pointwise()
        cfg = self.config   # a tiled kernel's is its schedule's tile
        if body_kind == "reduction-split":
            nsplit = self.grid[1]
            final_cfg = split_final_config(self.shape_info.numel, nsplit)
            self.stage2 = _Lowering(self.kernel_op, *self.strides, self.name + "_final",
                                    final_cfg, self.aligned, final_of_split=nsplit).lower()
        params = []
        for a, al in zip(self.inputs + self.outputs, self.aligned):
            attr = " {tt.divisibility = 16 : i32}" if al else ""
            params.append(f"{a.name}: !tt.ptr<{a.dt.mem}>{attr}")
        for a in self.ws:   # fresh torch allocations: always 16-byte aligned
            params.append(f"{a.name}: !tt.ptr<{a.dt.mem}> {{tt.divisibility = 16 : i32}}")
        consts = [" " * 4 + f"{n} = {t}" for n, t in em.consts.values()]
        lines = ["module {", f"  tt.func public @{self.name}({', '.join(params)}) "
                 f"attributes {{noinline = false}} {{"]
        lines += consts + em.lines + ["    tt.return", "  }", "}"]
        text = _dce("\n".join(lines) + "\n")
        return TTIRKernel(self.name, text, body_kind, self.grid, cfg.num_warps, cfg.num_stages,
                          tuple(a.dt.mem for a in self.inputs + self.outputs), cfg, self.aligned,
                          self.stage2, tuple((a.extent, a.dt.mem) for a in self.ws))

    def _gpu_tiling(self, config):
        """The kernel's tiling.gpu: its schedule's, rewritten to `config` when one is given
        (an autotuner candidate: `with_gpu_tiling`, verified); for a kernel the analysis
        refuses, the analysis' default config (no loop order: each output's own)."""
        s = self._schedule()
        if s is None or s.gpu is None:
            cfg = config or default_config(self.shape_info)
            return gpu_tiling_of(self.shape_info, cfg)
        if config is None:
            return s.gpu
        try:
            return with_gpu_tiling(s, config).gpu
        except ValueError as e:
            raise KernelLoweringError(f"kernel {self.name}: config {config}: {e}") from None

    def _walk_order(self, out):
        """The order (outermost first) an output's 1-D block is delinearized in: the
        schedule's loop_order for an output of the domain's shape; the output's own
        storage order for another shape (a view result) or a schedule without one."""
        s = self._schedule()
        g = self.gpu
        if g is not None and g.loop_order and s is not None and \
                tuple(out.shape) == tuple(s.domain):
            return tuple(g.loop_order)
        return kernel_schedule.loop_order(out.shape, out.strides)

    # --------------------------------------------------------------- pointwise
    def _emit_pointwise(self):
        tile = self._tile()
        if tile is not None:
            return self._emit_pointwise_tiled(*tile)
        em = self.em
        B = self.config.block
        numels = [_numel(o.shape) for o in self.outputs]
        n = max(numels + [0])
        self._choose_index_type(n + B)
        self.grid = (max(1, -(-n // B)), 1, 1)
        self.masks = {}
        if n == 0:
            return "pointwise"
        it = self.it
        pid = self._program_id("x", "pid")
        base = em.op(f"arith.muli {pid}, {em.const(B, it)} : {it}", "i")
        rng = self._arange(B, "r")
        offs = em.op(f"arith.addi {em.mat(V(base, (), it), (B,))}, {rng} : tensor<{B}x{it}>", "offs")
        shape = (B,)
        for i, out in enumerate(self.outputs):
            numel = numels[i]
            lin = V(offs, shape, it, hi=numel)
            key = ("mask", numel)
            if key not in self.masks:
                self.masks[key] = V(em.op(f"arith.cmpi slt, {offs}, {em.const(numel, it, shape)} : "
                                          f"tensor<{B}x{it}>", "mask"), shape, "i1")
            self.masks[shape] = self.masks[key]
            self.mask_ctx = numel
            self.masks[()] = None
            # lanes walk the schedule's loop order (by default the output's storage
            # order): a channels-last or transposed output is stored coalesced
            order = self._walk_order(out)
            walked = self.delinearize(lin, [out.shape[d] for d in order])
            logical = [None] * len(order)
            for k, d in enumerate(order):
                logical[d] = walked[k]
            idx = self.ix_of(logical)
            self._check_domain(idx, out.shape, i)
            val = self._eval(self.yielded[i], idx)
            self._store(out, val, idx, shape)
        return "pointwise"


    # --------------------------------------------------------------- tiled pointwise
    def _tile(self):
        """((p, q), (BP, BQ), domain) when the kernel's schedule tiles it in 2-D, else None.
        Blocks and warps are the tiling.gpu's (the schedule's, or an autotuner
        candidate's rewrite of it)."""
        s = self._schedule()
        g = self.gpu
        if g is None or g.mode != "tiled":
            return None
        dom = tuple(s.domain)
        ident = str(ir.AffineMap.get_identity(len(dom)))
        if any(tuple(o.shape) != dom for o in self.outputs) or \
                any(r.map is None or str(r.map) != ident for r in s.results):
            raise KernelLoweringError(f"internal error: kernel {self.name}: its schedule tiles "
                                      "it in 2-D, but a result is not the domain's")
        g = self.gpu   # the schedule's tile, or an explicit config's (with_gpu_tiling)
        return tuple(g.tile_dims), tuple(g.tile_blocks), dom

    def _emit_pointwise_tiled(self, dims, blocks, dom):
        em = self.em
        (p, q), (bp, bq) = dims, blocks
        n = _numel(dom)
        self._choose_index_type(n + bp * bq)
        it = self.it
        # the program id walks the other dims in the schedule's loop order
        order = self.gpu.loop_order or tuple(range(len(dom)))
        others = [d for d in order if d not in dims]
        ntp, ntq = -(-dom[p] // bp), -(-dom[q] // bq)
        nprog = ntp * ntq * _numel([dom[d] for d in others])
        self.grid = (max(1, nprog), 1, 1)
        self.masks = {(): None}
        if n == 0:
            return "pointwise"

        def split(v, k):   # (v mod k, v div k)
            return (self.ix_const(0), v) if k == 1 else (self.ix_rem(v, k), self.ix_div(v, k))

        pid = V(self._program_id("x", "pid"), (), it, hi=nprog)
        tq, rest = split(pid, ntq)
        tp, rest = split(rest, ntp)
        idx = [None] * len(dom)
        for d, i in zip(others, self.delinearize(rest, [dom[d] for d in others])):
            idx[d] = i
        for d, b, axis, shape in ((p, bp, 1, (bp, 1)), (q, bq, 0, (1, bq))):
            tile = tp if d == p else tq
            start = self.ix_mul(tile, b)
            rng = self._arange(b, "r", axis=axis)
            i = rng if start.is_const and start.cval == 0 else em.op(
                f"arith.addi {em.mat(start, shape)}, {rng} : {em.ty(shape, it)}", "i")
            idx[d] = V(i, shape, it, hi=dom[d])
            self.masks[shape] = V(em.op(f"arith.cmpi slt, {i}, {em.const(dom[d], it, shape)} : "
                                        f"{em.ty(shape, it)}", "mask"), shape, "i1")
        full = (bp, bq)
        self.masks[full] = V(self._and(self.masks[(bp, 1)], self.masks[(1, bq)], full),
                             full, "i1")
        self.mask_ctx = ("tile", n)
        ix = self.ix_of(idx)
        for i, out in enumerate(self.outputs):
            self._check_domain(ix, out.shape, i)
            val = self._eval(self.yielded[i], ix)
            self._store(out, val, ix, full)
        return "pointwise"


# ----------------------------------------------------------------------------- cleanup

_DEF = re.compile(r"^\s*(%[\w]+)(?::\d+)? = (.*)$")
_SIDE_EFFECTS = ("tt.store", "scf.for", "\"tt.reduce\"", "scf.if")


def _dce(text: str) -> str:
    """Drop single-line pure definitions whose result is never used (to a fixpoint)."""
    lines = text.split("\n")
    while True:
        uses = {}
        for ln in lines:
            for m in re.finditer(r"%[\w]+", ln):
                uses[m.group(0)] = uses.get(m.group(0), 0) + 1
        keep, dropped = [], False
        for ln in lines:
            m = _DEF.match(ln)
            if m and uses.get(m.group(1), 0) == 1 and not ln.rstrip().endswith("{") and \
                    not any(m.group(2).startswith(s) for s in _SIDE_EFFECTS):
                dropped = True
                continue
            keep.append(ln)
        lines = keep
        if not dropped:
            return "\n".join(lines)


# ----------------------------------------------------------------------------- entry point

def emit_ttir(kernel_op, input_strides, output_strides, name="kernel",
              config: TritonConfig | None = None, aligned=None) -> TTIRKernel:
    """The kernel as TTIR text: `tt.func public @name(in0.., out0..)`, one !tt.ptr per
    input then per output. `aligned[i]` puts `tt.divisibility = 16` on pointer i (a
    promise: the caller must only launch with 16-byte aligned pointers there)."""
    op = kernel_op.operation if hasattr(kernel_op, "operation") else kernel_op
    with op.context:
        return _Lowering(op, input_strides, output_strides, name, config, aligned).lower()
