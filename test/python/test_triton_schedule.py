"""The Triton generator reads the kernel schedule (issue 9): its loads and stores are at the
schedule's offsets, checked at the domain point, and a read the schedule does not have is
an internal error.

Kernels are built from MLIR text, compiled to PTX for sm_90 (no GPU needed) and run: on a
GPU when there is one, else in ttir_interp (which bounds-checks every lane); results are
compared with torch.
"""
import os
import sys

import pytest
import torch

pytest.importorskip("triton")

from stax._mlir import ir, new_context  # noqa: E402
from stax.passes import kernel_schedule  # noqa: E402
from stax.targets import triton as stt  # noqa: E402
from stax.targets.llvm import KernelLoweringError  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ttir_interp import run_kernel as interpret  # noqa: E402

CUDA = torch.cuda.is_available()
DEV = "cuda" if CUDA else "cpu"
F32, BF16, I32 = torch.float32, torch.bfloat16, torch.int32
_MEM = {F32: "f32", BF16: "bf16", I32: "i32", torch.int64: "i64"}


def ttype(shape, dtype):
    return "tensor<" + "".join(f"{s}x" for s in shape) + _MEM[dtype] + ">"


def kernel_text(body, in_specs, out_specs):
    ins = [ttype(s, d) for s, d in in_specs]
    outs = [ttype(s, d) for s, d in out_specs]
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(ins))
    return (f'func.func @main({", ".join(f"%x{i}: {t}" for i, t in enumerate(ins))}) {{\n'
            f'  %r:{len(outs)} = "stax_graph.kernel"('
            f'{", ".join(f"%x{i}" for i in range(len(ins)))}) ({{\n'
            f'  ^bb0({args}):\n{body}\n'
            f'  }}) {{name = "k"}} : ({", ".join(ins)}) -> ({", ".join(outs)})\n  return\n}}\n')


def compile_and_run(body, inputs, out_specs, name="k", config=None):
    """(outputs on the CPU, TritonKernel): compiled to PTX, then run on the GPU or in the
    TTIR interpreter."""
    ctx = new_context()
    with ctx, ir.Location.unknown():
        m = ir.Module.parse(kernel_text(body, [(tuple(t.shape), t.dtype) for t in inputs],
                                        out_specs))
        kop = [o for o in m.body.operations[0].regions[0].blocks[0].operations
               if o.operation.name == "stax_graph.kernel"][0]
        kernel_schedule.analyze(kop.operation)   # schedulable: the generator checks against it
        outs = [torch.empty(s, dtype=d, device=DEV) for s, d in out_specs]
        k = stt.compile_kernel(kop.operation, [t.stride() for t in inputs],
                               [o.stride() for o in outs], name, arch=90, config=config)
    assert f".entry {name}" in k.ptx
    for o in outs:   # poison: a lane never written shows up
        o.fill_(float("nan") if o.dtype.is_floating_point else -7)
    if CUDA:
        k(*inputs, *outs)
        torch.cuda.synchronize()
    else:
        interpret(k.ttir_kernel, *inputs, *outs)
    return [o.cpu() for o in outs], k


# ----------------------------------------------------------------------------- extent-1 reads

STACK_N = [2, 7, 300]


def _stack_bodies(n, dt):
    """torch.stack([x, y], 1) as the importer writes it (reshape to [n, 1], concat); x
    padded on a size-1 dim plus w. One kernel each: (body, input shapes, output shapes)."""
    V, C, F = ttype((n,), dt), ttype((n, 1), dt), ttype((n, 2), dt)
    P = ttype((n, 4), dt)
    stack = f'''    %xr = "stax.reshape"(%a0) : ({V}) -> {C}
    %yr = "stax.reshape"(%a1) : ({V}) -> {C}
    %s = "stax.concat"(%xr, %yr) {{dim = 1 : i64}} : ({C}, {C}) -> {F}'''
    return [
        (stack + f'''\n    "stax_graph.yield"(%s) : ({F}) -> ()''', [(n,), (n,)], [(n, 2)]),
        (f'''    %xr = "stax.reshape"(%a0) : ({V}) -> {C}
    %pd = "stax.pad"(%xr) {{low = array<i64: 0, 2>, high = array<i64: 0, 1>, value = 0 : {_MEM[dt]}}} : ({C}) -> {P}
    %pz = "stax.add"(%pd, %a1) : ({P}, {P}) -> {P}
    "stax_graph.yield"(%pz) : ({P}) -> ()''', [(n,), (n, 4)], [(n, 4)]),
    ]


@pytest.mark.parametrize("case", ["stack", "pad"])
@pytest.mark.parametrize("n", STACK_N)
def test_concat_and_pad_operands_of_extent_one(n, case):
    """A concat or pad operand of extent 1 along its dim (CI's ptx-only fuzz, seed 13,
    program 13000060: torch.stack in a training batch_norm): the schedule's map keeps the
    dim's expression (d0 + d1, valid where d1 == 0), the generator reads the size-1 dim at
    0 (d0); the check matches them on the read's region, and the values are eager's."""
    i = ["stack", "pad"].index(case)
    body, ins, outs = _stack_bodies(n, I32)[i]
    xs = [torch.randint(-60, 60, s, dtype=I32, device=DEV) for s in ins]
    got, _ = compile_and_run(body, xs, [(s, I32) for s in outs], name=f"k_{case}_{n}")
    c = [x.cpu() for x in xs]
    if case == "pad":
        want = torch.nn.functional.pad(c[0][:, None], (2, 1)) + c[1]
    else:
        want = torch.stack([c[0], c[1]], 1)
    assert torch.equal(got[0], want)


@pytest.mark.parametrize("case", [0, 1])
def test_a_read_the_schedule_does_not_have_is_an_internal_error(monkeypatch, case):
    """Without the region restriction these reads are none of the schedule's offsets (the
    failure CI saw), and that is a KernelLoweringError, never a silent load."""
    monkeypatch.setattr(kernel_schedule, "restrict_to_where", lambda e, where, sizes: e)
    body, ins, outs = _stack_bodies(5, I32)[case]
    with pytest.raises(KernelLoweringError, match="internal error.*none of the schedule's"):
        compile_and_run(body, [torch.zeros(s, dtype=I32, device=DEV) for s in ins],
                        [(s, I32) for s in outs], name=f"kbad{case}")


def test_region_pins_of_where_conditions():
    """kernel_schedule.where_pins / restrict_to_where: a concat lhs of extent 1 pins its
    dim to 0, a rhs of extent 1 to the split, a pad of extent 1 to `low`; a wider operand
    pins nothing; a pin is found through a reshape's mod."""
    ctx = new_context()
    with ctx:
        d0, d1 = ir.AffineDimExpr.get(0), ir.AffineDimExpr.get(1)

        def c(v):
            return ir.AffineConstantExpr.get(v)

        pins = kernel_schedule.where_pins
        assert pins([c(0) - d1], [5, 2]) == {"d1": 0}
        assert pins([d1 - c(1)], [5, 2]) == {"d1": 1}
        assert pins([d1 - c(2), c(2) - d1], [5, 4]) == {"d1": 2}
        assert pins([c(1) - d1], [5, 3]) == {}
        assert pins([d1 - c(1), c(2) - d1, c(1) - d0], [5, 6]) == {}
        assert pins([d1 - c(1), c(1) - d1, c(1) - d0], [5, 6]) == {"d1": 1}
        r = kernel_schedule.restrict_to_where(d0 + d1 - c(1), [d1 - c(1)], [5, 2])
        assert str(r) == "d0"
        r = kernel_schedule.restrict_to_where(d0 * c(3) + d1, [c(2) - d1], [5, 3])
        assert str(r) == "d0 * 3 + d1"   # nothing pinned: unchanged


# ----------------------------------------------------------------------------- 2-D tiles

def _permute_add(src_shape, perm, dt):
    """(x.permute(perm) + y) * 2: x of src_shape, y and the result of the permuted shape."""
    dst = tuple(src_shape[i] for i in perm)
    X, Y = ttype(src_shape, dt), ttype(dst, dt)
    body = f'''    %t = "stax.permute"(%a0) {{perm = array<i64: {", ".join(map(str, perm))}>}} : ({X}) -> {Y}
    %s = "stax.add"(%t, %a1) : ({Y}, {Y}) -> {Y}
    %two = "stax.full"() {{value = 2.0 : {_MEM[dt]}}} : () -> {Y}
    %r = "stax.mul"(%s, %two) : ({Y}, {Y}) -> {Y}
    "stax_graph.yield"(%r) : ({Y}) -> ()'''
    return body, dst


def _assert_2d(text, bp=64, bq=64):
    """The kernel is one 2-D block: [BP, 1] and [1, BQ] ranges, [BP, BQ] loads and
    stores, and no div/mod on a block tensor (offsets are index * stride sums)."""
    assert f"tensor<{bp}x1xi32>" in text and f"tensor<1x{bq}xi32>" in text, text
    loads = [ln for ln in text.splitlines() if "tt.load" in ln]
    assert loads and all(f"tensor<{bp}x{bq}x!tt.ptr" in ln for ln in loads), loads
    assert f"tt.store" in text and f"tensor<{bp}x{bq}x!tt.ptr" in text
    bad = [ln for ln in text.splitlines()
           if ("arith.divui" in ln or "arith.remui" in ln) and "tensor<" in ln]
    assert not bad, bad


TILED = [((512, 512), (1, 0)), ((771, 513), (1, 0)), ((3, 257, 130), (0, 2, 1)),
         ((2, 48, 17, 33), (0, 2, 3, 1))]


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("src,perm", TILED)
def test_permute_add_is_a_2d_tile_and_matches_eager(src, perm, dtype):
    """x.permute + y on 2-D tiles (issue 9, benchmarks/layout.py transpose_add): at 512^2,
    with tails on both axes (513 x 771), a batch dim and an NCHW -> NHWC permute (two dims
    from the program id); the values are eager's, bit for bit."""
    body, dst = _permute_add(src, perm, dtype)
    x = torch.randn(src).to(dtype).to(DEV)
    y = torch.randn(dst).to(dtype).to(DEV)
    outs, k = compile_and_run(body, [x, y], [(dst, dtype)],
                              name=f"tile_{'x'.join(map(str, src))}_{_MEM[dtype]}")
    _assert_2d(k.ttir_kernel.text)
    assert k.ttir_kernel.num_warps == 8 and k.ttir_kernel.config.block == 64 * 64
    want = (x.cpu().permute(perm) + y.cpu()) * 2
    assert torch.equal(outs[0], want)


def test_tile_dims_and_blocks_in_the_schedule():
    """The schedule decides the tile: dims (p, q) = (the transposed read's contiguous dim,
    the result's), blocks 64 (or a smaller dim's power of two, at least 16)."""
    ctx = new_context()
    for src, perm, want in [((771, 513), (1, 0), ((0, 1), (64, 64), 8)),
                            ((2, 48, 17, 33), (0, 2, 3, 1), ((2, 3), (64, 64), 8)),
                            ((20, 40), (1, 0), ((0, 1), (64, 32), 4)),
                            ((3, 257, 130), (0, 2, 1), ((1, 2), (64, 64), 8))]:
        body, dst = _permute_add(src, perm, F32)
        with ctx, ir.Location.unknown():
            m = ir.Module.parse(kernel_text(body, [(src, F32), (dst, F32)], [(dst, F32)]))
            kop = m.body.operations[0].regions[0].blocks[0].operations[0]
            sched = kernel_schedule.analyze(kop.operation)
            g = sched.gpu
            # the attribute round-trips the tile and verifies
            from stax.dialects.schedule import ATTR, read_schedule, schedule_errors, to_attr
            kop.operation.attributes[ATTR] = to_attr(sched)
            assert schedule_errors(kop.operation) == []
            assert read_schedule(kop.operation).gpu == g
        assert (g.mode, g.tile_dims, g.tile_blocks, g.num_warps) == ("tiled",) + want, src
        assert g.block == want[1][0] * want[1][1] and g.rblock == 1 and g.split == 1


@pytest.mark.parametrize("src,perm", [((8, 8), (1, 0)), ((512, 4), (1, 0)),
                                      ((4, 512, 64), (1, 0, 2))])
def test_no_tile_where_loads_are_contiguous_or_dims_are_small(src, perm):
    """A plain add, a transpose with a dim under 16, and a permute that keeps the last dim
    (every read contiguous along the result's dim) keep the 1-D block."""
    body, dst = _permute_add(src, perm, F32)
    x, y = torch.randn(src).to(DEV), torch.randn(dst).to(DEV)
    outs, k = compile_and_run(body, [x, y], [(dst, F32)], name="k1d")
    assert "x1xi32>" not in k.ttir_kernel.text and "tt.expand_dims" not in k.ttir_kernel.text
    assert torch.equal(outs[0], (x.cpu().permute(perm) + y.cpu()) * 2)


def test_explicit_config_keeps_the_tile_with_its_warps():
    """An autotuner candidate (an explicit pointwise config) keeps the schedule's tile and
    sets num_warps."""
    from stax.targets.triton_ttir import TritonConfig
    body, dst = _permute_add((96, 80), (1, 0), F32)
    x, y = torch.randn(96, 80).to(DEV), torch.randn(dst).to(DEV)
    outs, k = compile_and_run(body, [x, y], [(dst, F32)], name="ktuned",
                              config=TritonConfig(256, 1, 2, 1))
    _assert_2d(k.ttir_kernel.text)
    assert k.ttir_kernel.num_warps == 2 and k.ttir_kernel.config.block == 4096
    assert torch.equal(outs[0], (x.cpu().t() + y.cpu()) * 2)


def test_transposed_strided_input_through_the_driver(monkeypatch):
    """The whole route: (x.t() + y) * 2 traced for a (fake) CUDA device; x.t() reaches the
    kernel as a strided input or a permute, the schedule tiles it, and the interpreted
    kernels give eager's values."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    from stax.driver import compile_graph
    from stax.options import resolve_config
    from ttir_interp import cpu_triton
    monkeypatch.setenv("STAX_TRITON_ARCH", "90")

    def fn(x, y):
        return (x.t() + y) * 2.0

    texts = []
    import stax.targets.triton_ttir as TT
    orig = TT.emit_ttir

    def emit(*a, **kw):
        tk = orig(*a, **kw)
        texts.append(tk.text)
        return tk
    monkeypatch.setattr(TT, "emit_ttir", emit)
    monkeypatch.setattr(stt, "emit_ttir", emit)
    with FakeTensorMode(allow_non_fake_inputs=True):
        x, y = torch.empty(515, 260, device="cuda"), torch.empty(260, 515, device="cuda")
        gm = make_fx(fn, tracing_mode="fake")(x, y)
        cg = compile_graph(gm, [x, y], resolve_config(None, target="triton"))
    assert cg.route == "triton" and cg.kernel_count == 1
    assert len(texts) == 1
    _assert_2d(texts[0])
    xr, yr = torch.randn(515, 260), torch.randn(260, 515)
    with cpu_triton(cg):
        got = cg(xr, yr)
    got = got[0] if isinstance(got, (tuple, list)) else got
    assert torch.equal(got, (xr.t() + yr) * 2.0)
