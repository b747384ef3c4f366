"""The Neuron target: StableHLO lowering run on XLA's CPU client against eager (op sweep
and the reference models, f32 and bf16), the artifact folder, the HloModuleProto
round-trip, the legality check, strict/fallback behaviour. Needs jax/jaxlib 0.10.2
(`pip install 'stax[neuron]'`); skipped without them."""
import functools
import json
import os

import pytest
import torch

pytest.importorskip("jax")

import models  # noqa: E402
import stax.neuron_backend as NB  # noqa: E402
from stax.driver import StaxCompileError  # noqa: E402
from stax.targets import neuron as N  # noqa: E402

F32, BF16 = torch.float32, torch.bfloat16
TOL = {F32: dict(rtol=1e-5, atol=1e-5), BF16: dict(rtol=2e-2, atol=2e-2)}


@pytest.fixture(autouse=True)
def _fresh(monkeypatch, tmp_path):
    for var in ("STAX_DEBUG", "STAX_DEBUG_DIR", "STAX_STRICT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("STAX_NEURON_ARTIFACTS", str(tmp_path / "neuron"))
    torch._dynamo.reset()
    NB.clear()
    yield
    torch._dynamo.reset()


def _compile(fn, strict=True, **kw):
    # dynamic=False: a second shape must recompile statically (Dynamo's automatic
    # dynamic shapes would hand the Neuron target a symbolic graph, which it refuses)
    return torch.compile(fn, backend=functools.partial(NB.stax_neuron, strict_native=strict,
                                                       **kw), dynamic=False)


def _run(fn, *args, strict=True, dtype=None):
    with torch.no_grad():
        ref = fn(*args)
        out = _compile(fn, strict)(*args)
    rep = NB.last_report()
    assert rep is not None and rep.route == "neuron", rep and rep.summary()
    return out, ref, rep


def _close(out, ref, dtype=F32):
    outs = out if isinstance(out, (tuple, list)) else [out]
    refs = ref if isinstance(ref, (tuple, list)) else [ref]
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert o.dtype == r.dtype and o.shape == r.shape, (o.dtype, r.dtype, o.shape, r.shape)
        if r.is_floating_point():
            torch.testing.assert_close(o, r, equal_nan=True, **TOL.get(r.dtype, TOL[F32]))
        else:
            assert torch.equal(o, r), (o, r)


# ----------------------------------------------------------------------------- op sweep

def _x(*shape, dtype=F32, lo=-3.0, hi=3.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(*shape, generator=g) * (hi - lo) + lo).to(dtype)


UNARY = {
    "neg": torch.neg, "abs": torch.abs, "sign": torch.sign, "exp": torch.exp,
    "exp2": torch.exp2, "expm1": torch.expm1, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
    "erf": torch.erf, "sin": torch.sin, "cos": torch.cos, "floor": torch.floor,
    "ceil": torch.ceil, "round": torch.round, "trunc": torch.trunc,
    "reciprocal": torch.reciprocal, "relu": torch.relu, "silu": torch.nn.functional.silu,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": functools.partial(torch.nn.functional.gelu, approximate="tanh"),
}
POSITIVE = {"log": torch.log, "log2": torch.log2, "log1p": torch.log1p, "sqrt": torch.sqrt,
            "rsqrt": torch.rsqrt}


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("name", sorted(UNARY) + sorted(POSITIVE))
def test_unary(name, dtype):
    fn = UNARY.get(name) or POSITIVE[name]
    x = _x(4, 33, dtype=dtype, lo=0.01 if name in POSITIVE else -3.0, hi=5.0)
    out, ref, _ = _run(lambda a: fn(a), x)
    _close(out, ref, dtype)


def test_erf_accuracy_f32():
    x = torch.linspace(-6, 6, 20001)
    out, ref, _ = _run(torch.erf, x)
    assert (out - ref).abs().max().item() < 3e-7
    special = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-30])
    out, ref, _ = _run(torch.erf, special)
    torch.testing.assert_close(out, ref, equal_nan=True)


BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "maximum": torch.maximum, "minimum": torch.minimum, "pow": torch.pow,
    "atan2": torch.atan2, "remainder": torch.remainder,
    "floor_divide": torch.floor_divide,
}


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name, dtype):
    a = _x(3, 17, dtype=dtype, lo=0.5 if name == "pow" else -4, hi=4, seed=1)
    b = _x(17, dtype=dtype, lo=0.5, hi=3, seed=2)
    if name in ("remainder", "floor_divide"):
        b = b * torch.where(torch.arange(17) % 2 == 0, 1.0, -1.0).to(dtype)
    out, ref, _ = _run(lambda x, y: BINARY[name](x, y), a, b)
    _close(out, ref, dtype)


@pytest.mark.parametrize("name", ["add", "mul", "remainder", "floor_divide", "maximum",
                                  "bitwise_and", "bitwise_xor"])
def test_binary_int(name):
    g = torch.Generator().manual_seed(3)
    a = torch.randint(-50, 50, (4, 9), generator=g)
    b = torch.randint(1, 7, (4, 9), generator=g) * torch.where(torch.rand(4, 9, generator=g) > 0.5, 1, -1)
    fn = getattr(torch, name)
    out, ref, _ = _run(lambda x, y: fn(x, y), a, b)
    _close(out, ref)


def test_compare_select_convert_bitcast():
    def f(a, b):
        m = (a > b) & (a != 0.5) | (a <= -1)
        w = torch.where(m, a, b * 2)
        i = w.to(torch.int32)
        bits = w.view(torch.int32)
        return w, i, bits, m, (~m).to(torch.float32), torch.isnan(a / b)

    a, b = _x(5, 7, seed=4), _x(5, 7, seed=5)
    b[0, 0] = 0.0
    a[0, 0] = 0.0
    out, ref, _ = _run(f, a, b)
    _close(out, ref)


def test_data_movement():
    def f(a, b):
        t = a.transpose(0, 1).reshape(3, 8)
        s = t[1:5:2, ::3]
        c = torch.cat([a, b, a], dim=1)
        p = torch.nn.functional.pad(a, (1, 2, 0, 1), value=-1.5)
        e = a[:, None, :].expand(4, 3, 6)
        r = torch.arange(6, dtype=torch.float32) * a
        return t, s, c, p, e + 0, r, a.permute(1, 0).contiguous()

    out, ref, _ = _run(f, _x(4, 6, seed=6), _x(4, 2, seed=7))
    _close(out, ref)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_reductions(dtype):
    def f(a):
        return (a.sum(-1), a.sum((0, 2), keepdim=True), a.amax(1), a.amin(-1, keepdim=True),
                a.mean(-1), a.prod(-1), a.argmax(-1), a.argmin(1, keepdim=True),
                a.softmax(-1), torch.log_softmax(a, 1), a.var(-1))

    a = _x(3, 5, 16, dtype=dtype, seed=8)
    a[0, 0, 3] = a[0, 0, 7] = 10.0  # argmax tie: first index
    out, ref, _ = _run(f, a)
    _close(out, ref, dtype)


def test_argmax_nan_and_bool_reductions():
    a = _x(4, 8, seed=9)
    a[1, 5] = float("nan")
    a[2, 2] = float("nan")
    a[2, 6] = float("nan")
    out, ref, _ = _run(lambda x: (x.argmax(-1), x.argmin(-1), x.amax(-1)), a)
    _close(out, ref)
    m = a > 0
    out, ref, _ = _run(lambda x: (x.any(-1), x.all(-1), x.sum(-1)), m)
    _close(out, ref)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_matmul(dtype):
    def f(a, b, c, w, bias):
        return a @ b, torch.bmm(c, c.transpose(1, 2)), torch.nn.functional.linear(a, w, bias)

    a, b = _x(8, 32, dtype=dtype, seed=10), _x(32, 16, dtype=dtype, seed=11)
    c = _x(3, 8, 32, dtype=dtype, seed=12)
    w, bias = _x(24, 32, dtype=dtype, seed=13), _x(24, dtype=dtype, seed=14)
    out, ref, _ = _run(f, a, b, c, w, bias)
    _close(out, ref, dtype)


def test_layernorm_rmsnorm_and_int_ops():
    ln = torch.nn.LayerNorm(16)
    rms = models.RMSNorm(16) if hasattr(models, "RMSNorm") else None

    def f(x, idx):
        outs = [ln(x), (idx * 3 + 1) % 5, (idx > 2).to(torch.int64).sum(-1)]
        if rms is not None:
            outs.append(rms(x))
        return tuple(outs)

    idx = torch.arange(12).reshape(3, 4)
    out, ref, _ = _run(f, _x(3, 4, 16, seed=15), idx)
    _close(out, ref)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_nll_without_gather(reduction):
    """nll_loss arrives whole (stax_decompositions) and becomes iota == target, select,
    reduce: no gather, no fallback op."""
    t = torch.randint(0, 100, (16,), generator=torch.Generator().manual_seed(3))
    t[2] = -100
    out, ref, rep = _run(lambda x, t: torch.nn.functional.cross_entropy(x, t, reduction=reduction),
                         _x(16, 100, seed=21), t)
    assert rep.fallback_ops == [], rep.fallback_ops
    _close(out, ref)


# ----------------------------------------------------------------------------- models

@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("name", ["mlp", "gpt2", "llama"])
def test_models_inference(name, dtype):
    torch.manual_seed(0)
    m = models.make_model(name, dtype).eval()
    inputs = models.make_inputs(name, batch=2, seq=8, dtype=dtype,
                                generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = m(*inputs)
        out = torch.compile(m, backend="stax_neuron")(*inputs)  # the entry point
    rep = NB.last_report()
    assert rep.route == "neuron", rep.summary()
    _close(out, ref, dtype)


def test_training_forward_backward():
    torch.manual_seed(0)
    m = models.make_model("mlp", F32, in_features=16, hidden=32, out_features=8)
    m2 = models.make_model("mlp", F32, in_features=16, hidden=32, out_features=8)
    m2.load_state_dict(m.state_dict())
    x = _x(4, 16, seed=16)
    _compile(m2)(x).square().sum().backward()
    m(x).square().sum().backward()
    rep = NB.last_report()
    assert rep.route == "neuron" and len(rep.artifact_dirs) == 2, rep.summary()
    for p, q in zip(m.parameters(), m2.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------- artifacts

def _one_graph(tmp_path=None):
    def f(x, w):
        y = torch.tanh(x @ w)
        return y, y.sum(-1)

    x, w = _x(4, 8, seed=17), _x(8, 5, seed=18)
    c = _compile(f)
    with torch.no_grad():
        c(x, w)
    return NB.compiled_callables[-1], NB.last_report()


def test_artifact_folder(tmp_path):
    compiled, rep = _one_graph()
    d = compiled.stax_artifact_dir
    assert d is not None and d.startswith(str(tmp_path / "neuron"))
    assert compiled.stax_route == "neuron"
    assert sorted(os.listdir(d)) == ["hlo_module.pb", "hlo_module.txt", "manifest.json",
                                     "neuronx_cc_command.txt", "stablehlo.mlir"]
    man = json.load(open(os.path.join(d, "manifest.json")))
    assert [i["shape"] for i in man["inputs"]] == [[4, 8], [8, 5]]
    assert [i["dtype"] for i in man["inputs"]] == ["float32", "float32"]
    assert man["neff_input_names"] == [i["name"] for i in man["inputs"]]
    assert [o["shape"] for o in man["outputs"]] == [[4, 5], [4]]
    cmd = open(os.path.join(d, "neuronx_cc_command.txt")).read().strip()
    assert cmd == "neuronx-cc compile --framework XLA hlo_module.pb --target trn2 " \
                  "--output graph.neff"
    hlo = open(os.path.join(d, "hlo_module.txt")).read()
    names = ",".join(man["neff_input_names"])
    assert f'frontend_attributes={{neff_input_names="{names}"}}' in hlo
    assert "ROOT" in hlo and "tuple(" in hlo  # two outputs: one tuple
    shlo = open(os.path.join(d, "stablehlo.mlir")).read()
    assert "stablehlo.dot_general" in shlo and "stax." not in shlo


def test_artifact_root_default(monkeypatch, tmp_path):
    monkeypatch.delenv("STAX_NEURON_ARTIFACTS")
    monkeypatch.setenv("STAX_CACHE_DIR", str(tmp_path / "cache"))
    assert N.artifact_root() == str(tmp_path / "cache" / "neuron")
    monkeypatch.delenv("STAX_CACHE_DIR")
    assert N.artifact_root() == os.path.join(os.path.expanduser("~"), ".cache", "stax",
                                             "neuron")


def test_proto_round_trip_and_decoder():
    compiled, _ = _one_graph()
    pb = open(os.path.join(compiled.stax_artifact_dir, "hlo_module.pb"), "rb").read()
    assert N.reserialize(pb) == pb
    instrs = N.decode_instructions(pb)
    text = N.hlo_text_of(pb)
    # the wire decoder agrees with XLA's own printer on every instruction
    for ins in instrs:
        assert f"{ins.name} = " in text and f" {ins.opcode}(" in text, ins
    assert {i.opcode for i in instrs} >= {"parameter", "dot", "tanh", "reduce", "tuple"}
    assert N.check_legality(pb)


# ----------------------------------------------------------------------------- legality

BAD_F64 = """
func.func @main(%a: tensor<4xf64>) -> tensor<4xf64> {
  %0 = "stablehlo.add"(%a, %a) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64> loc("twice")
  return %0 : tensor<4xf64>
}
"""
BAD_OPCODE = """
func.func @main(%a: tensor<8xf32>) -> tensor<8xf32> {
  %0 = "stablehlo.sort"(%a) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %c = "stablehlo.compare"(%x, %y) {comparison_direction = #stablehlo<comparison_direction LT>} : (tensor<f32>, tensor<f32>) -> tensor<i1>
    "stablehlo.return"(%c) : (tensor<i1>) -> ()
  }) {dimension = 0 : i64} : (tensor<8xf32>) -> tensor<8xf32> loc("my_sort")
  return %0 : tensor<8xf32>
}
"""
BAD_FP8 = """
func.func @main(%a: tensor<4xf32>) -> tensor<4xf8E4M3FN> {
  %0 = "stablehlo.convert"(%a) : (tensor<4xf32>) -> tensor<4xf8E4M3FN> loc("to_fp8")
  return %0 : tensor<4xf8E4M3FN>
}
"""


@pytest.mark.parametrize("text,words", [
    (BAD_F64, ["twice", "F64", "f64 is not supported"]),
    (BAD_OPCODE, ["my_sort", "opcode 'sort'"]),
    (BAD_FP8, ["to_fp8", "F8E4M3FN", "fp8"]),
])
def test_legality_rejects(text, words):
    hlo = N.stablehlo_to_hlo(text)
    with pytest.raises(N.NeuronLegalityError) as e:
        N.check_legality(hlo.proto)
    for w in words:
        assert w in str(e.value), str(e.value)


# ----------------------------------------------------------------------------- refusals

def test_fallback_op_strict_names_op():
    def f(x):
        return torch.cumsum(x, 0) + 1

    x = _x(6, seed=19)
    with pytest.raises(Exception) as e:
        _compile(f, strict=True)(x)
    assert "cumsum" in str(e.value) and "Neuron" in str(e.value)


def test_fallback_op_not_strict_runs_as_written():
    def f(x):
        return torch.cumsum(x, 0) + 1

    x = _x(6, seed=19)
    out = _compile(f, strict=False)(x)
    torch.testing.assert_close(out, f(x))
    rep = NB.last_report()
    assert rep.route == "fallback" and "cumsum" in rep.fallback_reason


def test_f64_refused():
    x = torch.randn(4, dtype=torch.float64)
    with pytest.raises(Exception) as e:
        _compile(lambda a: a * 2, strict=True)(x)
    assert "float64" in str(e.value) or "f64" in str(e.value)
    torch._dynamo.reset()
    out = _compile(lambda a: a * 2, strict=False)(x)
    torch.testing.assert_close(out, x * 2)
    assert NB.last_report().route == "fallback"


def _dynamic(strict=True, dynamic=True):
    return torch.compile(_attn_like, backend=functools.partial(NB.stax_neuron,
                                                               strict_native=strict),
                         dynamic=dynamic)


def _attn_like(x, w):
    return torch.softmax(x @ w, dim=-1) * 2.0 + x[:, :1]


def test_dynamic_shapes_compile_one_hlo_module_per_size():
    # neuronx-cc takes static shapes: each size Dynamo's symbolic graph meets is its own
    # static HLO module (and artifact folder); a size met again reuses its variant
    w = torch.randn(64, 512)
    c = _dynamic()
    sizes = (5, 7, 512, 3, 7)
    with torch.no_grad():
        for n in sizes:
            x = torch.randn(n, 64)
            _close(c(x, w), _attn_like(x, w))
    rep = NB.last_report()
    assert rep.route == "neuron", rep.summary()
    variants = rep.variants
    assert [v.sizes for v in variants] and len(variants) == 4, [v.describe() for v in variants]
    assert sorted(next(iter(v.sizes.values())) for v in variants) == [3, 5, 7, 512]
    assert all(v.route == "neuron" for v in variants)
    assert [v.calls for v in variants] == [1, 2, 1, 1]
    dirs = rep.artifact_dirs
    assert len(set(dirs)) == 4, dirs
    for v in variants:
        (ng,) = v.graphs
        man = json.load(open(os.path.join(ng.artifact_dir, "manifest.json")))
        n = next(iter(v.sizes.values()))
        assert [i["shape"] for i in man["inputs"] if i["kind"] != "constant"][:1] == [[n, 64]]
        assert os.path.getsize(os.path.join(ng.artifact_dir, "hlo_module.pb")) > 0
    assert any("shape-specialized" in n for n in rep.notes), rep.notes


def test_dynamic_automatic_and_marked():
    # automatic dynamic (a second size makes the batch symbolic) and mark_dynamic with
    # bounds both reach the per-size compile; a size outside the bounds is Dynamo's
    w = torch.randn(64, 512)
    c = _dynamic(dynamic=None)
    with torch.no_grad():
        for n in (4, 6, 9):
            x = torch.randn(n, 64)
            _close(c(x, w), _attn_like(x, w))
    assert NB.last_report().route == "neuron"
    assert len(NB.last_report().variants) == 2  # 4 was Dynamo's static first graph
    torch._dynamo.reset()
    NB.clear()
    c = _dynamic(dynamic=None)
    x = torch.randn(8, 64)
    torch._dynamo.mark_dynamic(x, 0, min=2, max=16)
    with torch.no_grad():
        _close(c(x, w), _attn_like(x, w))
        x2 = torch.randn(11, 64)
        _close(c(x2, w), _attn_like(x2, w))
    rep = NB.last_report()
    assert rep.route == "neuron" and len(rep.variants) == 2


def test_dynamic_variant_reuses_its_artifact_folder_across_compiles():
    # a later compile (a new process, or after torch._dynamo.reset) of the same size
    # reuses the HLO proto on disk; a folder whose proto was edited is converted again
    w = torch.randn(64, 512)
    x = torch.randn(5, 64)
    with torch.no_grad():
        ref = _attn_like(x, w)
        for _ in range(2):
            c = _dynamic()
            _close(c(x, w), ref)
            (ng,) = NB.last_report().variants[0].graphs
            torch._dynamo.reset()
            NB.clear()
        assert any("reused the HLO module" in n for n in ng.notes), ng.notes
        pb = os.path.join(ng.artifact_dir, "hlo_module.pb")
        good = open(pb, "rb").read()
        with open(pb, "wb") as f:
            f.write(good[:-1] + bytes([good[-1] ^ 1]))
        c = _dynamic()
        _close(c(x, w), ref)
        (ng2,) = NB.last_report().variants[0].graphs
    assert ng2.artifact_dir == ng.artifact_dir
    assert not any("reused" in n for n in ng2.notes), ng2.notes
    # converted again and rewritten: the proto is whole again and has its manifest's hash
    # (jaxlib's conversion is not byte-stable across calls, so not compared with `good`)
    import hashlib
    fresh = open(pb, "rb").read()
    man = json.load(open(os.path.join(ng.artifact_dir, "manifest.json")))
    assert hashlib.sha256(fresh).hexdigest() == man["hlo_module_sha256"]
    assert fresh != good[:-1] + bytes([good[-1] ^ 1])


def test_guards():
    compiled, rep = _one_graph()
    ng = rep.graphs[-1]
    from stax.driver import StaxGuardError
    with pytest.raises(StaxGuardError, match="compiled for"):
        ng(torch.randn(4, 9), torch.randn(9, 5))


def test_options_notes_and_validation():
    with pytest.raises(ValueError):
        NB.neuron_notes("nope", None)
    with pytest.raises(TypeError):
        NB.neuron_notes(None, {"stax.fusion": 1})
    cfg, notes = NB.neuron_notes("max-autotune", None)
    assert cfg.target == "neuron"
    assert any("cudagraphs" in n for n in notes) and any("max_autotune" in n for n in notes)
    cfg, notes = NB.neuron_notes(None, {"stax.fusion": False})
    assert any("neuronx-cc fuses" in n for n in notes)
    assert NB.neuron_notes(None, None)[1] == []


def test_fp8_decode_step_bit_exact_on_xla_cpu():
    # An fp8 KV cache (cat, slice, permute), decode to bf16, bf16 matmul, fp8-quantized
    # result: stax-legalize-fp8 carries fp8 as ui8 for Neuron (trn1/trn2 reject
    # F8E4M3FN); fp8 inputs go in as their bytes and fp8 outputs come back as fp8.
    def f(cache, new, w):
        kv = torch.cat([cache, new], 0)
        x = kv[1:].to(torch.bfloat16)
        y = x @ w
        return (y * 0.5).to(torch.float8_e4m3fn), kv.permute(1, 0)

    torch.manual_seed(0)
    cache = (torch.randn(7, 32) * 100).to(torch.float8_e4m3fn)
    new = (torch.randn(1, 32) * 1000).to(torch.float8_e4m3fn)  # overflows saturate
    w = torch.randn(32, 16, dtype=torch.bfloat16)
    g = torch.compile(f, backend="stax_neuron", dynamic=False)
    got, want = g(cache, new, w), f(cache, new, w)
    c = NB.compiled_callables[-1]
    assert c.stax_route == "neuron"
    for a, b in zip(got, want):
        assert a.dtype == b.dtype == torch.float8_e4m3fn
        assert torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    hlo = open(os.path.join(c.stax_artifact_dir, "hlo_module.txt")).read()
    assert "f8e4m3" not in hlo.lower()


def test_fp8_kv_cache_gather_decode_step_bit_exact_on_xla_cpu():
    # The decode step of the issue: gather rows of an fp8 KV cache by position, decode,
    # bf16 q.k^T; plus a gather along an inner dim. Gathers lower to stablehlo.gather.
    def f(cache, pos, q, cols):
        k = cache[pos].to(torch.bfloat16)            # [P, 64] fp8 rows -> bf16
        s = q @ k.t()                                 # [4, P]
        return s, torch.index_select(cache, 1, cols)  # fp8 bytes moved exactly

    torch.manual_seed(0)
    cache = (torch.randn(32, 64) * 50).to(torch.float8_e4m3fn)
    pos = torch.tensor([3, 31, 0, 17, 17, 8])
    cols = torch.tensor([63, 0, 5])
    q = torch.randn(4, 64, dtype=torch.bfloat16)
    g = torch.compile(f, backend="stax_neuron", dynamic=False)
    (s1, c1), (s2, c2) = g(cache, pos, q, cols), f(cache, pos, q, cols)
    c = NB.compiled_callables[-1]
    assert c.stax_route == "neuron"
    torch.testing.assert_close(s1, s2, rtol=2e-2, atol=2e-2)
    assert c1.dtype == torch.float8_e4m3fn
    assert torch.equal(c1.view(torch.uint8), c2.view(torch.uint8))
    hlo = open(os.path.join(c.stax_artifact_dir, "hlo_module.txt")).read()
    assert "gather(" in hlo and "f8e4m3" not in hlo.lower()
