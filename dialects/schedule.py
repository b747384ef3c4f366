"""The kernel schedule attribute `stax.schedule`: its builder, its reader and its verifier.

`stax-schedule` writes one `stax.schedule` DictionaryAttr on every `stax_graph.kernel`;
the code generators read it back with `read_schedule(kernel_op) -> KernelSchedule`.
Only builtin attributes are used (DictionaryAttr, ArrayAttr, AffineMapAttr,
DenseI64ArrayAttr, StringAttr, IntegerAttr, BoolAttr), so the IRDL file is untouched and
any MLIR tool can parse scheduled IR. docs/schedule.md describes every field:

    stax.schedule = {
      version = 1, kind = "pointwise" | "reduction",
      domain = array<i64: ...>, parallel_dims = array<i64: ...>, reduced_dims = array<i64: ...>,
      keepdim = true,                                   (reduction kernels)
      input_strides = [array<i64: ...>, ...], output_strides = [array<i64: ...>, ...],
      reads = [{input = 0 : i64, space = "full" | "row", map = affine_map<...>,
                offset = affine_map<...>, where = affine_map<...> (optional: every
                result >= 0), computed = "why" (instead of map/offset), path = "..."}, ...],
      results = [{space = ..., map = ..., offset = ...} or {space, computed}, ...],
      phases = [array<i64: body positions of the reductions of phase 0>, ...],
      row_values = array<i64: ...>,                    (body positions of per-row ops)
      tiling = {gpu = {mode, block, rblock, num_warps, num_stages, split,
                       tile_dims = array<i64: p, q>, tile_blocks = array<i64: BP, BQ>
                       (mode "tiled" only), loop_order = array<i64: ...>},
                cpu = {vector_width, parallel_min_elements, work, mode, loop_order,
                       vector_dim, tail, split_dim, tile (mode "tiled" only)}}}

This module imports nothing of the passes or the targets (targets read attributes; they
import no pass).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from stax._mlir import ir

__all__ = ["ATTR", "VERSION", "CPU_MODES", "CPU_TAILS", "Read", "Result", "GpuTiling", "CpuTiling", "merged_extent", "run_extent", "KernelSchedule",
           "read_schedule", "has_schedule", "schedule_errors", "to_attr", "dims_used",
           "gpu_mode", "with_gpu_tiling", "set_schedule",
           "stride_along", "split_loop", "split_candidates"]

ATTR = "stax.schedule"
VERSION = 1
SPACES = ("full", "row")
GPU_MODES = ("pointwise", "tiled", "persistent", "looped", "split")
CPU_MODES = ("pointwise", "tiled", "row", "column", "scalar")
CPU_TAILS = ("scalar", "none")
TILE_BLOCK_MAX = 1024     # a tiled dim's block; the tile (their product) at most 2**16
_REDUCTIONS = frozenset({"stax.reduce_sum", "stax.reduce_max", "stax.reduce_min",
                         "stax.reduce_prod", "stax.argmax", "stax.argmin"})


@dataclass(frozen=True)
class Read:
    """One read of a kernel input: at domain point `p` (space "row": only the parallel dims
    of `p` matter) the input element `map(p)` is read, at storage offset `offset(p)`
    (elements), where every result of `where(p)` is >= 0 (None: always). `computed` says
    why there is no map (a gather's data-dependent index); then map and offset are None."""
    input: int
    space: str
    map: "ir.AffineMap | None"
    offset: "ir.AffineMap | None"
    where: "ir.AffineMap | None" = None
    computed: str | None = None
    path: str = ""


@dataclass(frozen=True)
class Result:
    """Where the value of kernel result i at domain point p is written: element `map(p)`,
    storage offset `offset(p)`; `computed` when that is not a function of p."""
    space: str
    map: "ir.AffineMap | None"
    offset: "ir.AffineMap | None"
    computed: str | None = None


@dataclass(frozen=True)
class GpuTiling:
    mode: str            # pointwise | tiled | persistent | looped | split
    block: int           # pointwise BLOCK; tiled: the tile's elements; reduction XBLOCK
    rblock: int          # reduced elements per step (1 for pointwise and tiled)
    num_warps: int
    num_stages: int
    split: int           # programs sharing one row block's reduced range
    # mode "tiled" (a pointwise kernel over 2-D tiles): the domain dims (p, q) of the
    # tile's axes 0 and 1 (index [BP, 1] along p, [1, BQ] along q; q is the dim the
    # results are contiguous along) and their blocks (BP, BQ); other dims come from the
    # program id, one value per program
    tile_dims: tuple = ()
    tile_blocks: tuple = ()
    # the domain dims, outermost first: a pointwise kernel's 1-D block is delinearized
    # over the domain in this order (its innermost dim the fastest lanes); a tiled
    # kernel's ends with tile_dims; a reduction's is its kept dims, then its reduced
    # dims. () only in IR written before the field (then the analysis' order is used)
    loop_order: tuple = ()


@dataclass(frozen=True)
class CpuTiling:
    """How the CPU generator's loops walk the domain (passes/cpu_tiling.py decides it; the
    generator reads it and decides nothing itself):

    - `vector_width`: the lanes (1 in mode "scalar");
    - `parallel_min_elements`, `work`: the thread split rule's inputs (a kernel is split
      over threads when it has a `split_dim` and `work`, the largest input or output
      element count, is at least `parallel_min_elements`);
    - `mode`: pointwise | tiled | row | column | scalar (CPU_MODES);
    - `loop_order`: the domain dims, outermost loop first;
    - `vector_dim`: the dim the lanes run along (-1: rank 0);
    - `tail`: "scalar" (a 1-lane loop after the last full vector) or "none";
    - `split_dim`: the dim whose loop threads split, -1 for none;
    - `tile`: (TP, TQ) of mode "tiled" (the tile's extents along loop_order[-2] and
      loop_order[-1]), else ();
    - `merged`: how many of the innermost loops are walked as one vector loop (mode
      "pointwise"; 1: none): their dims are one contiguous run of every read and result
      (`merged_extent`), so an odd row (56 of NCHW's 56x56) leaves no tail per row."""
    vector_width: int
    parallel_min_elements: int
    work: int
    mode: str = "pointwise"
    loop_order: tuple = ()
    vector_dim: int = -1
    tail: str = "none"
    split_dim: int = -1
    tile: tuple = ()
    merged: int = 1


def merged_extent(c: CpuTiling, domain) -> int:
    """The element count of the vector loop of tiling `c` (run_extent)."""
    return run_extent(domain, c.loop_order, c.vector_dim, c.merged)


def run_extent(domain, loop_order, vector_dim, merged=1) -> int:
    """The element count of a vector loop: the vector dim's extent, or with `merged`
    dims, the product of the innermost `merged` loops' extents (1 without a vector dim)."""
    if vector_dim < 0:
        return 1
    n = 1
    for d in (loop_order[-merged:] if merged > 1 else (vector_dim,)):
        n *= domain[d]
    return n


@dataclass(frozen=True)
class KernelSchedule:
    kind: str
    domain: tuple
    parallel_dims: tuple
    reduced_dims: tuple
    keepdim: bool
    input_strides: tuple
    output_strides: tuple
    reads: tuple
    results: tuple
    phases: tuple          # tuple of tuples of body positions (reductions), in order
    row_values: tuple      # body positions of per-row (non-reduction) ops
    gpu: GpuTiling | None = None
    cpu: CpuTiling | None = None

    def reads_of(self, input_index: int) -> list:
        """Every read of kernel input `input_index` (one per view path)."""
        return [r for r in self.reads if r.input == input_index]


# ----------------------------------------------------------------------------- helpers

def _kernel_name(op) -> str:
    return ir.StringAttr(op.attributes["name"]).value if "name" in op.attributes else "?"


def _loc_prefix(op) -> str:
    text = str(op.location)
    m = re.search(r'"([^"]+)":(\d+):(\d+)', text)
    return f"{m.group(1)}:{m.group(2)}:{m.group(3)}" if m else text


def dims_used(expr) -> set:
    """The dim positions an AffineExpr reads."""
    e = expr.maybe_downcast() if hasattr(expr, "maybe_downcast") else expr
    if isinstance(e, ir.AffineDimExpr):
        return {e.position}
    if isinstance(e, ir.AffineBinaryExpr):
        return dims_used(e.lhs) | dims_used(e.rhs)
    return set()


def stride_along(amap, dim: int):
    """How far the (single-result) map moves per step of `dim`: an int when `dim` only
    appears linearly (0 when absent: a broadcast read), None when it sits inside a
    floordiv/mod/ceildiv (a reshape that does not merge cleanly). This is what a code
    generator asks to choose a vector load (1), a broadcast (0) or a gather."""
    def walk(e):
        e = e.maybe_downcast()
        if isinstance(e, ir.AffineDimExpr):
            return 1 if e.position == dim else 0
        if isinstance(e, ir.AffineConstantExpr):
            return 0
        if isinstance(e, ir.AffineAddExpr):
            a, b = walk(e.lhs), walk(e.rhs)
            return None if a is None or b is None else a + b
        if isinstance(e, ir.AffineMulExpr):
            a, b = walk(e.lhs), walk(e.rhs)
            c = e.rhs.maybe_downcast()
            if a is None or b is None or not isinstance(c, ir.AffineConstantExpr):
                return None
            return a * c.value
        return None if dim in dims_used(e) else 0

    (result,) = amap.results
    return walk(result)


def has_schedule(kernel_op) -> bool:
    op = getattr(kernel_op, "operation", kernel_op)
    return ATTR in op.attributes


def _ints(a) -> tuple:
    return tuple(int(x) for x in ir.DenseI64ArrayAttr(a))


def _map(a):
    return ir.AffineMapAttr(a).value if a is not None else None


def _get(d, name):
    return d[name] if name in d else None


def _int(a) -> int:
    return ir.IntegerAttr(a).value


def _str(a) -> str:
    return ir.StringAttr(a).value


# ----------------------------------------------------------------------------- writing

def _i64(v):
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(v))


def _dense(vals):
    return ir.DenseI64ArrayAttr.get([int(v) for v in vals])


def _entry(e: dict) -> "ir.Attribute":
    out = {}
    for k, v in e.items():
        if v is None:
            continue
        if isinstance(v, ir.AffineMap):
            out[k] = ir.AffineMapAttr.get(v)
        elif isinstance(v, bool):
            out[k] = ir.BoolAttr.get(v)
        elif isinstance(v, int):
            out[k] = _i64(v)
        elif isinstance(v, str):
            out[k] = ir.StringAttr.get(v)
        else:
            raise TypeError(f"schedule field {k!r}: {v!r}")
    return ir.DictAttr.get(out)


def to_attr(s: KernelSchedule) -> "ir.DictAttr":
    """The `stax.schedule` attribute of a schedule (the inverse of read_schedule)."""
    fields = {
        "version": _i64(VERSION),
        "kind": ir.StringAttr.get(s.kind),
        "domain": _dense(s.domain),
        "parallel_dims": _dense(s.parallel_dims),
        "reduced_dims": _dense(s.reduced_dims),
        "input_strides": ir.ArrayAttr.get([_dense(st) for st in s.input_strides]),
        "output_strides": ir.ArrayAttr.get([_dense(st) for st in s.output_strides]),
        "reads": ir.ArrayAttr.get([_entry({
            "input": r.input, "space": r.space, "map": r.map, "offset": r.offset,
            "where": r.where, "computed": r.computed, "path": r.path or None})
            for r in s.reads]),
        "results": ir.ArrayAttr.get([_entry({
            "space": r.space, "map": r.map, "offset": r.offset, "computed": r.computed})
            for r in s.results]),
        "phases": ir.ArrayAttr.get([_dense(p) for p in s.phases]),
        "row_values": _dense(s.row_values),
    }
    if s.kind == "reduction":
        fields["keepdim"] = ir.BoolAttr.get(bool(s.keepdim))
    tiling = {}
    if s.gpu is not None:
        g = s.gpu
        gpu = _entry({"mode": g.mode, "block": g.block, "rblock": g.rblock,
                      "num_warps": g.num_warps, "num_stages": g.num_stages, "split": g.split})
        extra = {}
        if g.tile_dims or g.tile_blocks:
            extra = {"tile_dims": _dense(g.tile_dims), "tile_blocks": _dense(g.tile_blocks)}
        if g.loop_order:
            extra["loop_order"] = _dense(g.loop_order)
        if extra:
            gpu = ir.DictAttr.get({**{a.name: a.attr for a in gpu}, **extra})
        tiling["gpu"] = gpu
    if s.cpu is not None:
        c = s.cpu
        cpu = {"vector_width": _i64(c.vector_width),
               "parallel_min_elements": _i64(c.parallel_min_elements), "work": _i64(c.work),
               "mode": ir.StringAttr.get(c.mode), "loop_order": _dense(c.loop_order),
               "vector_dim": _i64(c.vector_dim), "tail": ir.StringAttr.get(c.tail),
               "split_dim": _i64(c.split_dim)}
        if c.tile:
            cpu["tile"] = _dense(c.tile)
        if c.merged > 1:
            cpu["merged"] = _i64(c.merged)
        tiling["cpu"] = ir.DictAttr.get(cpu)
    fields["tiling"] = ir.DictAttr.get(tiling)
    return ir.DictAttr.get(fields)


# ----------------------------------------------------------------------------- reading

def read_schedule(kernel_op) -> KernelSchedule:
    """The schedule a kernel carries (raises KeyError when it has none). The attribute
    is assumed verified (`verify_module` runs `schedule_errors`)."""
    op = getattr(kernel_op, "operation", kernel_op)
    d = ir.DictAttr(op.attributes[ATTR])
    reads = []
    for a in ir.ArrayAttr(d["reads"]):
        e = ir.DictAttr(a)
        reads.append(Read(_int(e["input"]), _str(e["space"]), _map(_get(e, "map")),
                          _map(_get(e, "offset")), _map(_get(e, "where")),
                          _str(e["computed"]) if "computed" in e else None,
                          _str(e["path"]) if "path" in e else ""))
    results = []
    for a in ir.ArrayAttr(d["results"]):
        e = ir.DictAttr(a)
        results.append(Result(_str(e["space"]), _map(_get(e, "map")), _map(_get(e, "offset")),
                              _str(e["computed"]) if "computed" in e else None))
    tiling = ir.DictAttr(d["tiling"])
    gpu = cpu = None
    if "gpu" in tiling:
        g = ir.DictAttr(tiling["gpu"])
        gpu = GpuTiling(_str(g["mode"]), *(_int(g[k]) for k in
                                           ("block", "rblock", "num_warps", "num_stages",
                                            "split")),
                        tile_dims=_ints(g["tile_dims"]) if "tile_dims" in g else (),
                        tile_blocks=_ints(g["tile_blocks"]) if "tile_blocks" in g else (),
                        loop_order=_ints(g["loop_order"]) if "loop_order" in g else ())
    if "cpu" in tiling:
        c = ir.DictAttr(tiling["cpu"])
        cpu = CpuTiling(_int(c["vector_width"]), _int(c["parallel_min_elements"]),
                        _int(c["work"]), mode=_str(c["mode"]), loop_order=_ints(c["loop_order"]),
                        vector_dim=_int(c["vector_dim"]), tail=_str(c["tail"]),
                        split_dim=_int(c["split_dim"]),
                        tile=_ints(c["tile"]) if "tile" in c else (),
                        merged=_int(c["merged"]) if "merged" in c else 1)
    return KernelSchedule(
        kind=_str(d["kind"]), domain=_ints(d["domain"]),
        parallel_dims=_ints(d["parallel_dims"]), reduced_dims=_ints(d["reduced_dims"]),
        keepdim=ir.BoolAttr(d["keepdim"]).value if "keepdim" in d else False,
        input_strides=tuple(_ints(a) for a in ir.ArrayAttr(d["input_strides"])),
        output_strides=tuple(_ints(a) for a in ir.ArrayAttr(d["output_strides"])),
        reads=tuple(reads), results=tuple(results),
        phases=tuple(_ints(a) for a in ir.ArrayAttr(d["phases"])),
        row_values=_ints(d["row_values"]), gpu=gpu, cpu=cpu)


# ----------------------------------------------------------------------------- verifying

class _Bad(Exception):
    pass


def _rank(v) -> int | None:
    try:
        return ir.RankedTensorType(v.type).rank
    except ValueError:
        return None


def _need(d, name, kind, where):
    if name not in d:
        raise _Bad(f"field '{where}{name}' is missing")
    a = d[name]
    if not isinstance(a, kind):
        raise _Bad(f"field '{where}{name}' must be a {kind.__name__}, got {a}")
    return a


def _check_map(e, key, where, ndims, nresults, reduced=(), row=False):
    m = ir.AffineMapAttr(e[key]).value if isinstance(e[key], ir.AffineMapAttr) else None
    if m is None:
        raise _Bad(f"field '{where}.{key}' must be an affine_map, got {e[key]}")
    if m.n_dims != ndims:
        raise _Bad(f"field '{where}.{key}' {m} has {m.n_dims} dims but the domain has "
                   f"rank {ndims}")
    if m.n_symbols != 0:
        raise _Bad(f"field '{where}.{key}' {m} has symbols; the domain is static")
    if nresults is not None and len(m.results) != nresults:
        want = "an offset has one" if key == "offset" else f"the operand has rank {nresults}"
        raise _Bad(f"field '{where}.{key}' {m} has {len(m.results)} results but {want}")
    if row:
        used = set().union(*(dims_used(r) for r in m.results)) if m.results else set()
        bad = sorted(used & set(reduced))
        if bad:
            raise _Bad(f"field '{where}.{key}' {m} is in row space but reads reduced "
                       f"dim(s) {bad}")


def _strides_list(d, name, values):
    arr = _need(d, name, ir.ArrayAttr, "")
    arr = list(arr)
    if len(arr) != len(values):
        raise _Bad(f"field '{name}' has {len(arr)} entries for {len(values)} values")
    for i, (a, v) in enumerate(zip(arr, values)):
        if not isinstance(a, ir.DenseI64ArrayAttr):
            raise _Bad(f"field '{name}'[{i}] must be array<i64: ...>, got {a}")
        if len(_ints(a)) != _rank(v):
            raise _Bad(f"field '{name}'[{i}] has {len(_ints(a))} strides but the value has "
                       f"rank {_rank(v)}")


def _is_pow2(n) -> bool:
    return n > 0 and n & (n - 1) == 0


def _check_tile(g, mode, kind, rank):
    """Mode "tiled" has both tile fields, other modes neither; two distinct domain dims,
    blocks that are powers of two up to TILE_BLOCK_MAX whose product is `block`."""
    has = [k for k in ("tile_dims", "tile_blocks") if k in g]
    if mode != "tiled":
        if has:
            raise _Bad(f"field 'tiling.gpu.{has[0]}' belongs to mode \"tiled\" only, not "
                       f"\"{mode}\"")
        return
    if kind != "pointwise":
        raise _Bad(f"field 'tiling.gpu.mode' is \"tiled\" in a {kind} kernel; only pointwise "
                   "kernels are tiled")
    dims = _ints(_need(g, "tile_dims", ir.DenseI64ArrayAttr, "tiling.gpu."))
    blocks = _ints(_need(g, "tile_blocks", ir.DenseI64ArrayAttr, "tiling.gpu."))
    if len(dims) != 2 or dims[0] == dims[1] or not all(0 <= d < rank for d in dims):
        raise _Bad(f"field 'tiling.gpu.tile_dims' = {list(dims)} must be two distinct dims "
                   f"of the domain (rank {rank})")
    if len(blocks) != 2 or not all(_is_pow2(b) and b <= TILE_BLOCK_MAX for b in blocks):
        raise _Bad(f"field 'tiling.gpu.tile_blocks' = {list(blocks)} must be two powers of "
                   f"two up to {TILE_BLOCK_MAX}")
    block = _int(g["block"])
    if block != blocks[0] * blocks[1]:
        raise _Bad(f"field 'tiling.gpu.block' = {block} must be the tile's elements "
                   f"{blocks[0]} * {blocks[1]} in mode \"tiled\"")
    for k in ("rblock", "split"):
        if _int(g[k]) != 1:
            raise _Bad(f"field 'tiling.gpu.{k}' must be 1 in mode \"tiled\"")


def gpu_mode(kind, reduced_numel, rblock, split, tiled=False) -> str:
    """The GPU mode a config implies: the one rule the pass, the verifier and
    `with_gpu_tiling` share (a reduction is persistent when one RBLOCK covers its
    reduced range, split when programs share it)."""
    if kind == "pointwise":
        return "tiled" if tiled else "pointwise"
    if split > 1:
        return "split"
    return "persistent" if rblock >= reduced_numel else "looped"


def _check_gpu_mode(g, mode, kind, domain, reduced):
    """The mode fits the kernel: pointwise/tiled for pointwise kernels (rblock and split
    1), persistent/looped/split for reductions; persistent covers the reduced range in one
    RBLOCK; only split splits."""
    rblock, split = _int(g["rblock"]), _int(g["split"])
    if (mode in ("pointwise", "tiled")) != (kind == "pointwise"):
        raise _Bad(f"field 'tiling.gpu.mode' = \"{mode}\" does not fit a {kind} kernel")
    if mode == "pointwise" and (rblock != 1 or split != 1):
        raise _Bad("fields 'tiling.gpu.rblock' and 'tiling.gpu.split' must be 1 in mode "
                   "\"pointwise\"")
    if mode in ("persistent", "looped") and split != 1:
        raise _Bad(f"field 'tiling.gpu.split' = {split} must be 1 in mode \"{mode}\"")
    rn = 1
    for d in reduced:
        rn *= domain[d]
    if mode == "persistent" and rblock < rn:
        raise _Bad(f"field 'tiling.gpu.rblock' = {rblock} is smaller than the reduced "
                   f"range ({rn} elements) in mode \"persistent\"; use mode \"looped\"")


def _check_gpu_order(g, mode, rank, reduced):
    """loop_order: a permutation of the domain's dims; a reduction's ends with its
    reduced dims, a tiled kernel's with its tile dims (p, q)."""
    order = list(_ints(_need(g, "loop_order", ir.DenseI64ArrayAttr, "tiling.gpu.")))
    if sorted(order) != list(range(rank)):
        raise _Bad(f"field 'tiling.gpu.loop_order' = {order} must be a permutation of the "
                   f"domain's dims 0..{rank - 1}")
    if reduced and sorted(order[rank - len(reduced):]) != sorted(reduced):
        raise _Bad(f"field 'tiling.gpu.loop_order' = {order} must end with the reduced dims "
                   f"{list(reduced)}")
    if mode == "tiled" and order[-2:] != list(_ints(g["tile_dims"])):
        raise _Bad(f"field 'tiling.gpu.loop_order' = {order} must end with the tile dims "
                   f"{list(_ints(g['tile_dims']))}")


def with_gpu_tiling(kernel_or_schedule, cfg, loop_order=None) -> "KernelSchedule":
    """The schedule with its `tiling.gpu` rewritten to an explicit config (an autotuner
    candidate: anything with block, rblock, num_warps, num_stages, split, and optionally
    tile_blocks), verified by the schedule's verifier (ValueError naming the field).
    A tiled kernel keeps its tile dims: its blocks are `cfg.tile_blocks` when the config
    has them, else the schedule's (a 1-D config then sets only the warps and stages)."""
    import dataclasses
    s = kernel_or_schedule
    if not isinstance(s, KernelSchedule):
        s = read_schedule(s)
    g = s.gpu
    rn = 1
    for d in s.reduced_dims:
        rn *= s.domain[d]
    order = tuple(loop_order) if loop_order is not None else (g.loop_order if g else ())
    tiled = g is not None and g.mode == "tiled"
    if tiled:
        blocks = tuple(getattr(cfg, "tile_blocks", ()) or g.tile_blocks)
        new = dataclasses.replace(g, block=blocks[0] * blocks[1], tile_blocks=blocks,
                                  num_warps=cfg.num_warps, num_stages=cfg.num_stages,
                                  loop_order=order)
    else:
        mode = gpu_mode(s.kind, rn, cfg.rblock, cfg.split)
        new = GpuTiling(mode, cfg.block, cfg.rblock, cfg.num_warps, cfg.num_stages, cfg.split,
                        loop_order=order)
    out = dataclasses.replace(s, gpu=new)
    try:
        _check_tiling(ir.DictAttr(to_attr(out)["tiling"]), s.kind, len(s.domain),
                      tuple(s.reduced_dims), tuple(s.domain))
    except _Bad as e:
        raise ValueError(f"{ATTR}: {e}") from None
    return out


def set_schedule(kernel_op, s: "KernelSchedule") -> None:
    """Write `s` as the kernel's stax.schedule attribute (a tuned tiling, for example)."""
    op = getattr(kernel_op, "operation", kernel_op)
    op.attributes[ATTR] = to_attr(s)


def _check_tiling(t, kind="pointwise", rank=0, reduced=(), domain=None):
    domain = tuple(domain) if domain is not None else (1,) * rank
    _known(t, "tiling", "tiling")
    if "gpu" in t:
        g = _need(t, "gpu", ir.DictAttr, "tiling.")
        _known(g, "tiling.gpu", "tiling.gpu")
        mode = _str(_need(g, "mode", ir.StringAttr, "tiling.gpu."))
        if mode not in GPU_MODES:
            raise _Bad(f"field 'tiling.gpu.mode' = \"{mode}\" must be one of {list(GPU_MODES)}")
        for k in ("block", "rblock", "num_warps"):
            v = _int(_need(g, k, ir.IntegerAttr, "tiling.gpu."))
            if not _is_pow2(v):
                raise _Bad(f"field 'tiling.gpu.{k}' = {v} must be a positive power of two")
        for k in ("num_stages", "split"):
            v = _int(_need(g, k, ir.IntegerAttr, "tiling.gpu."))
            if v < 1:
                raise _Bad(f"field 'tiling.gpu.{k}' = {v} must be positive")
        if mode == "split" and _int(g["split"]) < 2:
            raise _Bad("field 'tiling.gpu.split' must be at least 2 in mode \"split\"")
        _check_tile(g, mode, kind, rank)
        _check_gpu_mode(g, mode, kind, domain, reduced)
        if "loop_order" in g:
            _check_gpu_order(g, mode, rank, reduced)
    if "cpu" in t:
        _check_cpu(_need(t, "cpu", ir.DictAttr, "tiling."), kind, rank, reduced, domain)


def split_loop(extents) -> int:
    """Which of a kernel's loops (their extents, outermost first: those the threads may
    split) the threads split: the outermost of more than one iteration, the last when
    none has one; -1 when there are no loops. A leading loop of one iteration (a batch
    of 1) split over the threads leaves every thread but one idle. An extent that is not
    an int (a runtime size) may be more than 1."""
    for k, n in enumerate(extents):
        if not isinstance(n, int) or n > 1:
            return k
    return len(extents) - 1


def split_candidates(extents, lanes) -> list:
    """The loops of a pointwise nest (extents, outermost first, the vector loop last)
    that the threads may split: the vector loop only in a rank-1 nest or where it holds
    a whole vector of `lanes` (a split vector loop runs W-wide steps between runtime
    bounds; a shorter one is all tail, and a concat or pad along it is not checked for
    lanes: passes/cpu_tiling). A runtime extent (not an int) has its vector loop."""
    extents = list(extents)
    if len(extents) == 1 or (extents and (not isinstance(extents[-1], int) or
                                          extents[-1] >= lanes)):
        return extents
    return extents[:-1]


def _check_cpu(c, kind, rank, reduced, domain):
    """tiling.cpu: known mode and tail, a loop order that is a permutation of the domain's
    dims (the reduced dims innermost in a reduction), a vector dim and a split dim of the
    domain (the split dim's loop the outermost of more than one iteration), 1 lane exactly in mode "scalar", the
    tile only in mode "tiled" (its two dims the innermost loops, its rows one vector)."""
    _known(c, "tiling.cpu", "tiling.cpu")
    w = "tiling.cpu."
    v = _int(_need(c, "vector_width", ir.IntegerAttr, w))
    if not _is_pow2(v):
        raise _Bad(f"field 'tiling.cpu.vector_width' = {v} must be a positive power of two")
    for k in ("parallel_min_elements", "work"):
        if _int(_need(c, k, ir.IntegerAttr, w)) < 0:
            raise _Bad(f"field 'tiling.cpu.{k}' must be non-negative")
    mode = _str(_need(c, "mode", ir.StringAttr, w))
    if mode not in CPU_MODES:
        raise _Bad(f"field 'tiling.cpu.mode' = \"{mode}\" must be one of {list(CPU_MODES)}")
    if mode in ("row", "column") and kind != "reduction" or \
            mode in ("pointwise", "tiled") and kind != "pointwise":
        raise _Bad(f"field 'tiling.cpu.mode' = \"{mode}\" does not fit a {kind} kernel")
    if (mode == "scalar") != (v == 1):
        raise _Bad(f"field 'tiling.cpu.vector_width' = {v}: mode \"scalar\" is 1 lane and "
                   "only it")
    tail = _str(_need(c, "tail", ir.StringAttr, w))
    if tail not in CPU_TAILS:
        raise _Bad(f"field 'tiling.cpu.tail' = \"{tail}\" must be one of {list(CPU_TAILS)}")
    order = list(_ints(_need(c, "loop_order", ir.DenseI64ArrayAttr, w)))
    if sorted(order) != list(range(rank)):
        raise _Bad(f"field 'tiling.cpu.loop_order' = {order} must be a permutation of the "
                   f"domain's dims 0..{rank - 1}")
    if reduced and sorted(order[rank - len(reduced):]) != sorted(reduced):
        raise _Bad(f"field 'tiling.cpu.loop_order' = {order} must end with the reduced dims "
                   f"{list(reduced)}")
    vd = _int(_need(c, "vector_dim", ir.IntegerAttr, w))
    if not (-1 <= vd < rank) or (vd == -1) != (rank == 0):
        raise _Bad(f"field 'tiling.cpu.vector_dim' = {vd} must be a dim of the domain "
                   f"(rank {rank}; -1 for rank 0)")
    sd = _int(_need(c, "split_dim", ir.IntegerAttr, w))
    if sd != -1 and (sd not in order or any(domain[d] > 1 for d in order[:order.index(sd)])):
        raise _Bad(f"field 'tiling.cpu.split_dim' = {sd} must be the dim of the outermost "
                   f"loop of more than one iteration (loop order {order}, domain "
                   f"{list(domain)}) or -1 (no split)")
    if "tile" in c:
        if mode != "tiled":
            raise _Bad(f"field 'tiling.cpu.tile' belongs to mode \"tiled\" only, not "
                       f"\"{mode}\"")
        tile = _ints(c["tile"])
        if len(tile) != 2 or not all(_is_pow2(x) for x in tile):
            raise _Bad(f"field 'tiling.cpu.tile' = {list(tile)} must be two powers of two")
        if tile[1] != v:   # a tile row is one vector (the autotuner varies both together)
            raise _Bad(f"field 'tiling.cpu.tile' = {list(tile)}: its inner extent must be "
                       f"the vector width {v}")
        if rank < 2 or vd != order[-1]:
            raise _Bad(f"field 'tiling.cpu.vector_dim' = {vd} must be the tile's inner dim "
                       f"{order[-1] if order else None}")
    elif mode == "tiled":
        raise _Bad("field 'tiling.cpu.tile' is missing in mode \"tiled\"")
    if "merged" in c:
        k = _int(c["merged"])
        if mode != "pointwise" or not 2 <= k <= rank or vd != order[-1]:
            raise _Bad(f"field 'tiling.cpu.merged' = {k} must be 2..{rank} innermost loops "
                       f"of mode \"pointwise\" whose last is the vector dim (mode \"{mode}\", "
                       f"loop order {order}, vector dim {vd})")


_FIELDS = {
    "": {"version", "kind", "domain", "parallel_dims", "reduced_dims", "keepdim",
         "input_strides", "output_strides", "reads", "results", "phases", "row_values",
         "tiling"},
    "reads": {"input", "space", "map", "offset", "where", "computed", "path"},
    "results": {"space", "map", "offset", "computed"},
    "tiling": {"gpu", "cpu"},
    "tiling.gpu": {"mode", "block", "rblock", "num_warps", "num_stages", "split",
                   "tile_dims", "tile_blocks", "loop_order"},
    "tiling.cpu": {"vector_width", "parallel_min_elements", "work", "mode", "loop_order",
                   "vector_dim", "tail", "split_dim", "tile", "merged"},
}


def _known(d, where, kind):
    """Unknown fields are errors: a misspelt field would otherwise be ignored."""
    extra = sorted({n.name for n in d} - _FIELDS[kind])
    if extra:
        raise _Bad(f"unknown field(s) {extra} in '{where or ATTR}' (known: "
                   f"{sorted(_FIELDS[kind])})")


def _check(op):
    d = op.attributes[ATTR]
    if not isinstance(d, ir.DictAttr):
        raise _Bad(f"must be a dictionary attribute, got {d}")
    d = ir.DictAttr(d)
    _known(d, "", "")
    v = _int(_need(d, "version", ir.IntegerAttr, ""))
    if v != VERSION:
        raise _Bad(f"field 'version' = {v}; this stax reads version {VERSION}")
    kind = _str(_need(d, "kind", ir.StringAttr, ""))
    if kind not in ("pointwise", "reduction"):
        raise _Bad(f"field 'kind' = \"{kind}\" must be \"pointwise\" or \"reduction\"")
    domain = _ints(_need(d, "domain", ir.DenseI64ArrayAttr, ""))
    if any(s < 0 for s in domain):
        raise _Bad(f"field 'domain' = {list(domain)} has a negative size")
    rank = len(domain)
    par = _ints(_need(d, "parallel_dims", ir.DenseI64ArrayAttr, ""))
    red = _ints(_need(d, "reduced_dims", ir.DenseI64ArrayAttr, ""))
    if sorted(par + red) != list(range(rank)):
        raise _Bad(f"fields 'parallel_dims' {list(par)} and 'reduced_dims' {list(red)} must "
                   f"split the domain's dims 0..{rank - 1}")
    if (kind == "reduction") != bool(red):
        raise _Bad(f"field 'reduced_dims' = {list(red)} does not fit kind \"{kind}\"")
    if kind == "reduction":
        _need(d, "keepdim", ir.BoolAttr, "")
    block = op.regions[0].blocks[0]
    body = [o.operation for o in block.operations][:-1]
    args = list(block.arguments)
    yielded = list(list(block.operations)[-1].operation.operands)
    _strides_list(d, "input_strides", args)
    _strides_list(d, "output_strides", yielded)
    reads = _need(d, "reads", ir.ArrayAttr, "")
    for i, a in enumerate(reads):
        w = f"reads[{i}]"
        if not isinstance(a, ir.DictAttr):
            raise _Bad(f"field '{w}' must be a dictionary, got {a}")
        e = ir.DictAttr(a)
        _known(e, w, "reads")
        k = _int(_need(e, "input", ir.IntegerAttr, w + "."))
        if not 0 <= k < len(args):
            raise _Bad(f"field '{w}.input' = {k} but the kernel has {len(args)} inputs")
        _space(e, w, kind)
        row = _str(e["space"]) == "row"
        if "computed" in e:
            _need(e, "computed", ir.StringAttr, w + ".")
            if "map" in e or "offset" in e:
                raise _Bad(f"field '{w}' is computed; it must not also have a map or offset")
            continue
        _need(e, "map", ir.AffineMapAttr, w + ".")
        _check_map(e, "map", w, rank, _rank(args[k]), red, row)
        _need(e, "offset", ir.AffineMapAttr, w + ".")
        _check_map(e, "offset", w, rank, 1, red, row)
        if "where" in e:
            _need(e, "where", ir.AffineMapAttr, w + ".")
            _check_map(e, "where", w, rank, None)
    results = list(_need(d, "results", ir.ArrayAttr, ""))
    if len(results) != len(yielded):
        raise _Bad(f"field 'results' has {len(results)} entries for {len(yielded)} kernel "
                   "results")
    for i, a in enumerate(results):
        w = f"results[{i}]"
        if not isinstance(a, ir.DictAttr):
            raise _Bad(f"field '{w}' must be a dictionary, got {a}")
        e = ir.DictAttr(a)
        _known(e, w, "results")
        _space(e, w, kind)
        if "computed" in e:
            continue
        row = _str(e["space"]) == "row"
        _need(e, "map", ir.AffineMapAttr, w + ".")
        _check_map(e, "map", w, rank, _rank(yielded[i]), red, row)
        _need(e, "offset", ir.AffineMapAttr, w + ".")
        _check_map(e, "offset", w, rank, 1, red, row)
    phases = _need(d, "phases", ir.ArrayAttr, "")
    seen = set()
    for i, a in enumerate(phases):
        if not isinstance(a, ir.DenseI64ArrayAttr):
            raise _Bad(f"field 'phases'[{i}] must be array<i64: ...>, got {a}")
        for p in _ints(a):
            if not 0 <= p < len(body) or body[p].name not in _REDUCTIONS:
                what = body[p].name if 0 <= p < len(body) else "nothing"
                raise _Bad(f"field 'phases'[{i}] names body op #{p}, which is {what}, "
                           "not a reduction")
            if p in seen:
                raise _Bad(f"field 'phases'[{i}] names reduction #{p} a second time")
            seen.add(p)
    missing = [p for p, o in enumerate(body) if o.name in _REDUCTIONS and p not in seen]
    if missing:
        raise _Bad(f"field 'phases' misses the reduction(s) at body position(s) {missing}")
    for p in _ints(_need(d, "row_values", ir.DenseI64ArrayAttr, "")):
        if not 0 <= p < len(body):
            raise _Bad(f"field 'row_values' names body op #{p}; the body has {len(body)} ops")
    _check_tiling(_need(d, "tiling", ir.DictAttr, ""), kind, rank, red, domain)


def _space(e, w, kind):
    s = _str(_need(e, "space", ir.StringAttr, w + "."))
    if s not in SPACES:
        raise _Bad(f"field '{w}.space' = \"{s}\" must be \"full\" or \"row\"")
    if s == "row" and kind != "reduction":
        raise _Bad(f"field '{w}.space' is \"row\" in a pointwise kernel")


def schedule_errors(kernel_op) -> list:
    """The located error lines of a kernel's `stax.schedule` ([] when it has none or it
    is well-formed); each names the kernel and the field."""
    op = getattr(kernel_op, "operation", kernel_op)
    if ATTR not in op.attributes:
        return []
    try:
        _check(op)
    except _Bad as e:
        return [f"{_loc_prefix(op)}: error: 'stax_graph.kernel' op kernel "
                f"'{_kernel_name(op)}' {ATTR}: {e}"]
    except (ValueError, KeyError, IndexError) as e:  # a malformed nested attribute
        return [f"{_loc_prefix(op)}: error: 'stax_graph.kernel' op kernel "
                f"'{_kernel_name(op)}' {ATTR}: malformed ({e})"]
    return []
