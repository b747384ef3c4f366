"""Launch configurations of the Triton code generator: what a kernel's tiling depends on
(`KernelShape`, from `analyze_kernel`), the default `TritonConfig`, the autotuner's
candidates, the split-reduction heuristics and the tile of a split's final kernel.

The analysis (`passes/kernel_schedule`) records `default_gpu_tiling` as the schedule's
`tiling.gpu`, and the generator reads that back (`config_of`); the generator calls these
heuristics itself only for a kernel the analysis refuses. Guarantees: each
function is a pure function of the kernel's shapes and element types (no strides, no
emission); `candidate_configs(s)[0] == default_config(s)` and holds no duplicates; a
config only splits (split > 1) a kernel whose `KernelShape.splittable` is true.
"""
from __future__ import annotations

from dataclasses import dataclass

from stax.dialects.schedule import GpuTiling, gpu_mode
from stax.dialects.symbolic import dim_product
from stax.targets.kernel_ir import reduction_signature as _reduction_signature
from stax.targets.kernel_ir import REDUCTION_OPS as _REDUCTIONS
from stax.targets.kernel_ir import SIZE_VALUE_OPS
from stax.targets.kernel_ir import etype as _etype
from stax.targets.kernel_ir import numel as _numel
from stax.targets.kernel_ir import shape as _shape
from stax.targets.triton_dtypes import _dt

PERSISTENT_MAX = 4096          # reduced sizes up to this many elements stay in registers


@dataclass(frozen=True)
class TritonConfig:
    block: int        # pointwise: BLOCK; reduction: XBLOCK (rows per program)
    rblock: int       # reduction: RBLOCK (reduced elements per step); 1 for pointwise
    num_warps: int
    num_stages: int
    split: int = 1    # reduction: programs sharing one row block's reduced range (a
    #                   two-stage reduction: partials to a workspace, then a final kernel)


@dataclass(frozen=True)
class KernelShape:
    """What the config choice depends on."""
    kind: str                # "pointwise" | "reduction"
    numel: int               # pointwise: elements per output; reduction: rows
    rnumel: int = 1          # reduction: reduced elements per row
    inner_reduced: bool = True   # the innermost dim of S is reduced (rows contiguous)
    max_bytes: int = 4       # widest element size touched
    splittable: bool = False     # the reduced range may be split over programs


# A looped reduction with fewer row-block programs than this splits its reduced range
# (an H100/H200 has 132 SMs; 12 programs summing a bias gradient over 16384 rows leave
# the GPU idle), aiming at about SPLIT_TARGET programs in all.
SPLIT_BELOW = 128
SPLIT_TARGET = 264


def _p2(n):
    return 1 << max(0, (max(1, n) - 1).bit_length())


def default_config(shape: KernelShape) -> TritonConfig:
    if shape.kind == "pointwise":
        block = min(1024, max(128, _p2(shape.numel)))
        return TritonConfig(block, 1, 4 if block >= 512 else 2, 1)
    R = _p2(shape.rnumel)
    if not shape.inner_reduced and R > COLUMN_PERSISTENT_MAX:
        return _column_config(shape)
    if R <= PERSISTENT_MAX:
        if not shape.inner_reduced:   # column reduction: many neighbouring rows per block
            xb = max(1, min(_p2(shape.numel), max(1, 4096 // R), 64))
        elif R >= 512:
            # one row per program: measured on the H200 (softmax over [262144, 1024] f32,
            # benchmarks/results/gpu-h200-verify.jsonl) 1x1024 w4 takes 0.51 ms, 2x1024 w4
            # 0.63 ms; rows of 512: 1x512 w4 0.51 ms, 4x512 w4 0.70 ms
            xb = 1
        else:
            xb = max(1, min(_p2(shape.numel), max(1, 2048 // R)))
        total = xb * R
        warps = 8 if total >= 4096 and R >= 2048 else (4 if total >= 512 else 2)
        return TritonConfig(xb, R, warps, 1)
    rb = 2048 if shape.inner_reduced else 64
    xb = 1 if shape.inner_reduced else 64
    return TritonConfig(xb, rb, 8 if shape.inner_reduced else 4, 1,
                        _default_split(shape, xb, rb))


# A column reduction (the reduced dims are not innermost: a bias gradient) over more than
# this many rows loops over [COLUMN_XBLOCK kept, 64 reduced] tiles and splits its reduced
# range into parts of about COLUMN_PART rows, aiming at COLUMN_PROGRAMS programs. Measured
# on the H200 (GELU backward + bias gradient over [16384, 3072] bf16, the GPT-2 training
# step's k2, max-autotune's descent): 64x64 split 6 0.306 ms, 64x64 split 24 0.217 ms,
# 16x64 w8 split 24 0.119 ms, 16x64 w8 split 48 0.115 ms. A persistent column tile of
# one kept element per program (the old rule for 4096 rows) reads one element per row.
COLUMN_PERSISTENT_MAX = 256
COLUMN_XBLOCK = 16
COLUMN_PART = 512
COLUMN_PROGRAMS = 8192


def _column_config(shape: KernelShape) -> TritonConfig:
    xb = min(COLUMN_XBLOCK, _p2(shape.numel))
    programs = -(-shape.numel // xb)
    split = 1
    if shape.splittable:
        split = max(1, min(shape.rnumel // COLUMN_PART, -(-COLUMN_PROGRAMS // programs)))
    return TritonConfig(xb, 64, 8, 1, split)


def _default_split(shape: KernelShape, xb, rb) -> int:
    programs = -(-shape.numel // xb)
    if not shape.splittable or programs >= SPLIT_BELOW or shape.rnumel < 4 * rb:
        return 1
    return max(1, min(-(-SPLIT_TARGET // programs), shape.rnumel // (2 * rb)))


def candidate_configs(shape: KernelShape) -> list[TritonConfig]:
    """A small search space around the default (the default is always first)."""
    out = [default_config(shape)]

    def add(c):
        if c not in out:
            out.append(c)

    if shape.kind == "pointwise":
        top = max(128, _p2(shape.numel))
        for b in (256, 512, 1024, 2048, 4096):
            if b > top:
                continue
            for w in (2, 4, 8):
                if b // (32 * w) >= 1:
                    add(TritonConfig(b, 1, w, 1))
        return out
    R = _p2(shape.rnumel)
    rows = _p2(shape.numel)
    if R <= PERSISTENT_MAX:
        for xb in (1, 2, 4, 8, 16, 32, 64):
            if xb > rows or xb * R > 16384:
                continue
            for w in (2, 4, 8, 16):
                if w * 32 <= xb * R:
                    add(TritonConfig(xb, R, w, 1))
    for rb in (512, 1024, 2048, 4096):
        if rb >= R:
            continue
        for xb in (1, 2, 4):
            if xb > rows:
                continue
            for w in (4, 8):
                for st in (1, 2):
                    add(TritonConfig(xb, rb, w, st))
    d = out[0]
    if d.split > 1:   # the split factor and the tile of a split reduction
        for sp in (d.split // 2, d.split * 2, d.split * 4):
            if sp > 1:
                add(TritonConfig(d.block, d.rblock, d.num_warps, d.num_stages, sp))
        for xb, rb in ((d.block, d.rblock * 2), (d.block * 2, d.rblock), (d.block // 2,
                                                                           d.rblock * 2)):
            if xb >= 1 and rb <= 4096:
                add(TritonConfig(xb, rb, d.num_warps, d.num_stages,
                                 _default_split(shape, xb, rb)))
    return out


def split_parts(rn, split, rblock):
    """(chunk, parts) of a split reduction over `rn` reduced elements asked to split
    `split` ways: each program's range is a multiple of RBLOCK, so parts <= split."""
    chunk = -(-(-(-rn // split)) // rblock) * rblock
    return chunk, -(-rn // chunk)


def split_final_config(rows, nsplit) -> TritonConfig:
    """The tile of a split reduction's final kernel: [XB rows, SB >= nsplit partials]."""
    sb = _p2(nsplit)
    xb = max(1, min(_p2(rows), max(1, 4096 // sb), 64))
    return TritonConfig(xb, sb, 4 if xb * sb >= 1024 else 2, 1)


# ----------------------------------------------------------------------------- schedule

def gpu_tiling_of(shape: KernelShape, cfg: TritonConfig, loop_order=(), tile=None) -> GpuTiling:
    """`cfg` as a schedule's tiling.gpu (tile: (p, q, BP, BQ, num_warps) of a 2-D tile)."""
    if tile is not None:
        p, q, bp, bq, warps = tile
        return GpuTiling("tiled", bp * bq, 1, warps, 1, 1, (p, q), (bp, bq), tuple(loop_order))
    return GpuTiling(gpu_mode(shape.kind, shape.rnumel, cfg.rblock, cfg.split), cfg.block,
                     cfg.rblock, cfg.num_warps, cfg.num_stages, cfg.split,
                     loop_order=tuple(loop_order))


def default_gpu_tiling(kernel_op, domain, reduced, results_shape_strides, tile=None):
    """The schedule's default tiling.gpu: `default_config`'s values (or the analysis' 2-D
    tile), with the loop order the generator walks: a pointwise kernel's is the storage
    order of its first result of the domain's shape (`kernel_schedule.loop_order`); a
    tiled kernel's the other dims, then (p, q); a reduction's the kept dims, then the
    reduced ones."""
    from stax.passes.kernel_schedule import loop_order
    shape = analyze_kernel(kernel_op)
    rank = len(domain)
    if tile is not None:
        order = [d for d in range(rank) if d not in tile[:2]] + list(tile[:2])
    elif shape.kind == "pointwise":
        order = list(range(rank))
        for shp, st in results_shape_strides:
            if tuple(shp) == tuple(domain):
                order = list(loop_order(shp, st))
                break
    else:
        order = [d for d in range(rank) if d not in reduced] + list(reduced)
    return gpu_tiling_of(shape, default_config(shape), order,
                         tile if shape.kind == "pointwise" else None)


def config_of(g: GpuTiling) -> TritonConfig:
    """The TritonConfig a schedule's tiling.gpu stands for (the generator's only source)."""
    return TritonConfig(g.block, g.rblock, g.num_warps, g.num_stages, g.split)


def tiling_candidates(kernel_op, g: GpuTiling) -> list:
    """The autotuner's search space as tiling.gpu variants (TritonConfigs; the caller
    rewrites the schedule with each, `with_gpu_tiling`): the schedule's own tiling first,
    then `candidate_configs` around it; a tiled kernel keeps its tile dims and varies its
    warps and its blocks."""
    first = config_of(g)
    if g.mode == "tiled":
        out = [TiledConfig(*_tiled_fields(g.tile_blocks, g.num_warps, g.num_stages))]
        bp, bq = g.tile_blocks
        for b in ((bp, bq), (bp // 2, bq), (bp, bq // 2), (bp * 2, bq), (bp, bq * 2)):
            if not all(16 <= x <= 1024 for x in b) or b[0] * b[1] > 16384:
                continue
            for w in (2, 4, 8, 16):
                if 32 * w <= b[0] * b[1]:
                    c = TiledConfig(*_tiled_fields(b, w, g.num_stages))
                    if c not in out:
                        out.append(c)
        return out
    out = [first]
    for c in candidate_configs(analyze_kernel(kernel_op)):
        if c not in out:
            out.append(c)
    return out


def _tiled_fields(blocks, warps, stages):
    return blocks[0] * blocks[1], 1, warps, stages, 1, tuple(blocks)


@dataclass(frozen=True)
class TiledConfig(TritonConfig):
    """A tiled kernel's candidate: a TritonConfig plus its 2-D tile's blocks (BP, BQ)."""
    tile_blocks: tuple = ()

    def label(self) -> str:   # the autotuner's progress line
        return f"tile {self.tile_blocks[0]}x{self.tile_blocks[1]} w{self.num_warps} " \
               f"s{self.num_stages}"


# ----------------------------------------------------------------------------- analysis

def analyze_kernel(kernel_op) -> KernelShape:
    """The numbers the config choice depends on (no strides needed)."""
    block = kernel_op.regions[0].blocks[0]
    ops = list(block.operations)
    reds = [o for o in ops[:-1] if o.operation.name in _REDUCTIONS]
    mb = max([_dt(_etype(a)).nbytes for a in block.arguments] +
             [_dt(_etype(v)).nbytes for v in ops[-1].operands] + [1])
    if not reds:
        n = max([_numel(_shape(v)) for v in ops[-1].operands] + [0])
        return KernelShape("pointwise", n, 1, True, mb)
    S, D = _reduction_signature(reds[0])
    rn = _numel([S[d] for d in D])
    rows = _numel([S[d] for d in range(len(S)) if d not in D])
    inner = (len(S) - 1) in D or all(S[d] == 1 for d in range(max(D) + 1, len(S)))
    return KernelShape("reduction", rows, rn, inner, mb,
                       _splittable(ops[:-1], list(ops[-1].operands), S, D))


def _value_facts(defining, domain, reduced, dims=_shape):
    """A memoized v -> (reads a reduction, is full space) over a kernel body (`defining`:
    result -> op), for a reduction over dims `reduced` of `domain`. Full space: v varies
    along the reduced dims, i.e. it is computed per element of the domain. A kernel
    input (or a full / iota) with as many elements as the domain is full space whatever
    its shape: an input [B*T, C] reshaped to the domain [B, T, C] is full space, not a
    row value. A gather is full
    space where its index is or where its result has the domain's elements. A slice of
    a domain-shaped value that keeps every kept dim whole and one element of each
    reduced dim (`x.select(1, 5)` of a row reduction's [rows, C] operand) is a row value:
    one element per row, read at the row index. `dims`: v -> its dims (static shapes';
    the runtime-size generator passes symbolic ones, ints and size expressions, and
    `domain` in that form)."""
    def count(v):
        return dim_product(dims(v))
    size = dim_product(domain)
    memo = {}

    def picks_one_per_row(o):
        if o.operation.name != "stax.slice":
            return False
        src, res = list(dims(o.operands[0])), list(dims(o.results[0]))
        return src == list(domain) and len(res) == len(src) and all(
            res[d] == (1 if d in reduced else domain[d]) for d in range(len(res)))

    def walk(v):
        if v in memo:
            return memo[v]
        o = defining.get(v)
        if o is not None and o.operation.name in SIZE_VALUE_OPS:
            res = (False, False)   # a scalar: its operand's type is read, not its data
        elif o is None or not o.operands:
            res = (False, count(v) == size)
        elif o.operation.name in _REDUCTIONS:
            res = (True, False)
        elif o.operation.name == "stax.gather":
            # read at computed coordinates: full where its index is, or where it has the
            # domain's elements itself (a flip); a row's pick from a full input at a
            # row-value index is a row value
            data, index = walk(o.operands[0]), walk(o.operands[1])
            res = (data[0] or index[0], index[1] or count(v) == size)
        elif count(v) != size and picks_one_per_row(o):
            res = (walk(o.operands[0])[0], False)
        else:
            parts = [walk(x) for x in o.operands]
            res = (any(p[0] for p in parts), any(p[1] for p in parts))
        memo[v] = res
        return res
    return walk


def _splittable(body, yielded, S, D) -> bool:
    """Can programs share a row block's reduced range (partials, then a final kernel)?
    Yes when every reduction is a plain one (no argmax/argmin, not over i1) that reads no
    other reduction (one phase), and no full-space output reads a reduction (it would
    need the finished row value in every part)."""
    walk = _value_facts({r: o for o in body for r in o.results}, S, D)
    size = _numel(S)
    for o in body:
        if o.operation.name not in _REDUCTIONS:
            continue
        if o.operation.name in ("stax.argmax", "stax.argmin"):
            return False
        if _dt(_etype(o.operands[0])).comp == "i1" or walk(o.operands[0])[0]:
            return False
    for v in yielded:
        reads, full = walk(v)
        if reads and (full or _numel(_shape(v)) == size):
            return False
    return True
