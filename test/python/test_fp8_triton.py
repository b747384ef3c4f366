"""fp8 on the Triton target: legalized (ui8 carriers, for GPUs without native fp8) and native.

CPU part (CI, no GPU; Triton compiles to PTX without one): the fp8 graphs of test_fp8.py
(the decode step: fp8 KV-cache cat / gather / slice + exact decode + bf16 matmul,
fp8-quantized activations, fills; the fp8 arithmetic/compare graph; a per-row
fp8-quantized linear) and the exhaustive encode/decode cast kernels are imported,
legalized (`stax-legalize-fp8{formats=none}`), fused, and every kernel compiles to PTX
for sm_80 with no fp8 instruction in it; without legalization the same graphs hold fp8
kernels that compile for sm_90 (native `cvt ... e4m3x2/e5m2x2`) and not for sm_80.

GPU part (skipped without CUDA): the same graphs through `torch.compile(backend=stax)`
with `stax.legalize_fp8=True`, and natively on sm_89+, bit-exact against eager CUDA:
all 256 codes decode, the f32 encode sweep of test_fp8.py (ties, subnormals, the
saturation/NaN boundary, ±inf, NaN, ±0) against torch's CUDA cast.
"""
import functools
import os
import re
import sys

import pytest
import torch

pytest.importorskip("triton")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from stax._mlir import ir, new_context  # noqa: E402
from stax.importer import import_graph  # noqa: E402
from stax.passes import legalize_fp8 as L  # noqa: E402
from stax.passes.registry import run_pipeline  # noqa: E402
from stax.targets import triton as stax_triton  # noqa: E402
from stax.targets.triton_ttir import KernelLoweringError  # noqa: E402
from test_fp8 import (_DT, E4, E5, MLIR_NAME, SWEEP, _bits, _cast_kernel_text,  # noqa: E402
                      _kv_decode_step)
from test_triton_compile import _contig, kernels_of  # noqa: E402

FUSE = ["canonicalize", "cse", "stax-fuse", "cse"]
LEGALIZED = ["stax-legalize-fp8{formats=none}"] + FUSE
CUDA = torch.cuda.is_available()
NATIVE_FP8_GPU = CUDA and torch.cuda.get_device_capability() >= (8, 9)
FP8_CVT = re.compile(r"cvt\.[a-z0-9.]*e[45]m[23]x2")
FP8_TYPE = re.compile(r"[<x]f8E[45]M")  # an fp8 type in TTIR (kernel names may say f8E...)


# ----------------------------------------------------------------------------- the graphs

def _arith_compare(a, b):  # test_fp8.test_fp8_arithmetic_and_compare_graph
    c = a.to(torch.float32) * 3 + b.to(torch.float32)
    return c.to(torch.float8_e5m2), torch.where(a.to(torch.float32) > 1, a, b), \
        (a.view(torch.uint8) & 0x80).to(torch.int32)


def _quant_linear(x, w8, sw):
    """fp8-quantized activations: per-row absmax scale, e4m3fn quantize, bf16 matmul on
    the decoded values of both fp8 operands, rescale."""
    scale = x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-6) / 448.0
    xq = (x / scale).to(torch.float8_e4m3fn)
    y = xq.to(torch.bfloat16) @ w8.to(torch.bfloat16).t()
    return y.float() * scale * sw, xq


def _decode_step_args(device="cpu"):
    g = torch.Generator().manual_seed(0)
    cache = (torch.randn(4, 6, 8, generator=g) * 50).to(E4)
    new = (torch.randn(4, 1, 8, generator=g) * 300).to(E4)
    idx = torch.tensor([3, 0, 2])
    q = torch.randn(2, 32, generator=g).to(torch.bfloat16)
    w = torch.randn(16, 5, generator=g)
    x = torch.randn(6, 16, generator=g) * 100
    x[0, :4] = torch.tensor([float("inf"), -float("inf"), float("nan"), -0.0])
    mask = torch.rand(6, 16, generator=g) > 0.8
    return tuple(t.to(device) for t in (cache, new, idx, q, w, x, mask))


def _arith_args(device="cpu"):
    g = torch.Generator().manual_seed(1)
    a = (torch.randn(64, generator=g) * 10).to(E4)
    b = (torch.randn(64, generator=g) * 10).to(E4)
    return a.to(device), b.to(device)


def _quant_args(device="cpu"):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(16, 64, generator=g) * 3
    w8 = (torch.randn(32, 64, generator=g) * 0.5).to(E4)
    sw = torch.tensor(0.02)
    return x.to(device), w8.to(device), sw.to(device)


GRAPHS = {"decode_step": (_kv_decode_step, _decode_step_args),
          "arith_compare": (_arith_compare, _arith_args),
          "quant_linear": (_quant_linear, _quant_args)}


class _Captured(Exception):
    pass


def capture_forward(fn, args):
    """The ATen forward graph(s) aot_autograd makes of `fn` (core decompositions), without
    running them (eager CPU has no masked_fill for fp8)."""
    from torch._decomp import core_aten_decompositions
    from torch._functorch.aot_autograd import aot_module_simplified

    graphs = []

    def fw(gm, ex):
        graphs.append((gm, list(ex)))

        def call(*a):
            raise _Captured
        call._boxed_call = False
        return call

    def backend(gm, ex):
        return aot_module_simplified(gm, ex, fw_compiler=fw,
                                     decompositions=core_aten_decompositions())

    torch._dynamo.reset()
    try:
        torch.compile(fn, backend=backend, fullgraph=True)(*args)
    except _Captured:
        pass
    assert graphs
    return graphs


def _cast_module_kernels(text, pipeline, ctx):
    with ctx, ir.Location.unknown():
        m = ir.Module.parse(text)
        run_pipeline(m, pipeline)
        return m, kernels_of(m)


CASTS = ([(f"decode_{MLIR_NAME[f]}_{d}", 256, MLIR_NAME[f], d)
          for f in (E4, E5) for d in ("f32", "bf16", "f16")]
         + [(f"encode_{s}_{MLIR_NAME[f]}", SWEEP.numel(), s, MLIR_NAME[f])
            for f in (E4, E5) for s in ("f32", "bf16", "f16", "f64")]
         + [("e4_to_e5", 256, "f8E4M3FN", "f8E5M2"), ("e5_to_e4", 256, "f8E5M2", "f8E4M3FN"),
            ("i32_to_e4", 1200, "i32", "f8E4M3FN")])


def _fused(pipeline):
    """[(label, ctx, module, kernel ops)] for every graph and cast above."""
    out = []
    for name, (fn, make_args) in GRAPHS.items():
        for gi, (gm, ex) in enumerate(capture_forward(fn, make_args())):
            ctx = new_context()
            ig = import_graph(gm, ex, ctx)
            with ctx:
                run_pipeline(ig.module, pipeline)
            out.append((f"{name}{gi}", ctx, ig.module, kernels_of(ig.module)))
    for label, n, src, dst in CASTS:
        ctx = new_context()
        m, kops = _cast_module_kernels(_cast_kernel_text(n, src, dst), pipeline, ctx)
        out.append((label, ctx, m, kops))
    ctx = new_context()  # the torch 2.11 CUDA overflow behaviour, as an explicit option
    nan_mode = ["stax-legalize-fp8{formats=none e4m3fn-overflow=nan}"] + FUSE
    if pipeline == LEGALIZED:
        m, kops = _cast_module_kernels(_cast_kernel_text(SWEEP.numel(), "f32", "f8E4M3FN"),
                                       nan_mode, ctx)
        out.append(("encode_f32_f8E4M3FN_nan", ctx, m, kops))
    return out


def _compile_all(fused, arch):
    """Compile every kernel for sm_<arch>; returns [(label, TritonKernel)]."""
    res = []
    for label, ctx, module, kops in fused:
        with ctx:
            for i, k in enumerate(kops):
                ins = [_contig(list(ir.RankedTensorType(v.type).shape)) for v in k.operands]
                outs = [_contig(list(ir.RankedTensorType(r.type).shape)) for r in k.results]
                res.append((label, stax_triton.compile_kernel(
                    k, ins, outs, f"fp8_{label}_k{i}", arch=arch)))
    return res


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    old = os.environ.get("STAX_CACHE_DIR")
    os.environ["STAX_CACHE_DIR"] = str(tmp_path_factory.mktemp("stax-fp8-cache"))
    yield
    if old is None:
        os.environ.pop("STAX_CACHE_DIR", None)
    else:
        os.environ["STAX_CACHE_DIR"] = old


@pytest.fixture(scope="module")
def legalized(cache_dir):
    return _fused(LEGALIZED)


@pytest.fixture(scope="module")
def native(cache_dir):
    return _fused(FUSE)


# ----------------------------------------------------------------------------- CPU: PTX

def test_legalized_graphs_compile_for_sm80(legalized):
    for label, ctx, module, kops in legalized:
        assert "f8E" not in str(module), label
        assert kops, label
    compiled = _compile_all(legalized, 80)
    labels = {lb for lb, _ in compiled}
    assert {"decode_step0", "arith_compare0", "quant_linear0"} <= labels
    assert labels >= {c[0] for c in CASTS}
    for label, k in compiled:
        assert ".target sm_80" in k.ptx, label
        assert f".entry {k.name}" in k.ptx, label
        assert not FP8_CVT.search(k.ptx), (label, FP8_CVT.search(k.ptx).group(0))
        assert not FP8_TYPE.search(k.ttir), label
    print(f"\nsm_80 legalized: {len(compiled)} kernels compiled to PTX "
          f"({len({k.ttir for _, k in compiled})} distinct)")


def test_native_graphs_compile_for_sm90(native):
    fp8_kernels = 0
    compiled = _compile_all(native, 90)
    for label, k in compiled:
        assert ".target sm_90" in k.ptx, label
        assert f".entry {k.name}" in k.ptx, label
        if FP8_TYPE.search(k.ttir):
            fp8_kernels += 1
            if "tt.fp_to_fp" in k.ttir:
                assert FP8_CVT.search(k.ptx), label  # hardware conversions
    # every cast kernel and the graphs' quantize/decode kernels hold fp8 natively
    assert fp8_kernels >= len(CASTS)
    for label, ctx, module, kops in native:
        if label.startswith(("decode_step", "quant_linear", "arith")):
            assert "f8E" in str(module), label
    print(f"\nsm_90 native: {len(compiled)} kernels compiled to PTX, {fp8_kernels} with fp8")


def test_native_fp8_decode_keeps_the_nan_sign(native):
    """The hardware cvt behind tt.fp_to_fp decodes both NaN codes to one positive NaN
    (on the H200 an e4m3fn -> e5m2 cast of 0xFF gave 0x7F, eager 0xFF): every native
    decode re-applies the byte's sign bit by integer ops (a float negate of a NaN may
    come back canonical). The interpreter behind the *_interpreted tests keeps NaN signs
    itself, so this pins the emitted code instead."""
    dec = re.compile(r"(%\w+) = tt\.fp_to_fp (%\w+) : tensor<(\w+)xf8E[45]M\w*> -> "
                     r"tensor<\w+xf32>")
    seen = 0
    for label, k in _compile_all([x for x in native if x[0] in ("e4_to_e5", "e5_to_e4",
                                                                "decode_f8E4M3FN_f32")], 90):
        for e, src, _ in dec.findall(k.ttir):
            seen += 1
            u = re.search(rf"(%\w+) = tt\.bitcast {e} : tensor<\w+xf32> -> tensor<\w+xi32>",
                          k.ttir)
            assert u, (label, e, k.ttir)
            assert re.search(rf"= arith\.andi {u.group(1)}, %\w+ : ", k.ttir), (label, k.ttir)
            assert re.search(rf"= tt\.bitcast {src} : tensor<\w+xf8E[45]M\w*> -> "
                             r"tensor<\w+xi8>", k.ttir), (label, k.ttir)
    assert seen >= 3, seen


def test_native_e4m3fn_does_not_compile_for_sm80(native):
    """Why the driver legalizes before sm_89: Triton has no e4m3fn conversion there."""
    label, ctx, module, kops = next(x for x in native if x[0] == "encode_f32_f8E4M3FN")
    with ctx, pytest.raises(KernelLoweringError, match="sm_80"):
        _compile_all([(label, ctx, module, kops)], 80)


def test_pipeline_entry_cpu():
    s = L.pipeline_entry("stax-cpu", torch.device("cuda"))  # the CPU route runs on the CPU
    mode = L.probe_device_e4m3fn_overflow("cpu")
    assert s == f"stax-legalize-fp8{{formats=none e4m3fn-overflow={mode} e5m2-nan=payload}}"
    assert L.pipeline_entry("stax-cpu", None) == s
    b = torch.tensor([470.0, float("inf")]).to(E4).view(torch.uint8).tolist()
    assert b == ([0x7E, 0x7E] if mode == "saturate" else [0x7F, 0x7F])
    ctx = new_context()  # the string is a valid pipeline element
    m, kops = _cast_module_kernels(_cast_kernel_text(4, "f32", "f8E4M3FN"), [s] + FUSE, ctx)
    assert kops and "f8E" not in str(m)
    if not CUDA:  # no device to ask: the CPU behaviour, not cached for cuda
        assert f"e4m3fn-overflow={mode} " in L.pipeline_entry("triton", "cuda")
        assert ("cuda", None) not in L._DEVICE_PROBED


def test_pipeline_entry_is_probed_under_fake_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode
    L._DEVICE_PROBED.pop(("cpu", None), None)
    with FakeTensorMode():
        s = L.pipeline_entry("stax-cpu", "cpu")
    assert f"e4m3fn-overflow={L.probe_torch_e4m3fn_overflow()} " in s


# ----------------------------------------------------------------------------- GPU: numerics

gpu = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
MODES = [pytest.param(True, id="legalized"),
         pytest.param(False, id="native", marks=pytest.mark.skipif(
             not NATIVE_FP8_GPU, reason="native fp8 needs sm_89+"))]


def _stax_compile(fn, legalize):
    import stax.backend
    torch._dynamo.reset()
    be = functools.partial(stax.backend.stax, options={"stax.legalize_fp8": legalize},
                           strict_native=True)
    return torch.compile(fn, backend=be, fullgraph=True, dynamic=False)


def _check_route(legalize):
    """The graph compiled for the triton target, kernels legalized or not as asked."""
    import stax.backend
    rep = stax.backend.last_report()
    assert rep is not None and rep.route == "triton", rep and rep.summary()
    assert rep.kernel_count >= 1, rep.summary()
    ttirs = [getattr(k, "ttir", None) for g in rep.graphs for k in getattr(g, "kernels", [])]
    ttirs = [t for t in ttirs if isinstance(t, str)]
    if ttirs:
        has_fp8 = any(FP8_TYPE.search(t) for t in ttirs)
        assert has_fp8 == (not legalize), rep.summary()


def _assert_bits_equal(got, ref, what, nan_payload=True):
    assert got.dtype == ref.dtype and got.shape == ref.shape, (what, got.dtype, ref.dtype)
    if got.dtype in (E4, E5):
        g, r = got.view(torch.uint8), ref.view(torch.uint8)
    elif got.dtype.is_floating_point:
        g, r = _bits(got), _bits(ref)
        if not nan_payload:
            nan = ref.isnan()
            assert torch.equal(got.isnan(), nan), what
            g, r = g[~nan], r[~nan]
    else:
        g, r = got, ref
    g, r = g.flatten(), r.flatten()  # flat indices: the message indexed 2-D outputs wrong
    bad = (g != r).nonzero().flatten()
    assert bad.numel() == 0, (what, bad.numel(), [(i.item(), g[i].item(), r[i].item())
                                                  for i in bad[:8]])


@gpu
@pytest.mark.parametrize("legalize", MODES)
@pytest.mark.parametrize("fp8", [E4, E5])
@pytest.mark.parametrize("dst", ["f32", "bf16", "f16"])
def test_gpu_decode_all_256_codes(legalize, fp8, dst):
    codes = torch.arange(256, dtype=torch.uint8, device="cuda").view(fp8)
    dt = _DT[dst]
    got = _stax_compile(lambda c: c.to(dt), legalize)(codes)
    _check_route(legalize)
    ref = codes.to(dt)
    # Legalized decode is bit math, as torch's (c10) cast: NaN payloads match too. The
    # hardware cvt of the native path gives a canonical NaN: NaN-ness and every non-NaN
    # bit pattern must match.
    _assert_bits_equal(got, ref, f"{fp8}->{dst}", nan_payload=legalize)


def _sweep_cuda(src):
    x = SWEEP.cuda()
    return x if src == "f32" else x.to(_DT[src])


@gpu
@pytest.mark.parametrize("legalize", MODES)
@pytest.mark.parametrize("fp8", [E4, E5])
@pytest.mark.parametrize("src", ["f32", "bf16", "f16", "f64"])
def test_gpu_encode_sweep_bit_exact(legalize, fp8, src):
    """Every f32 of the sweep (ties, ±1/±2 ulp around every fp8 value and midpoint,
    subnormals of f32 and fp8, 448/464/470/480, 57344/61440, ±inf, NaNs, ±0), as f32 and
    rounded to bf16/f16/f64, against torch's CUDA cast."""
    x = _sweep_cuda(src)
    got = _stax_compile(lambda t: t.to(fp8), legalize)(x)
    _check_route(legalize)
    # Native too, with no xfail: the hardware's cvt.rn.satfinite saturates, and
    # TTIRLowering._fp8_encode patches overflow (±inf for e5m2 from 61440, NaN or
    # saturation for e4m3fn as the device's torch cast does), ±inf and signed NaN after
    # it (commit 9492cb0). Every mismatch used to be turned into an xfail here, so that
    # fix was never checked, and a regression would not have been seen either.
    _assert_bits_equal(got, x.to(fp8), f"{src}->{fp8}")


@gpu
@pytest.mark.parametrize("legalize", MODES)
@pytest.mark.parametrize("fp8", [E4, E5])
def test_gpu_encode_in_range_bit_exact(legalize, fp8):
    """The sweep without overflow, ±inf and NaN: native and legalized agree with eager."""
    x = SWEEP[~SWEEP.isnan() & (SWEEP.abs() <= (448.0 if fp8 is E4 else 57344.0))].cuda()
    got = _stax_compile(lambda t: t.to(fp8), legalize)(x)
    _check_route(legalize)
    _assert_bits_equal(got, x.to(fp8), f"f32->{fp8} in range")


@gpu
@pytest.mark.parametrize("legalize", MODES)
def test_gpu_fp8_to_fp8_and_int(legalize):
    codes = torch.arange(256, dtype=torch.uint8, device="cuda")
    for a, b in ((E4, E5), (E5, E4)):
        # every code, native too: the encode handles overflow, inf and NaN as torch does
        # (test_gpu_encode_sweep_bit_exact)
        src = codes.view(a)
        got = _stax_compile(lambda t: t.to(b), legalize)(src)
        _check_route(legalize)
        _assert_bits_equal(got, src.to(b), f"{a}->{b}")
    ints = torch.arange(-600, 600, dtype=torch.int32, device="cuda")
    got = _stax_compile(lambda t: t.to(E4), legalize)(ints)
    _assert_bits_equal(got, ints.to(E4), "i32->e4m3fn")


def _decode_step_eager_cuda(cache_k, new_k, idx, q, w, x, mask):
    """_kv_decode_step as eager CUDA computes it; the byte moves (cat, gather, slice,
    masked_fill) run on uint8 views, which is exact whatever torch's fp8 op coverage."""
    u8 = torch.uint8
    k = torch.cat([cache_k.view(u8), new_k.view(u8)], dim=1)[idx][:, 1:5].view(E4)
    kb = k.to(torch.bfloat16)
    s = q @ kb.reshape(kb.shape[0], -1).transpose(0, 1)
    xq = (x * 4).to(torch.float8_e4m3fn)
    one5 = torch.tensor([1.5], device=x.device).to(E4).view(u8).item()
    xq = xq.view(u8).masked_fill(mask, one5).view(E4)
    z = torch.zeros(3, dtype=u8, device=x.device).view(torch.float8_e5m2)
    f = torch.full((2, 2), 300.0, device=x.device).to(E4)
    y = xq.to(torch.float32) @ w
    return s, k, xq, xq.view(u8), z, f, y, kb.permute(2, 0, 1)


def _check_graph_outputs(got, ref, matmul_outputs):
    assert len(got) == len(ref)
    for i, (g, r) in enumerate(zip(got, ref)):
        if i in matmul_outputs:  # a library/Triton matmul: same inputs, close results
            assert g.dtype == r.dtype and g.shape == r.shape
            torch.testing.assert_close(g, r, equal_nan=True)
        else:
            _assert_bits_equal(g, r, f"output {i}")


@gpu
@pytest.mark.parametrize("legalize", MODES)
def test_gpu_decode_step_graph(legalize):
    args = _decode_step_args("cuda")
    fn = _stax_compile(_kv_decode_step, legalize)
    # the graph's factories (zeros, full) name no device: on the GPU's (a graph that
    # places them on the CPU beside CUDA inputs is refused since eb8f5a4)
    torch.set_default_device("cuda")
    try:
        got = fn(*args)
    finally:
        torch.set_default_device(None)
    _check_route(legalize)
    ref = list(_decode_step_eager_cuda(*args))
    got = list(got)
    # every element, overflowing ones (x * 4 reaches ±inf and the 1000s) included, native
    # too: see test_gpu_encode_sweep_bit_exact
    assert ((args[5] * 4).abs() > 448).any()
    _check_graph_outputs(got, ref, matmul_outputs={0, 6})
    assert args[0].dtype == E4  # the cache went in as a zero-copy view


@gpu
@pytest.mark.parametrize("legalize", MODES)
def test_gpu_arith_compare_graph(legalize):
    a, b = _arith_args("cuda")
    got = _stax_compile(_arith_compare, legalize)(a, b)
    _check_route(legalize)
    _check_graph_outputs(got, _arith_compare(a, b), matmul_outputs=set())


@gpu
@pytest.mark.parametrize("legalize", MODES)
def test_gpu_quant_linear_graph(legalize):
    args = _quant_args("cuda")
    got = _stax_compile(_quant_linear, legalize)(*args)
    _check_route(legalize)
    _check_graph_outputs(got, _quant_linear(*args), matmul_outputs={0})


# ----------------------------------------------------------------------------- bit views

def _bit_views(fp8):
    """fp8 bytes through integer bit operations and back (issue 8, item 3)."""
    u8, i8 = torch.uint8, torch.int8
    return {
        "and_or": lambda x: ((x.view(u8) & 0x7F) | 0x80).view(fp8).float(),
        "abs": lambda x: (x.view(u8) & 0x7F).view(fp8).float(),
        "neg": lambda x: (x.view(u8) ^ 0x80).view(fp8).float(),
        "not": lambda x: (~x.view(u8)).view(fp8).float(),
        "shr": lambda x: (x.view(u8) >> 1).view(fp8).float(),
        "shl": lambda x: (x.view(u8) << 1).view(fp8).float(),
        "add": lambda x: (x.view(u8) + 3).view(fp8).float(),
        "i8_neg": lambda x: (-x.view(i8)).view(fp8).float(),
        "f32_bits": lambda x: (x.view(u8) & 0x7F).view(fp8).float().view(torch.int32),
        "scaled": lambda x: (x.view(u8) & 0x7F).view(fp8).float() * 2,
        "where": lambda x: torch.where(x.view(u8) > 127, x.view(u8) & 0x7F,
                                       x.view(u8)).view(fp8).float(),
        "to_i32": lambda x: (x.view(u8) & 0x7F).to(torch.int32) * 3,
        "roundtrip": lambda x: x.view(u8).view(fp8).float(),
        "fp8_out": lambda x: (x.view(u8) | 0x80).view(fp8),
        "bytes_out": lambda x: x.view(u8) ^ 0x80,
    }


BIT_VIEWS = [(fp8, name) for fp8 in (E4, E5) for name in _bit_views(fp8)]
_BV_IDS = [f"{'e4m3fn' if f is E4 else 'e5m2'}-{n}" for f, n in BIT_VIEWS]


def _interpreted(fn, x, legalize):
    """fn through the triton route on the CPU: compiled for a fake CUDA input, every
    kernel run by ttir_interp."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from stax.driver import compile_graph
    from stax.options import resolve_config
    from ttir_interp import cpu_triton
    (gm, ex), = capture_forward(fn, (x,))
    with FakeTensorMode(allow_non_fake_inputs=True):
        fake = [torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="cuda")
                for t in ex]
    cg = compile_graph(gm, fake, resolve_config(None, {"stax.legalize_fp8": legalize},
                                                target="triton"))
    with cpu_triton(cg):
        out = cg(x)
    return out[0] if isinstance(out, (tuple, list)) else out


@pytest.mark.parametrize("legalize", [True, False], ids=["legalized", "native"])
@pytest.mark.parametrize("fp8,name", BIT_VIEWS, ids=_BV_IDS)
def test_bit_views_triton_route_interpreted(fp8, name, legalize, cache_dir, monkeypatch):
    """No GPU: the bit-view graphs compiled for sm_90 (native fp8 or legalized) and run
    by ttir_interp, bit-exact against eager over all 256 codes. A bitcast of a loaded
    fp8 value decoded and re-encoded it (e5m2 NaN payloads 0x7D/0x7E changed)."""
    monkeypatch.setenv("STAX_TRITON_ARCH", "90")
    fn = _bit_views(fp8)[name]
    x = torch.arange(256, dtype=torch.uint8).view(fp8)
    got = _interpreted(fn, x, legalize)
    ref = fn(x)
    if name == "f32_bits" and torch.cuda.is_available():
        # a decoded NaN's payload is the one of the device the graph was compiled for
        # (legalize_fp8 probes it: canonical on a CUDA machine), not CPU eager's: on the
        # H200 this compared the CUDA-probed canonical NaN with CPU eager's payload
        nan = ref.view(torch.float32).isnan()
        assert torch.equal(got.view(torch.float32).isnan(), nan)
        got, ref = got[~nan], ref[~nan]
    _assert_bits_equal(got, ref, f"{fp8} {name}", nan_payload=False)


@pytest.mark.parametrize("fp8,name", BIT_VIEWS, ids=_BV_IDS)
def test_bit_views_cpu_target(fp8, name, monkeypatch):
    """The same graphs on the CPU target (fp8 legalized to bytes), bit-exact."""
    import stax.backend
    monkeypatch.setenv("STAX_STRICT", "1")
    torch._dynamo.reset()
    fn = _bit_views(fp8)[name]
    x = torch.arange(256, dtype=torch.uint8).view(fp8)
    got = torch.compile(fn, backend="stax", fullgraph=True)(x)
    assert stax.backend.last_report().route == "stax-cpu"
    _assert_bits_equal(got, fn(x), f"{fp8} {name}")


@gpu
@pytest.mark.parametrize("legalize", MODES)
@pytest.mark.parametrize("fp8,name", BIT_VIEWS, ids=_BV_IDS)
def test_gpu_bit_views_bit_exact(fp8, name, legalize):
    """All 256 codes through the bit-view graphs on the GPU, against eager CUDA: bytes and
    integers bit-exact; decoded f32 bit-exact except that a NaN's payload is the
    hardware's on the native path (as test_gpu_decode_all_256_codes)."""
    fn = _bit_views(fp8)[name]
    x = torch.arange(256, dtype=torch.uint8, device="cuda").view(fp8)
    got = _stax_compile(fn, legalize)(x)
    import stax.backend
    assert stax.backend.last_report().route == "triton", stax.backend.last_report().summary()
    ref = fn(x)
    if name == "f32_bits":   # the f32 bits of decoded NaN codes: the hardware's payload
        nan = ref.view(torch.float32).isnan()
        assert torch.equal(got.view(torch.float32).isnan(), nan)
        got, ref = got[~nan], ref[~nan]
    # NaN payloads of f32 arithmetic (NaN * 2) are the GPU's, not data
    _assert_bits_equal(got, ref, f"{fp8} {name}", nan_payload=False)


def _qdq_cases(fp8):
    top = 448.0 if fp8 is E4 else 57344.0
    return {"f32": lambda t: t.to(fp8).float(),
            "scaled": lambda t: (t * 0.5).to(fp8).to(torch.float32) * 2.0,
            "bf16": lambda t: t.to(fp8).to(torch.bfloat16),
            "clamped": lambda t: t.clamp(-top, top).to(fp8).float() + 1.0}


_QDQ = [(f, n) for f in (E4, E5) for n in _qdq_cases(f)]
_QDQ_IDS = [f"{'e4m3fn' if f is E4 else 'e5m2'}-{n}" for f, n in _QDQ]


def _qdq_input(fp8, device):
    top = 448.0 if fp8 is E4 else 57344.0
    return SWEEP[~SWEEP.isnan() & (SWEEP.abs() <= top)].to(device)


@pytest.mark.parametrize("fp8,name", _QDQ, ids=_QDQ_IDS)
def test_quantize_dequantize_in_one_kernel_interpreted(fp8, name, cache_dir, monkeypatch):
    """An encode and the decode of its result in one kernel (fp8 fake quantization), on
    the triton route (native fp8, sm_90) run by ttir_interp: exact against eager."""
    monkeypatch.setenv("STAX_TRITON_ARCH", "90")
    fn = _qdq_cases(fp8)[name]
    x = _qdq_input(fp8, "cpu")
    _assert_bits_equal(_interpreted(fn, x, False), fn(x), f"{fp8} qdq {name}")


@gpu
@pytest.mark.parametrize("legalize", MODES)
@pytest.mark.parametrize("fp8,name", _QDQ, ids=_QDQ_IDS)
def test_gpu_quantize_dequantize_in_one_kernel(fp8, name, legalize):
    """The in-range sweep encoded and decoded again inside one kernel, against eager CUDA
    (the pre-fix bit views showed that an encode whose bytes are decoded in registers is
    where sm_90 code went wrong)."""
    fn = _qdq_cases(fp8)[name]
    x = _qdq_input(fp8, "cuda")
    got = _stax_compile(fn, legalize)(x)
    _check_route(legalize)
    _assert_bits_equal(got, fn(x), f"{fp8} qdq {name}")


def _encoded_bit_views(fp8):
    """The bits of an fp8 value computed in the kernel (an encode), through integer ops."""
    u8 = torch.uint8
    return {"bytes": lambda t: (t * 2).to(fp8).view(u8),
            "abs": lambda t: ((t * 2).to(fp8).view(u8) & 0x7F).view(fp8).float(),
            "or_sign": lambda t: (t.to(fp8).view(u8) | 0x80).view(fp8).float(),
            "xor": lambda t: (t.to(fp8).view(u8) ^ 0x01).view(fp8).to(torch.bfloat16)}


_ENC = [(f, n) for f in (E4, E5) for n in _encoded_bit_views(f)]
_ENC_IDS = [f"{'e4m3fn' if f is E4 else 'e5m2'}-{n}" for f, n in _ENC]


@pytest.mark.parametrize("fp8,name", _ENC, ids=_ENC_IDS)
def test_encoded_bit_views_interpreted(fp8, name, cache_dir, monkeypatch):
    """The whole f32 sweep (ties, subnormals, overflow, ±inf, NaN) encoded in the kernel
    and its bits read by integer ops (the bitcast encodes in integer arithmetic, not
    with tt.fp_to_fp), by ttir_interp: bit-exact against eager (CPU casts here)."""
    monkeypatch.setenv("STAX_TRITON_ARCH", "90")
    fn = _encoded_bit_views(fp8)[name]
    x = SWEEP.clone()
    got = _interpreted(fn, x, False)
    _assert_bits_equal(got, fn(x), f"{fp8} encoded {name}", nan_payload=False)


@gpu
@pytest.mark.parametrize("legalize", MODES)
@pytest.mark.parametrize("fp8,name", _ENC, ids=_ENC_IDS)
def test_gpu_encoded_bit_views(fp8, name, legalize):
    """On the GPU: the in-range sweep encoded in the kernel, its bits through integer ops
    and decoded again (the pattern sm_90 code got wrong), against eager CUDA."""
    fn = _encoded_bit_views(fp8)[name]
    x = _qdq_input(fp8, "cuda") * 0.5
    got = _stax_compile(fn, legalize)(x)
    _check_route(legalize)
    _assert_bits_equal(got, fn(x), f"{fp8} encoded {name}", nan_payload=False)
