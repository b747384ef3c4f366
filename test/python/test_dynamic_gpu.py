"""One compile for every size on the GPU target (stax.dynamic_compile with
stax.dynamic_kernels' Triton kernels: targets/triton_symbolic's SizedTritonKernel).

Two halves:

- on this CPU-only machine, the GPU path is taken with CPU tensors: the backend is told
  the target is `triton`, the dynamic graph's tensors live on the CPU, and every Triton
  kernel (runtime-size variants and static ones) runs in the bounds-checked TTIR
  interpreter (test/python/ttir_interp.py). So the graph, its guards, its Triton
  kernels' launch plans (variant, grid, size arguments) and their TTIR are checked at
  every size against eager, forward and backward;
- on a GPU (skipped without CUDA), the same models on cuda at real sizes (widths >= 512,
  batches >= 256), inference and training.

Every call: values (dtype-aware tolerance), shape, strides and dtype against eager; the
one dynamic variant, route `triton`; one dynamic build per graph, no static compile.
"""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
import torch.fx.experimental._config as fx_config

import stax.backend as B
from stax import driver, dynamic_compile, dynamic_kernels
from stax.dynamic_compile import DynamicShapes
from stax.errors import StaxGuardError
from stax.runtime.triton_sized import SizedTritonKernel
from stax.targets import triton as stt
from ttir_interp import run_kernel, run_ttir

pytestmark = pytest.mark.usefixtures("stax_strict")

TOL = {torch.float32: dict(rtol=2e-4, atol=2e-4), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}
HAS_CUDA = torch.cuda.is_available()


@pytest.fixture
def counts(monkeypatch):
    got = {"static": 0, "dynamic": 0}

    def counting(key, fn):
        def wrapped(*a, **k):
            got[key] += 1
            return fn(*a, **k)
        return wrapped
    monkeypatch.setattr(driver, "compile_graph", counting("static", driver.compile_graph))
    monkeypatch.setattr(B, "compile_graph", counting("static", B.compile_graph))
    monkeypatch.setattr(dynamic_compile, "_build", counting("dynamic", dynamic_compile._build))
    return got


@pytest.fixture
def interpreted_triton(monkeypatch):
    """The triton target with CPU tensors; Triton kernels interpreted (see the module
    docstring). Launches are counted per kernel kind."""
    launched = {"sized": 0, "static": 0}
    monkeypatch.setattr(B, "select_target", lambda *a, **k: ("triton", "cuda:0"))
    monkeypatch.setitem(dynamic_kernels.DEVICES, "triton", "cpu")

    def sized_call(self, *tensors, sizes=None, check=True):
        p = self.plan(*tensors, sizes=sizes, check=True)   # always checked here
        launched["sized"] += 1
        if p.grid[0]:
            run_ttir(p.ttir.text, p.grid, list(tensors), self.name, scalars=p.scalars)

    def static_call(self, *tensors):
        launched["static"] += 1
        run_kernel(self.ttir_kernel, *tensors)

    monkeypatch.setattr(SizedTritonKernel, "__call__", sized_call)
    monkeypatch.setattr(stt.TritonKernel, "__call__", static_call)
    return launched


def _close(got, ref):
    assert got.shape == ref.shape and got.dtype == ref.dtype, (got.shape, ref.shape)
    assert got.stride() == ref.stride(), (got.stride(), ref.stride())
    torch.testing.assert_close(got, ref, **TOL[ref.dtype])


def _dynamic_report():
    reps = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    assert len(reps) == 1, [r.summary() for r in B.reports()]
    return reps[0]


def _check_call(calls_before):
    report = _dynamic_report()
    (v,) = report.variants
    assert v.dynamic and v.calls == calls_before + 1
    assert report.route == "triton" and report.fallback_reason is None, report.summary()
    assert all(g.route == "triton" for g in report.graphs)
    return v.calls


class MLP(torch.nn.Module):
    def __init__(self, d=64, h=256, o=48):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(d, h), torch.nn.Linear(h, o)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


class Block(torch.nn.Module):
    """layer_norm, a projection, a softmax over the last dim and a residual."""

    def __init__(self, d=64):
        super().__init__()
        self.norm, self.proj = torch.nn.LayerNorm(d), torch.nn.Linear(d, d)

    def forward(self, x):
        return x + torch.softmax(self.proj(self.norm(x)), dim=-1)


def _inference(model, shapes, width, device, dtype=torch.float32, oblivious=True):
    model = model.to(device=device, dtype=dtype).eval()
    cf = torch.compile(model, backend="stax", dynamic=True)
    calls = 0
    with torch.no_grad(), fx_config.patch(backed_size_oblivious=oblivious):
        for shape in shapes:
            x = torch.randn(*shape, width, device=device, dtype=dtype)
            _close(cf(x), model(x))
            calls = _check_call(calls)


def _compare_backward(ref, mine, xr, xm, out_r, out_m, g, params=True):
    """Eager's and the compiled model's forward results compared, both backwarded with
    `g`, then the input gradients and (with `params`) every parameter gradient."""
    _close(out_m, out_r.detach())
    out_r.backward(g)
    out_m.backward(g)
    _close(xm.grad, xr.grad)
    for (name, pr), (_, pm) in zip(ref.named_parameters(), mine.named_parameters()):
        if not params:
            break
        assert pm.grad is not None, name
        _close(pm.grad, pr.grad)
        pr.grad = pm.grad = None


def _training(model, batches, width, device):
    torch.manual_seed(1)
    ref = model.to(device)
    mine = copy.deepcopy(ref)
    cf = torch.compile(mine, backend="stax", dynamic=True)
    calls = 0
    with fx_config.patch(backed_size_oblivious=True):
        for n in batches:
            x = torch.randn(n, width, device=device)
            xr = x.clone().requires_grad_(True)
            xm = x.clone().requires_grad_(True)
            out_r, out_m = ref(xr), cf(xm)
            _compare_backward(ref, mine, xr, xm, out_r, out_m, torch.randn_like(out_r))
            calls = _check_call(calls)
    r = _dynamic_report()
    assert [g.kind for g in r.graphs] == ["forward", "backward"]


# ------------------------------------------------------------------ interpreted (no GPU)

def test_mlp_inference_interpreted(counts, interpreted_triton):
    torch.manual_seed(0)
    _inference(MLP(), [(8,), (1,), (17,), (257,), (3,), (40,)], 64, "cpu")
    assert counts == {"static": 0, "dynamic": 1}
    assert interpreted_triton["sized"] >= 6   # every call launched runtime-size kernels
    g = _dynamic_report().graphs[0]
    assert any(isinstance(k, SizedTritonKernel) for k in g.kernels)
    assert len(g.library_calls) == 2


def test_block_batch_and_sequence_interpreted(counts, interpreted_triton):
    torch.manual_seed(0)
    _inference(Block(), [(2, 8), (1, 1), (3, 31), (5, 17), (1, 130), (2, 8)], 64, "cpu")
    assert counts == {"static": 0, "dynamic": 1}
    (v,) = _dynamic_report().variants
    assert len(v.sizes) == 2   # batch and sequence


def test_first_call_variants_compiled_at_compile_time_interpreted(monkeypatch,
                                                                   interpreted_triton):
    """As on a GPU (dynamic_kernels.finish_compiles, made to think one is present): each
    runtime-size kernel's variant for the example sizes is compiled to PTX in the thread
    pool before the first call, and it is the variant that call plans."""
    from stax import dynamic_kernels
    from stax.runtime.triton_sized import SizedTritonKernel
    monkeypatch.setattr(dynamic_kernels, "_gpu_present", lambda: True)
    planned = []
    plan = SizedTritonKernel.plan

    def recording_plan(self, *tensors, **kw):
        p = plan(self, *tensors, **kw)
        planned.append((self, p.variant))
        return p
    monkeypatch.setattr(SizedTritonKernel, "plan", recording_plan)
    model = Block(64).eval()
    cf = torch.compile(model, backend="stax", dynamic=True)
    with torch.no_grad(), fx_config.patch(backed_size_oblivious=True):
        x = torch.randn(3, 40, 64)
        _close(cf(x), model(x))
    assert planned
    for k, var in planned:
        assert var in k.compiled and k.prefetched >= 1, (k.name, var)


def test_mlp_training_interpreted(counts, interpreted_triton):
    _training(MLP(), [8, 1, 17, 257, 3, 40], 64, "cpu")
    assert counts == {"static": 0, "dynamic": 2}   # the forward and the backward, once


def _pad_of_an_empty_dim(device):
    # stax-fuzz --device cuda seed 4000 (program 4000012038): x0 of [3, 0] makes Dynamo
    # specialize the dim to 0, and the pad kernel's index decomposition divided by the
    # product of the dims after it, 0: ZeroDivisionError while compiling the kernel
    def f(x):
        return F.pad(x.unsqueeze(0), (3, 0), value=2)

    cf = torch.compile(f, backend="stax", dynamic=True)
    for shape in [(5, 7), (3, 0), (513, 0)]:
        x = torch.randint(-5, 5, shape, device=device)
        got, ref = cf(x), f(x)
        assert got.shape == ref.shape and got.stride() == ref.stride()
        assert torch.equal(got, ref)   # integers: bit-exact
    assert all(r.route == "triton" for r in B.reports()), [r.summary() for r in B.reports()]


def test_pad_of_an_empty_dim_interpreted(interpreted_triton):
    _pad_of_an_empty_dim("cpu")


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_pad_of_an_empty_dim_cuda():
    _pad_of_an_empty_dim("cuda")


def test_gpt2_block_interpreted(counts, interpreted_triton):
    """The written-out GPT-2 block (causal mask sliced to the sequence length, head
    permutes, softmax): one compile on the triton route for batch and sequence."""
    from models import GPT2Block
    torch.manual_seed(0)
    # plain (backed) sizes: under backed_size_oblivious torch 2.11 makes the mask slice's
    # length an unbacked size the symbolic importer does not take (per size, then)
    _inference(GPT2Block(64, 4), [(2, 8), (3, 17), (5, 31), (2, 8)], 64, "cpu",
               oblivious=False)
    assert counts == {"static": 0, "dynamic": 1}


# ------------------------------------------------------------------------------ on a GPU

@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_gpt2_block_cuda(counts):
    from models import GPT2Block
    torch.manual_seed(0)
    _inference(GPT2Block(768, 12, max_seq=1024), [(4, 128), (2, 17), (8, 257), (2, 512),
                                                  (16, 64), (4, 128)], 768, "cuda",
               oblivious=False)
    assert counts == {"static": 0, "dynamic": 1}


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_mlp_inference_cuda_real_sizes(counts, dtype):
    torch.manual_seed(0)
    _inference(MLP(512, 2048, 512), [(256,), (1,), (257,), (1000,), (17,), (4096,)], 512,
               "cuda", dtype)
    assert counts == {"static": 0, "dynamic": 1}


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_first_call_variants_compiled_before_it_cuda(counts):
    """The graph's runtime-size kernels start compiling their variants for the example
    sizes in the thread pool at compile time (dynamic_kernels.finish_compiles), so the
    first call compiles nothing one kernel after another; a later size's variant is still
    compiled at its first launch."""
    from stax.runtime.triton_sized import SizedTritonKernel
    class Scores(torch.nn.Module):   # a softmax over rows of the sequence's length
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(768)

        def forward(self, x):
            h = self.norm(x)
            return torch.softmax(h @ h.transpose(1, 2) * 0.03, dim=-1)
    torch.manual_seed(0)
    model = Scores().cuda().eval()
    cf = torch.compile(model, backend="stax", dynamic=True)
    with torch.no_grad(), fx_config.patch(backed_size_oblivious=True):
        x = torch.randn(8, 128, 768, device="cuda")
        _close(cf(x), model(x))
        sized = [k for g in _dynamic_report().graphs for k in g.kernels
                 if isinstance(k, SizedTritonKernel)]
        assert sized and all(k.compiles == k.prefetched >= 1 for k in sized), \
            [(k.name, k.compiles, k.prefetched) for k in sized]
        x = torch.randn(2, 5000, 768, device="cuda")   # rows past one persistent block
        _close(cf(x), model(x))
    assert any(k.compiles > k.prefetched for k in sized)
    assert counts == {"static": 0, "dynamic": 1}


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_block_batch_and_sequence_cuda(counts):
    torch.manual_seed(0)
    _inference(Block(768), [(8, 128), (1, 1), (3, 257), (16, 512), (1, 1023), (8, 128)],
               768, "cuda")
    assert counts == {"static": 0, "dynamic": 1}


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_mlp_training_cuda_real_sizes(counts):
    _training(MLP(512, 2048, 512), [256, 1, 257, 1000, 17, 512], 512, "cuda")
    assert counts == {"static": 0, "dynamic": 2}


# ------------------------------------------------------ BatchNorm training, symbolic batch

def _close_to_oracle(got, eager, exact, what):
    """Shape, strides and dtype as eager's; values no farther from the float64 result
    than 4x eager's own distance from it (plus 1e-6 of the tensor's scale)."""
    assert got.shape == eager.shape and got.dtype == eager.dtype, (what, got.shape)
    assert got.stride() == eager.stride(), (what, got.stride(), eager.stride())
    err = (got.double() - exact).abs().max().item()
    err_eager = (eager.double() - exact).abs().max().item()
    scale = exact.abs().max().item()
    # a gradient that is 0 in real arithmetic (a convolution's bias before BatchNorm,
    # which removes the mean) is rounding noise in eager and stax alike: 1e-3 absolute
    floor = 1e-3 if scale < 1e-6 else 1e-6 * scale
    assert err <= 4 * err_eager + floor, (what, err, err_eager, scale)


def train_step_against_oracle(ref, mine, m64, compiled, x):
    """One forward and backward of eager `ref`, `compiled` (over `mine`, a copy of ref)
    and the float64 copy `m64` at input x: output, input and parameter gradients held to
    the oracle (`_close_to_oracle`); the gradients are cleared after."""
    xr, xm = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    x64 = x.double().requires_grad_(True)
    out_r, out_m, out64 = ref(xr), compiled(xm), m64(x64)
    _close_to_oracle(out_m, out_r.detach(), out64.detach(), "output")
    g = torch.randn_like(out_r)
    out_r.backward(g)
    out_m.backward(g)
    out64.backward(g.double())
    _close_to_oracle(xm.grad, xr.grad, x64.grad, "input grad")
    for (name, pr), (_, pm), p64 in zip(ref.named_parameters(), mine.named_parameters(),
                                       m64.parameters()):
        _close_to_oracle(pm.grad, pr.grad, p64.grad, f"{name}.grad")
        pr.grad = pm.grad = p64.grad = None


def _bn_training(conv, shapes, device):
    """Train-mode BatchNorm over a symbolic batch: its backward's 1.0 / (N*H*W) (a float
    of sizes) and a convolution with its backward through PyTorch, in the one compile;
    outputs, gradients and running statistics against eager at every size."""
    torch.manual_seed(0)
    if conv:
        ref = torch.nn.Sequential(torch.nn.Conv2d(16, 64, 3, padding=1),
                                  torch.nn.BatchNorm2d(64), torch.nn.ReLU()).to(device)
    else:
        ref = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.BatchNorm1d(512),
                                  torch.nn.ReLU()).to(device)
    mine = copy.deepcopy(ref)
    m64 = copy.deepcopy(ref).double()   # the oracle: BatchNorm's backward cancels, and
    # the GPU's reduction orders (and cuDNN's TF32 convolutions) differ from eager's, so
    # stax is held to eager's own distance from float64, not to eager's bits
    cf = torch.compile(mine, backend="stax", dynamic=True)
    calls = 0
    for shape in shapes:
        train_step_against_oracle(ref, mine, m64, cf, torch.randn(*shape, device=device))
        calls = _check_call(calls)
    for name in ("running_mean", "running_var"):
        _close_to_oracle(getattr(mine[1], name), getattr(ref[1], name),
                         getattr(m64[1], name), name)
    r = _dynamic_report()
    assert [g.kind for g in r.graphs] == ["forward", "backward"]


def test_batch_norm_training_interpreted(counts, interpreted_triton):
    _bn_training(False, [(8, 512), (3, 512), (17, 512), (2, 512), (40, 512), (5, 512)], "cpu")
    assert counts == {"static": 0, "dynamic": 2}


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("conv", [False, True], ids=["linear-bn1d", "conv-bn2d"])
def test_batch_norm_training_cuda(counts, conv):
    # conv: batches 2..15 (torch's fake convolution guards 2 <= N <= 15: Dynamo's own
    # recompile beyond); linear: widths 512, batches up to 1000
    shapes = ([(8, 16, 32, 32), (13, 16, 32, 32), (2, 16, 32, 32), (5, 16, 32, 32),
               (3, 16, 32, 32), (11, 16, 32, 32)] if conv else
              [(256, 512), (1000, 512), (17, 512), (2, 512), (257, 512), (640, 512)])
    _bn_training(conv, shapes, "cuda")
    assert counts == {"static": 0, "dynamic": 2}


# ----------------------------------------------- the test models in training, batch and sequence

def _model_training(name, shapes, device, dim, heads=None, loss=False):
    """Model `name` of models.py in training with dynamic batch and sequence: one forward
    and one backward compile (route triton every call), output (or cross-entropy loss),
    input and parameter gradients against eager at every (batch, sequence)."""
    from models import make_model
    torch.manual_seed(0)
    kw = {"dim": dim} if heads is None else {"dim": dim, "n_heads": heads}
    if name in ("gpt2", "gpt2_sdpa", "llama"):
        kw["max_seq"] = 1024   # the causal mask / rotary tables cover every sequence
    ref = make_model(name, **kw).to(device).train()
    mine = copy.deepcopy(ref)
    head = torch.nn.Linear(dim, 97).to(device)   # a vocabulary of 97 for the loss
    cf = torch.compile((lambda x, t: F.cross_entropy(head(mine(x)).flatten(0, 1),
                                                     t.flatten())) if loss else mine,
                       backend="stax", dynamic=True)
    calls = 0
    for b, t in shapes:
        x = torch.randn(b, t, dim, device=device)
        xr, xm = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        if loss:
            tgt = torch.randint(0, 97, (b, t), device=device)
            out_r = F.cross_entropy(head(ref(xr)).flatten(0, 1), tgt.flatten())
            out_m = cf(xm, tgt)
            g = torch.ones_like(out_r)
        else:
            out_r, out_m = ref(xr), cf(xm)
            g = torch.randn_like(out_r)
        _compare_backward(ref, mine, xr, xm, out_r, out_m, g)
        calls = _check_call(calls)
    assert [g.kind for g in _dynamic_report().graphs] == ["forward", "backward"]



# batches >= 2 (Dynamo specializes a batch of 1 into a graph of its own), primes, and
# sizes above the first
_TRAIN_SHAPES = [(4, 64), (2, 17), (3, 257), (8, 128), (5, 31), (4, 64)]


@pytest.mark.parametrize("name", ["gpt2", "gpt2_sdpa", "llama"])
def test_models_training_interpreted(counts, interpreted_triton, name):
    _model_training(name, [(2, 8), (3, 5), (2, 13), (4, 8)], "cpu", 32, heads=2)
    assert counts == {"static": 0, "dynamic": 2}


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("name,loss", [("gpt2", False), ("llama", False), ("gpt2", True),
                                       ("gpt2_sdpa", False)],
                         ids=["gpt2", "llama", "gpt2-cross_entropy", "gpt2_sdpa"])
def test_models_training_cuda(counts, name, loss):
    """gpt2_sdpa: CUDA's memory-efficient attention pads its logsumexp to 32*ceil(T/32),
    a derived symbol (test_dynamic_floor_division); it was compiled per size before."""
    _model_training(name, _TRAIN_SHAPES, "cuda", 512, heads=8, loss=loss)
    assert counts == {"static": 0, "dynamic": 2}


def test_host_scalars_copied_or_passed_through(monkeypatch):
    """A 0-d host tensor of a GPU graph: copied to the device when a kernel may read it
    (RMSNorm's eps), handed over as it comes when only library ops read it (CUDA
    attention's philox seed and offset, which its backward takes on the CPU: the H200
    raised 'argument 14 device: expected cuda, got cpu' before). Checked on the meta
    device standing for the GPU."""
    from stax.dynamic_graph import DynamicGraph, OutputPlan, _ArgCheck, _Step
    monkeypatch.setitem(dynamic_kernels.DEVICES, "triton", "meta")
    checks = [_ArgCheck(0, "x", "tensor", dims=["s0"], dtype=torch.float32),
              _ArgCheck(1, "eps", "tensor", dims=[], dtype=torch.float32, host_scalar=True),
              _ArgCheck(2, "seed", "tensor", dims=[], dtype=torch.int64, host_scalar=True,
                        pass_through=True)]
    seen = []

    def library(ins, env):
        seen.append([t.device.type for t in ins])
        return [ins[0]]
    g = DynamicGraph("g", checks, [], [_Step("library", [0, 1, 2], [3], library)],
                     [OutputPlan("tensor", 3)], {"s0": (0, 0)}, {}, [], [], [], None,
                     target="triton")
    g.n_values = 1
    x = torch.empty(5, device="meta")
    (out,) = g([x, torch.tensor(1e-5), torch.tensor(7)])
    assert out.device.type == "meta" and seen == [["meta", "meta", "cpu"]]
    with pytest.raises(StaxGuardError, match="argument 2 .*a host scalar"):
        g([x, torch.tensor(1e-5), torch.tensor([7])])
