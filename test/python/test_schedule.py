"""stax-schedule: the index and offset maps are right, checked against eager on every
domain point (exhaustively for small shapes, a random sample for large), and every
kernel of the test models gets a schedule that verifies, with the Triton generator's
own default tiling."""
import random

import models
import numpy as np
import pytest
import torch
from torch._decomp import core_aten_decompositions
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd

from stax._mlir import ir, new_context
from stax.dialects.schedule import read_schedule, schedule_errors, stride_along, to_attr
from stax.dialects.stax_dialect import KERNEL, verify_module
from stax.importer import import_graph
from stax.passes import schedule as schedule_pass
from stax.passes.kernel_schedule import ScheduleError, analyze, simplify
from stax.passes.registry import PassError, run_pipeline

FUSED = ["canonicalize", "cse", "stax-sink-converts", "stax-fuse", "cse"]


# ----------------------------------------------------------------------------- helpers

def capture(fn, *inputs, backward=False):
    """The ATen graphs (gm, example inputs) of `fn` under torch.compile: the forward,
    and with `backward` the backward too."""
    graphs = []

    def cap(gm, ex):
        graphs.append((gm, list(ex)))
        return make_boxed_func(gm.forward)

    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=cap, bw_compiler=cap,
                           decompositions=core_aten_decompositions())
    if not backward:
        with torch.no_grad():
            torch.compile(fn, backend=backend, fullgraph=True)(*inputs)
        return graphs
    out = torch.compile(fn, backend=backend, fullgraph=True)(*inputs)
    out.float().sum().backward()
    return graphs


def scheduled_module(fn, *inputs, graph=None):
    """`fn` imported, fused and scheduled (its only graph, or `graph` = (gm, inputs));
    returns (ctx, module, kernel ops)."""
    (gm, ex), = [graph] if graph is not None else capture(fn, *inputs)
    ctx = new_context()
    with ctx, ir.Location.unknown():
        module = import_graph(gm, ex, ctx).module
        run_pipeline(module, FUSED + ["stax-schedule"])
        verify_module(module)
        kernels = []
        module.operation.walk(lambda op: (kernels.append(op) if op.name == KERNEL else None)
                              or ir.WalkResult.ADVANCE)
    return ctx, module, kernels


def _py(e) -> str:
    """An AffineExpr as numpy source over arrays d[0], d[1], ... (an evaluator written
    apart from the analysis, so a wrong map cannot check itself)."""
    e = e.maybe_downcast()
    if isinstance(e, ir.AffineConstantExpr):
        return f"({e.value})"
    if isinstance(e, ir.AffineDimExpr):
        return f"d[{e.position}]"
    a, b = _py(e.lhs), _py(e.rhs)
    if isinstance(e, ir.AffineAddExpr):
        return f"({a} + {b})"
    if isinstance(e, ir.AffineMulExpr):
        return f"({a} * {b})"
    if isinstance(e, ir.AffineFloorDivExpr):
        return f"np.floor_divide({a}, {b})"
    if isinstance(e, ir.AffineModExpr):
        return f"np.mod({a}, {b})"
    if isinstance(e, ir.AffineCeilDivExpr):
        return f"(-np.floor_divide(-{a}, {b}))"
    raise AssertionError(f"unexpected affine expr {e}")


def evaluate(amap, points):
    """Each result of `amap` at every point (points: int64 array [n, rank])."""
    d = [points[:, i] for i in range(points.shape[1])]
    out = []
    for r in amap.results:
        v = eval(_py(r), {"np": np}, {"d": d})  # noqa: S307 - our own generated source
        out.append(np.broadcast_to(np.asarray(v, dtype=np.int64), (points.shape[0],)))
    return np.stack(out, axis=1) if out else np.zeros((points.shape[0], 0), np.int64)


def domain_points(shape, rng, limit=4096, sample=3000):
    n = int(np.prod(shape)) if shape else 1
    if n <= limit:
        idx = np.arange(n)
    else:
        idx = np.array(sorted(rng.sample(range(n), sample)) + [0, n - 1])
    return np.stack(np.unravel_index(idx, shape), axis=1).astype(np.int64) if shape else \
        np.zeros((1, 0), np.int64)


# ----------------------------------------------------------------------------- random view chains

def random_chain(rng, shape):
    """A random chain of views (permute, stepped slice, reshape split/merge, expand) on
    `shape`; returns (list of (description, torch function)), the final shape."""
    steps, shape = [], list(shape)
    for _ in range(rng.randint(2, 4)):
        kind = rng.choice(["permute", "slice", "split", "merge", "expand"])
        r = len(shape)
        if kind == "permute" and r >= 2:
            perm = list(range(r))
            rng.shuffle(perm)
            steps.append((f"permute{perm}", lambda t, p=perm: t.permute(*p)))
            shape = [shape[p] for p in perm]
        elif kind == "slice" and any(s >= 2 for s in shape):
            d = rng.choice([i for i, s in enumerate(shape) if s >= 2])
            a = rng.randint(0, shape[d] // 2)
            b = rng.randint(a + 1, shape[d])
            st = rng.randint(1, 3)
            idx = (slice(None),) * d + (slice(a, b, st),)
            steps.append((f"slice(d{d} {a}:{b}:{st})", lambda t, i=idx: t[i]))
            shape = shape[:d] + [len(range(a, b, st))] + shape[d + 1:]
        elif kind == "split":
            cands = [(i, f) for i, s in enumerate(shape) for f in (2, 3, 4, 8) if s % f == 0
                     and s > f]
            if not cands:
                continue
            d, f = rng.choice(cands)
            new = shape[:d] + [f, shape[d] // f] + shape[d + 1:]
            steps.append((f"reshape{new}", lambda t, n=new: t.reshape(n)))
            shape = new
        elif kind == "merge" and r >= 2:
            d = rng.randrange(r - 1)
            new = shape[:d] + [shape[d] * shape[d + 1]] + shape[d + 2:]
            steps.append((f"reshape{new}", lambda t, n=new: t.reshape(n)))
            shape = new
        elif kind == "expand" and r <= 3:
            d = rng.randint(0, r)
            n = rng.randint(2, 3)
            new = shape[:d] + [n] + shape[d:]
            steps.append((f"expand(at {d} to {n})",
                          lambda t, d=d, new=new: t.unsqueeze(d).expand(*new)))
            shape = new
    return steps, shape


SHAPES = [[4, 6], [2, 3, 4], [6, 8], [3, 512], [2, 4, 520], [1024, 3], [8, 12, 5]]


@pytest.mark.parametrize("seed", range(24))
def test_random_view_chain_offsets_match_eager(seed):
    rng = random.Random(seed)
    shape = SHAPES[seed % len(SHAPES)]
    steps, out_shape = random_chain(rng, shape)

    def fn(x):
        for _, f in steps:
            x = f(x)
        return x * 2.0 + 1.0

    x = torch.arange(int(np.prod(shape)), dtype=torch.float32).reshape(shape)
    ctx, module, kernels = scheduled_module(fn, x)
    with ctx:
        assert len(kernels) == 1, [str(k) for k in kernels]
        s = read_schedule(kernels[0])
        assert s.kind == "pointwise" and list(s.domain) == out_shape
        reads = s.reads_of(0)
        assert len(reads) == 1, reads
        rd = reads[0]
        assert rd.computed is None and rd.where is None
        pts = domain_points(out_shape, rng)
        want = ((fn(x) - 1.0) / 2.0).numpy()[tuple(pts.T)].astype(np.int64)
        flat = evaluate(rd.offset, pts)[:, 0]
        desc = " -> ".join(d for d, _ in steps)
        assert (flat == want).all(), f"{desc}: offset {rd.offset}"
        coords = evaluate(rd.map, pts)
        assert (x.numpy()[tuple(coords.T)].astype(np.int64) == want).all(), \
            f"{desc}: map {rd.map}"
        res = s.results[0]
        assert str(res.map) == str(ir.AffineMap.get_identity(len(out_shape)))


def test_strided_input_offsets_address_the_storage():
    """Given an input's real strides (a transposed, sliced view), the offset map
    addresses its storage."""
    def fn(x):
        return x.reshape(6, 4, 3).permute(2, 0, 1) + 1.0

    ctx, module, kernels = scheduled_module(fn, torch.zeros(24, 3))
    base = torch.arange(100 * 7, dtype=torch.float32).reshape(100, 7)
    x = base.t()[1:4:1, 2:74:3]  # [3, 24] view; make it [24, 3] via .t()
    x = x.t()
    assert list(x.shape) == [24, 3] and not x.is_contiguous()
    with ctx:
        s = analyze(kernels[0], input_strides=[list(x.stride())],
                    output_strides=[[1, 12, 3]])
        rd = s.reads_of(0)[0]
        pts = domain_points(list(s.domain), random.Random(0))
        want = (fn(x) - 1.0).numpy()[tuple(pts.T)]
        storage = base.flatten().numpy()
        got = storage[evaluate(rd.offset, pts)[:, 0] + x.storage_offset()]
        assert (got == want).all(), str(rd.offset)
        out = evaluate(s.results[0].offset, pts)[:, 0]
        assert (out == pts @ np.array([1, 12, 3])).all()


@pytest.mark.parametrize("src,dst", [([4, 6, 8], [24, 8]), ([24, 8], [4, 6, 8]),
                                     ([2, 3, 4, 5], [6, 20]), ([512, 6], [3, 1024]),
                                     ([8, 64], [2, 4, 8, 8]), ([7, 5], [35])])
def test_contiguous_reshape_offset_is_the_linear_index(src, dst):
    def fn(x):
        return x.reshape(dst) + 1.0

    ctx, module, kernels = scheduled_module(fn, torch.zeros(src))
    with ctx:
        s = read_schedule(kernels[0])
        off = s.reads_of(0)[0].offset
        lin = ir.AffineExpr.simplify_affine_expr(
            sum((ir.AffineDimExpr.get(i) * ir.AffineConstantExpr.get(int(np.prod(dst[i + 1:])))
                 for i in range(len(dst))), ir.AffineConstantExpr.get(0)), len(dst), 0)
        assert str(off.results[0]) == str(lin)
        assert "floordiv" not in str(off) and "mod" not in str(off)


def test_expand_read_has_stride_zero():
    def fn(x, b):
        return x + b.unsqueeze(0).expand(8, 512)

    ctx, module, kernels = scheduled_module(fn, torch.zeros(8, 512), torch.zeros(512))
    with ctx:
        s = read_schedule(kernels[0])
        (rb,) = s.reads_of(1)
        assert str(rb.map) == "(d0, d1) -> (d1)"
        assert str(rb.offset) == "(d0, d1) -> (d1)"   # d0 moves it by 0
        assert (stride_along(rb.offset, 0), stride_along(rb.offset, 1)) == (0, 1)


def test_stride_along_reads_the_offset():
    ctx, module, kernels = scheduled_module(
        lambda x, y: x + y.t() + y.reshape(4, 16, 64).permute(1, 0, 2).reshape(64, 64),
        torch.randn(64, 64), torch.randn(64, 64))
    with ctx:
        s = read_schedule(kernels[0])
        by_path = {r.path: r for r in s.reads_of(1)}
        t = by_path["permute"].offset
        assert (stride_along(t, 0), stride_along(t, 1)) == (1, 64)
        r = by_path["reshape.permute.reshape"].offset
        assert stride_along(r, 1) == 1           # the last dim stays contiguous
        assert stride_along(r, 0) is None        # d0 splits into 16 x 4 rows: div/mod
        assert stride_along(s.reads_of(0)[0].offset, 0) == 64


def test_simplify_uses_dim_bounds():
    with new_context():
        d0, d1 = ir.AffineDimExpr.get(0), ir.AffineDimExpr.get(1)
        e = ir.AffineFloorDivExpr.get(d0 * ir.AffineConstantExpr.get(8) + d1,
                                      ir.AffineConstantExpr.get(48))
        assert str(simplify(e, [24, 8])) == "d0 floordiv 6"
        assert str(simplify(e, [24, 9])) != "d0 floordiv 6"  # d1 may reach 8: no rewrite


# ----------------------------------------------------------------------------- reductions

def test_softmax_and_layernorm_phases():
    def softmax(x):
        return torch.softmax(x, dim=-1)

    ctx, module, kernels = scheduled_module(softmax, torch.randn(8, 1024))
    with ctx:
        (k,) = kernels
        s = read_schedule(k)
        body = [o.operation.name for o in k.regions[0].blocks[0].operations]
        assert s.kind == "reduction" and s.reduced_dims == (1,) and s.parallel_dims == (0,)
        assert [[body[p] for p in ph] for ph in s.phases] == [["stax.reduce_max"],
                                                             ["stax.reduce_sum"]]
        assert s.gpu.mode == "persistent"

    def layernorm(x, w, b):
        return torch.nn.functional.layer_norm(x, (512,), w, b)

    ctx, module, kernels = scheduled_module(layernorm, torch.randn(4, 16, 512),
                                            torch.randn(512), torch.randn(512))
    with ctx:
        k = [k for k in kernels if read_schedule(k).kind == "reduction"][0]
        s = read_schedule(k)
        body = [o.operation.name for o in k.regions[0].blocks[0].operations]
        assert len(s.phases) == 2
        assert all(body[p] == "stax.reduce_sum" for ph in s.phases for p in ph)
        assert s.row_values, "rstd is a per-row value"
        assert all(body[p] not in ("stax.reduce_sum",) for p in s.row_values)
        w_reads = s.reads_of(1)
        assert w_reads and all(str(r.map) == "(d0, d1, d2) -> (d2)" for r in w_reads)


def test_column_reduction_splits():
    ctx, module, kernels = scheduled_module(lambda x: x.sum(0), torch.randn(8192, 512))
    with ctx:
        s = read_schedule(kernels[0])
        assert s.reduced_dims == (0,) and s.parallel_dims == (1,)
        assert s.gpu.mode == "split" and s.gpu.split > 1
        assert s.results[0].space == "row" and str(s.results[0].map) == "(d0, d1) -> (d1)"


# ----------------------------------------------------------------------------- pass and verifier

def test_pass_is_idempotent_and_round_trips():
    def fn(x, y):
        return torch.softmax(x, -1) + y.t()

    ctx, module, kernels = scheduled_module(fn, torch.randn(16, 32), torch.randn(32, 16))
    with ctx:
        once = str(module)
        schedule_pass.run(module)
        assert str(module) == once
        again = ir.Module.parse(once)
        verify_module(again)
        assert str(again) == once
        for k in kernels:
            assert str(to_attr(read_schedule(k))) == str(k.attributes["stax.schedule"])


def test_verifier_names_kernel_and_field():
    ctx, module, kernels = scheduled_module(lambda x: x.t() + 1.0, torch.randn(8, 4))
    with ctx:
        k = kernels[0]
        d = ir.DictAttr(k.attributes["stax.schedule"])
        fields = {n.name: n.attr for n in d}
        fields["domain"] = ir.DenseI64ArrayAttr.get([4, 8, 1])
        k.attributes["stax.schedule"] = ir.DictAttr.get(fields)
        (msg,) = schedule_errors(k)
        assert "k0_" in msg and "parallel_dims" in msg
        fields["domain"] = ir.DenseI64ArrayAttr.get([4, 8])
        fields["tiling"] = ir.DictAttr.get({"gpu": ir.DictAttr.get({
            "mode": ir.StringAttr.get("pointwise"),
            **{n: ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v) for n, v in
               (("block", 96), ("rblock", 1), ("num_warps", 4), ("num_stages", 1),
                ("split", 1))}})})
        k.attributes["stax.schedule"] = ir.DictAttr.get(fields)
        (msg,) = schedule_errors(k)
        assert "tiling.gpu.block" in msg and "power of two" in msg
        with pytest.raises(Exception, match="tiling.gpu.block"):
            verify_module(module)


def test_unschedulable_kernel_is_a_pass_error():
    text = """
    func.func @f(%x: tensor<8x16xf32>) -> (tensor<8xf32>, tensor<16xf32>) {
      %0:2 = "stax_graph.kernel"(%x) ({
      ^bb0(%a: tensor<8x16xf32>):
        %s = "stax.reduce_sum"(%a) {dims = array<i64: 1>, keepdim = false} : (tensor<8x16xf32>) -> tensor<8xf32>
        %t = "stax.reduce_sum"(%a) {dims = array<i64: 0>, keepdim = false} : (tensor<8x16xf32>) -> tensor<16xf32>
        "stax_graph.yield"(%s, %t) : (tensor<8xf32>, tensor<16xf32>) -> ()
      }) {kind = "reduction", name = "k0_bad"} : (tensor<8x16xf32>) -> (tensor<8xf32>, tensor<16xf32>)
      return %0#0, %0#1 : tensor<8xf32>, tensor<16xf32>
    }"""
    ctx = new_context()
    with ctx:
        module = ir.Module.parse(text)
        with pytest.raises(PassError, match="k0_bad.*differ in signature"):
            schedule_pass.run(module)
        k = list(module.body.operations)[0].regions[0].blocks[0].operations[0]
        with pytest.raises(ScheduleError):
            analyze(k)


# ----------------------------------------------------------------------------- the test models

@pytest.mark.parametrize("name,graph", [(n, "fwd") for n in models.MODEL_NAMES] +
                         [("gpt2", "bwd"), ("llama", "bwd"), ("mlp", "bwd")])
def test_model_kernels_schedule_and_match_triton_tiling(name, graph):
    """Every kernel of the test models (forward, and the training backward of some) gets
    a schedule that verifies, whose GPU tiling is the config emit_ttir picks."""
    from stax.targets.kernel_ir import contiguous_strides
    from stax.targets.triton_ttir import emit_ttir

    torch.manual_seed(0)
    model = models.make_model(name)
    (x,) = models.make_inputs(name)
    if graph == "bwd":
        model.train()
        x.requires_grad_(True)
        graphs = capture(model, x, backward=True)
        ctx, module, kernels = scheduled_module(None, graph=graphs[-1])
    else:
        ctx, module, kernels = scheduled_module(model, x)
    assert kernels
    with ctx:
        for k in kernels:
            assert schedule_errors(k) == []
            s = read_schedule(k)
            block = k.regions[0].blocks[0]
            ins = [contiguous_strides(list(ir.RankedTensorType(a.type).shape))
                   for a in block.arguments]
            outs = [contiguous_strides(list(ir.RankedTensorType(v.type).shape))
                    for v in list(block.operations)[-1].operands]
            cfg = emit_ttir(k, ins, outs, "k").config
            g = s.gpu
            assert (g.block, g.rblock, g.num_warps, g.num_stages, g.split) == \
                (cfg.block, cfg.rblock, cfg.num_warps, cfg.num_stages, cfg.split), \
                ir.StringAttr(k.attributes["name"]).value
            # every affine read stays inside its input wherever it applies
            pts = domain_points(list(s.domain), random.Random(1), limit=512, sample=512)
            for r in s.reads:
                if r.map is None:
                    continue
                keep = np.ones(len(pts), bool) if r.where is None else \
                    (evaluate(r.where, pts) >= 0).all(axis=1)
                coords = evaluate(r.map, pts)[keep]
                shape = ir.RankedTensorType(block.arguments[r.input].type).shape
                assert ((coords >= 0) & (coords < np.array(shape, dtype=np.int64))).all(), \
                    (ir.StringAttr(k.attributes["name"]).value, str(r.map))


YIELD_VIEWS = """
func.func @yv(%x: tensor<4x6xf32>) -> (tensor<6x4xf32>, tensor<24xf32>, tensor<2x3x4xf32>, tensor<2x6xf32>) {
  %0:4 = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<4x6xf32>):
    %e = "stax.exp"(%a) : (tensor<4x6xf32>) -> tensor<4x6xf32>
    %t = "stax.permute"(%e) {perm = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
    %r = "stax.reshape"(%e) : (tensor<4x6xf32>) -> tensor<24xf32>
    %u = "stax.reshape"(%t) : (tensor<6x4xf32>) -> tensor<2x3x4xf32>
    %s = "stax.slice"(%e) {start = array<i64: 0, 0>, limit = array<i64: 4, 6>, step = array<i64: 2, 1>} : (tensor<4x6xf32>) -> tensor<2x6xf32>
    "stax_graph.yield"(%t, %r, %u, %s) : (tensor<6x4xf32>, tensor<24xf32>, tensor<2x3x4xf32>, tensor<2x6xf32>) -> ()
  }) {kind = "pointwise", name = "k0_views"} : (tensor<4x6xf32>) -> (tensor<6x4xf32>, tensor<24xf32>, tensor<2x3x4xf32>, tensor<2x6xf32>)
  return %0#0, %0#1, %0#2, %0#3 : tensor<6x4xf32>, tensor<24xf32>, tensor<2x3x4xf32>, tensor<2x6xf32>
}
"""


def test_result_maps_of_yielded_views():
    """A yielded view of a domain value: its result map sends domain point p to where
    the value computed at p lands in that output; a stepped slice is recorded computed."""
    ctx = new_context()
    with ctx:
        module = ir.Module.parse(YIELD_VIEWS)
        schedule_pass.run(module)
        k = list(module.body.operations)[0].regions[0].blocks[0].operations[0]
        s = read_schedule(k)
        assert s.domain == (4, 6)
        e = torch.arange(24.0).reshape(4, 6)  # stands for exp(x): a value per domain point
        outs = [e.t(), e.reshape(24), e.t().reshape(2, 3, 4)]
        pts = domain_points([4, 6], random.Random(0))
        for res, out in zip(s.results[:3], outs):
            flat = out.contiguous().flatten().numpy()
            got = flat[evaluate(res.offset, pts)[:, 0]]
            assert (got == e.numpy()[tuple(pts.T)]).all(), str(res.map)
            coords = evaluate(res.map, pts)
            assert (out.numpy()[tuple(coords.T)] == e.numpy()[tuple(pts.T)]).all()
        assert s.results[3].computed and "slice" in s.results[3].computed


@pytest.mark.parametrize("name,graph", [(n, "fwd") for n in models.MODEL_NAMES] +
                         [("gpt2", "bwd"), ("llama", "bwd"), ("mlp", "bwd")])
def test_cpu_tiling_is_what_the_cpu_generator_compiles(name, graph):
    """Every kernel of the test models gets tiling.cpu fields (passes/cpu_tiling.py) that
    are what the CPU generator compiled it with: it emits its loops from them (the kernel
    records the tiling it read), with their lanes, thread split and work, a 2-D tile
    exactly in mode "tiled", and 1-lane code exactly in mode "scalar"."""
    from stax.targets.llvm import compile_kernel
    torch.manual_seed(0)
    model = models.make_model(name)
    (x,) = models.make_inputs(name)
    if graph == "bwd":
        model.train()
        x.requires_grad_(True)
        ctx, module, kernels = scheduled_module(None, graph=capture(model, x, backward=True)[-1])
    else:
        ctx, module, kernels = scheduled_module(model, x)
    with ctx:
        for k in kernels:
            s = read_schedule(k)
            c = s.cpu
            ck = compile_kernel(k, s.input_strides, s.output_strides, "k")
            kname = ir.StringAttr(k.attributes["name"]).value
            assert ck.tiling == c, kname
            assert (c.vector_width, c.work, c.split_dim >= 0) == \
                (ck.vector_width, ck.work, ck.splittable), kname
            assert ("vector.transpose" in ck.mlir) == (c.mode == "tiled"), kname
            assert ("vector<16x" in ck.mlir) == (c.mode != "scalar") or \
                s.domain[c.vector_dim] < 16, kname
            assert sorted(c.loop_order) == list(range(len(s.domain)))


def test_cpu_tiling_of_a_bias_add():
    ctx, module, kernels = scheduled_module(lambda x, b: torch.tanh(x + b), torch.randn(256, 300),
                                            torch.randn(300))
    with ctx:
        (k,) = kernels
        c = read_schedule(k).cpu
        assert (c.mode, c.vector_width, c.loop_order, c.vector_dim, c.tail, c.split_dim) == \
            ("pointwise", 16, (0, 1), 1, "scalar", 0)   # 300 % 16 = 12: a 1-lane tail
        assert c.work >= c.parallel_min_elements


def test_one_input_read_through_two_paths_has_two_reads():
    ctx, module, kernels = scheduled_module(lambda x: x + x.t() * x, torch.randn(64, 64))
    with ctx:
        s = read_schedule(kernels[0])
        maps = sorted((str(r.map), r.path) for r in s.reads_of(0))
        assert maps == [("(d0, d1) -> (d0, d1)", "direct"), ("(d0, d1) -> (d1, d0)", "permute")]


# -- the CPU generator addresses its loads and stores from the schedule ------------------

def _cpu_kernels(fn, *args):
    import stax.backend as B
    torch._dynamo.reset()
    B.clear()
    out = torch.compile(fn, backend="stax")(*args)
    ks = [k for r in B.reports() for g in r.graphs for k in g.kernels]
    assert ks and all(g.route == "stax-cpu" for r in B.reports() for g in r.graphs)
    return out, ks


@pytest.mark.parametrize("name", ["mlp", "gpt2", "llama"])
def test_cpu_model_kernels_are_addressed_from_the_schedule(name):
    """Every kernel of the models, forward and backward, takes its offsets from the
    schedule (llvm.compile_kernel records the route as `addressing`), and the results
    are still eager's."""
    torch.manual_seed(0)
    m, x = {"mlp": lambda: (models.MLP(512, 1024, 512), torch.randn(256, 512)),
            "gpt2": lambda: (models.GPT2Block(dim=512, n_heads=8), torch.randn(2, 64, 512)),
            "llama": lambda: (models.LlamaBlock(dim=512, n_heads=8), torch.randn(2, 64, 512)),
            }[name]()
    xs = x.clone().requires_grad_()
    out, ks = _cpu_kernels(m, xs)
    out.square().mean().backward()
    ref = m(x)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    import stax.backend as B
    ks = [k for r in B.reports() for g in r.graphs for k in g.kernels]
    assert any("backward" in g.graph_id for r in B.reports() for g in r.graphs)
    own = [k.name for k in ks if getattr(k, "addressing", None) != "schedule"]
    assert not own, f"kernels not addressed from the schedule: {own}"


def test_cpu_gather_keeps_its_own_addressing():
    # a gather's data read is data-dependent: no affine map, so the kernel is addressed
    # by cpu_index (and says so) -- and is right
    x = torch.randn(64, 512)
    i = torch.randint(0, 64, (128,))
    out, ks = _cpu_kernels(lambda x, i: torch.index_select(x, 0, i) * 2, x, i)
    torch.testing.assert_close(out, torch.index_select(x, 0, i) * 2)
    assert {k.addressing for k in ks} >= {"cpu_index"}, [(k.name, k.addressing) for k in ks]
