"""Training graphs compile once for every size on the CPU (stax.dynamic_training,
docs/dynamic-shapes.md "Training"): aot_autograd's forward and backward of a symbolic
graph are each compiled ONCE, with kernels that take their sizes at run time, and every
later batch / sequence length runs them natively.

Each call is compared with eager on fresh random inputs and a random output gradient:
the output, the input's gradient and every parameter's .grad (values with a dtype-aware
tolerance, shape, strides, dtype). Every call must have run the one dynamic variant on
route stax-cpu; stax compiles are counted (static graphs through driver.compile_graph,
dynamic builds, runtime-size kernel lowerings). A graph whose backward has no symbolic
rule is specialized per size, with the reason in the report. STAX_STRICT=1 (fixture):
nothing may fall back.
"""
from __future__ import annotations

import copy

import pytest
import torch
import torch.fx.experimental._config as fx_config
from torch.fx.experimental.proxy_tensor import make_fx

import stax
import stax.backend as B
from stax import driver, dynamic_compile
from stax.dynamic_compile import DynamicGraph, DynamicShapes, _evaluate
from stax.errors import StaxGuardError
from stax.options import resolve_config
from stax.shape_specialize import ShapeSpecializer
from stax.targets import cpu_symbolic

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.bfloat16: dict(rtol=3e-2, atol=3e-2)}

pytestmark = pytest.mark.usefixtures("stax_strict")


@pytest.fixture
def counts(monkeypatch):
    """Compiles, by kind: static graphs (driver.compile_graph), dynamic graphs
    (dynamic_compile._build: a forward and a backward per training graph) and
    runtime-size kernel lowerings."""
    got = {"static": 0, "dynamic": 0, "lowered": 0}

    def counting(key, fn):
        def wrapped(*a, **k):
            got[key] += 1
            return fn(*a, **k)
        return wrapped
    monkeypatch.setattr(driver, "compile_graph", counting("static", driver.compile_graph))
    monkeypatch.setattr(B, "compile_graph", counting("static", B.compile_graph))
    monkeypatch.setattr(dynamic_compile, "_build", counting("dynamic", dynamic_compile._build))
    monkeypatch.setattr(cpu_symbolic._RuntimeSizeLowering, "lower",
                        counting("lowered", cpu_symbolic._RuntimeSizeLowering.lower))
    return got


def _close(got, ref, what, exact=None):
    """`got` against eager's `ref`: shape, strides, dtype, values. bf16 gradients are
    sums over the batch rounded to 8 bits, where 1-ulp differences of an activation
    (a different erf polynomial) add up: there `got` must be about as close to the f64
    result `exact` as eager is (twice eager's error, plus one bf16 ulp of the largest
    value)."""
    assert got is not None, f"{what}: no gradient"
    assert got.shape == ref.shape and got.dtype == ref.dtype, (what, got.shape, ref.shape)
    assert got.stride() == ref.stride(), (what, got.stride(), ref.stride())
    if exact is None:
        torch.testing.assert_close(got, ref, **TOL[ref.dtype], msg=lambda m: f"{what}: {m}")
        return
    err = (got.double() - exact).abs().max().item()
    eager_err = (ref.double() - exact).abs().max().item()
    bound = 2 * eager_err + 2 ** -8 * exact.abs().max().item() + 1e-3
    assert err <= bound, f"{what}: max error {err} vs f64, eager's {eager_err}"


class MLP(torch.nn.Module):
    def __init__(self, act, d=64, h=256, o=48):
        super().__init__()
        self.fc1, self.fc2, self.act = torch.nn.Linear(d, h), torch.nn.Linear(h, o), act

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(torch.nn.Module):
    """layer_norm, a projection, a softmax over the last dim and a residual."""

    def __init__(self, d=64):
        super().__init__()
        self.norm, self.proj = torch.nn.LayerNorm(d), torch.nn.Linear(d, d)

    def forward(self, x):
        return x + torch.softmax(self.proj(self.norm(x)), dim=-1)


def _dynamic_report():
    reps = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    assert len(reps) == 1, [r.summary() for r in B.reports()]
    return reps[0]


def _step(cf, model, ref, x, mark=()):
    """One forward + backward through the compiled and the eager model, compared (for
    bf16 also with an f64 copy of the model, see _close)."""
    xc = x.detach().clone().requires_grad_()
    xr = x.detach().clone().requires_grad_()
    for d in mark:
        torch._dynamo.mark_dynamic(xc, d)
    got, want = cf(xc), ref(xr)
    grad = torch.randn_like(want)
    exact = {}
    if x.dtype == torch.bfloat16:
        m64 = copy.deepcopy(ref).double()
        x64 = x.detach().double().requires_grad_()
        y64 = m64(x64)
        y64.backward(grad.double())
        exact = {"output": y64.detach(), "input grad": x64.grad,
                 **{f"{n}.grad": p.grad for n, p in m64.named_parameters()}}
    _close(got, want, "output", exact.get("output"))
    got.backward(grad)
    want.backward(grad)
    _close(xc.grad, xr.grad, "input grad", exact.get("input grad"))
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        _close(p.grad, q.grad, f"{name}.grad", exact.get(f"{name}.grad"))
        p.grad = q.grad = None


def _train_once(model, shapes, dtype=torch.float32, mark=(0,), **compile_kw):
    """Every shape through the compiled model, each call checked to have run the one
    dynamic variant natively."""
    model = model.to(dtype)
    ref = copy.deepcopy(model)
    cf = torch.compile(model, backend="stax", **compile_kw)
    for i, shape in enumerate(shapes):
        _step(cf, model, ref, torch.randn(*shape, dtype=dtype), mark)
        r = _dynamic_report()
        (v,) = r.variants
        assert v.dynamic and v.calls == i + 1
        assert r.route == "stax-cpu" and r.fallback_reason is None, r.summary()
    return cf, _dynamic_report()


def _assert_one_training_compile(counts, r):
    fw, bw = r.graphs
    assert isinstance(fw, DynamicGraph) and isinstance(bw, DynamicGraph)
    assert (fw.kind, bw.kind) == ("forward", "backward")
    assert counts["static"] == 0 and counts["dynamic"] == 2   # one forward, one backward
    assert counts["lowered"] == sum(1 for g in (fw, bw) for k in g.kernels
                                    if hasattr(k, "symbols")) >= 2
    assert r.specializer.training
    assert any("training: compiled once for every size, forward" in n for n in r.notes)
    return fw, bw


SIZES = [(8, 64), (1, 64), (257, 64), (512, 64), (3, 64), (600, 64), (17, 64), (257, 64)]


@pytest.mark.parametrize("act,dtype", [
    (torch.nn.functional.gelu, torch.float32), (torch.relu, torch.float32),
    (torch.nn.functional.gelu, torch.bfloat16)], ids=["gelu-f32", "relu-f32", "gelu-bf16"])
def test_mlp_training_one_compile_every_batch(counts, act, dtype):
    # size-oblivious: Dynamo does not specialize batch 1, so 1 reaches the one compile
    with fx_config.patch(backed_size_oblivious=True):
        cf, r = _train_once(MLP(act), SIZES, dtype)
    fw, bw = _assert_one_training_compile(counts, r)
    assert fw.calls == bw.calls == len(SIZES)
    assert len(fw.library_calls) == 2 and len(bw.library_calls) == 4   # the matmuls
    assert r.launches_per_call == {"forward": fw.launches_per_call,
                                   "backward": bw.launches_per_call}
    text = stax.explain(cf)
    assert "compiled it once (training" in text and "route stax-cpu" in text


def _fake_strides(t, env):
    from stax.importer import symbolic as isym
    return [_evaluate(isym.dim(s), env) for s in t.stride()]


def test_block_training_batch_and_sequence(counts, monkeypatch):
    built = {}   # kind -> the ATen graph each DynamicGraph was built from
    real_build = dynamic_compile._build

    def keep(gm, inputs, config, graph_id, **kw):
        built[kw["kind"]] = gm
        return real_build(gm, inputs, config, graph_id, **kw)
    monkeypatch.setattr(dynamic_compile, "_build", keep)
    shapes = [(2, 8, 64), (1, 1, 64), (3, 257, 64), (5, 17, 64), (1, 512, 64),
              (4, 33, 64), (2, 8, 64)]
    with fx_config.patch(backed_size_oblivious=True):
        cf, r = _train_once(Block(), shapes, mark=(0, 1))
    fw, bw = _assert_one_training_compile(counts, r)
    assert len(r.variants[0].sizes) == 2   # batch and sequence: two symbols
    # the forward saves batch*sequence (a size expression) for the backward's views:
    # computed from the symbols, and checked by the backward against them
    assert any(out[0] == "size" for out in fw.outputs)
    assert any(c.kind == "size" for c in bw.checks)
    # every saved tensor has the strides of aot_autograd's fake tensor (what the
    # backward was traced against), and the saved transposed weight is a view of it
    (out,) = [n for n in built["forward"].graph.nodes if n.op == "output"]
    vals = [o.meta["val"] if isinstance(o, torch.fx.Node) else o for o in out.args[0]]
    x_check = next(c for c in fw.checks if c.kind == "tensor" and len(c.dims) == 3)
    env = {x_check.dims[0]: 3, x_check.dims[1]: 11}
    args = []
    for c in sorted(fw.checks, key=lambda c: c.index):
        args.append(env[c.symbol] if c.kind == "symbol" else
                    torch.randn([_evaluate(d, env) for d in c.dims]))
    got = fw(list(args))
    assert len(got) == len(vals)
    from stax.importer import symbolic as isym
    for i, (g, v) in enumerate(zip(got, vals)):
        if isinstance(v, torch.Tensor):
            want = _fake_strides(v, env)
            assert [s for n, s in zip(g.shape, g.stride()) if n != 1] == \
                [s for n, s in zip(g.shape, want) if n != 1], (i, g.stride(), want)
        else:   # a saved size: the batch, the sequence, their product
            assert g == _evaluate(isym.dim(v), env), (i, g, v)
    (w_arg,) = [a for a in args if isinstance(a, torch.Tensor) and a.shape == (64, 64)]
    saved_t = [g for g, v in zip(got, vals) if isinstance(v, torch.Tensor) and
               v.shape == (64, 64)]
    assert saved_t and all(t.data_ptr() == w_arg.data_ptr() and t.stride() == (1, 64)
                           for t in saved_t)   # permute(weight): a view, as in eager


def test_automatic_dynamic_training(counts):
    # no marking: Dynamo's first graph is static, its second (a new batch) symbolic
    model = MLP(torch.nn.functional.gelu, d=32, h=96, o=24)
    ref = copy.deepcopy(model)
    cf = torch.compile(model, backend="stax")
    for i, n in enumerate((8, 5, 257, 3, 512, 17)):
        _step(cf, model, ref, torch.randn(n, 32))
        if i == 0:   # the static graph: its forward and (lazily) its backward
            assert counts == {"static": 2, "dynamic": 0, "lowered": 0}
    assert counts["static"] == 2 and counts["dynamic"] == 2
    first, second = B.reports()
    assert first.specializer is None and second is _dynamic_report()
    assert second.variants[0].calls == 5 and second.route == "stax-cpu"
    assert any("size mismatch" in x for x in second.recompile_reasons)


def test_optimizer_steps_at_varying_batch_match_eager(counts):
    torch.manual_seed(1)
    model = MLP(torch.nn.functional.gelu, d=32, h=128, o=16)
    ref = copy.deepcopy(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    opt_ref = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    cf = torch.compile(model, backend="stax", dynamic=True)
    for n in (6, 257, 40):
        x, target = torch.randn(n, 32), torch.randn(n, 16)
        for m, o in ((cf, opt), (ref, opt_ref)):
            o.zero_grad()
            torch.nn.functional.mse_loss(m(x), target).backward()
            o.step()
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=name)
    assert counts["dynamic"] == 2 and counts["static"] == 0
    assert _dynamic_report().variants[0].calls == 3


class PowModel(torch.nn.Module):
    """x ** w: its forward imports symbolically; its backward reads `logical_and`, which
    the test takes out of the symbolic importer's ops (in the test), so the backward
    has an op with no symbolic rule."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.rand(16) + 0.5)

    def forward(self, x):
        return torch.pow(x.abs() + 1, self.w)


def test_backward_without_symbolic_rule_is_specialized_per_size(counts, monkeypatch):
    from stax.importer import symbolic
    monkeypatch.setattr(symbolic, "SYMBOLIC_OPS",
                        symbolic.SYMBOLIC_OPS - {torch.ops.aten.logical_and.default})
    model = PowModel()
    ref = copy.deepcopy(model)
    cf = torch.compile(model, backend="stax", dynamic=True)
    sizes = (3, 5, 9)
    for n in sizes:
        _step(cf, model, ref, torch.randn(n, 16))
    (r,) = B.reports()
    assert isinstance(r.specializer, ShapeSpecializer)
    assert r.route == "stax-cpu" and len(r.variants) == len(sizes)
    why = r.specializer.not_dynamic_reason
    assert why.startswith("the backward graph: the symbolic importer refused")
    assert "logical_and" in why
    assert "could not stay dynamic: the backward graph" in stax.explain(cf)
    # both graphs were tried (the forward built, the backward refused), then 3 static
    # variants of a forward and a backward each
    assert counts["dynamic"] == 2 and counts["static"] == 2 * len(sizes)


@pytest.mark.parametrize("conv", [False, True], ids=["linear-bn1d", "conv-bn2d"])
def test_train_batch_norm_over_a_dynamic_batch_compiles_once(counts, conv):
    """BatchNorm in train mode over a symbolic batch (and symbolic image sizes): its
    backward scales by the Python float `1.0 / (N*H*W)` of sizes (operator.truediv of
    SymInts, a SymFloat), imported as a ratio of stax.size_value products (once a
    symbol unbounded below broke the size guards, and the division had no rule: per
    size). A convolution and its backward run through PyTorch inside the one compile.
    Outputs, every gradient and the running statistics match eager at every size."""
    torch.manual_seed(0)
    if conv:
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1),
                                    torch.nn.BatchNorm2d(16), torch.nn.ReLU())
        # batches 2..15: torch's fake convolution guards `2 <= N <= 15` (a layout
        # heuristic in fake_impls' conv), so a batch of 16 or more is Dynamo's recompile
        # (one more dynamic compile), not stax's
        shapes = [(8, 3, 12, 12), (13, 3, 12, 12), (2, 3, 12, 12), (5, 3, 12, 12),
                  (3, 3, 12, 12), (11, 3, 12, 12)]
    else:
        model = torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.BatchNorm1d(512),
                                    torch.nn.ReLU())
        shapes = [(8, 64), (13, 64), (2, 64), (257, 64), (3, 64), (600, 64)]
    ref = copy.deepcopy(model)
    cf = torch.compile(model, backend="stax", dynamic=True)
    for n, shape in enumerate(shapes):
        _step(cf, model, ref, torch.randn(*shape))
        r = _dynamic_report()
        (v,) = r.variants
        assert v.dynamic and v.calls == n + 1 and r.route == "stax-cpu", r.summary()
    bn, bn_ref = model[1], ref[1]
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(bn, name), getattr(bn_ref, name),
                                   rtol=1e-5, atol=1e-6, msg=name)
    assert counts["static"] == 0 and counts["dynamic"] == 2
    if conv:
        assert {"aten.convolution.default", "aten.convolution_backward.default"} <= \
            set(r.fallback_ops), r.fallback_ops


def test_backward_guards_check_the_forward_sizes(counts):
    with fx_config.patch(backed_size_oblivious=True):
        _cf, r = _train_once(Block(d=16), [(2, 8, 16), (3, 5, 16)], mark=(0, 1))
    _fw, bw = r.graphs
    tangent = max(bw.checks, key=lambda c: c.index)   # the output's gradient: [b, s, 16]
    env = {tangent.dims[0]: 4, tangent.dims[1]: 7}
    args = []
    for c in sorted(bw.checks, key=lambda c: c.index):
        if c.kind == "symbol":
            args.append(env[c.symbol])
        elif c.kind == "size":
            args.append(_evaluate(c.dims[0], env))
        else:
            shape = [_evaluate(d, env) for d in c.dims]
            t = torch.randn(shape)
            if c.strides is not None:   # the saved transposed weight
                t = torch.empty_strided(shape, [_evaluate(s, env) for s in c.strides])
                t.copy_(torch.randn(shape))
            args.append(t)
    grads = bw(list(args))
    assert [tuple(g.shape) for g in grads if g is not None] == \
        [tuple(p.shape) for p in (_cf.norm.weight, _cf.norm.bias)] + [(4, 7, 16), (16, 16),
                                                                      (16,)]
    size_i = next(c.index for c in bw.checks if c.kind == "size")
    bad = list(args)
    bad[size_i] += 1   # a saved batch*sequence that disagrees with the saved symbols
    with pytest.raises(StaxGuardError, match=r"\(the size s\d+\*s\d+\): expected 28, got 29"):
        bw(bad)
    bad = list(args)
    bad[tangent.index] = torch.randn(4, 6, 16)   # a gradient of another sequence length
    with pytest.raises(StaxGuardError, match=r"dim 1: expected 7"):
        bw(bad)
    strided_i = next(c.index for c in bw.checks if c.strides is not None)
    bad = list(args)
    bad[strided_i] = args[strided_i].contiguous()   # not the strides it was saved with
    with pytest.raises(StaxGuardError, match=r"strides: expected \[1, 16\]"):
        bw(bad)


# the backward ops in SYMBOLIC_OPS' training group, traced without the decompositions
# the backend applies (which would turn them into elementwise ops first)
aten = torch.ops.aten
BACKWARD_OPS = {
    "threshold_backward": lambda g, x: aten.threshold_backward(g, x, 0.0),
    "gelu_backward": lambda g, x: aten.gelu_backward(g, x),
    "tanh_backward": lambda g, x: aten.tanh_backward(g, torch.tanh(x)),
    "sigmoid_backward": lambda g, x: aten.sigmoid_backward(g, torch.sigmoid(x)),
    "_softmax_backward_data": lambda g, x: aten._softmax_backward_data(
        g, torch.softmax(x, -1), -1, torch.float32),
    "_log_softmax_backward_data": lambda g, x: aten._log_softmax_backward_data(
        g, torch.log_softmax(x, -1), -1, torch.float32),
}


@pytest.mark.parametrize("name", sorted(BACKWARD_OPS))
def test_backward_ops_import_symbolically(name):
    fn = BACKWARD_OPS[name]
    with fx_config.patch(backed_size_oblivious=True):   # sizes 1 admitted too
        gm = make_fx(fn, tracing_mode="symbolic", _allow_non_fake_inputs=True)(
            torch.randn(4, 6), torch.randn(4, 6))
    ops = {n.target._overloadpacket.__name__ for n in gm.graph.nodes
           if n.op == "call_function" and hasattr(n.target, "_overloadpacket")}
    assert name in ops, ops   # the op itself, not a decomposition of it
    vals = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]
    config = resolve_config(None, None).for_target("stax-cpu")
    g = dynamic_compile._build(gm, vals, config, "g_bwd_op", kind="backward")
    assert len(g.symbols) == 2 and g.kind == "backward"   # both dims symbolic
    for shape in ((1, 1), (257, 33), (3, 768), (600, 17)):
        grad, x = torch.randn(shape), torch.randn(shape)
        (got,) = g([grad, x])
        _close(got, fn(grad, x), name)


@pytest.mark.parametrize("name", ["gpt2", "gpt2_sdpa", "llama"])
def test_test_models_training_one_compile(counts, name):
    """The attention blocks of models.py in training, batch and sequence dynamic: one
    forward and one backward compile. SDPA's fused op and its backward (kept whole in
    training, see stax.backend.stax_decompositions) run through PyTorch inside it, and
    Llama's rotate-half backward (slice_scatter along the static head dim) imports
    symbolically. Batches >= 2 and sequences >= 2 (Dynamo's own graphs for size 1)."""
    from models import make_model
    torch.manual_seed(0)
    model = make_model(name)
    shapes = [(2, 8, 64), (3, 17, 64), (2, 31, 64), (5, 64, 64), (4, 13, 64), (2, 8, 64)]
    cf, r = _train_once(model, shapes, mark=(0, 1))
    _assert_one_training_compile(counts, r)
    if name == "gpt2_sdpa":
        assert any("scaled_dot_product" in op and "backward" in op for op in r.fallback_ops), \
            r.fallback_ops


class MaxOverSequence(torch.nn.Module):
    """A projection, then a max and a min over the (symbolic) sequence dim and a gather
    along the width: their backwards scatter the gradient into zeros at the argmax
    (`aten.scatter.src`) and add it at the gathered indices (`scatter_add`)."""

    def __init__(self, d=512):
        super().__init__()
        self.proj = torch.nn.Linear(d, d)

    def forward(self, x):
        h = torch.tanh(self.proj(x))
        idx = torch.remainder(torch.arange(h.shape[-1]) * 7, h.shape[-1]).expand_as(h)
        picked = torch.gather(h, -1, idx)
        return h.max(dim=1).values * 2 + torch.amin(picked, 1) + h.min(dim=1).values


def test_max_over_a_dim_trains_with_one_compile(counts):
    # session 33 (GPU fuzz seed 4000: "scatter.src cannot be imported symbolically"):
    # the backward of max/min over a dim was compiled per size; scatters are library ops
    # (PyTorch runs them, as on the static path) that keep it dynamic, and torch.gather
    # is a stax gather since session 41
    with fx_config.patch(backed_size_oblivious=True):
        cf, r = _train_once(MaxOverSequence(), [(4, 9, 512), (1, 1, 512), (3, 37, 512),
                                                 (257, 5, 512), (2, 130, 512)],
                            mark=(0, 1))
    fw, bw = _assert_one_training_compile(counts, r)
    assert fw.calls == bw.calls == 5
    assert "aten.gather.default" not in fw.fallback_ops
    assert {"aten.scatter.src", "aten.scatter_add.default"} <= set(bw.fallback_ops)
