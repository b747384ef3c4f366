"""One compile serves every size (stax.dynamic_compile, docs/dynamic-shapes.md): a CPU
inference graph that Dynamo makes symbolic is compiled ONCE, with kernels that take their
sizes at run time, and then runs natively at every batch / sequence length.

Every call is compared with eager on random inputs (values with a dtype-aware tolerance,
shape, strides, dtype) and must have run the one dynamic variant on route stax-cpu; the
number of stax compiles (static compiles through driver.compile_graph, dynamic builds,
kernel lowerings) is counted. A graph that cannot stay dynamic is specialized per size,
with the reason in the report and `stax.explain`. STAX_STRICT=1 (fixture): no fallback.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import torch.fx.experimental._config as fx_config

import stax
import stax.backend as B
from stax import driver, dynamic_compile
from stax.dynamic_compile import DynamicGraph, DynamicShapes, _evaluate
from stax.errors import StaxGuardError
from stax.shape_specialize import ShapeSpecializer
from stax.targets import cpu_symbolic

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}

pytestmark = pytest.mark.usefixtures("stax_strict")


@pytest.fixture
def counts(monkeypatch):
    """Compiles, by kind: static graphs (driver.compile_graph), dynamic graphs
    (dynamic_compile._build) and runtime-size kernel lowerings."""
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


def _close(got, ref):
    assert got.shape == ref.shape and got.dtype == ref.dtype, (got.shape, ref.shape)
    assert got.stride() == ref.stride(), (got.stride(), ref.stride())
    torch.testing.assert_close(got, ref, **TOL[ref.dtype])


def _dynamic_report():
    reps = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    assert len(reps) == 1, [r.summary() for r in B.reports()]
    return reps[0]


def _check_call(report, calls_before):
    """The last call ran the dynamic variant, natively."""
    (v,) = report.variants
    assert v.dynamic and v.calls == calls_before + 1
    assert report.route == "stax-cpu" and report.fallback_reason is None, report.summary()
    assert v.route == "stax-cpu"
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


SIZES = [8, 1, 257, 600, 3, 17, 512, 2, 257]   # 8 distinct: 1, a prime, above the first


def _run(model, sizes, make, dtype=torch.float32, **compile_kw):
    model = model.to(dtype).eval()
    cf = torch.compile(model, backend="stax", **compile_kw)
    calls = 0
    with torch.no_grad():
        for n in sizes:
            x = make(n).to(dtype)
            got = cf(x)
            _close(got, model(x))
            calls = _check_call(_dynamic_report(), calls)
    return cf


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_mlp_one_compile_every_batch(counts, dtype):
    torch.manual_seed(0)
    # size-oblivious: Dynamo does not specialize batch 1, so 1 reaches the one compile too
    with fx_config.patch(backed_size_oblivious=True):
        cf = _run(MLP(), SIZES, lambda n: torch.randn(n, 64), dtype, dynamic=True)
    assert len(B.reports()) == 1
    assert counts["static"] == 0 and counts["dynamic"] == 1
    r = _dynamic_report()
    g = r.graphs[0]
    assert isinstance(g, DynamicGraph) and g.calls == len(SIZES)
    assert counts["lowered"] == sum(1 for k in g.kernels if hasattr(k, "symbols")) >= 1
    assert len(g.library_calls) == 2   # the two matmuls, through torch
    assert r.variants[0].describe().startswith("dynamic: s")
    text = stax.explain(cf)
    assert "compiled it once" in text and "route stax-cpu" in text


def test_transformer_block_batch_and_sequence(counts):
    torch.manual_seed(0)
    shapes = [(2, 8), (1, 1), (3, 257), (5, 17), (1, 512), (4, 33), (2, 8)]
    it = iter(shapes)
    with fx_config.patch(backed_size_oblivious=True):
        _run(Block(), range(len(shapes)), lambda _n: torch.randn(*next(it), 64),
             dynamic=True)
    assert counts["static"] == 0 and counts["dynamic"] == 1
    (v,) = _dynamic_report().variants
    assert len(v.sizes) == 2   # batch and sequence: two symbols


def test_dynamo_zero_one_specialization_is_a_static_graph(counts):
    # without size-oblivious sizes, Dynamo compiles batch 1 as a static graph of its
    # own; every other size runs the one dynamic compile
    torch.manual_seed(0)
    model = MLP().eval()
    cf = torch.compile(model, backend="stax", dynamic=True)
    with torch.no_grad():
        for n in (8, 257, 1, 600, 3):
            x = torch.randn(n, 64)
            _close(cf(x), model(x))
    # batch 1 is a second Dynamo graph (static sizes: compiled once, by either path)
    assert counts["dynamic"] + counts["static"] == 2 and len(B.reports()) == 2
    first = B.reports()[0]
    assert isinstance(first.specializer, DynamicShapes) and first.variants[0].calls == 4
    assert all(x.route == "stax-cpu" for x in B.reports())


def test_automatic_dynamic_second_shape(counts):
    torch.manual_seed(0)
    model = Block().eval()
    cf = torch.compile(model, backend="stax")   # no marking: symbolic at the 2nd size
    with torch.no_grad():
        for i, n in enumerate((8, 5, 257, 3, 600, 17, 5)):
            x = torch.randn(n, 64)
            _close(cf(x), model(x))
            if i == 0:
                assert counts == {"static": 1, "dynamic": 0, "lowered": 0}
    assert counts["static"] == 1 and counts["dynamic"] == 1
    first, second = B.reports()
    assert first.specializer is None and second is _dynamic_report()
    assert second.variants[0].calls == 6
    assert any("size mismatch" in x for x in second.recompile_reasons)


def _aten_args(g: DynamicGraph, env: dict):
    """Arguments for the dynamic graph itself at the symbol values `env`."""
    args = []
    for c in g.checks:
        if c.kind == "symbol":
            args.append(env[c.symbol])
        else:
            args.append(torch.randn([_evaluate(d, env) for d in c.dims]).to(c.dtype))
    return args


def test_bounds_and_guards(counts):
    torch.manual_seed(0)
    model = MLP(d=16, h=32, o=8).eval()
    cf = torch.compile(model, backend="stax")
    with torch.no_grad():
        for n in (6, 17, 40, 9):
            x = torch.randn(n, 16)
            torch._dynamo.mark_dynamic(x, 0, min=4, max=48)
            _close(cf(x), model(x))
        assert counts["dynamic"] == 1
        r = _dynamic_report()
        # above max: Dynamo's guard fails and it compiles again; never a wrong answer
        x = torch.randn(100, 16)
        _close(cf(x), model(x))
    assert len(B.reports()) == 2 and B.reports()[0] is r
    assert all(x.route == "stax-cpu" for x in B.reports())
    assert r.variants[0].calls == 4
    g = r.graphs[0]
    ((sym, (lo, hi)),) = [(s, g.ranges[s]) for s in g.symbols]
    assert (lo, hi) == (4, 48)
    ok = _aten_args(g, {sym: 7})
    assert g(ok)[0].shape == (7, 8)   # the arguments as the graph takes them, at s=7
    # the graph's own guards: a size outside the range, a wrong static dim, a
    # non-contiguous input, a wrong dtype
    xi = _x_index(g)
    bad = _aten_args(g, {sym: 49})   # the SymInt argument (if any) says 49 too
    with pytest.raises(StaxGuardError, match=rf"\(symbol {sym}\): expected a size "
                                             r"in \[4, 48\].*got 49"):
        g(bad)
    bad = list(ok)
    bad[xi] = torch.randn(7, 15)
    with pytest.raises(StaxGuardError, match=r"dim 1: expected 16, got 15"):
        g(bad)
    bad[xi] = torch.randn(16, 7).t()
    with pytest.raises(StaxGuardError, match=r"strides: expected contiguous"):
        g(bad)
    bad[xi] = torch.randn(7, 16, dtype=torch.float64)
    with pytest.raises(StaxGuardError, match=r"dtype: expected torch.float32"):
        g(bad)
    # a weight whose dim disagrees with the input's symbol
    wi = next(c.index for c in g.checks if c.kind == "tensor" and c.index != xi and
              len(c.dims) == 2)
    bad = list(ok)
    bad[wi] = torch.randn(3, 3)
    with pytest.raises(StaxGuardError, match=r"argument"):
        g(bad)


def _x_index(g: DynamicGraph) -> int:
    """The argument whose dim 0 binds the symbol (the input x)."""
    (sym,) = g.symbols
    return next(c.index for c in g.checks if c.kind == "tensor" and c.dims[:1] == [sym])


def test_symint_argument(counts):
    # the size arrives as a SymInt placeholder too, and is used in a view
    def f(x):
        n = x.shape[0]
        return torch.tanh(x).reshape(n * 2, -1) * 3

    cf = torch.compile(f, backend="stax")
    for n in (4, 9, 257, 600, 2):
        x = torch.randn(n, 6)
        torch._dynamo.mark_dynamic(x, 0)   # dim 1 stays 6: -1 is 3, not s1//2
        _close(cf(x), f(x))
    assert counts["dynamic"] == 1 and counts["static"] == 0
    g = _dynamic_report().graphs[0]
    assert any(c.kind == "symbol" for c in g.checks)


def _per_size_reason(cf, f, make, sizes):
    for n in sizes:
        x = make(n)
        _close(cf(x), f(x))
    spec = [r.specializer for r in B.reports() if r.specializer is not None]
    assert len(spec) == 1 and isinstance(spec[0], ShapeSpecializer)
    (r,) = [r for r in B.reports() if r.specializer is not None]
    assert r.route == "stax-cpu" and len(r.variants) == len(set(sizes))
    text = stax.explain(cf)
    assert "could not stay dynamic: " in text
    return spec[0].not_dynamic_reason


def test_mean_over_batch_stays_dynamic(counts):
    # a mean over the symbolic dim divides by a stax.size_value (its divisor is the
    # batch at run time): one compile for every size (test_dynamic_size_value.py has
    # the other means, var/std, layer_norm and the losses)
    def f(x):
        return torch.tanh(x - x.mean(0))

    cf = torch.compile(f, backend="stax", dynamic=True)
    for n in (3, 5, 9, 257):
        x = torch.randn(n, 8)
        _close(cf(x), f(x))
    assert counts["dynamic"] == 1 and counts["static"] == 0
    assert _dynamic_report().variants[0].calls == 4


def test_training_compiles_once_too(counts):
    # a graph needing a backward: its forward and backward are each compiled once
    # (test_dynamic_training.py has the gradients against eager)
    model = MLP(d=16, h=32, o=8)
    cf = torch.compile(model, backend="stax", dynamic=True)
    for n in (3, 5, 257):
        x = torch.randn(n, 16)
        got = cf(x)
        _close(got, model(x))
        got.sum().backward()
    assert counts["dynamic"] == 2 and counts["static"] == 0   # a forward and a backward
    r = _dynamic_report()
    assert [g.kind for g in r.graphs] == ["forward", "backward"]
    assert r.variants[0].calls == 3 and r.route == "stax-cpu"
    assert all(p.grad is not None for p in model.parameters())


def test_non_contiguous_input_stays_dynamic(counts):
    """A transposed input keeps Dynamo's strides (guarded); its kernel reads a contiguous
    copy. (It was sent per size before: test_dynamic_strided_inputs.py has more.)"""
    def f(x):
        return torch.tanh(x) + 1

    cf = torch.compile(f, backend="stax", dynamic=True)
    for n in (3, 5, 17):
        x = torch.randn(8, n).t()
        _close(cf(x), f(x))
    (r,) = B.reports()
    assert isinstance(r.specializer, DynamicShapes) and r.route == "stax-cpu", r.summary()
    assert counts["static"] == 0 and counts["dynamic"] == 1


def test_output_views_keep_eager_aliasing():
    # an output that is a view of an input stays a view of it (or the graph is
    # specialized per size); a view of a result has eager's strides
    def f(x):
        return x.view(-1), torch.tanh(x).t()

    cf = torch.compile(f, backend="stax", dynamic=True)
    for n in (3, 6, 257):
        x = torch.randn(n, 5)
        got, want = cf(x), f(x)
        assert got[0].data_ptr() == x.data_ptr() and got[0]._base is not None
        for a, b in zip(got, want):
            _close(a, b)
    (r,) = B.reports()
    assert r.route == "stax-cpu"
    if isinstance(r.specializer, ShapeSpecializer):
        assert "view of input" in r.specializer.not_dynamic_reason
    else:
        assert r.variants[0].calls == 3


def test_stax_dynamic_off(monkeypatch, counts):
    monkeypatch.setenv("STAX_DYNAMIC", "0")
    model = MLP(d=16, h=32, o=8).eval()
    cf = torch.compile(model, backend="stax", dynamic=True)
    with torch.no_grad():
        why = _per_size_reason(cf, model, lambda n: torch.randn(n, 16), (3, 5))
    assert "STAX_DYNAMIC=0" in why and counts["dynamic"] == 0


def test_output_read_straight_from_an_input_is_a_fresh_tensor(counts):
    # trunc of an int is the value itself in the IR: eager returns a new tensor, so must
    # stax (never the input, aliased); the input is a contiguous view at an offset
    def f(x):
        return torch.trunc(x), x * 2

    cf = torch.compile(f, backend="stax", dynamic=True)
    for n in (5, 7, 257):   # (n + 1 == 4 would meet a guard of Dynamo's on the base)
        base = torch.randint(-9, 9, (n + 1, 4), dtype=torch.int32)
        x = base[1:]
        got, want = cf(x), f(x)
        assert got[0].data_ptr() != x.data_ptr() and got[0].storage_offset() == 0
        for a, b in zip(got, want):
            assert a.stride() == b.stride()
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert counts["dynamic"] == 1 and counts["static"] == 0


def test_outputs_share_a_storage_exactly_when_eager_does(counts):
    """`v1` and `v1.clone()` are one value in the IR: the clone is a copy, not the same
    tensor (stax-fuzz --dynamic seed 2740, program 2740008261, returned them sharing a
    storage); a view of an output keeps sharing it, as in eager."""
    def f(x):
        y = torch.all(x > 0, 0, keepdim=True)
        z = x * 2
        return y.clone(), y, z, z.view(-1), z.clone(), z[1:]

    def shares(ts):
        ptr = [t.untyped_storage().data_ptr() for t in ts]
        return [[a == b for b in ptr] for a in ptr]

    cf = torch.compile(f, backend="stax", dynamic=True)
    for n in (3, 131, 7, 600):
        x = torch.randn(n, 4)
        got, want = cf(x), f(x)
        assert shares(got) == shares(want)
        for a, b in zip(got, want):
            assert a.stride() == b.stride() and a.storage_offset() == b.storage_offset()
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert counts["dynamic"] == 1 and counts["static"] == 0


@pytest.mark.parametrize("name", ["unbind_of_clone", "tail_of_result", "tail_of_clone",
                                  "sum_of_one_element"])
def test_outputs_keep_eager_storage_offsets(counts, name):
    """An output at a storage offset in eager is at that offset here too, at every size
    (stax-fuzz --dynamic on the H200, seed 3406, program 3406010230: `x.clone().unbind(3)[2]`
    came back at offset 0 where eager's is at 2)."""
    f = {"unbind_of_clone": lambda x: x.clone().unbind(3)[2],
         "tail_of_result": lambda x: (x * 3 + 1)[..., 1:],
         "tail_of_clone": lambda x: x.clone()[..., 1:],
         # (stax-fuzz --dynamic seed 15882, program 15882047697: the sum of one element
         # is that element, a 0-d view of the pad kernel's result at offset 8, where
         # eager's is a fresh tensor at offset 0)
         "sum_of_one_element": lambda x: F.pad(x, (3, 0), value=2).select(0, 8).sum()}[name]
    cf = torch.compile(f, backend="stax", dynamic=True)
    shapes = [(1, 8, 8, 4), (2, 3, 5, 3), (1, 1, 1, 3), (3, 7, 513, 5), (4, 2, 9, 4)]
    dtype = torch.int32
    if name == "sum_of_one_element":   # int64 (no widening kernel), at least 6 elements
        shapes, dtype = [(8,), (6,), (11,), (600,), (7,)], torch.int64
    for shape in shapes:
        x = torch.randint(-50, 50, shape, dtype=dtype)
        got, want = cf(x), f(x)
        assert got.shape == want.shape and got.stride() == want.stride()
        assert got.storage_offset() == want.storage_offset(), (shape, got.storage_offset())
        assert got.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
        assert torch.equal(got, want)
    # (1, 1, 1, 3) is a Dynamo graph of its own (its 0/1 specialization), whose sizes are
    # all static: the static compile takes it (at most once); the rest run one dynamic one
    assert counts["static"] <= 1 and counts["dynamic"] >= 1


def test_one_tensor_returned_twice_in_training_stays_one_storage(counts):
    """`v.mul_(-2)` and `v` are one tensor in eager; AOT's forward returns it twice, and
    with eager's strides of a transposed input both outputs need a restriding copy:
    one copy, shared (stax-fuzz --dynamic --backward on the H200, seed 3405, program
    3405010243, returned two storages)."""
    def f(a, b):
        v = torch.minimum(a, b)
        w = v.mul_(-2.0)
        return w, v

    cf = torch.compile(f, backend="stax", dynamic=True)
    for shape in [(3, 5, 63), (4, 6, 17), (2, 9, 33), (1, 5, 600)]:
        a = torch.randn(shape[0], shape[2], shape[1]).transpose(1, 2).requires_grad_()
        b = torch.randn(shape).requires_grad_()
        got, want = cf(a, b), f(a, b)
        assert got[0].untyped_storage().data_ptr() == got[1].untyped_storage().data_ptr()
        for g, w in zip(got, want):
            assert g.stride() == w.stride() and g.storage_offset() == w.storage_offset()
            torch.testing.assert_close(g, w, rtol=0, atol=0)
        grads = torch.autograd.grad(got[0].sum() + (got[1] * 3).sum(), (a, b))
        a2, b2 = a.detach().requires_grad_(), b.detach().requires_grad_()
        w2 = f(a2, b2)
        want_grads = torch.autograd.grad(w2[0].sum() + (w2[1] * 3).sum(), (a2, b2))
        for g, w in zip(grads, want_grads):
            torch.testing.assert_close(g, w, rtol=0, atol=0)
    assert counts["static"] == 0


def _pick_feature(x):            # x[..., 1] and x[..., 0] of a static feature dim
    return (x * 3 + 1)[..., 1] + x[..., 0]


def _unbind_heads(x):            # qkv.unflatten(-1, (3, D)).unbind(-2): selects, static dim
    q, k, v = x.unflatten(-1, (3, -1)).unbind(-2)
    return torch.softmax(q @ k.transpose(-1, -2) * 0.25, -1) @ v


@pytest.mark.parametrize("fn,train", [(_pick_feature, False), (_unbind_heads, False),
                                      (_unbind_heads, True)],
                         ids=["pick_feature", "unbind_heads", "unbind_heads_training"])
def test_select_along_a_static_dim_compiles_once(counts, fn, train):
    """`x[..., 1]` and `unbind` along a static dim of a tensor with dynamic batch and
    sequence dims: one dynamic compile (forward and backward in training), eager's
    values, strides and gradients at every size."""
    cf = torch.compile(fn, backend="stax")
    for b, t in [(2, 5), (3, 17), (5, 9), (4, 64), (7, 512), (2, 5)]:
        x = torch.randn(b, t, 48, requires_grad=train)
        torch._dynamo.mark_dynamic(x, 0)
        torch._dynamo.mark_dynamic(x, 1)
        got, want = cf(x), fn(x)
        _close(got, want)
        if train:
            (g,), (w,) = (torch.autograd.grad(o.sum(), x) for o in (got, want))
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    assert counts["static"] == 0 and counts["dynamic"] == (2 if train else 1), counts


def test_a_step_slice_between_both_ends_compiles_once(counts):
    """`x[:, 1:-1:2]`: its length is `(s - 1)//2` and the strides of a contiguous result
    after it `8*Max(1, (s - 1)//2)`, which the graph reads as `8*((s - 1)//2)` (equal
    wherever the result is not empty; an empty one gets eager's strides from the
    expression itself). Compiled once; at t = 2 the result is empty. (`x[:, -1]`,
    `x[:, 0]`, `x[:, -4:-1:2]`: test_dynamic_fixed_length_slices.)"""
    fn = lambda x: x[:, 1:-1:2] * 2  # noqa: E731
    cf = torch.compile(fn, backend="stax", dynamic=True)
    for t in (5, 9, 33, 2, 3, 4, 514):
        x = torch.randn(3, t, 8)
        _close(cf(x), fn(x))
    assert "could not stay dynamic" not in stax.explain(cf)
    # (Dynamo itself recompiles where the length is 0 or 1: each compile is dynamic)
    assert counts["static"] == 0 and counts["dynamic"] >= 1, counts


def test_a_recompile_for_a_new_layout_compiles_statically(counts):
    # session 33 (benchmarks/profile_conv_gpu.py on the H200): a conv block called with
    # an NCHW input, then a channels-last one, made Dynamo recompile with symbolic
    # strides only; the dynamic path compiled it with no free symbol, and its kernels read
    # contiguous copies: two extra copies of the activation per call (171 of 289 us).
    # Now the static compile takes it and reads the strides as they come.
    from torch import nn
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU()).eval()
    x = torch.randn(4, 32, 14, 14)
    cf = torch.compile(m, backend="stax")
    with torch.no_grad():
        _close(cf(x), m(x))
        m.to(memory_format=torch.channels_last)
        for n in range(2):
            xc = torch.randn(4, 32, 14, 14).contiguous(memory_format=torch.channels_last)
            _close(cf(xc), m(xc))
    r = B.reports()[-1]
    assert isinstance(r.specializer, ShapeSpecializer), r.summary()
    assert r.specializer.not_dynamic_reason.startswith("no size is symbolic")
    assert len(r.variants) == 1 and r.variants[0].calls == 2
    assert not any(isinstance(g, DynamicGraph) for g in r.graphs)
    assert "s6272" not in r.explain() and "6272=6272" not in r.explain()


def test_a_transposed_call_of_a_pointwise_graph_compiles_statically(counts):
    def f(x):
        return torch.tanh(x) * 2 + 1

    torch.manual_seed(0)
    cf = torch.compile(f, backend="stax")
    x = torch.randn(512, 520)
    _close(cf(x), f(x))
    for _ in range(2):
        xt = torch.randn(520, 512).t()
        _close(cf(xt), f(xt))
    r = B.reports()[-1]
    assert not any(isinstance(g, DynamicGraph) for g in r.graphs), r.summary()
    assert r.specializer.not_dynamic_reason.startswith("no size is symbolic")
    assert r.route == "stax-cpu" and len(r.variants) == 1
