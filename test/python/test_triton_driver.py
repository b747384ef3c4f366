"""The driver and backend on the triton (CUDA) target.

CPU-runnable: target selection from the example inputs' device (fake CUDA tensors stand
in for real ones), the mode/option notes of the triton target, the refusal of
`stax.triton=False`, the alignment guard's message, the static reasons of the CUDA
graph runner, and (when `stax.targets.triton` exists) the whole driver path on fake CUDA
inputs down to PTX (Triton compiles without a GPU).

GPU (skipped without CUDA): the test models' numerics on `device="cuda"`, f32 and bf16,
against eager; one training step; route "triton"; softmax in <= 2 kernels; the
alignment guard; `reduce-overhead` capture, and its recorded reason where it cannot.
"""
from __future__ import annotations

import copy
import importlib.util

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

import stax.backend as B
from stax.driver import (ArgGuard, StaxGuardError, StaxUnsupportedError, compile_graph,
                         guard_failure, select_target)
from stax.options import resolve_config

from models import MODEL_NAMES, make_inputs, make_model
from test_models import EXPECTED_FALLBACK, SIZES, TOL
from test_numerics_ops import assert_close

F32, BF16 = torch.float32, torch.bfloat16
# on the GPU, fused attention stays with PyTorch's kernels (flash / efficient / cuDNN)
CUDA_FALLBACK = {"gpt2_sdpa": ["aten._scaled_dot_product_efficient_attention.default",
                               "aten._scaled_dot_product_flash_attention.default",
                               "aten._scaled_dot_product_cudnn_attention.default"]}
CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU (the triton target runs "
                                "kernels on the device)")
HAS_TRITON_TARGET = importlib.util.find_spec("stax.targets.triton") is not None and \
    importlib.util.find_spec("triton") is not None


@pytest.fixture(autouse=True)
def _strict(monkeypatch):
    monkeypatch.setenv("STAX_STRICT", "1")
    monkeypatch.delenv("STAX_DEBUG", raising=False)
    torch._dynamo.reset()
    B.clear()
    torch.manual_seed(0)
    yield
    torch._dynamo.reset()
    B.clear()


def fake_cuda(*shapes, dtype=F32):
    with FakeTensorMode():
        return [torch.empty(s, dtype=dtype, device="cuda") for s in shapes]


# ----------------------------------------------------------------------------- CPU-runnable

def test_select_target_by_device():
    assert select_target([torch.randn(3), 2]) == ("stax-cpu", "cpu")
    assert select_target([]) == ("stax-cpu", "cpu")
    a, b = fake_cuda((4, 8), (8,))
    assert select_target([a, b, 3]) == ("triton", "cuda:0")


def _graph_placing(device, with_input=False):
    """An FX graph whose factory names `device` (built by hand: no CUDA needed)."""
    g = torch.fx.Graph()
    x = g.placeholder("x") if with_input else None
    z = g.call_function(torch.ops.aten.full.default, ([3], 1.0),
                        {"dtype": F32, "device": torch.device(device)})
    g.output((g.call_function(torch.ops.aten.add.Tensor, (z, x)) if x is not None else z,))
    return torch.fx.GraphModule(torch.nn.Module(), g)


def test_select_target_graph_without_inputs_runs_where_its_factories_place_it():
    # found by the OpInfo sweep on the H200: torch.full(..., device="cuda") compiled for
    # the CPU and returned a CPU tensor
    assert select_target([], gm=_graph_placing("cuda:0")) == ("triton", "cuda:0")
    assert select_target([], gm=_graph_placing("cpu")) == ("stax-cpu", "cpu")
    with pytest.raises(StaxUnsupportedError, match="meta"):
        select_target([], gm=_graph_placing("meta"))


def test_select_target_refuses_a_graph_that_moves_tensors_to_another_device():
    (a,) = fake_cuda((3,))
    with pytest.raises(StaxUnsupportedError) as e:
        select_target([torch.randn(3)], ["x"], gm=_graph_placing("cuda:0", with_input=True))
    assert "cuda:0: full" in str(e.value) and "inputs on cpu" in str(e.value)
    assert select_target([a], ["x"], gm=_graph_placing("cuda:0", True)) == ("triton", "cuda:0")


def test_select_target_takes_a_cpu_scalar_made_in_a_cuda_graph():
    """`y[mask] = 0` on CUDA: aot's graph indexes with `full([], 0, device=cpu)`, a CPU
    scalar PyTorch takes in any device's op; the graph compiles for the GPU (H100,
    test_model_idioms' masked_assign fell back)."""
    (a,) = fake_cuda((3,))
    g = torch.fx.Graph()
    x = g.placeholder("x")
    z = g.call_function(torch.ops.aten.full.default, ([], 0.0),
                        {"dtype": F32, "device": torch.device("cpu")})
    z.meta["val"] = torch.empty(())
    g.output((g.call_function(torch.ops.aten.add.Tensor, (x, z)),))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    assert select_target([a], ["x"], gm=gm) == ("triton", "cuda:0")
    z.meta["val"] = torch.empty((1,))   # not a scalar: still refused
    with pytest.raises(StaxUnsupportedError, match="cpu: full"):
        select_target([a], ["x"], gm=gm)
    z.meta["val"] = torch.empty(())   # a CPU scalar the graph returns: eager's is on the CPU
    out = next(n for n in g.nodes if n.op == "output")
    out.args = ((out.args[0][0], z),)
    with pytest.raises(StaxUnsupportedError, match="cpu: full"):
        select_target([a], ["x"], gm=torch.fx.GraphModule(torch.nn.Module(), g))


def test_select_target_mixed_devices_names_the_inputs():
    # CPU tensors beside CUDA tensors are allowed (torch allows a CPU 0-dim tensor beside
    # CUDA tensors everywhere): the graph compiles for the GPU
    (a,) = fake_cuda((4, 8))
    assert select_target([a, torch.tensor(2.0)], ["x", "scale"]) == ("triton", "cuda:0")
    # two other devices are still refused, naming the inputs
    with pytest.raises(StaxUnsupportedError) as e:
        select_target([a, torch.empty(3, device="meta")], ["x", "m"])
    msg = str(e.value)
    assert "more than one device" in msg and "1 ('m')" in msg and "0 ('x')" in msg
    assert "meta" in msg and "cuda:0" in msg


def _fake_cuda_compile(fn, *inputs):
    from torch.fx.experimental.proxy_tensor import make_fx
    gm = make_fx(fn, tracing_mode="fake")(*inputs)
    return compile_graph(gm, list(inputs), resolve_config(None, target="triton"))


@pytest.mark.skipif(not HAS_TRITON_TARGET, reason="stax.targets.triton or triton missing")
def test_cpu_scalar_beside_cuda_tensors_is_copied_to_the_device(monkeypatch):
    monkeypatch.setenv("STAX_TRITON_ARCH", "90")
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        x = torch.empty(64, 32, device="cuda")
        s = torch.empty((), device="cpu")
        cg = _fake_cuda_compile(lambda x, s: x * s + 1.0, x, s)
    del mode
    assert cg.route == "triton" and cg.kernel_count == 1
    assert "a1.to(_dev)" in cg.source, cg.source
    # a 0-dim input may come on the CPU or the GPU (its device is not guarded)
    assert cg.guards[1].device is None and cg.guards[0].device == "cuda:0"
    guard_line = next(ln for ln in cg.source.splitlines() if "isinstance(a1" in ln)
    assert "device" not in guard_line, guard_line
    # the interpreted kernels (ttir_interp) give eager's values
    from ttir_interp import cpu_triton
    xr, sr = torch.randn(64, 32), torch.tensor(3.0)
    with cpu_triton(cg):
        got = cg(xr, sr)
    assert_close(got[0] if isinstance(got, (tuple, list)) else got, xr * sr + 1.0)


@pytest.mark.skipif(not HAS_TRITON_TARGET, reason="stax.targets.triton or triton missing")
def test_scalar_saved_for_backward_may_come_on_the_cpu(monkeypatch):
    # sdpa's RNG state: fake tensors put the 0-dim seed/offset on the GPU, eager hands the
    # backward CPU tensors; a fallback op reads them, so either device passes the guard
    monkeypatch.setenv("STAX_TRITON_ARCH", "90")
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        x = torch.empty(64, 32, device="cuda")
        seed = torch.empty((), dtype=torch.int64, device="cuda")
        cg = _fake_cuda_compile(lambda x, seed: (x * 2.0, seed.view(1).repeat(2)), x, seed)
    del mode
    assert cg.guards[1].device is None
    assert "a1.to(" not in cg.source, cg.source
    from ttir_interp import cpu_triton
    with cpu_triton(cg):
        got = cg(torch.ones(64, 32), torch.tensor(7))
    assert got[1].tolist() == [7, 7]


@pytest.mark.skipif(not HAS_TRITON_TARGET, reason="stax.targets.triton or triton missing")
def test_cpu_tensor_beside_cuda_tensors_read_by_a_kernel_is_refused(monkeypatch):
    monkeypatch.setenv("STAX_TRITON_ARCH", "90")
    with FakeTensorMode(allow_non_fake_inputs=True):
        x = torch.empty(64, 32, device="cuda")
        s = torch.empty(32, device="cpu")
        from torch.fx.experimental.proxy_tensor import make_fx
        gm = make_fx(lambda x, s: x + 1.0, tracing_mode="fake")(x, s)
    # a graph where the CPU tensor feeds a kernel: built by hand (eager would refuse
    # x_cuda * s_cpu with a device error already while tracing)
    g = torch.fx.Graph()
    a, b = g.placeholder("x"), g.placeholder("s")
    g.output((g.call_function(torch.ops.aten.mul.Tensor, (a, b)),))
    for n, v in zip(list(g.nodes)[:2], (x, s)):
        n.meta["val"] = v
    list(g.nodes)[2].meta["val"] = x
    gm = torch.fx.GraphModule({}, g)
    with pytest.raises(StaxUnsupportedError, match="only 0-dim CPU tensors"):
        compile_graph(gm, [x, s], resolve_config(None, target="triton"))


@pytest.mark.skipif(not HAS_TRITON_TARGET, reason="stax.targets.triton or triton missing")
def test_cpu_tensor_read_only_by_a_fallback_op_stays_on_the_cpu(monkeypatch):
    # like sdpa's RNG state saved for the backward: a CPU tensor beside CUDA tensors that
    # only a fallback op reads (or that is returned) passes through on its own device
    monkeypatch.setenv("STAX_TRITON_ARCH", "90")
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        x = torch.empty(64, 32, device="cuda")
        seed = torch.empty(2, dtype=torch.int64, device="cpu")
        cg = _fake_cuda_compile(lambda x, seed: (x * 2.0, seed.cumsum(0), seed), x, seed)
    del mode
    assert cg.route == "triton"
    assert "a1.to(" not in cg.source, cg.source
    assert cg.guards[1].device == "cpu"


def test_select_target_other_device_refused():
    with pytest.raises(StaxUnsupportedError, match="device meta"):
        select_target([torch.empty(3, device="meta")])


def test_triton_option_off_on_cuda_is_a_clear_refusal():
    x, = fake_cuda((4, 8))
    gm = torch.fx.symbolic_trace(lambda x: x * 2.0)
    cfg = resolve_config(None, {"stax.triton": False})
    with pytest.raises(StaxUnsupportedError, match="'stax.triton'=False turns off the triton"):
        compile_graph(gm, [x], cfg)
    cfg = resolve_config(None, {"stax.cuda_codegen": False})
    with pytest.raises(StaxUnsupportedError, match="'stax.cuda_codegen'=False"):
        compile_graph(gm, [x], cfg)


def _no_tuner(monkeypatch, why="triton is not installed"):
    import stax.options as O
    monkeypatch.setattr(O, "_autotune_unavailable_reason", lambda: why)


def test_triton_mode_notes(monkeypatch):
    # both sides of the autotuner note run whatever is installed (they were skipped
    # whenever the autotuner imported, and the skipped side looked for a text that no
    # longer exists)
    from stax.options import autotune_available
    c = resolve_config("max-autotune", target="triton")
    if autotune_available():
        assert not any("autotuning is not available" in n for n in c.notes), c.notes
    assert c.max_autotune and c.cudagraphs and c.coordinate_descent_tuning
    with monkeypatch.context() as mp:
        _no_tuner(mp)
        nt = resolve_config("max-autotune", target="triton")
        assert ("mode 'max-autotune': autotuning is not available on the triton target "
                "(triton is not installed); every kernel uses triton_ttir.default_config"
                ) in " ".join(nt.notes), nt.notes
        assert nt.max_autotune  # the option is kept; the note says it cannot act
        ex = resolve_config(None, {"stax.max_autotune": True}, target="triton")
        assert any(n.startswith("option 'stax.max_autotune': autotuning is not available")
                   for n in ex.notes), ex.notes
    # cudagraphs applies on the GPU: no "not applicable" note there
    assert not any("not applicable" in n for n in c.notes)
    assert resolve_config("reduce-overhead", target="triton").notes == ()
    assert resolve_config(None, target="triton").notes == ()
    off = resolve_config(None, {"stax.triton": False}, target="triton")
    assert any("'stax.triton'=False" in n and "fallback" in n for n in off.notes)
    # the CPU notes are unchanged, and for_target switches between them
    cpu = resolve_config("max-autotune")
    assert any("cudagraphs: not applicable on CPU" in n for n in cpu.notes)
    gpu = cpu.for_target("triton")
    assert gpu.target == "triton" and gpu.mode == "max-autotune"
    assert not any("not applicable on CPU" in n for n in gpu.notes)
    with pytest.raises(ValueError, match="unknown target"):
        resolve_config(None, target="tpu")


def test_alignment_guard_message_says_what_to_do():
    g = ArgGuard(0, "x", "tensor", (7,), F32, "cpu", (1,), aligned=True)
    base = torch.randn(8)
    x = base[1:]  # 4 bytes past an aligned pointer
    assert x.data_ptr() % 16
    msg = str(guard_failure([g], "g0", 0, x))
    assert "not 16-byte aligned" in msg and "x.clone()" in msg and "contiguous()" in msg


def test_cudagraph_static_reasons():
    from stax.cudagraphs import static_reason

    class CG:  # what the runner reads of a CompiledGraph
        fallback_ops = ["aten.nonzero.default"]
        source = ""

    r = static_reason(CG())
    assert r and "aten.nonzero.default" in r and "not capturable" in r
    CG.fallback_ops = ["aten.cumsum.default"]
    CG.source = ("def call(args):\n    v3 = f0(a0, 1, device=torch.device('cpu'))  "
                 "# aten.arange.start\n")
    r = static_reason(CG())
    assert r and "aten.arange.start" in r and "CPU tensor" in r
    CG.source = ""
    assert static_reason(CG()) is None


@pytest.mark.skipif(not HAS_TRITON_TARGET, reason="stax.targets.triton or triton missing")
def test_driver_compiles_fake_cuda_graph_to_ptx(monkeypatch):
    # no GPU needed: the kernels are compiled for sm_90 from fake CUDA example inputs
    monkeypatch.setenv("STAX_TRITON_ARCH", "90")
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x):
        return torch.softmax(x, dim=-1) * 2.0

    with FakeTensorMode() as mode:
        x = torch.empty(64, 256, device="cuda")
        gm = make_fx(f, tracing_mode="fake")(x)
    cg = compile_graph(gm, [x], resolve_config(None, target="triton"))
    assert cg.route == "triton" and cg.device == "cuda:0"
    assert 1 <= cg.kernel_count <= 2
    assert all(getattr(k, "ptx", None) for k in cg.kernels)
    assert "device=_dev" in cg.source
    del mode


# ----------------------------------------------------------------------------- GPU

@pytest.fixture
def on_cuda():
    torch.set_default_device("cuda")
    try:
        yield
    finally:
        torch.set_default_device(None)


def _the_callable(route="triton"):
    assert len(B.compiled_callables) == 1, \
        f"expected one compiled graph, got {len(B.compiled_callables)}"
    c = B.compiled_callables[0]
    assert c.stax_route == route, f"route {c.stax_route}: {c.stax_fallback_reason}"
    return c


@needs_cuda
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
@pytest.mark.parametrize("name", MODEL_NAMES)
def test_model_inference_cuda(name, dtype, on_cuda):
    model = make_model(name, dtype)
    ref_model = copy.deepcopy(model)
    batch, seq = SIZES[name]
    cm = torch.compile(model, backend="stax", fullgraph=True)
    with torch.no_grad():
        for which in ("A", "B"):
            (x,) = make_inputs(name, batch, seq, dtype)
            assert x.is_cuda
            ref = ref_model(x.clone())
            out = cm(x)
            assert out.is_cuda
            torch.testing.assert_close(out, ref, **TOL[dtype],
                                       msg=lambda m: f"{name} {dtype} inputs {which}: {m}")
    c = _the_callable()
    expected = EXPECTED_FALLBACK.get(name, []) + CUDA_FALLBACK.get(name, [])
    assert set(c.stax_fallback_ops) <= set(expected), c.stax_fallback_ops
    assert c.stax_kernel_count >= 1
    lp = c.stax_launches_per_call
    assert lp and all(v >= c.stax_kernel_count for v in lp.values()), lp
    if name != "conv_bn_relu":
        assert c.stax_library_calls, "linear layers should be cuBLAS library calls"


@needs_cuda
def test_training_step_cuda(on_cuda):
    model = make_model("gpt2", F32)
    ref = copy.deepcopy(model)

    def loss_fn(m, x, t):
        return F.mse_loss(m(x), t)

    step = torch.compile(loss_fn, backend="stax", fullgraph=True)
    (x,) = make_inputs("gpt2", 2, 16, F32)
    t = torch.randn_like(x)
    loss = step(model, x, t)
    loss.backward()
    ref_loss = loss_fn(ref, x, t)
    ref_loss.backward()
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-5)
    for (n, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5,
                                   msg=lambda m: f"grad of {n}: {m}")
    c = _the_callable()
    kinds = " ".join(g.graph_id for g in c.stax_graphs)
    assert "forward" in kinds and "backward" in kinds, kinds


@needs_cuda
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_softmax_is_at_most_two_kernels(dtype, on_cuda):
    x = torch.randn(512, 1000, dtype=dtype)
    f = torch.compile(lambda x: torch.softmax(x, dim=-1), backend="stax", fullgraph=True)
    assert_close(f(x), torch.softmax(x, dim=-1), what="softmax")
    c = _the_callable()
    assert c.stax_kernel_count <= 2, c.stax_kernel_count
    assert c.stax_launches_per_call == {"inference": c.stax_kernel_count}


@needs_cuda
def test_misaligned_input_fails_the_guard(on_cuda):
    f = torch.compile(lambda x: torch.sigmoid(x) * 3.0, backend="stax", fullgraph=True)
    x = torch.randn(1025)
    f(x[:1024])
    with pytest.raises(StaxGuardError, match=r"16-byte aligned.*x\.clone\(\)"):
        f(x[1:])
    assert_close(f(x[1:].clone()), torch.sigmoid(x[1:]) * 3.0, what="after clone")


@needs_cuda
def test_triton_option_off_falls_back_with_reason(monkeypatch, on_cuda):
    monkeypatch.setenv("STAX_STRICT", "0")
    f = torch.compile(lambda x: x * 2.0 + 1.0, backend="stax",
                      options={"stax.triton": False})
    x = torch.randn(16)
    assert_close(f(x), x * 2.0 + 1.0)
    c = _the_callable("fallback")
    assert "'stax.triton'=False" in c.stax_fallback_reason


@needs_cuda
def test_cpu_scalar_beside_cuda_tensors_compiles(on_cuda):
    # a CPU 0-dim tensor beside CUDA tensors (torch allows it): compiled for the GPU, the
    # scalar copied to the device per call; a CUDA graph cannot read the CPU argument, so
    # reduce-overhead runs it uncaptured and says why
    f = torch.compile(lambda x, s: x * s + 1.0, backend="stax", mode="reduce-overhead")
    x = torch.randn(16)
    for v in (3.0, -2.0, 0.5):
        s = torch.tensor(v, device="cpu")
        assert_close(f(x, s), x * s + 1.0)
    c = _the_callable()
    assert any("not captured" in r and "is on cpu" in r for r in c.stax_cudagraphs), \
        c.stax_cudagraphs


@needs_cuda
def test_max_autotune_says_what_it_does(on_cuda):
    f = torch.compile(lambda x: torch.tanh(x) * 2.0, backend="stax", mode="max-autotune")
    x = torch.randn(1000)
    assert_close(f(x), torch.tanh(x) * 2.0)
    c = _the_callable()
    # runs on every GPU machine (it was skipped whenever the autotuner was installed)
    from stax.options import autotune_available
    assert autotune_available(), "triton is installed on the GPU machine: the tuner must import"
    assert not any("autotuning is not available" in n for n in c.stax_notes), c.stax_notes
    tuned = c.stax_tuned
    assert tuned and all(t["winner"] and t["total"] >= 1 for t in tuned), tuned


@needs_cuda
def test_max_autotune_without_tuner_says_so(on_cuda, monkeypatch):
    _no_tuner(monkeypatch)
    f = torch.compile(lambda x: torch.tanh(x) * 2.0, backend="stax", mode="max-autotune")
    x = torch.randn(1000)
    assert_close(f(x), torch.tanh(x) * 2.0)
    c = _the_callable()
    assert any("autotuning is not available on the triton target (triton is not installed)"
               in n for n in c.stax_notes), c.stax_notes
    assert c.stax_tuned == [], c.stax_tuned


@needs_cuda
def test_reduce_overhead_captures_and_replays(on_cuda):
    def f(x, y):
        return torch.softmax(x, dim=-1) * y + 1.0

    cf = torch.compile(f, backend="stax", mode="reduce-overhead", fullgraph=True)
    for i in range(4):  # warm-up, capture, replays: fresh inputs every call
        x, y = torch.randn(64, 300), torch.randn(64, 300)
        out = cf(x, y)
        assert_close(out, f(x, y), what=f"call {i}")
    c = _the_callable()
    status = c.stax_cudagraphs
    assert len(status) == 1 and "captured in a CUDA graph" in status[0], status
    runner = c.report.runners[0]
    assert runner.captured and runner.replays >= 2
    # a wrong argument still hits the guard (not a silent copy into the static buffer);
    # called on the runner itself, since Dynamo would recompile for a new shape
    with pytest.raises(StaxGuardError):
        runner([torch.randn(64, 300), torch.randn(64, 299)])


@needs_cuda
def test_reduce_overhead_model_cuda(on_cuda):
    model = make_model("gpt2", BF16).eval()
    ref_model = copy.deepcopy(model)
    cm = torch.compile(model, backend="stax", mode="reduce-overhead", fullgraph=True)
    with torch.no_grad():
        for i in range(3):
            (x,) = make_inputs("gpt2", 2, 32, BF16)
            torch.testing.assert_close(cm(x), ref_model(x), **TOL[BF16])
    c = _the_callable()
    assert any("captured in a CUDA graph" in s for s in c.stax_cudagraphs), c.stax_cudagraphs


@needs_cuda
def test_reduce_overhead_records_reason_when_it_cannot_capture(on_cuda):
    # a runner over a graph whose fallback op synchronizes: never captured, reason kept
    from stax.cudagraphs import CudaGraphRunner

    calls = []

    class CG:
        graph_id = "g_test"
        fallback_ops = ["aten._local_scalar_dense.default"]
        source = ""
        notes: list = []
        device = "cuda:0"
        input_names = ["x"]

    def call(args):
        calls.append(1)
        return (args[0] * 2,)

    r = CudaGraphRunner(call, CG(), "inference")
    x = torch.randn(8)
    for _ in range(3):
        assert_close(r([x])[0], x * 2)
    assert not r.captured and len(calls) == 3
    assert "aten._local_scalar_dense.default" in r.reason and "host" in r.reason
    assert any("runs uncaptured" in n for n in CG.notes)
    # an input on the CPU: which input, and why
    r2 = CudaGraphRunner(lambda a: (a[0] + 1,), type("G", (), {"graph_id": "g2",
                         "fallback_ops": [], "source": "", "notes": [], "device": "cuda:0",
                         "input_names": ["x"]})(), "inference")
    r2([torch.randn(4, device="cpu")])
    assert "input 0 ('x') is on cpu" in r2.reason


@pytest.mark.skipif(not HAS_TRITON_TARGET, reason="stax.targets.triton or triton missing")
def test_second_compile_hits_the_disk_cache(monkeypatch, tmp_path):
    # kernel names must not carry the (process-unique) graph id: it is part of the TTIR
    # text, hence of the cache key; the H200 run before this fix had 0 disk hits
    monkeypatch.setenv("STAX_TRITON_ARCH", "90")
    monkeypatch.setenv("STAX_CACHE_DIR", str(tmp_path))
    from torch.fx.experimental.proxy_tensor import make_fx
    from stax.targets import triton as tt

    with FakeTensorMode():
        x = torch.empty(64, 256, device="cuda")
        gm = make_fx(lambda x: torch.softmax(x, -1) * 2.0, tracing_mode="fake")(x)
    cfg = resolve_config(None, target="triton")
    tt.clear_memory_cache()  # earlier tests may hold this kernel in memory
    compile_graph(gm, [x], cfg)
    tt.clear_memory_cache()
    before = dict(tt.STATS)
    cg = compile_graph(gm, [x], cfg)
    assert tt.STATS["disk_hits"] - before["disk_hits"] == cg.kernel_count >= 1
