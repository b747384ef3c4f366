"""The CPU tiling of one kernel: how the CPU generator's loops walk the schedule's domain.

`cpu_tiling(kernel_op, kind, domain, reduced_dims, reads, results, shapes, output_strides)
-> CpuTiling` decides, from the kernel schedule's maps alone (kernel_schedule calls it
when it builds the schedule, so `tiling.cpu` records it), everything the CPU generator
(targets/llvm.py, cpu_reduction.py) used to decide itself:

- `mode`: "pointwise" (one loop nest over the domain), "tiled" (a pointwise kernel with
  a transposed read: 2-D W x W tiles, loaded along the read's own stride-1 dim and
  transposed in registers, see `cpu_tile`), "row" (a reduction: per row of the kept
  dims, the reductions in phases vectorized along the last reduced dim), "column" (the
  reduced dims precede the last kept dim, e.g. a sum over the batch: W neighbouring rows
  at once, one accumulator lane each) or "scalar" (every loop 1 lane wide: some address
  is not affine per lane, below);
- `vector_width`: the lanes (1 in mode "scalar", else `VECTOR_WIDTH`);
- `loop_order`: the domain dims from the outermost loop to the innermost: a pointwise
  kernel walks its domain in its first result's storage order (`kernel_schedule.loop_order`); a row
  reduction loops over the kept dims, then the reduced ones; a column reduction over
  the kept dims but the last, the last (the vector loop), then the reduced ones;
- `vector_dim`: the domain dim the lanes run along (-1 for a rank-0 kernel);
- `tail`: "scalar" when the vector dim's extent is not a multiple of the width (or the
  kernel is 1-lane): a 1-lane loop computes what follows the last full vector; "none"
  when it is;
- `split_dim`: the domain dim whose loop threads split (`%part` of `%nparts`): the
  outermost loop of more than one iteration (`schedule.split_loop`: a batch of 1 split
  over the threads left all but one idle); -1 when there is none (a rank-0 kernel, a
  reduction to one value);
- `tile`: (TP, TQ) of mode "tiled", else ().

The scalar fallback: a lane loop cannot address a read, result or branch whose position
moves per lane through a floordiv or mod (a reshape that does not merge cleanly), nor
branch per lane (a concat or pad boundary along the vector dim), nor gather with an index
that differs per lane. Where a vector loop is emitted and one of these holds along the
vector dim, the kernel is 1-lane ("scalar"): slower, never wrong.

The lanes are `VECTOR_WIDTH` (16; `llvm.VECTOR_WIDTH` re-exports it): this is the default
tiling. Under max-autotune (or STAX_CPU_AUTOTUNE=1) `stax.cpu_autotune` rewrites
`tiling.cpu` per kernel with measured variants (4/8/16/32 lanes, W x W tiles, the tile
off, the thread split off) that the generator honours the same way.
"""
from __future__ import annotations

from stax._mlir import ir
from stax.dialects.schedule import (CpuTiling, dims_used, run_extent, split_candidates,
                                    split_loop, stride_along)
from stax.passes import kernel_schedule
from stax.runtime.cpu_parallel import PARALLEL_MIN_ELEMENTS

__all__ = ["cpu_tiling", "CPU_TILE", "one_lane_reason", "cpu_tile"]

#: a tiled kernel's tile: CPU_TILE x CPU_TILE elements (one vector of the generator's
#: width, llvm.VECTOR_WIDTH, per tile row)
CPU_TILE = 16
# lanes of the default tiling: one 512-bit vector of f32, two of AVX2
VECTOR_WIDTH = 16

_ARG_REDUCTIONS = frozenset({"stax.argmax", "stax.argmin"})


def _divmod_on(e, dim) -> bool:
    """Does `e` hold a floordiv / mod / ceildiv whose operand moves with `dim`?"""
    e = e.maybe_downcast()
    if isinstance(e, (ir.AffineFloorDivExpr, ir.AffineModExpr, ir.AffineCeilDivExpr)):
        return dim in dims_used(e.lhs) or _divmod_on(e.lhs, dim)
    if isinstance(e, ir.AffineBinaryExpr):
        return _divmod_on(e.lhs, dim) or _divmod_on(e.rhs, dim)
    return False


def one_lane_reason(dim, domain, reads, results, boundaries=(), gather_coords=()):
    """Why lanes along domain dim `dim` cannot be addressed (None: they can): a read's or
    result's offset divides a per-lane position, a concat or pad boundary (a read's
    `where` condition, or one of `boundaries`: those of pieces that read no input, that
    can fail) moves along it, a gather's index is read per lane (`gather_coords`: the
    coordinates its gathers read their index at, whether the index is an input, computed
    or generated), or a gather reads its data through a reshape."""
    for where in boundaries:
        for w in where:
            if dim in dims_used(w) and kernel_schedule.expr_range(w, list(domain))[0] < 0:
                return ("a concat or pad of a generated value has a boundary along the "
                        f"lanes ({w} >= 0)")
    for c in gather_coords:
        if dim in dims_used(c):
            return f"a gather's index is read per lane (at {c})"
    for r in reads:
        if r.map is None:
            if "reshape" in r.path.split("."):
                # a gather's data read through a reshape: the gathered coordinate is
                # divided and taken modulo (a merged dim), which no lane offset holds
                return f"input {r.input} is a gather's data read through a reshape ({r.path})"
            continue
        if _divmod_on(r.offset.results[0], dim):
            return f"input {r.input}'s offset {r.offset} divides the lane position"
        for w in (r.where.results if r.where is not None else ()):
            if dim in dims_used(w) and kernel_schedule.expr_range(w, list(domain))[0] < 0:
                return f"input {r.input} ({r.path}) has a boundary along the lanes ({w} >= 0)"
    for i, r in enumerate(results):
        if r.offset is not None and _divmod_on(r.offset.results[0], dim):
            return f"result {i}'s offset {r.offset} divides the lane position"
    return None


def cpu_tile(domain, reads, results, order):
    """(p, q) of a tiled CPU pointwise kernel, or None: the same condition as the GPU's
    2-D tile (kernel_schedule.gpu_tile: a read contiguous along p and strided along q,
    the dim every result is contiguous along), q the innermost loop, both dims at least
    CPU_TILE, and the read's offset affine along both (a transposed load is W vector
    loads along p)."""
    t = kernel_schedule.gpu_tile(domain, reads, results)
    if t is None or not order:
        return None
    p, q = t[0], t[1]
    if q != order[-1] or domain[p] < CPU_TILE or domain[q] < CPU_TILE:
        return None
    for r in reads:
        for d in (p, q):
            if stride_along(r.offset, d) is None:
                return None
    return p, q


def cpu_tiling(kernel_op, kind, domain, reduced_dims, reads, results, shapes,
               output_strides, boundaries=(), gather_coords=()) -> CpuTiling:
    """The CPU tiling of a kernel of this schedule (see the module docstring). `shapes`:
    every input and result shape (the thread split's work is the largest); `boundaries`:
    the `where` conditions of concat/pad pieces that read no input."""
    S, D = list(domain), list(reduced_dims)
    rank = len(S)
    work = max([_numel(s) for s in shapes] + [0])
    W = VECTOR_WIDTH
    body = [o.operation for o in kernel_op.regions[0].blocks[0].operations]
    tile = ()
    if kind == "pointwise":
        order = kernel_schedule.loop_order(S, output_strides[0]) if output_strides else tuple(range(rank))
        mode = "pointwise"
        vdim = order[-1] if rank else -1
        # a lane loop exists when the innermost extent holds a vector, or always in a
        # rank-1 kernel (its loop's bounds are the thread part's, runtime values)
        lanes = rank == 1 or (rank > 1 and S[vdim] >= W)
        split = None   # below, once the lanes are known
        t = cpu_tile(S, reads, results, order)
        if t is not None and all(one_lane_reason(d, S, reads, results, boundaries,
                                                 gather_coords) is None for d in t):
            mode, tile = "tiled", (CPU_TILE, CPU_TILE)
            order = tuple(d for d in order if d not in t) + t
            vdim, split = t[1], _split_dim(S, order[:-1])   # tiles split along p
    else:
        outer = [d for d in range(rank) if d not in D]
        args = any(o.name in _ARG_REDUCTIONS for o in body)
        column = bool(outer) and D[-1] < outer[-1] and S[outer[-1]] >= W and not args
        if column:
            mode, vdim = "column", outer[-1]
            order = tuple(outer) + tuple(D)
            lanes = True
        else:
            mode, vdim = "row", D[-1]
            order = tuple(outer) + tuple(D)
            # the full-domain outputs of a reduction to one value are written by a
            # top-level loop: a rank-1 one always has its lane loop
            lanes = S[vdim] >= W or (not outer and len(D) == 1)
        split = _split_dim(S, outer) if outer else -1
    # (a rank-1 loop has lanes even over one element: its bounds are the thread part's)
    if mode != "tiled" and lanes and vdim >= 0 and (S[vdim] > 1 or rank == 1) and \
            one_lane_reason(vdim, S, reads, results, boundaries, gather_coords) is not None:
        mode, W = "scalar", 1
        if kind != "pointwise":
            vdim = D[-1]
    merged = 1
    # (rows shorter than a vector have no lane loop of their own: merged, they may)
    if mode == "pointwise" and W > 1 and rank >= 2 and S[vdim] % W and \
            not boundaries and not gather_coords and \
            not any(o.name == "stax.iota" for o in body) and \
            one_lane_reason(vdim, S, reads, results) is None:
        merged = _merged_loops(S, order, reads, results, W)
    # the vector loop's extent: the vector dim's, or the merged loops' product
    n = run_extent(S, order, vdim, merged)
    if split is None:   # pointwise: the vector loop may be split (schedule.split_candidates)
        # (merged loops are one loop: the group's outermost dim stands for it)
        loops = list(order)[:len(order) - merged + 1]
        extents = [S[d] for d in loops[:-1]] + [n]
        n_cands = len(split_candidates(extents, W)) if loops else 0
        split = loops[split_loop(extents[:n_cands])] if n_cands else -1
    tail = "scalar" if W == 1 or n % W else "none"
    return CpuTiling(W, PARALLEL_MIN_ELEMENTS, work, mode=mode, loop_order=tuple(order),
                     vector_dim=vdim, tail=tail, split_dim=split, tile=tile, merged=merged)


def _merged_loops(S, order, reads, results, W) -> int:
    """How many innermost loops of a pointwise kernel to walk as one vector loop (1:
    none): outward from the vector loop while its extent leaves a tail (a row of 56 in
    16 lanes: a 1-lane loop over 8 elements per row, 2.7x Inductor's time for a
    BatchNorm + ReLU of [8, 64, 56, 56]), as long as the next dim is contiguous with the
    group in every read and result (its stride is the group's extent times the vector
    dim's: 0 for a broadcast read) and no offset divides or bounds a position along it.
    The generator then walks one run of their product and addresses every access by the
    vector dim's stride alone."""
    vdim = order[-1]
    ext, k = S[vdim], 1
    accesses = [r.offset for r in reads] + [r.offset for r in results]
    if any(r.map is None or r.where is not None for r in reads) or \
            any(a is None for a in accesses):
        return 1
    inner = [stride_along(a, vdim) for a in accesses]
    if any(c is None for c in inner):
        return 1
    while ext % W and k < len(order):
        d = order[-k - 1]
        if any(_divmod_on(a.results[0], d) or stride_along(a, d) != c * ext
               for a, c in zip(accesses, inner)):
            break
        ext, k = ext * S[d], k + 1
    return k


def _split_dim(S, loops):
    """The dim of `loops` (domain dims, outermost first) that the threads split."""
    return loops[split_loop([S[d] for d in loops])]


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n
