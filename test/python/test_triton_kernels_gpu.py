"""The Triton target on hand-written kernels, every kernel kind, against torch.

Each case builds one `stax_graph.kernel` from MLIR text (like kernel_harness.py does for
the CPU target) and compiles it with `stax.targets.triton.compile_kernel`. With a CUDA
device the kernel runs on CUDA tensors and is compared with torch; without one the same
kernel still has to lower to TTIR and compile to PTX for sm_90 (that part runs in CI).

Covers: pointwise with broadcast and transposed inputs; row reductions persistent and
looped (rows of 3000, 10000 and 65536 elements); reductions over the leading dims of
[16384, 768] and of [8, 2048, 768] over [0, 1] (bias-gradient shapes) in f32 and bf16;
multi-dim reductions; softmax / layernorm / rmsnorm multi-phase kernels (looped too);
argmax / argmin; a column-space reduction feeding a full-space output (batchnorm-style);
concat / pad / iota; every candidate config of a few shapes.
"""
import math
import os
import re

import pytest
import torch

pytest.importorskip("triton")

from kernel_harness import softmax_body  # noqa: E402
from stax._mlir import ir, new_context  # noqa: E402
from stax.targets import triton as stt  # noqa: E402
from stax.targets.triton_ttir import (KernelShape, TritonConfig, analyze_kernel,  # noqa: E402
                                      candidate_configs)

CUDA = torch.cuda.is_available()
DEV = "cuda" if CUDA else "cpu"
F32, BF16, I64 = torch.float32, torch.bfloat16, torch.int64
_MEM = {F32: "f32", BF16: "bf16", torch.float16: "f16", torch.float64: "f64", I64: "i64",
        torch.int32: "i32", torch.int8: "i8", torch.uint8: "ui8", torch.bool: "i1"}


@pytest.fixture(autouse=True, scope="module")
def _cache_dir(tmp_path_factory):
    old = os.environ.get("STAX_CACHE_DIR")
    os.environ["STAX_CACHE_DIR"] = str(tmp_path_factory.mktemp("stax-triton-cache"))
    yield
    if old is None:
        os.environ.pop("STAX_CACHE_DIR", None)
    else:
        os.environ["STAX_CACHE_DIR"] = old


def ttype(shape, dtype):
    return "tensor<" + "".join(f"{s}x" for s in shape) + _MEM[dtype] + ">"


def _arch():
    if CUDA:
        major, minor = torch.cuda.get_device_capability()
        return major * 10 + minor
    return 90


def _text(body, in_specs, out_specs):
    in_types = [ttype(s, d) for s, d in in_specs]
    out_types = [ttype(s, d) for s, d in out_specs]
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(in_types))
    return (f'func.func @main({", ".join(f"%x{i}: {t}" for i, t in enumerate(in_types))}) {{\n'
            f'  %r:{len(out_types)} = "stax_graph.kernel"('
            f'{", ".join(f"%x{i}" for i in range(len(in_specs)))}) ({{\n'
            f'  ^bb0({args}):\n{body}\n'
            f'  }}) : ({", ".join(in_types)}) -> ({", ".join(out_types)})\n  return\n}}\n')


def run_kernel(body, inputs, out_specs, name="k", config=None):
    """Compile the kernel for these inputs' strides; on CUDA run it and return the outputs
    (on the CPU), else return None after checking the PTX. Returns (outs, TritonKernel)."""
    text = _text(body, [(tuple(t.shape), t.dtype) for t in inputs], out_specs)
    ctx = new_context()
    with ctx, ir.Location.unknown():
        m = ir.Module.parse(text)
        kop = [o for o in m.body.operations[0].regions[0].blocks[0].operations
               if o.operation.name == "stax_graph.kernel"][0]
        outs = [torch.empty(s, dtype=d, device=DEV) for s, d in out_specs]
        aligned = tuple(t.data_ptr() % 16 == 0 for t in inputs) + (True,) * len(outs) \
            if CUDA else None
        k = stt.compile_kernel(kop.operation, [t.stride() for t in inputs],
                               [o.stride() for o in outs], name, arch=_arch(), config=config,
                               aligned=aligned)
    assert f".entry {name}" in k.ptx
    if not CUDA:
        return None, k
    for o in outs:   # poison: a lane that is never written shows up
        if o.dtype.is_floating_point:
            o.fill_(float("nan"))
        else:
            o.fill_(-7)
    k(*inputs, *outs)
    torch.cuda.synchronize()
    return [o.cpu() for o in outs], k


def close(got, want, rtol, atol, what=""):
    """assert_close with a message naming the first bad positions (rows) to help debug."""
    if got is None:
        return
    want = want.to(got.dtype) if not got.dtype.is_floating_point else want
    g, w = got.double(), want.double()
    bad = ~((g - w).abs() <= atol + rtol * w.abs())
    bad |= torch.isnan(g) != torch.isnan(w)
    if bad.any():
        nz = bad.nonzero()
        d = (g - w).abs()
        d = torch.where(torch.isnan(d), torch.full_like(d, float("inf")), d)
        msg = (
            f"{what}: {int(bad.sum())}/{bad.numel()} mismatches, max abs err "
            f"{float(d.max()):.3g}; first bad idx {nz[:6].tolist()}; got "
            f"{g[tuple(nz[0])].item():.6g} want {w[tuple(nz[0])].item():.6g}; "
            f"bad along dims: {[sorted(set(nz[:, i].tolist()))[:8] for i in range(nz.shape[1])]}")
        log = os.environ.get("STAX_KERNEL_TEST_LOG")
        if log:   # written at once: a run cut short by a timeout keeps what it found
            with open(log, "a") as f:
                f.write(os.environ.get("PYTEST_CURRENT_TEST", "?") + " :: " + msg + "\n")
        raise AssertionError(msg)


def randn(*shape, dtype=F32, scale=1.0):
    return (torch.randn(*shape) * scale).to(dtype).to(DEV)


torch.manual_seed(0)


# ----------------------------------------------------------------------------- pointwise

@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("shape", [(40, 24), (1000, 333)])
def test_pointwise_broadcast_and_transposed(dtype, shape):
    M, N = shape
    a = randn(M, N, dtype=dtype)
    b = randn(N, M, dtype=dtype).t()      # transposed (strided) input
    c = randn(N, dtype=dtype)
    T, C = ttype(shape, dtype), ttype((N,), dtype)
    body = f'''    %cb = "stax.broadcast_in_dim"(%a2) {{dims = array<i64: 1>}} : ({C}) -> {T}
    %bb = "stax.add"(%a1, %cb) : ({T}, {T}) -> {T}
    %e = "stax.tanh"(%bb) : ({T}) -> {T}
    %r = "stax.mul"(%a0, %e) : ({T}, {T}) -> {T}
    "stax_graph.yield"(%r, %e) : ({T}, {T}) -> ()'''
    outs, k = run_kernel(body, [a, b, c], [(shape, dtype), (shape, dtype)])
    assert k.kind == "pointwise"
    if outs:
        af, bf, cf = a.float().cpu(), b.float().cpu(), c.float().cpu()
        e = torch.tanh(bf + cf)
        tol = 1e-5 if dtype == F32 else 8e-3
        close(outs[1], e.to(dtype), tol, tol, "tanh")
        close(outs[0], (af * e.to(dtype).float() if False else af * e).to(dtype), tol, tol, "mul")


def test_pointwise_transposed_output_and_3d_broadcast():
    a = randn(8, 1, 50)
    b = randn(8, 30, 1)
    T = ttype((8, 30, 50), F32)
    body = f'''    %ab = "stax.broadcast_in_dim"(%a0) {{dims = array<i64: 0, 1, 2>}} : ({ttype((8, 1, 50), F32)}) -> {T}
    %bb = "stax.broadcast_in_dim"(%a1) {{dims = array<i64: 0, 1, 2>}} : ({ttype((8, 30, 1), F32)}) -> {T}
    %r = "stax.sub"(%ab, %bb) : ({T}, {T}) -> {T}
    "stax_graph.yield"(%r) : ({T}) -> ()'''
    outs, k = run_kernel(body, [a, b], [((8, 30, 50), F32)])
    if outs:
        close(outs[0], a.cpu() - b.cpu(), 0, 0, "sub")


# ----------------------------------------------------------------------------- reductions

RED = {"reduce_sum": lambda x, d: x.sum(d), "reduce_max": lambda x, d: x.amax(d),
       "reduce_min": lambda x, d: x.amin(d)}


def _sum_tol(dtype, n):
    # f32 accumulation in a different order: ~ sqrt(n) * eps * |terms|; a bf16 result is
    # one rounding of the f32 sum (2^-8 relative) plus that.
    if dtype == F32:
        return 2e-5, 2e-5 * math.sqrt(n) * 4
    return 8e-3, 2e-4 * math.sqrt(n) + 1e-2


def _reduce_case(kind, shape, dims, dtype, keepdim=False, config=None, name="k"):
    x = randn(*shape, dtype=dtype)
    out_shape = tuple((1 if i in dims else s) for i, s in enumerate(shape) if keepdim or i not in dims)
    X, R = ttype(shape, dtype), ttype(out_shape, dtype)
    dl = ", ".join(map(str, dims))
    body = (f'    %r = "stax.{kind}"(%a0) {{dims = array<i64: {dl}>, keepdim = {str(keepdim).lower()}}} : ({X}) -> {R}\n'
            f'    "stax_graph.yield"(%r) : ({R}) -> ()')
    outs, k = run_kernel(body, [x], [(out_shape, dtype)], name=name, config=config)
    if outs:
        want = RED[kind](x.float().cpu(), dims)
        if keepdim:
            want = want.reshape(out_shape)
        n = math.prod(shape[d] for d in dims)
        rtol, atol = _sum_tol(dtype, n) if kind == "reduce_sum" else (0, 0)
        close(outs[0], want.to(dtype) if kind != "reduce_sum" else want, rtol, atol,
              f"{kind} {shape} over {dims} {dtype}")
    return k


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("kind", sorted(RED))
@pytest.mark.parametrize("shape", [(16, 700), (6, 3000), (5, 10000), (3, 65536)])
def test_row_reduction_persistent_and_looped(kind, shape, dtype):
    k = _reduce_case(kind, shape, [1], dtype)
    # a few long rows: the reduced range is split over programs (two stages)
    assert k.kind == ("reduction-persistent" if shape[1] <= 4096 else "reduction-split")
    k = _reduce_case(kind, shape, [1], dtype, config=TritonConfig(1, 2048, 8, 1), name="unsplit")
    assert k.kind == ("reduction-persistent" if shape[1] <= 2048 else "reduction-looped")


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("kind", ["reduce_sum", "reduce_max"])
@pytest.mark.parametrize("shape,dims", [((16384, 768), [0]), ((8, 2048, 768), [0, 1]),
                                        ((2048, 768), [0]), ((1000, 3072), [0]),
                                        ((16384, 3072), [0])])
def test_leading_dim_reduction_bias_grad(kind, shape, dims, dtype):
    if not CUDA and shape == (16384, 3072):
        pytest.skip("same TTIR shape class as (16384, 768)")
    _reduce_case(kind, shape, dims, dtype)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_leading_dim_reduction_keepdim(dtype):
    _reduce_case("reduce_sum", (8, 2048, 768), [0, 1], dtype, keepdim=True)


@pytest.mark.parametrize("kind", sorted(RED) + ["reduce_prod"])
@pytest.mark.parametrize("shape,dims", [((6, 20, 35), [0, 2]), ((6, 20, 35), [1]),
                                        ((6, 20, 35), [0, 1, 2]), ((64, 300, 40), [0, 2]),
                                        ((32, 3000, 8), [0, 1]), ((40, 50, 60), [0, 2]),
                                        ((4, 8, 4096), [0, 2])])
def test_multi_dim_reductions(kind, shape, dims):
    if kind == "reduce_prod":
        x = (torch.rand(*shape) * 0.02 + 0.99).to(DEV)
    else:
        x = randn(*shape)
    out_shape = tuple(s for i, s in enumerate(shape) if i not in dims)
    X, R = ttype(shape, F32), ttype(out_shape, F32)
    dl = ", ".join(map(str, dims))
    body = (f'    %r = "stax.{kind}"(%a0) {{dims = array<i64: {dl}>, keepdim = false}} : ({X}) -> {R}\n'
            f'    "stax_graph.yield"(%r) : ({R}) -> ()')
    outs, k = run_kernel(body, [x], [(out_shape, F32)])
    if outs:
        xc = x.cpu().double()
        if kind == "reduce_prod":
            want = xc
            for d in sorted(dims, reverse=True):
                want = want.prod(d)
        else:
            want = RED[kind](xc, dims)
        n = math.prod(shape[d] for d in dims)
        close(outs[0], want, 1e-4, 1e-4 * math.sqrt(n), f"{kind} {shape} {dims}")


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
@pytest.mark.parametrize("shape,dim", [((9, 31), 1), ((6, 3000), 1), ((4, 10000), 1),
                                       ((2, 65536), 1), ((3000, 7), 0), ((10000, 5), 0)])
def test_arg_reductions_first_index_on_ties(kind, shape, dim):
    x = torch.randint(0, 50, shape).float().to(DEV)   # many ties
    out_shape = tuple(s for i, s in enumerate(shape) if i != dim)
    X, R = ttype(shape, F32), ttype(out_shape, I64)
    body = (f'    %r = "stax.{kind}"(%a0) {{dim = {dim} : i64, keepdim = false}} : ({X}) -> {R}\n'
            f'    "stax_graph.yield"(%r) : ({R}) -> ()')
    outs, k = run_kernel(body, [x], [(out_shape, I64)])
    if outs:
        want = getattr(torch, kind)(x.cpu(), dim)
        close(outs[0], want, 0, 0, kind)


# ----------------------------------------------------------------------------- multi-phase

@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("shape", [(64, 1000), (8, 3000), (4, 10000), (2, 65536), (96, 2048)])
def test_softmax_persistent_and_looped(shape, dtype):
    x = randn(*shape, dtype=dtype, scale=3)
    outs, k = run_kernel(softmax_body(shape, dtype), [x], [(shape, dtype)])
    if outs:
        want = torch.softmax(x.float().cpu(), 1)
        tol = 1e-5 if dtype == F32 else 8e-3
        close(outs[0], want, tol, tol * 1e-2, f"softmax {shape}")


def _layernorm_body(M, N, dtype):
    S, R, V = ttype((M, N), dtype), ttype((M, 1), F32), ttype((N,), dtype)
    SF = ttype((M, N), F32)
    return f'''    %xf = "stax.convert"(%a0) : ({S}) -> {SF}
    %s = "stax.reduce_sum"(%xf) {{dims = array<i64: 1>, keepdim = true}} : ({SF}) -> {R}
    %n = "stax.full"() {{value = {float(N)} : f32}} : () -> {R}
    %mean = "stax.div"(%s, %n) : ({R}, {R}) -> {R}
    %mb = "stax.broadcast_in_dim"(%mean) {{dims = array<i64: 0, 1>}} : ({R}) -> {SF}
    %xc = "stax.sub"(%xf, %mb) : ({SF}, {SF}) -> {SF}
    %sq = "stax.mul"(%xc, %xc) : ({SF}, {SF}) -> {SF}
    %vs = "stax.reduce_sum"(%sq) {{dims = array<i64: 1>, keepdim = true}} : ({SF}) -> {R}
    %var = "stax.div"(%vs, %n) : ({R}, {R}) -> {R}
    %eps = "stax.full"() {{value = 1.0e-5 : f32}} : () -> {R}
    %ve = "stax.add"(%var, %eps) : ({R}, {R}) -> {R}
    %rstd = "stax.rsqrt"(%ve) : ({R}) -> {R}
    %rb = "stax.broadcast_in_dim"(%rstd) {{dims = array<i64: 0, 1>}} : ({R}) -> {SF}
    %y = "stax.mul"(%xc, %rb) : ({SF}, {SF}) -> {SF}
    %wf = "stax.convert"(%a1) : ({V}) -> {ttype((N,), F32)}
    %bf = "stax.convert"(%a2) : ({V}) -> {ttype((N,), F32)}
    %wb = "stax.broadcast_in_dim"(%wf) {{dims = array<i64: 1>}} : ({ttype((N,), F32)}) -> {SF}
    %bb = "stax.broadcast_in_dim"(%bf) {{dims = array<i64: 1>}} : ({ttype((N,), F32)}) -> {SF}
    %yw = "stax.mul"(%y, %wb) : ({SF}, {SF}) -> {SF}
    %o = "stax.add"(%yw, %bb) : ({SF}, {SF}) -> {SF}
    %oc = "stax.convert"(%o) : ({SF}) -> {S}
    "stax_graph.yield"(%oc, %mean, %rstd) : ({S}, {R}, {R}) -> ()'''


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("M,N", [(33, 768), (16, 3000), (8, 10000), (2, 65536)])
def test_layernorm_persistent_and_looped(M, N, dtype):
    x, w, b = randn(M, N, dtype=dtype), randn(N, dtype=dtype), randn(N, dtype=dtype)
    outs, k = run_kernel(_layernorm_body(M, N, dtype), [x, w, b],
                         [((M, N), dtype), ((M, 1), F32), ((M, 1), F32)])
    if outs:
        xf, wf, bf = x.float().cpu(), w.float().cpu(), b.float().cpu()
        want, m2, r2 = torch.ops.aten.native_layer_norm(xf, [N], wf, bf, 1e-5)
        tol = 2e-5 if dtype == F32 else 1.6e-2
        close(outs[1], m2, 1e-5, 1e-5, "mean")
        close(outs[2], r2, 1e-4, 1e-5, "rstd")
        close(outs[0], want, tol, tol, "layernorm out")


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("M,N", [(64, 768), (4, 10000)])
def test_rmsnorm_persistent_and_looped(M, N, dtype):
    x, w = randn(M, N, dtype=dtype), randn(N, dtype=dtype)
    S, R, V = ttype((M, N), dtype), ttype((M, 1), dtype), ttype((N,), dtype)
    body = f'''    %sq = "stax.mul"(%a0, %a0) : ({S}, {S}) -> {S}
    %s = "stax.reduce_sum"(%sq) {{dims = array<i64: 1>, keepdim = true}} : ({S}) -> {R}
    %n = "stax.full"() {{value = {float(N)} : f32}} : () -> {R}
    %ms = "stax.div"(%s, %n) : ({R}, {R}) -> {R}
    %eps = "stax.full"() {{value = 1.0e-6 : f32}} : () -> {R}
    %ve = "stax.add"(%ms, %eps) : ({R}, {R}) -> {R}
    %r = "stax.rsqrt"(%ve) : ({R}) -> {R}
    %rb = "stax.broadcast_in_dim"(%r) {{dims = array<i64: 0, 1>}} : ({R}) -> {S}
    %wb = "stax.broadcast_in_dim"(%a1) {{dims = array<i64: 1>}} : ({V}) -> {S}
    %y = "stax.mul"(%a0, %rb) : ({S}, {S}) -> {S}
    %o = "stax.mul"(%y, %wb) : ({S}, {S}) -> {S}
    "stax_graph.yield"(%o) : ({S}) -> ()'''
    outs, k = run_kernel(body, [x, w], [((M, N), dtype)])
    if outs:
        xf, wf = x.float().cpu(), w.float().cpu()
        if dtype == BF16:   # the graph rounds the row values to bf16 (R is bf16)
            ms = (xf * xf).sum(1, keepdim=True).bfloat16().float() / N
            r = torch.rsqrt(ms.bfloat16().float() + 1e-6).bfloat16().float()
        else:
            r = torch.rsqrt((xf * xf).mean(1, keepdim=True) + 1e-6)
        want = xf * r * wf
        tol = 1e-5 if dtype == F32 else 2e-2
        close(outs[0], want, tol, tol, "rmsnorm")


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("M,N", [(1000, 64), (20000, 96), (16384, 768)])
def test_batchnorm_style_column_mean_feeds_full_output(M, N, dtype):
    """mean over dim 0 (column space), then x - mean (full space) and the mean itself."""
    x = randn(M, N, dtype=dtype)
    S, C = ttype((M, N), dtype), ttype((1, N), dtype)
    body = f'''    %s = "stax.reduce_sum"(%a0) {{dims = array<i64: 0>, keepdim = true}} : ({S}) -> {C}
    %n = "stax.full"() {{value = {float(M)} : f32}} : () -> {C}
    %mean = "stax.div"(%s, %n) : ({C}, {C}) -> {C}
    %mb = "stax.broadcast_in_dim"(%mean) {{dims = array<i64: 0, 1>}} : ({C}) -> {S}
    %xc = "stax.sub"(%a0, %mb) : ({S}, {S}) -> {S}
    "stax_graph.yield"(%xc, %mean) : ({S}, {C}) -> ()'''
    outs, k = run_kernel(body, [x], [((M, N), dtype), ((1, N), dtype)])
    if outs:
        xf = x.float().cpu()
        mean = xf.mean(0, keepdim=True)
        if dtype == BF16:
            mean = mean.bfloat16().float()   # the graph's row values are bf16
        rt, at = _sum_tol(dtype, M)
        close(outs[1], xf.mean(0, keepdim=True), rt, at / M + 1e-3, "mean")
        tol = 1e-5 if dtype == F32 else 1e-2
        close(outs[0], xf - mean, tol, tol, "x - mean")


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("M,N", [(64, 768), (16384, 768)])
def test_layernorm_backward_weight_grad_column_reduction(M, N, dtype):
    """sum over rows of g * (x - mean) * rstd, with per-row mean/rstd read along the
    reduced dim (the layernorm weight gradient), and the bias gradient sum(g)."""
    g, x = randn(M, N, dtype=dtype), randn(M, N, dtype=dtype)
    mean, rstd = randn(M, 1), (torch.rand(M, 1) + 0.5).to(DEV)
    S, SF, RM, V = ttype((M, N), dtype), ttype((M, N), F32), ttype((M, 1), F32), ttype((N,), F32)
    VD = ttype((N,), dtype)
    body = f'''    %gf = "stax.convert"(%a0) : ({S}) -> {SF}
    %xf = "stax.convert"(%a1) : ({S}) -> {SF}
    %mb = "stax.broadcast_in_dim"(%a2) {{dims = array<i64: 0, 1>}} : ({RM}) -> {SF}
    %rb = "stax.broadcast_in_dim"(%a3) {{dims = array<i64: 0, 1>}} : ({RM}) -> {SF}
    %xc = "stax.sub"(%xf, %mb) : ({SF}, {SF}) -> {SF}
    %xh = "stax.mul"(%xc, %rb) : ({SF}, {SF}) -> {SF}
    %p = "stax.mul"(%gf, %xh) : ({SF}, {SF}) -> {SF}
    %dw = "stax.reduce_sum"(%p) {{dims = array<i64: 0>, keepdim = false}} : ({SF}) -> {V}
    %db = "stax.reduce_sum"(%gf) {{dims = array<i64: 0>, keepdim = false}} : ({SF}) -> {V}
    %dwc = "stax.convert"(%dw) : ({V}) -> {VD}
    %dbc = "stax.convert"(%db) : ({V}) -> {VD}
    "stax_graph.yield"(%dwc, %dbc) : ({VD}, {VD}) -> ()'''
    outs, k = run_kernel(body, [g, x, mean, rstd], [((N,), dtype), ((N,), dtype)])
    if outs:
        gf, xf = g.float().cpu(), x.float().cpu()
        dw = (gf * ((xf - mean.cpu()) * rstd.cpu())).sum(0)
        rt, at = _sum_tol(dtype, M)
        close(outs[0], dw, rt, 2 * at, "dw")
        close(outs[1], gf.sum(0), rt, at, "db")


@pytest.mark.parametrize("M,N", [(16, 100), (4, 10000)])
def test_row_value_broadcast_output_of_domain_shape(M, N):
    """An output of the reduction domain's shape that is only a broadcast row value."""
    x = randn(M, N)
    S, R = ttype((M, N), F32), ttype((M, 1), F32)
    body = f'''    %s = "stax.reduce_sum"(%a0) {{dims = array<i64: 1>, keepdim = true}} : ({S}) -> {R}
    %sb = "stax.broadcast_in_dim"(%s) {{dims = array<i64: 0, 1>}} : ({R}) -> {S}
    %y = "stax.sub"(%a0, %sb) : ({S}, {S}) -> {S}
    "stax_graph.yield"(%sb, %y) : ({S}, {S}) -> ()'''
    outs, k = run_kernel(body, [x], [((M, N), F32), ((M, N), F32)])
    if outs:
        s = x.cpu().sum(1, keepdim=True)
        rt, at = _sum_tol(F32, N)
        close(outs[0], s.expand(M, N), rt, at, "broadcast sum")
        close(outs[1], x.cpu() - s, rt, at, "x - sum")


# ----------------------------------------------------------------------------- split reductions

@pytest.mark.parametrize("dtype", [F32, BF16])
def test_split_reduction_scalar_loss_with_full_output(dtype):
    """An mse-style loss: a full-space output (the difference) and one scalar sum scaled
    in the row epilogue. One row: the reduced range is split over many programs."""
    shape = (4, 1000, 768)
    a, b = randn(*shape, dtype=dtype), randn(*shape, dtype=dtype)
    n = math.prod(shape)
    X, XF, R, RD = ttype(shape, dtype), ttype(shape, F32), ttype((), F32), ttype((), dtype)
    body = f'''    %af = "stax.convert"(%a0) : ({X}) -> {XF}
    %bf = "stax.convert"(%a1) : ({X}) -> {XF}
    %d = "stax.sub"(%af, %bf) : ({XF}, {XF}) -> {XF}
    %dd = "stax.convert"(%d) : ({XF}) -> {X}
    %sq = "stax.mul"(%d, %d) : ({XF}, {XF}) -> {XF}
    %s = "stax.reduce_sum"(%sq) {{dims = array<i64: 0, 1, 2>, keepdim = false}} : ({XF}) -> {R}
    %inv = "stax.full"() {{value = {1.0 / n!r} : f32}} : () -> {R}
    %m = "stax.mul"(%s, %inv) : ({R}, {R}) -> {R}
    %mc = "stax.convert"(%m) : ({R}) -> {RD}
    "stax_graph.yield"(%dd, %mc) : ({X}, {RD}) -> ()'''
    outs, k = run_kernel(body, [a, b], [(shape, dtype), ((), dtype)])
    assert k.kind == "reduction-split" and k.grid[1] > 1, (k.kind, k.grid)
    assert k.ttir_kernel.stage2 is not None and k.ttir_kernel.workspace == ((k.grid[1], "f32"),)
    assert "tt.get_program_id y" in k.ttir and "@k_final" in k.ttir
    if outs:
        d = a.float().cpu() - b.float().cpu()
        close(outs[0], d.to(dtype), 0, 0, "difference")
        close(outs[1], (d * d).mean(), 1e-4 if dtype == F32 else 8e-3, 1e-5, "mean square")


@pytest.mark.parametrize("kind", ["reduce_sum", "reduce_max", "reduce_min"])
def test_split_reduction_column_kinds_and_forced_splits(kind):
    """Column reductions of a bias-gradient shape under the default split and forced
    split factors (uneven last part); max/min need the neutral element in masked lanes."""
    shape = (16384, 768)
    for sp in (None, 3, 64):
        cfg = None if sp is None else TritonConfig(64, 64, 4, 1, sp)
        k = _reduce_case(kind, shape, [0], F32, config=cfg, name=f"split{sp or 0}")
        assert k.kind == "reduction-split", (sp, k.kind, k.grid)


def test_split_is_refused_where_a_full_output_reads_the_reduction():
    """batchnorm-style x - mean(x, 0): the full output needs the finished mean, so the
    kernel is not splittable and a forced split is a clear error, not a wrong result."""
    M, N = 16384, 96
    S, C = ttype((M, N), F32), ttype((1, N), F32)
    body = f'''    %s = "stax.reduce_sum"(%a0) {{dims = array<i64: 0>, keepdim = true}} : ({S}) -> {C}
    %sb = "stax.broadcast_in_dim"(%s) {{dims = array<i64: 0, 1>}} : ({C}) -> {S}
    %xc = "stax.sub"(%a0, %sb) : ({S}, {S}) -> {S}
    "stax_graph.yield"(%xc, %s) : ({S}, {C}) -> ()'''
    x = randn(M, N)
    outs, k = run_kernel(body, [x], [((M, N), F32), ((1, N), F32)])
    assert k.kind == "reduction-looped" and k.config.split == 1
    with pytest.raises(stt.KernelLoweringError, match="cannot be split"):
        run_kernel(body, [x], [((M, N), F32), ((1, N), F32)], name="forced",
                   config=TritonConfig(64, 64, 4, 1, 8))


# ----------------------------------------------------------------------------- scalars in reductions

@pytest.mark.parametrize("shape,dims,cfg", [
    ((256, 2048), [0], None),                         # column, persistent (a bias gradient)
    ((256, 512), [0], None),
    ((16, 128, 1024), [0, 2], None),                  # BatchNorm's sums: looped, one row each
    ((64, 5000), [1], None),                          # rows, looped
    ((4, 50000), [1], None),                          # rows, split (two stages)
    ((16384, 96), [0], TritonConfig(64, 64, 4, 1, 8)),  # column, forced split
])
def test_scalar_input_broadcast_over_rows_of_a_reduction(shape, dims, cfg):
    """`g / sqrt(n)` (a 0-dim loss scale) times x, summed over `dims`, and the product
    itself: the scalar is one load of element 0 in every row block (issue 8: it was read
    at the row index, past the end of its 1-element buffer, so bias and BatchNorm
    gradients came out wrong at real sizes). Without a GPU the kernel runs in
    ttir_interp, which bounds-checks every lane."""
    from ttir_interp import run_kernel as interpret
    X = ttype(shape, F32)
    rshape = [1 if d in dims else n for d, n in enumerate(shape)]
    R, Z = ttype(rshape, F32), ttype((), F32)
    nd = ", ".join(str(d) for d in range(len(shape)))
    body = f'''    %sb = "stax.broadcast_in_dim"(%a0) {{dims = array<i64>}} : ({Z}) -> {X}
    %p = "stax.mul"(%sb, %a1) : ({X}, {X}) -> {X}
    %s = "stax.reduce_sum"(%p) {{dims = array<i64: {", ".join(map(str, dims))}>, keepdim = true}} : ({X}) -> {R}
    "stax_graph.yield"(%p, %s) : ({X}, {R}) -> ()'''
    del nd
    g = torch.tensor(0.37).to(DEV)
    x = randn(*shape)
    outs, k = run_kernel(body, [g, x], [(shape, F32), (tuple(rshape), F32)], config=cfg)
    texts = [k.ttir_kernel.text] + ([k.ttir_kernel.stage2.text] if k.ttir_kernel.stage2
                                    else [])
    assert "tt.load %in0 : !tt.ptr<f32>" in texts[0], texts[0]
    for t in texts:
        assert not re.search(r"tt\.splat %in0 ", t), t
    if outs is None:   # no GPU: interpret the TTIR on the CPU
        outs = [torch.full(shape, float("nan")), torch.full(rshape, float("nan"))]
        interpret(k.ttir_kernel, g.cpu(), x.cpu(), *outs)
    want = g.cpu() * x.cpu()
    close(outs[0], want, 0, 0, "product")
    close(outs[1], want.double().sum(dims, keepdim=True).float(), 1e-5, 1e-5, "sum")


# ----------------------------------------------------------------------------- every config

@pytest.mark.parametrize("shape,dims", [((64, 3000), [1]), ((2048, 768), [0]),
                                        ((4, 10000), [1])])
def test_every_candidate_config(shape, dims):
    x = randn(*shape)
    out_shape = tuple(s for i, s in enumerate(shape) if i not in dims)
    rows = math.prod(out_shape)
    rn = math.prod(shape[d] for d in dims)
    ks = KernelShape("reduction", rows, rn, (len(shape) - 1) in dims, 4, splittable=True)
    cfgs = candidate_configs(ks)[:20]
    # plus forced looped configs with small chunks (not a power of two multiple of rn),
    # and split reductions whose last part is shorter than the others
    cfgs += [TritonConfig(1, 512, 4, 1), TritonConfig(4, 256, 4, 2), TritonConfig(16, 64, 4, 1),
             TritonConfig(1, 512, 4, 1, 3), TritonConfig(16, 64, 4, 1, 5)]
    X, R = ttype(shape, F32), ttype(out_shape, F32)
    dl = ", ".join(map(str, dims))
    body = (f'    %r = "stax.reduce_sum"(%a0) {{dims = array<i64: {dl}>, keepdim = false}} : ({X}) -> {R}\n'
            f'    "stax_graph.yield"(%r) : ({R}) -> ()')
    want = x.cpu().sum(dims)
    for i, cfg in enumerate(cfgs):
        outs, k = run_kernel(body, [x], [(out_shape, F32)], name=f"cfg{i}", config=cfg)
        if outs:
            close(outs[0], want, 2e-5, 1e-4 * math.sqrt(rn), f"config {cfg}")


# ----------------------------------------------------------------------------- views

def test_views_reshape_permute_slice_concat_pad_iota():
    x = randn(4, 6, 8)
    y = randn(4, 3, 8)
    X, Y = ttype((4, 6, 8), F32), ttype((4, 3, 8), F32)
    P = ttype((8, 4, 6), F32)
    body = f'''    %p = "stax.permute"(%a0) {{perm = array<i64: 2, 0, 1>}} : ({X}) -> {P}
    %r = "stax.reshape"(%p) : ({P}) -> tensor<32x6xf32>
    %s = "stax.slice"(%a0) {{start = array<i64: 0, 1, 0>, limit = array<i64: 4, 6, 8>, step = array<i64: 1, 2, 1>}} : ({X}) -> {Y}
    %c = "stax.concat"(%s, %a1) {{dim = 1 : i64}} : ({Y}, {Y}) -> tensor<4x6x8xf32>
    %pd = "stax.pad"(%a1) {{low = array<i64: 0, 1, 2>, high = array<i64: 0, 2, 0>, value = 7.0 : f32}} : ({Y}) -> tensor<4x6x10xf32>
    %io = "stax.iota"() {{dim = 2 : i64}} : () -> tensor<4x6x10xi64>
    "stax_graph.yield"(%r, %c, %pd, %io) : (tensor<32x6xf32>, tensor<4x6x8xf32>, tensor<4x6x10xf32>, tensor<4x6x10xi64>) -> ()'''
    outs, k = run_kernel(body, [x, y], [((32, 6), F32), ((4, 6, 8), F32), ((4, 6, 10), F32),
                                        ((4, 6, 10), I64)])
    if outs:
        xc, yc = x.cpu(), y.cpu()
        close(outs[0], xc.permute(2, 0, 1).reshape(32, 6), 0, 0, "permute/reshape")
        close(outs[1], torch.cat([xc[:, 1::2], yc], 1), 0, 0, "concat")
        close(outs[2], torch.nn.functional.pad(yc, (2, 0, 1, 2), value=7.0), 0, 0, "pad")
        close(outs[3], torch.arange(10).expand(4, 6, 10), 0, 0, "iota")


def test_concat_pad_feeding_a_looped_reduction():
    x = randn(4, 6000)
    y = randn(4, 4000)
    X, Y = ttype((4, 6000), F32), ttype((4, 4000), F32)
    C, P, R = ttype((4, 10000), F32), ttype((4, 10003), F32), ttype((4,), F32)
    body = f'''    %c = "stax.concat"(%a0, %a1) {{dim = 1 : i64}} : ({X}, {Y}) -> {C}
    %pd = "stax.pad"(%c) {{low = array<i64: 0, 1>, high = array<i64: 0, 2>, value = 2.0 : f32}} : ({C}) -> {P}
    %s = "stax.reduce_sum"(%pd) {{dims = array<i64: 1>, keepdim = false}} : ({P}) -> {R}
    "stax_graph.yield"(%s) : ({R}) -> ()'''
    want = torch.cat([x.cpu(), y.cpu()], 1).sum(1) + 6.0
    for cfg, kind in ((None, "reduction-split"), (TritonConfig(1, 2048, 8, 1), "reduction-looped")):
        outs, k = run_kernel(body, [x, y], [((4,), F32)], config=cfg)
        assert k.kind == kind
        if outs:
            close(outs[0], want, 2e-5, 2e-3, f"concat+pad sum ({kind})")


def test_analyze_kernel_shapes_used_by_configs():
    text = _text(f'    %r = "stax.reduce_sum"(%a0) {{dims = array<i64: 0, 1>, keepdim = false}} : '
                 f'({ttype((8, 2048, 768), BF16)}) -> {ttype((768,), BF16)}\n'
                 f'    "stax_graph.yield"(%r) : ({ttype((768,), BF16)}) -> ()',
                 [((8, 2048, 768), BF16)], [((768,), BF16)])
    ctx = new_context()
    with ctx, ir.Location.unknown():
        m = ir.Module.parse(text)
        kop = list(m.body.operations[0].regions[0].blocks[0].operations)[0]
        ks = analyze_kernel(kop.operation)
    assert ks == KernelShape("reduction", 768, 16384, False, 2, splittable=True)


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("B,T,C", [(2, 64, 768), (8, 2048, 768), (2, 4, 10000)])
def test_reshaped_input_is_full_space(B, T, C, dtype):
    """The GPT-2 layernorm-backward pattern (training step, kernel stax_k7 of the backward
    graph): an input [B*T, C] reshaped to the domain [B, T, C] and yielded (converted)
    must be stored over the whole domain, not as a row value; also an output of the
    reshaped shape [B*T, C] of a full-space value."""
    g = randn(B * T, C, dtype=dtype)
    x = randn(B, T, C, dtype=dtype)
    G, S, SF = ttype((B * T, C), dtype), ttype((B, T, C), dtype), ttype((B, T, C), F32)
    R, GF = ttype((B, T, 1), F32), ttype((B * T, C), F32)
    body = f'''    %gr = "stax.reshape"(%a0) : ({G}) -> {S}
    %gf = "stax.convert"(%gr) : ({S}) -> {SF}
    %xf = "stax.convert"(%a1) : ({S}) -> {SF}
    %p = "stax.mul"(%gf, %xf) : ({SF}, {SF}) -> {SF}
    %s = "stax.reduce_sum"(%p) {{dims = array<i64: 2>, keepdim = true}} : ({SF}) -> {R}
    %sb = "stax.broadcast_in_dim"(%s) {{dims = array<i64: 0, 1, 2>}} : ({R}) -> {SF}
    %y = "stax.sub"(%xf, %sb) : ({SF}, {SF}) -> {SF}
    %yr = "stax.reshape"(%y) : ({SF}) -> {GF}
    "stax_graph.yield"(%gf, %s, %yr) : ({SF}, {R}, {GF}) -> ()'''
    outs, k = run_kernel(body, [g, x], [((B, T, C), F32), ((B, T, 1), F32), ((B * T, C), F32)])
    if outs:
        gf, xf = g.float().cpu().reshape(B, T, C), x.float().cpu()
        s = (gf * xf).sum(2, keepdim=True)
        rt, at = _sum_tol(F32, C)
        close(outs[0], gf, 0, 0, "converted reshaped input")
        close(outs[1], s, rt, at, "row sum")
        close(outs[2], (xf - s).reshape(B * T, C), rt, at, "reshaped full output")


# ----------------------------------------------------------------------------- gather

@pytest.mark.parametrize("dtype", [F32, BF16])
def test_gather_rows_and_columns_negative_indices(dtype):
    # Compiles to PTX everywhere; runs against torch indexing where there is a GPU.
    x = randn(6, 40, dtype=dtype)
    rows = torch.tensor([5, -1, 0, 2], dtype=torch.int64, device=DEV)
    cols = torch.tensor([3, 39, -40, 7, 7], dtype=torch.int32, device=DEV)
    X, et = ttype((6, 40), dtype), str(ttype((1,), dtype))[len("tensor<1x"):-1]
    body = f'''    %r = "stax.gather"(%a0, %a1) {{dim = 0 : i64}} : ({X}, tensor<4xi64>) -> tensor<4x40x{et}>
    %c = "stax.gather"(%a0, %a2) {{dim = 1 : i64}} : ({X}, tensor<5xi32>) -> tensor<6x5x{et}>
    "stax_graph.yield"(%r, %c) : (tensor<4x40x{et}>, tensor<6x5x{et}>) -> ()'''
    outs, k = run_kernel(body, [x, rows, cols], [((4, 40), dtype), ((6, 5), dtype)])
    if outs is not None:
        assert torch.equal(outs[0], x[rows].cpu())
        assert torch.equal(outs[1], x[:, cols.long()].cpu())
