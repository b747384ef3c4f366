"""Per-shape specialization (stax.shape_specialize, docs/dynamic-shapes.md): a graph that
Dynamo makes symbolic (automatic dynamic on the second size, `dynamic=True`,
`mark_dynamic`) runs as compiled stax code, one static variant per distinct size tuple.

Every call is compared with eager (values, shape, strides, dtype; in training every
gradient), and every call must have run stax code: either a variant of the symbolic
graph (the specializer's `last_variant`, with the call's sizes and route stax-cpu) or a
static graph Dynamo compiled for that size (its first size, or 1 under Dynamo's 0/1
specialization), never a fallback. The number of variants must equal the number of
distinct sizes that reached the symbolic graph. CPU only; STAX_STRICT=1 (fixture).
"""
from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F

import stax
import stax.backend as B
from stax.errors import StaxCompileError, StaxGuardError
from models import make_inputs, make_model

F32 = torch.float32
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.bfloat16: dict(rtol=2e-2, atol=2e-2),
       torch.int64: dict(rtol=0, atol=0)}
#: the ATen ops a model's graphs may run through PyTorch (CPU convolution has no stax
#: kernel: test_models.py expects the same); any other fallback op fails the test
EXPECTED_FALLBACK_OPS = {"conv_bn_relu": ["aten.convolution.default"]}

pytestmark = pytest.mark.usefixtures("stax_strict")


# ----------------------------------------------------------------------------- helpers

def _specializers():
    return [r.specializer for r in B.reports() if r.specializer is not None]


def _close(got, ref):
    assert type(got) is type(ref) or not isinstance(ref, torch.Tensor), (type(got), type(ref))
    if isinstance(ref, (tuple, list)):
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            _close(g, r)
        return
    torch.testing.assert_close(got, ref, **TOL[ref.dtype])
    assert got.shape == ref.shape and got.dtype == ref.dtype
    assert got.stride() == ref.stride(), (got.stride(), ref.stride())


class _Calls:
    """Checks after each call that it ran stax code (module docstring) and collects the
    variant keys of the calls that reached a symbolic graph."""

    def __init__(self, fallback_ops=()):
        self.fallback_ops = set(fallback_ops)
        self.symbolic_sizes: set = set()   # variant keys
        self.sizes: set = set()            # the sizes that ran a variant
        self._seen: dict = {}   # id(specializer) -> its variants' calls so far

    def check(self, size: int, static_ok: bool):
        reps = B.reports()
        assert reps, "nothing was compiled by stax"
        for r in reps:
            assert r.route == "stax-cpu", r.summary()
            assert r.fallback_reason is None, r.summary()
            assert set(r.fallback_ops) <= self.fallback_ops, r.summary()
        totals = {id(s): (s, sum(v.calls for v in s.variants.values()))
                  for s in _specializers()}
        ran = [(s, c - self._seen.get(k, 0)) for k, (s, c) in totals.items()
               if c != self._seen.get(k, 0)]
        self._seen = {k: c for k, (_s, c) in totals.items()}
        if not ran:
            assert static_ok, f"the call with size {size} ran no shape variant"
            return
        ((spec, n),) = ran
        assert n == 1, "one call ran more than one variant"
        v = spec.last_variant
        assert v is not None and v.route == "stax-cpu" and v.graphs, v
        assert size in v.sizes.values(), (size, v.sizes)
        self.symbolic_sizes.add(v.key)
        self.sizes.add(size)

    def variants(self) -> int:
        return sum(len(s.variants) for s in _specializers())


def _sym(spec):
    """The symbol names of a specializer (to build the expected `sizes`)."""
    return [name for name, _i, _d in spec.symbols]


def _run_model(name, sizes, *, train, batch_dynamic=True, seq=8, batch=2, kwargs=None):
    """Compile model `name` and call it with each size (as the batch or the sequence
    length), comparing with eager; training compares the loss and every gradient."""
    model = make_model(name, F32, **(kwargs or {}))
    if name == "conv_bn_relu":
        model.eval()
    ref = copy.deepcopy(model)
    cf = torch.compile(model, backend="stax")   # automatic dynamic: symbolic at size 2
    calls = _Calls(EXPECTED_FALLBACK_OPS.get(name, ()))
    first = sizes[0]
    for n in sizes:
        (x,) = make_inputs(name, n if batch_dynamic else batch, seq if batch_dynamic else n,
                           F32, dim=(kwargs or {}).get("dim") or (kwargs or {}).get(
                               "in_features"))
        if train:
            xs = x.clone().requires_grad_(True)
            xr = x.clone().requires_grad_(True)
            out, out_ref = cf(xs), ref(xr)
            _close(out, out_ref)
            target = torch.randn_like(out_ref)
            params, ref_params = list(model.parameters()), list(ref.parameters())
            got = torch.autograd.grad(F.mse_loss(out, target), [xs] + params)
            want = torch.autograd.grad(F.mse_loss(out_ref, target), [xr] + ref_params)
            assert len(got) == len(want) == len(params) + 1
            for g, w in zip(got, want):
                _close(g, w)
        else:
            with torch.no_grad():
                _close(cf(x), ref(x))
        calls.check(n, static_ok=(n == first or n == 1))
    return calls


# ----------------------------------------------------------------------------- models

SIZES = [4, 1, 7, 2, 13, 6, 7]   # 6 distinct: 1, primes 7 and 13, above the first


@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
def test_mlp_wide_big_batch(train, monkeypatch):
    monkeypatch.setenv("STAX_DYNAMIC", "0")   # per-size variants (CPU is one compile)
    # widths 512, batch from 256: one static compile for 256, then variants
    sizes = [256, 1, 257, 300, 263, 2, 257]
    calls = _run_model("mlp", sizes, train=train,
                       kwargs=dict(in_features=512, hidden=512, out_features=512))
    # 256 first (static), 1 (Dynamo's 0/1 specialization: static), the others reach the
    # symbolic graph, one variant each (257 twice: one variant)
    assert calls.sizes == {257, 300, 263, 2}
    assert calls.variants() == len(calls.symbolic_sizes) == 4


@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("name,batch_dynamic", [("gpt2", False), ("llama", True)])
def test_transformer_blocks(name, batch_dynamic, train, monkeypatch):
    monkeypatch.setenv("STAX_DYNAMIC", "0")   # they stay dynamic otherwise: per size here
    # GPT-2 with a dynamic sequence length (the causal mask slices its buffer), Llama
    # with a dynamic batch
    # fewer sizes than SIZES (each is a whole compile of the block, forward and backward,
    # on this per-size path): 1 and a prime, one repeated
    calls = _run_model(name, [4, 1, 7, 13, 7], train=train, batch_dynamic=batch_dynamic)
    assert calls.sizes == {7, 13}
    assert calls.variants() == len(calls.symbolic_sizes) == 2


def test_conv_bn_relu_inference(monkeypatch):
    monkeypatch.setenv("STAX_DYNAMIC", "0")
    calls = _run_model("conv_bn_relu", [3, 1, 5, 2, 7, 4, 5], train=False)
    assert calls.sizes == {5, 2, 7, 4}
    assert calls.variants() == len(calls.symbolic_sizes) == 4


# ----------------------------------------------------------------------------- how dims become symbolic

def _mlp_fn():
    torch.manual_seed(1)
    lin1, lin2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 8)

    def f(x):
        return lin2(torch.nn.functional.gelu(lin1(x)))
    return f


def _call_each(cf, f, sizes, make_input, static=()):
    """Call `cf` and eager `f` on `make_input(n)` for each size, checked (`_Calls`)."""
    calls = _Calls()
    for n in sizes:
        x = make_input(n)
        _close(cf(x), f(x))
        calls.check(n, static_ok=n in static)
    return calls


def _marked(mark, *args, **kw):
    """make_input for _call_each: a [n, 16] tensor with dim 0 marked by `mark`."""
    def make(n):
        x = torch.randn(n, 16)
        mark(x, 0, *args, **kw)
        return x
    return make


def test_automatic_dynamic_second_shape(monkeypatch):
    monkeypatch.setenv("STAX_DYNAMIC", "0")   # per-size variants (CPU is one compile)
    f = _mlp_fn()
    cf = torch.compile(f, backend="stax")  # no marking: symbolic at the 2nd size
    _call_each(cf, f, (5, 9, 3, 11, 9), lambda n: torch.randn(n, 16), static=(5,))
    (spec,) = _specializers()
    assert [v.sizes for v in spec.variants.values()] == [
        {_sym(spec)[0]: n} for n in (9, 3, 11)]
    assert spec.variants[next(iter(spec.variants))].calls == 2   # 9 ran twice
    notes = "\n".join(B.reports()[1].notes)
    assert "3 variant(s) compiled" in notes and f"{_sym(spec)[0]}=9" in notes


def test_dynamic_true_first_call_is_symbolic(monkeypatch):
    monkeypatch.setenv("STAX_DYNAMIC", "0")   # per-size variants (CPU is one compile)
    f = _mlp_fn()
    cf = torch.compile(f, backend="stax", dynamic=True)
    _call_each(cf, f, (5, 9, 5, 3), lambda n: torch.randn(n, 16))
    (r,) = B.reports()
    assert [v.describe() for v in r.variants] == [f"{_sym(r.specializer)[0]}={n}"
                                                  for n in (5, 9, 3)]
    assert r.stax_variants == r.variants and B.compiled_callables[0].stax_variants == r.variants
    # the report says what was specialized, and that each size is a full compile
    text = stax.explain(cf)
    assert "specialized for" in text and "each a full compile" in text
    assert "3 variant(s) compiled" in text
    # launches of one call: those of the variant the last call ran (params require
    # grad, so the graphs are forward graphs; the backward was never run)
    (g,) = r.variants[-1].graphs
    assert g.graph_id.split("_")[1] == "forward"
    assert r.launches_per_call == {"forward": g.launches_per_call}


def test_mark_dynamic_with_bounds(monkeypatch):
    monkeypatch.setenv("STAX_DYNAMIC", "0")   # per-size variants (CPU is one compile)
    f = _mlp_fn()
    cf = torch.compile(f, backend="stax")
    _call_each(cf, f, (6, 2, 17, 40), _marked(torch._dynamo.mark_dynamic, min=2, max=48))
    (spec,) = _specializers()
    assert len(spec.variants) == 4
    # Dynamo guards the bounds: a size above max is not handed to this graph (a new
    # Dynamo compile serves it), and it is still compiled by stax
    x = torch.randn(64, 16)
    _close(cf(x), f(x))
    assert len(spec.variants) == 4
    assert len(B.reports()) == 2 and all(r.route == "stax-cpu" for r in B.reports())


def test_mark_unbacked_sizes_including_0_and_1(monkeypatch):
    # an unbacked size has no 0/1 specialization: 0 and 1 reach the symbolic graph too,
    # whose runtime size assertions (u0 >= 0) are checked when each variant is made
    # (one compile instead: test_dynamic_size_asserts)
    monkeypatch.setenv("STAX_DYNAMIC", "0")   # per-size variants (CPU is one compile)

    def f(x):
        return torch.tanh(x) * 2 + x.sum(0)

    cf = torch.compile(f, backend="stax")
    _call_each(cf, f, (3, 1, 6, 0, 3), _marked(torch._dynamo.decorators.mark_unbacked))
    (spec,) = _specializers()
    assert [v.describe() for v in spec.variants.values()] == [
        f"{_sym(spec)[0]}={n}" for n in (3, 1, 6, 0)]


def test_symint_used_as_a_value():
    def f(x):
        n = x.shape[0]
        y = (x * 2).view(n * 2, -1)
        return y + torch.arange(n * 2, dtype=x.dtype)[:, None], torch.arange(n)

    cf = torch.compile(f, backend="stax", dynamic=True)
    _call_each(cf, f, (3, 5, 8, 3), lambda n: torch.randn(n, 6))
    (spec,) = _specializers()
    assert spec.scalar_positions, "the graph should take the size as a SymInt placeholder"
    assert len(spec.variants) == 3


def test_python_float_attribute_under_dynamic_true(monkeypatch):
    monkeypatch.setenv("STAX_DYNAMIC", "0")   # per-size variants (CPU is one compile)
    # dynamic=True leaves a module's float attribute (a norm's eps) unspecialized: Dynamo
    # passes it as a 0-dim tensor read with .item(); each value is part of the variant
    from models import RMSNorm
    model = RMSNorm(16, eps=1e-5)
    cf = torch.compile(model, backend="stax", dynamic=True)
    with torch.no_grad():
        _call_each(cf, model, (3, 5), lambda n: torch.randn(n, 16))
    (spec,) = _specializers()
    assert spec.wrapped_positions and len(spec.variants) == 2
    eps = [v for v in spec.last_variant.sizes.values() if isinstance(v, float)]
    assert eps == [1e-5]
    # read only by .item(), the 0-dim CPU tensor is no argument of the variant (a GPU
    # variant with a CPU argument could not be replayed from a CUDA graph)
    assert spec.dropped_wrapped == frozenset(spec.wrapped_positions)
    assert not set(spec.kept_positions) & spec.dropped_wrapped
    for g in spec.last_variant.graphs:
        assert len(g.input_names) == len(spec.kept_positions), g.input_names
    # another eps is another variant, with its own value written in
    model.eps = 1e-2
    with torch.no_grad():
        x = torch.randn(7, 16) * 1e-2
        torch.testing.assert_close(cf(x), model(x))
    assert [v for v in spec.last_variant.sizes.values() if isinstance(v, float)] == [1e-2]


def test_strides_are_part_of_the_variant_key(monkeypatch):
    monkeypatch.setenv("STAX_DYNAMIC", "0")   # per-size variants (CPU is one compile)
    f = _mlp_fn()
    cf = torch.compile(f, backend="stax", dynamic=True)
    for x in (torch.randn(5, 16), torch.randn(16, 5).t(), torch.randn(7, 16),
              torch.randn(16, 7).t()):
        _close(cf(x), f(x))
    for r in B.reports():
        assert r.route == "stax-cpu", r.summary()
    keys = [v.key for s in _specializers() for v in s.variants.values()]
    assert len(keys) == len(set(keys))


def test_a_variant_guards_its_own_arguments(monkeypatch):
    monkeypatch.setenv("STAX_DYNAMIC", "0")   # per-size variants (CPU is one compile)
    # a variant's generated wrapper checks what it was compiled for: called with another
    # size it raises, never computes a wrong answer
    f = _mlp_fn()
    cf = torch.compile(f, backend="stax", dynamic=True)
    with torch.no_grad():
        x = torch.randn(5, 16)
        _close(cf(x), f(x))
        (spec,) = _specializers()
        (v,) = spec.variants.values()
        nodes = [n for n in spec.gm.graph.nodes if n.op == "placeholder"]
        args = []
        for i in spec.kept_positions:
            ex = nodes[i].meta["example_value"]
            args.append(torch.randn(6, 16) if i in spec.tensor_positions else
                        torch.randn(tuple(ex.shape), dtype=ex.dtype))
        with pytest.raises(StaxGuardError, match=r"shape \(6, 16\)"):
            v.fn(*args)


# ----------------------------------------------------------------------------- the cap

def _capped(**kw):
    f = _mlp_fn()
    return f, torch.compile(f, backend="stax", dynamic=True, **kw)


def _recorded(fn, *args):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        out = fn(*args)
    return out, [w for w in got if issubclass(w.category, B.StaxFallbackWarning)]


def test_cap_warns_once_and_runs_as_written(monkeypatch):
    monkeypatch.setenv("STAX_DYNAMIC", "0")   # per-size variants (CPU is one compile)
    monkeypatch.delenv("STAX_STRICT")
    f, cf = _capped(options={"stax.max_shape_variants": 2})
    warned = []
    for n in (3, 4, 5, 6, 3, 4):
        x = torch.randn(n, 16)
        out, w = _recorded(cf, x)
        _close(out, f(x))
        warned += w
    (r,) = B.reports()
    assert len(r.variants) == 2 and [v.calls for v in r.variants] == [2, 2]
    assert len(warned) == 1, [str(w.message) for w in warned]
    msg = str(warned[0].message)
    assert "'stax.max_shape_variants'" in msg and "STAX_MAX_SHAPE_VARIANTS=4" in msg
    assert "run as written" in msg and "\n" not in msg
    assert r.specializer.calls_as_written == 2
    assert r.route == "fallback" and "stax.max_shape_variants" in r.fallback_reason
    assert "2 call(s) beyond the cap ran as written" in "\n".join(r.notes)


def test_cap_from_the_environment_and_strict_raises(monkeypatch):
    monkeypatch.setenv("STAX_DYNAMIC", "0")   # per-size variants (CPU is one compile)
    monkeypatch.setenv("STAX_MAX_SHAPE_VARIANTS", "1")
    f, cf = _capped()
    x = torch.randn(3, 16)
    _close(cf(x), f(x))
    with pytest.raises(StaxCompileError, match="stax.max_shape_variants.*strict mode"):
        cf(torch.randn(4, 16))
    assert len(B.reports()[0].variants) == 1


@pytest.mark.parametrize("value,err", [(0, ValueError), (True, TypeError), (2.0, TypeError)])
def test_cap_option_is_a_positive_int(value, err):
    from stax.options import resolve_config
    with pytest.raises(err, match="stax.max_shape_variants"):
        resolve_config(None, {"stax.max_shape_variants": value})


# ----------------------------------------------------------------------------- decode loop

def test_kv_cache_decode_loop(monkeypatch):
    # per size here (test_kv_cache_decode.py: the loop compiled once on the CPU)
    monkeypatch.setenv("STAX_DYNAMIC", "0")
    torch.manual_seed(2)
    d = 32
    wq, wk, wv = (torch.randn(d, d) / d ** 0.5 for _ in range(3))

    def decode(x, k_cache, v_cache):
        q, k, v = x @ wq, x @ wk, x @ wv
        k_all = torch.cat([k_cache, k], dim=1)
        v_all = torch.cat([v_cache, v], dim=1)
        att = torch.softmax(q @ k_all.transpose(1, 2) / d ** 0.5, dim=-1)
        return att @ v_all, k_all, v_all

    cf = torch.compile(decode, backend="stax")
    calls = _Calls()
    kc, vc = torch.randn(2, 3, d), torch.randn(2, 3, d)
    kr, vr = kc.clone(), vc.clone()
    lengths = []
    for _step in range(7):     # the cache grows 3, 4, ..., 9
        x = torch.randn(2, 1, d)
        lengths.append(kc.shape[1])
        out, kc, vc = cf(x, kc, vc)
        ref, kr, vr = decode(x, kr, vr)
        _close((out, kc, vc), (ref, kr, vr))
        calls.check(lengths[-1], static_ok=(len(lengths) == 1))
    # length 3 static, 4..9 one variant each
    assert calls.variants() == len(calls.symbolic_sizes) == 6


def test_recompile_and_variant_reasons(monkeypatch, capfd):
    monkeypatch.setenv("STAX_DYNAMIC", "0")   # per-size variants (CPU is one compile)
    """Why each compile happened: Dynamo's failed guards on the report of the graph it
    recompiled (automatic dynamic at the 2nd size; a transposed input fails the
    symbolic graph's stride guard), and per stax variant what no earlier variant
    matched; STAX_EXPLAIN=1 prints both as they happen."""
    monkeypatch.setenv("STAX_EXPLAIN", "1")
    f = _mlp_fn()
    cf = torch.compile(f, backend="stax")
    for x in (torch.randn(5, 16), torch.randn(9, 16), torch.randn(3, 16),
              torch.randn(16, 3).t()):
        _close(cf(x), f(x))
    first, second, third = B.reports()
    assert first.recompile_reasons == []
    (reason,) = second.recompile_reasons
    assert "size mismatch at index 0. expected 5, actual 9" in reason, reason
    assert any("stride mismatch at index 0. expected 16, actual 1" in r
               for r in third.recompile_reasons), third.recompile_reasons
    spec = second.specializer
    sym = _sym(spec)[0]
    reasons = [v.reason for v in spec.variants.values()]
    assert reasons == [f"the first call ({sym}=9)", f"argument {spec.tensor_positions[0]} "
                       f"('{spec.names[spec.tensor_positions[0]]}') dim 0 is 3 ({sym}); "
                       "the variants were compiled for [9]"], reasons
    text = second.explain()
    assert "compiled because Dynamo recompiled:" in text
    assert "compiled because the first call" in text
    err = capfd.readouterr().err
    assert "[stax] explain: Dynamo:" in err and "new stax variant 2:" in err


def test_data_dependent_variant_in_strict_mode_is_stax_refusal(monkeypatch):
    """A graph whose per-size compile fails in aot_autograd on a data-dependent output
    shape (`masked_select`): strict mode raises a StaxCompileError naming the sizes,
    caused by stax's StaxUnsupportedError (it raised torch's DynamicOutputShapeException
    bare, which `opinfo_sweep.py --dynamic` counted as an error, not a refusal);
    without strict mode the sizes run as written, with eager's values."""
    from stax.errors import StaxUnsupportedError

    def f(x):
        return torch.masked_select(x, x > 0) * 2
    cf = torch.compile(f, backend="stax", dynamic=True, fullgraph=True)
    with pytest.raises(StaxCompileError, match=r"static compile for s\w+=4, s\w+=5 "
                                               r"failed.*DynamicOutputShapeException") as ei:
        cf(torch.randn(4, 5))
    assert isinstance(ei.value.__cause__, StaxUnsupportedError)
    monkeypatch.delenv("STAX_STRICT", raising=False)
    torch._dynamo.reset()
    B.clear()
    cf = torch.compile(f, backend="stax", dynamic=True, fullgraph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = torch.randn(6, 7)
        assert torch.equal(cf(x), f(x))
