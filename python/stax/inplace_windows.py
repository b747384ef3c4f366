"""A cache written in place, in a graph compiled once for every size: `cache[:, pos:pos +
T] = k` of a decode step, where `cache` is a buffer the model preallocated.

aot_autograd hands the backend a functional graph: the write is `new = slice_scatter(cache,
k, 1, pos, pos + T)`, `new` is returned as the input's updated value, and aot's runtime
copies it back into the buffer. Imported as written, every step rebuilds the whole cache
(a select over all of it) and aot copies all of it again: two passes over the cache per
step where eager writes T rows.

`rewrite(gm)` turns such a write, on the CPU, into `cache.index_copy_(1, arange(pos, pos +
T), k)` (a library op PyTorch runs, reported as such) and returns the buffer itself as the
updated value, so aot's copy back is a copy of the buffer onto itself, which PyTorch skips.
It applies only where that is exact:

- aot's metadata (the TracingContext's `fw_metadata`) says the input is mutated in its
  data only, outside the graph, and the graph's output at its position is its new value;
- that output is a `slice_scatter` of the input itself, step 1, and nothing else reads
  the input's values (functionalization's `copy(cache[:, a:b], k)` reads only the
  slice's shape and dtype), so nothing reads the old value after the write;
- the input is a CPU tensor, or a CUDA tensor Dynamo gives as a static input (a module's
  buffer: aot's `static_input_indices`). A CUDA graph (stax.cudagraphs) reads a static
  input in place, so a replay writes the buffer itself; any other input it copies into
  a buffer of its own, where the write would be lost. Measured on the H100 at 128..191
  of a [8, 2048, 1024] cache (benchmarks/profile_decode.py): per step, two 44 us
  slice_scatter kernels and two 44 us copies of the caches.

`index_copy_` raises for an index outside the buffer, as the guarded gather did.
"""
from __future__ import annotations

import torch

aten = torch.ops.aten

#: the op the rewrite emits (importer.symbolic lists it as a library op)
WRITE_OP = aten.index_copy_.default


def _window(node):
    """(base, src, dim, start, end) of a step-1 slice_scatter node, or None."""
    if node.op != "call_function" or node.target is not aten.slice_scatter.default:
        return None
    names = ("input", "src", "dim", "start", "end", "step")
    args = dict(zip(names, node.args))
    args.update(node.kwargs)
    if args.get("step", 1) not in (None, 1):
        return None
    start, end = args.get("start"), args.get("end")
    if start is None or end is None or (isinstance(end, int) and end >= 1 << 62):
        return None
    return args["input"], args["src"], args.get("dim", 0), start, end


def _only_shape_readers(base, write) -> bool:
    """Whether `write` is the only node that reads `base`'s values: any other user is a
    slice of it that only `copy(slice, src)` reads, for its shape and dtype (how
    functionalization writes `cache[:, a:b] = k`: the copy's values are `src`'s)."""
    for user in base.users:
        if user is write:
            continue
        if user.target is not aten.slice.Tensor or not user.users or any(
                u.target is not aten.copy.default or u.args[0] is not user
                or user in u.args[1:] for u in user.users):
            return False
    return True


def _updates(gm):
    """({graph output position: placeholder index} of the inputs aot_autograd says the
    graph's outputs update (data only, copied back outside the graph), the placeholder
    indices of Dynamo's static inputs)."""
    ctx = torch._guards.TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None) if ctx is not None else None
    if meta is None:
        return {}, set()
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(meta.input_info) != len(phs):
        return {}, set()
    out = {}
    for j, i in enumerate(meta.mutated_inp_runtime_indices):
        info = meta.input_info[i]
        if info.mutates_data and not info.mutates_metadata and \
                "OUT_GRAPH" in str(getattr(info, "mutation_type", "")):
            out[j] = i
    return out, set(getattr(meta, "static_input_indices", None) or ())


def rewrite(gm) -> tuple[torch.fx.GraphModule, list[str]]:
    """(`gm`, or a copy with each such write in place, notes naming what was rewritten)."""
    updates, static = _updates(gm)
    if not updates:
        return gm, []
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    outs = out_node.args[0]
    items = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    plans = []
    for j, i in updates.items():
        node = items[j] if j < len(items) else None
        w = _window(node) if isinstance(node, torch.fx.Node) else None
        if w is None:
            continue
        base, src, dim, start, end = w
        val = base.meta.get("val") if isinstance(base, torch.fx.Node) else None
        # (the write's own readers read the new value: the buffer, once written)
        if base is not phs[i] or not _only_shape_readers(base, node) \
                or not isinstance(val, torch.Tensor) or not _writable_in_place(val, i in static):
            continue
        plans.append((node, base, src, dim, start, end))
    if not plans:
        return gm, []
    gm = torch.fx.GraphModule(gm, _copy_graph(gm.graph, plans))
    notes = [f"{len(plans)} cache write(s) in place (`index_copy_` into the input aot "
             "copies back, stax.inplace_windows): "
             + ", ".join(f"{p[1].name}[{p[4]}:{p[5]}] along dim {p[3]}" for p in plans)]
    return gm, notes


def _writable_in_place(val, static_input: bool) -> bool:
    """Whether a write into this input reaches the caller's tensor on every path: the
    CPU's; a CUDA graph's only for an input it reads in place (module docstring)."""
    return val.device.type == "cpu" or (val.device.type == "cuda" and static_input)


def _fake(x):
    """A node's fake value (a SymInt for a size), or `x` itself."""
    return x.meta["val"] if isinstance(x, torch.fx.Node) else x


def _copy_graph(graph, plans):
    """`graph` copied, each planned slice_scatter replaced by arange + index_copy_."""
    new = torch.fx.Graph()
    env = {}
    planned = {p[0]: p for p in plans}
    for n in graph.nodes:
        if n not in planned:
            env[n] = new.node_copy(n, lambda x: env[x])
            continue
        _, base, src, dim, start, end = planned[n]
        val = base.meta["val"]
        start_, end_, src_ = (env[x] if isinstance(x, torch.fx.Node) else x
                              for x in (start, end, src))
        idx = new.call_function(aten.arange.start, (start_, end_),
                                {"dtype": torch.int64, "device": val.device})
        with val.fake_mode:
            idx.meta["val"] = torch.arange(_fake(start), _fake(end), dtype=torch.int64,
                                           device=val.device)
        write = new.call_function(WRITE_OP, (env[base], dim, idx, src_))
        write.meta = dict(n.meta)
        with val.fake_mode:   # the slice_scatter's own: a new tensor for aot, which gets
            write.meta["val"] = torch.empty_like(val)   # the buffer back and copies nothing
        env[n] = write
    return new
