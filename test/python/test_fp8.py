"""fp8 on the CPU through stax-legalize-fp8 + the LLVM target, bit-exact against torch.

Every check runs real JIT'd CPU kernels: the pass rewrites fp8 to ui8 carriers, stax-fuse
groups the decode/encode arithmetic into kernels, and `stax.targets.llvm` compiles them.
Graphs are run by `run_module` below, a small stand-in for the driver (kernels, library
matmuls, fallbacks, top-level views) that also does what the driver must do for fp8:
fp8 inputs go in as zero-copy uint8 views, fp8 outputs come back as fp8 views.
"""
import json
import struct

import pytest
import torch

from stax._mlir import ir, new_context
from stax.importer import import_graph
from stax.passes import legalize_fp8 as L
from stax.passes.registry import PassError, run_pipeline
from stax.targets.llvm import compile_kernel

E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2
FP8 = {"f8E4M3FN": E4, "f8E5M2": E5}
MLIR_NAME = {E4: "f8E4M3FN", E5: "f8E5M2"}
_DT = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16, "f64": torch.float64,
       "i64": torch.int64, "i32": torch.int32, "i16": torch.int16, "i8": torch.int8,
       "ui8": torch.uint8, "i1": torch.bool}
PIPELINE = [L.CPU_PIPELINE_HOOK, "canonicalize", "cse", "stax-fuse", "cse"]


# ----------------------------------------------------------------------------- a tiny runner

def _tdtype(t):
    return _DT[str(ir.RankedTensorType(t).element_type)]


def _fallback_arg(x, vals):
    if isinstance(x, list):
        return [_fallback_arg(y, vals) for y in x]
    if isinstance(x, dict):
        if "$operand" in x:
            return vals[x["$operand"]]
        if "$dtype" in x:
            return getattr(torch, x["$dtype"])
        if "$device" in x:
            return torch.device(x["$device"])
        if "$layout" in x:
            return getattr(torch, x["$layout"])
        if "$memory_format" in x:
            return getattr(torch, x["$memory_format"])
        return {k: _fallback_arg(v, vals) for k, v in x.items()}
    return x


def run_module(module, args):
    """Run the legalized + fused `@main` on torch tensors (its ui8 carriers as uint8)."""
    func = module.body.operations[0]
    from stax.driver import _wrap_stray_ops
    with module.context, ir.Location.unknown():
        _wrap_stray_ops(func)  # ops stax-fuse leaves outside kernels (gather), as the driver does
    env = {}
    for a, t in zip(func.regions[0].blocks[0].arguments, args):
        assert _tdtype(a.type) == t.dtype, (a.type, t.dtype)
        env[a] = t
    n = 0
    for op in func.regions[0].blocks[0].operations:
        op = op.operation
        name = op.name
        ins = [env[v] for v in op.operands]
        if name == "func.return":
            return ins
        if name == "stax_graph.kernel":
            ins = [t.contiguous() for t in ins]
            outs = [torch.empty(list(ir.RankedTensorType(r.type).shape), dtype=_tdtype(r.type))
                    for r in op.results]
            k = compile_kernel(op, [t.stride() for t in ins], [o.stride() for o in outs], f"k{n}")
            n += 1
            k(*ins, *outs)
            res = outs
        elif name == "stax.matmul":
            res = [torch.matmul(*ins)]
        elif name == "stax_graph.fallback":
            call = json.loads(ir.StringAttr(op.attributes["call"]).value)
            views = json.loads(ir.StringAttr(op.attributes["fp8_views"]).value) \
                if "fp8_views" in op.attributes else {"operands": {}, "results": {}}
            vals = [t.view(getattr(torch, views["operands"][str(i)]))
                    if str(i) in views["operands"] else t for i, t in enumerate(ins)]
            target = ir.StringAttr(op.attributes["target"]).value
            ns, opname, overload = target.split(".")
            fn = getattr(getattr(getattr(torch.ops, ns), opname), overload)
            r = fn(*_fallback_arg(call["args"], vals), **_fallback_arg(call["kwargs"], vals))
            r = list(r) if isinstance(r, (tuple, list)) else [r]
            res = [t.view(torch.uint8) if str(i) in views["results"] else t
                   for i, t in enumerate(r)]
        elif name == "stax.reshape":
            res = [ins[0].reshape(list(ir.RankedTensorType(op.results[0].type).shape))]
        elif name == "stax.permute":
            res = [ins[0].permute(list(ir.DenseI64ArrayAttr(op.attributes["perm"])))]
        elif name == "stax.slice":
            st, li, sp = (list(ir.DenseI64ArrayAttr(op.attributes[k]))
                          for k in ("start", "limit", "step"))
            res = [ins[0][tuple(slice(a, b, c) for a, b, c in zip(st, li, sp))]]
        elif name == "stax.full":
            a = op.attributes["value"]
            v = ir.FloatAttr(a).value if isinstance(a, ir.FloatAttr) else (
                int(a.value) if isinstance(a, ir.BoolAttr) else ir.IntegerAttr(a).value)
            rt = ir.RankedTensorType(op.results[0].type)
            res = [torch.full(list(rt.shape), v, dtype=_tdtype(rt))]
        else:
            raise NotImplementedError(name)
        for r, t in zip(op.results, res):
            env[r] = t
    raise AssertionError("no return")


def compile_fx(fn, example_inputs, pipeline=PIPELINE):
    """torch.compile `fn` through aot_autograd, import + legalize + fuse, and return
    (runner, module text). The runner does the driver's fp8 I/O: uint8 views in, fp8 out."""
    from torch._decomp import core_aten_decompositions
    from torch._functorch.aot_autograd import aot_module_simplified

    state = {}

    def fw(gm, ex):
        ctx = new_context()
        imp = import_graph(gm, ex, ctx)
        run_pipeline(imp.module, pipeline)
        state["text"] = str(imp.module)
        state["imp"] = imp

        def call(*args):
            with ctx:
                carriers = [a.view(torch.uint8) if a.dtype in (E4, E5) else a for a in args]
                outs = run_module(imp.module, carriers)
            res = []
            for spec in imp.outputs:
                if spec.kind == "input":
                    res.append(args[spec.index])
                    continue
                t = outs[spec.index]
                res.append(t.view(spec.dtype) if spec.dtype in (E4, E5) else t)
            return tuple(res)
        call._boxed_call = False
        return call

    def backend(gm, ex):
        return aot_module_simplified(gm, ex, fw_compiler=fw,
                                     decompositions=core_aten_decompositions())

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=backend, fullgraph=True)
    return compiled, state


def run_text(text, inputs, options=None):
    """Legalize + fuse an MLIR `@main` and run it (fp8 inputs as uint8 views)."""
    ctx = new_context()
    with ctx, ir.Location.unknown():
        m = ir.Module.parse(text)
        pipe = list(PIPELINE)
        if options:
            pipe[0] = f"stax-legalize-fp8{{{options}}}"
        run_pipeline(m, pipe)
        outs = run_module(m, [t.view(torch.uint8) if t.dtype in (E4, E5) else t for t in inputs])
        return outs, str(m)


def _cast_kernel_text(n, src, dst):
    return (f'func.func @main(%x: tensor<{n}x{src}>) -> tensor<{n}x{dst}> {{\n'
            f'  %y = "stax.convert"(%x) : (tensor<{n}x{src}>) -> tensor<{n}x{dst}>\n'
            f'  return %y : tensor<{n}x{dst}>\n}}\n')


def _bits(t):
    return t.contiguous().view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()])


# ----------------------------------------------------------------------------- decode

@pytest.mark.parametrize("fp8", [E4, E5])
@pytest.mark.parametrize("dst", ["f32", "bf16", "f16"])
def test_decode_all_256_codes(fp8, dst):
    codes = torch.arange(256, dtype=torch.uint8)
    (out,), text = run_text(_cast_kernel_text(256, MLIR_NAME[fp8], dst), [codes.view(fp8)])
    assert "f8E" not in text
    ref = codes.view(fp8).to(_DT[dst])
    if dst == "f32":  # NaN payloads too
        assert torch.equal(_bits(out), _bits(ref)), [
            (i, hex(a), hex(b)) for i, (a, b) in enumerate(zip(_bits(out).tolist(),
                                                              _bits(ref).tolist())) if a != b]
    nan = ref.isnan()
    assert torch.equal(out.isnan(), nan)
    assert torch.equal(_bits(out)[~nan], _bits(ref)[~nan])


# ----------------------------------------------------------------------------- encode sweep

def _f32_from_bits(bits):
    return torch.tensor(bits, dtype=torch.int64).to(torch.int32).view(torch.float32) \
        if not isinstance(bits, torch.Tensor) else bits.to(torch.int32).view(torch.float32)


def encode_sweep():
    """Every f32 exponent (several mantissas each), every fp8 value's neighbourhood: the
    midpoints between consecutive fp8 values (ties) and ±1, ±2 ulp around them, the
    values themselves, subnormals of both formats and of f32, the saturation/overflow
    boundaries, ±inf, NaNs (both signs, payloads), ±0."""
    vals = []
    exps = torch.arange(0, 256, dtype=torch.int64)
    for mant in (0, 1, 0x3FFFFF, 0x400000, 0x400001, 0x7FFFFF, 0x100000, 0x0FFFFF, 0x180000,
                 0x080000, 0x200000, 0x1FFFFF, 0x600000, 0x5FFFFF, 0x123457):
        b = (exps << 23) | mant
        vals.append(b)
    for fp8 in (E4, E5):
        f = torch.arange(256, dtype=torch.uint8).view(fp8).float()
        f = f[~f.isnan() & ~f.isinf()].unique().sort().values
        mids = (f[:-1].double() + f[1:].double()) / 2  # exact in f32 (one more bit)
        m = mids.float()
        assert torch.equal(m.double(), mids)
        top = f[-1].double()
        step = top - f[-2].double()
        extra = torch.tensor([top + step / 2, top + step, top + step * 1.5, top + 2 * step,
                              470.0, 480.0, 464.0, 57344.0, 61440.0, 65536.0, 1e6, 3.4e38])
        for base in (f, m, extra.float()):
            bb = base.view(torch.int32).to(torch.int64)
            for d in (-2, -1, 0, 1, 2):
                vals.append(bb + d)
    vals.append(torch.arange(0, 1 << 12, dtype=torch.int64))  # f32 subnormals
    g = torch.Generator().manual_seed(0)
    vals.append(torch.randint(0, 1 << 31, (1 << 20,), generator=g, dtype=torch.int64))
    # dense: every 2^12-th f32 from 2^-20 up to past e5m2's overflow (all fp8 binades)
    lo, hi = 0x35800000, 0x47900000
    vals.append(torch.arange(lo, hi, 1 << 12, dtype=torch.int64))
    vals.append(torch.tensor([0x7F800000, 0x7F800001, 0x7FC00000, 0x7FFFFFFF, 0x7FA00000],
                             dtype=torch.int64))
    b = torch.cat(vals)
    b = b[(b >= 0) & (b <= 0x7FFFFFFF)]
    b = torch.cat([b, b | 0x80000000]).unique()
    b = torch.where(b >= 1 << 31, b - (1 << 32), b)
    return b.to(torch.int32).view(torch.float32)


SWEEP = encode_sweep()


def test_sweep_covers_the_cases():
    s = SWEEP
    assert s.numel() > 1_000_000
    for v in (0.0, 448.0, 464.0, 57344.0, 61440.0, float("inf"), -float("inf")):
        assert (s == v).any()
    assert s.isnan().any() and (_bits(s) == torch.tensor(-2147483648, dtype=torch.int32)).any()
    assert (s.abs() < 2.0 ** -126).sum() > 1000  # f32 subnormals


@pytest.mark.parametrize("fp8", [E4, E5])
def test_encode_f32_sweep_bit_exact(fp8):
    x = SWEEP
    (out,), text = run_text(_cast_kernel_text(x.numel(), "f32", MLIR_NAME[fp8]), [x])
    ref = x.to(fp8).view(torch.uint8)
    bad = (out != ref).nonzero().flatten()
    assert bad.numel() == 0, [(hex(_bits(x)[i].item() & 0xFFFFFFFF), x[i].item(),
                               out[i].item(), ref[i].item()) for i in bad[:10]]


@pytest.mark.parametrize("fp8", [E4, E5])
def test_encode_scalar_reference_matches_torch(fp8):
    x = SWEEP[::7]
    ref = x.to(fp8).view(torch.uint8).tolist()
    fmt = "e4m3fn" if fp8 is E4 else "e5m2"
    got = [L.encode_scalar(struct.unpack("<f", struct.pack("<i", b))[0], fmt)
           for b in _bits(x).tolist()]
    assert got == ref


@pytest.mark.parametrize("src", ["bf16", "f16", "f64"])
@pytest.mark.parametrize("fp8", [E4, E5])
def test_encode_other_floats(src, fp8):
    x = SWEEP[~SWEEP.isnan()].to(_DT[src])
    (out,), _ = run_text(_cast_kernel_text(x.numel(), src, MLIR_NAME[fp8]), [x])
    assert torch.equal(out, x.to(fp8).view(torch.uint8))


def test_fp8_to_fp8_and_int():
    codes = torch.arange(256, dtype=torch.uint8)
    (out,), _ = run_text(_cast_kernel_text(256, "f8E4M3FN", "f8E5M2"), [codes.view(E4)])
    assert torch.equal(out, codes.view(E4).to(E5).view(torch.uint8))
    (out,), _ = run_text(_cast_kernel_text(256, "f8E5M2", "f8E4M3FN"), [codes.view(E5)])
    assert torch.equal(out, codes.view(E5).to(E4).view(torch.uint8))
    ints = torch.arange(-600, 600, dtype=torch.int32)
    (out,), _ = run_text(_cast_kernel_text(1200, "i32", "f8E4M3FN"), [ints])
    assert torch.equal(out, ints.to(E4).view(torch.uint8))


def test_e4m3fn_overflow_nan_mode():
    """The torch 2.11 CUDA behaviour, as an explicit option: past 464 and ±inf -> NaN."""
    x = SWEEP
    (out,), _ = run_text(_cast_kernel_text(x.numel(), "f32", "f8E4M3FN"), [x],
                         options="formats=none e4m3fn-overflow=nan")
    ref = x.to(E4).view(torch.uint8).clone()
    over = (x.abs() > 464) & ~x.isnan()
    ref[over] = torch.where(x[over] < 0, 0xFF, 0x7F).to(torch.uint8)
    assert torch.equal(out, ref)
    assert out[x == 464.0].tolist() == [0x7E] and out[x == float("inf")].tolist() == [0x7F]
    assert L.probe_torch_e4m3fn_overflow() in ("saturate", "nan")


# ----------------------------------------------------------------------------- graphs

def _kv_decode_step(cache_k, new_k, idx, q, w, x, mask, eager=False):
    k = torch.cat([cache_k, new_k], dim=1)            # fp8 cat of the cache
    k = k[idx]                                         # gather (fallback, on bytes)
    k = k[:, 1:5]                                      # slice
    kb = k.to(torch.bfloat16)                          # exact decode
    s = q @ kb.reshape(kb.shape[0], -1).transpose(0, 1)  # bf16 matmul
    xq = (x * 4).to(torch.float8_e4m3fn)               # fp8-quantized activation
    if eager:  # eager CPU has no masked_fill for fp8; where with the fp8 scalar is the same
        xq = torch.where(mask, torch.tensor(1.5, dtype=torch.float8_e4m3fn), xq)
    else:
        xq = xq.masked_fill(mask, 1.5)                 # fill with an fp8 value
    z = torch.zeros(3, dtype=torch.float8_e5m2)
    f = torch.full((2, 2), 300.0, dtype=torch.float8_e4m3fn)
    y = xq.to(torch.float32) @ w                       # decode + f32 matmul
    return s, k, xq, xq.view(torch.uint8), z, f, y, kb.permute(2, 0, 1)


def test_decode_step_graph_bit_exact():
    torch.manual_seed(0)
    cache = (torch.randn(4, 6, 8) * 50).to(E4)
    new = (torch.randn(4, 1, 8) * 300).to(E4)
    idx = torch.tensor([3, 0, 2])
    q = torch.randn(2, 32, dtype=torch.bfloat16)
    w = torch.randn(16, 5)
    x = torch.randn(6, 16) * 100
    x[0, :4] = torch.tensor([float("inf"), -float("inf"), float("nan"), -0.0])
    mask = torch.rand(6, 16) > 0.8
    args = (cache, new, idx, q, w, x, mask)
    fn, state = compile_fx(_kv_decode_step, args)
    got = fn(*args)
    ref = _kv_decode_step(*args, eager=True)
    assert "f8E" not in state["text"]
    for g, r in zip(got, ref):
        assert g.dtype == r.dtype and g.shape == r.shape
        if g.dtype in (E4, E5):
            assert torch.equal(g.view(torch.uint8), r.view(torch.uint8))
        elif g.dtype.is_floating_point:
            if g.dtype == torch.bfloat16 and g.dim() == 2 and g.shape == (2, 3):
                torch.testing.assert_close(g, r)  # matmul: same library call, same inputs
            else:
                assert torch.equal(g.isnan(), r.isnan())
                assert torch.equal(g.nan_to_num(), r.nan_to_num())
        else:
            assert torch.equal(g, r)
    # the inputs went in as zero-copy views: the fp8 cache itself is untouched
    assert cache.dtype == E4


def test_fp8_arithmetic_and_compare_graph():
    def f(a, b):
        c = a.to(torch.float32) * 3 + b.to(torch.float32)
        return c.to(torch.float8_e5m2), torch.where(a.to(torch.float32) > 1, a, b), \
            (a.view(torch.uint8) & 0x80).to(torch.int32)
    torch.manual_seed(1)
    a = (torch.randn(64) * 10).to(E4)
    b = (torch.randn(64) * 10).to(E4)
    fn, state = compile_fx(f, (a, b))
    for g, r in zip(fn(a, b), f(a, b)):
        assert torch.equal(g.view(torch.uint8) if g.dtype in (E4, E5) else g,
                           r.view(torch.uint8) if r.dtype in (E4, E5) else r)


def test_keep_native_format():
    text = _cast_kernel_text(4, "f32", "f8E4M3FN").replace("tensor<4xf8E4M3FN>",
                                                           "tensor<4xf8E4M3FN>")
    ctx = new_context()
    with ctx:
        m = ir.Module.parse(text)
        run_pipeline(m, ["stax-legalize-fp8{formats=e4m3fn}"])
        assert "f8E4M3FN" in str(m) and "ui8" not in str(m)
        m = ir.Module.parse(_cast_kernel_text(4, "f32", "f8E5M2"))
        run_pipeline(m, ["stax-legalize-fp8{formats=e4m3fn}"])
        assert "f8E" not in str(m)


def test_check_fails_when_fp8_is_left():
    ctx = new_context()
    with ctx:
        m = ir.Module.parse(_cast_kernel_text(4, "f32", "f8E4M3FN"))
        with pytest.raises(PassError, match=r"f8E4M3FN.*formats=none"):
            run_pipeline(m, ["stax-legalize-fp8{formats=none verify-only=true}"])
        with pytest.raises(PassError, match="unknown fp8 format"):
            run_pipeline(m, ["stax-legalize-fp8{formats=e4m3fnuz}"])
        with pytest.raises(PassError, match="has no option"):
            run_pipeline(m, ["stax-legalize-fp8{format=none}"])
        m = ir.Module.parse(_cast_kernel_text(4, "f32", "f8E4M3FNUZ"))
        with pytest.raises(PassError, match="f8E4M3FNUZ"):
            run_pipeline(m, ["stax-legalize-fp8{formats=none}"])
