"""Symbolic dims in stax IR (dialects/symbolic.py): the normal form of size expressions
is sympy's `str` of Dynamo's expressions, and types built from dims round-trip."""
import random
import re

import pytest
import sympy

from stax._mlir import ir, new_context
from stax.dialects import symbolic


def test_normal_form_is_sympys_str():
    rng = random.Random(0)
    names = ["s0", "s1", "s2", "s10", "s77", "u0"]
    syms = {n: sympy.Symbol(n, integer=True, positive=True) for n in names}
    for _ in range(300):
        expr = 0
        for _ in range(rng.randint(1, 4)):
            term = rng.choice([1, 2, 3, -1, -5])
            for _ in range(rng.randint(0, 3)):
                term = term * syms[rng.choice(names)]
            expr = expr + term
        text = str(expr)
        if not getattr(expr, "free_symbols", None):
            continue
        assert symbolic.normalize(text) == text, text
        # and any other spelling of it normalizes to the same string
        assert symbolic.normalize(str(sympy.expand(expr * 1))) == text


@pytest.mark.parametrize("text,want", [("s1*s0", "s0*s1"), ("2*(s0 + 1)", "2*s0 + 2"),
                                       ("s0 + s0", "2*s0"), ("(s0 + 1)**2", "s0**2 + 2*s0 + 1"),
                                       ("s0 - s0 + 3", "3")])
def test_normalize(text, want):
    assert symbolic.normalize(text) == want


@pytest.mark.parametrize("text", ["s0 //2", "Mod(s0, 2)", "s0 +", "(s0", "2.5*s0", ""])
def test_malformed(text):
    with pytest.raises(symbolic.ExprError):
        symbolic.parse(text)


def test_dim_algebra():
    assert symbolic.dim_product(["s0", "s1", 64]) == "64*s0*s1"
    assert symbolic.dim_sum(["s0", "s0", 2]) == "2*s0 + 2"
    assert symbolic.dim_product([4, 8]) == 32
    assert symbolic.dim_sum(["s0", "-s0", 3]) == 3  # a constant again: a static dim


def test_sizes_type_round_trips():
    with new_context(), ir.Location.unknown():
        f32 = ir.F32Type.get()
        t = symbolic.sizes_type(["s1*s0", 768], f32)
        assert str(t) == 'tensor<?x768xf32, #stax.sizes<["s0*s1", 768]>>'
        assert symbolic.dims_of(t) == ("s0*s1", 768)
        assert ir.Type.parse(str(t)) == t
        # all-static dims give a plain static type (no encoding)
        assert str(symbolic.sizes_type([4, "s0 - s0 + 8"], f32)) == "tensor<4x8xf32>"
        bad = ir.Type.parse("tensor<?xf32>")
        assert "without a symbol" in symbolic.type_error(bad)


# ----------------------------------------------------------------------------- import

from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

import torch  # noqa: E402

from stax.dialects.stax_dialect import KERNEL, verify_module  # noqa: E402
from stax.importer import UnsupportedGraph, import_graph  # noqa: E402
from stax.passes import fuse  # noqa: E402

SYM = re.compile(r"^s\d+$")


def _trace(fn, *args, mode="symbolic"):
    return make_fx(fn, tracing_mode=mode, _allow_non_fake_inputs=True)(*args)


def _import(fn, *args):
    ctx = new_context()
    g = import_graph(_trace(fn, *args), None, ctx, symbolic=True)
    verify_module(g.module)
    return g, ctx


def _func(m):
    return m.body.operations[0]


def _arg_dims(m):
    return [symbolic.dims_of(a.type) for a in _func(m).regions[0].blocks[0].arguments]


def _result_dims(m):
    return [symbolic.dims_of(t) for t in ir.FunctionType(
        ir.TypeAttr(_func(m).attributes["function_type"]).value).results]


def _kernels(m):
    return [o for o in _func(m).regions[0].blocks[0].operations if o.operation.name == KERNEL]


def _static_kernels(fn, *args):
    ctx = new_context()
    g = import_graph(_trace(fn, *args, mode="real"), list(args), ctx)
    fuse.run(g.module)
    return len(_kernels(g.module))


def _fuse_and_reparse(g, ctx):
    fuse.run(g.module)
    verify_module(g.module)
    text = str(g.module)
    with ctx:
        again = ir.Module.parse(text)
    verify_module(again)
    assert str(again) == text
    return text


_W, _B, _C = torch.randn(16, 32), torch.randn(32), torch.randn(16)


def _mlp(x, r):
    h = torch.nn.functional.gelu(x @ _W + _B)
    return torch.nn.functional.layer_norm(h + r, (32,))


def test_import_mlp_block():
    x, r = torch.randn(8, 16), torch.randn(8, 32)
    g, ctx = _import(_mlp, x, r)
    (s, k), (s2, n), _w = _arg_dims(g.module)  # x, r, then the weight (a constant argument)
    assert SYM.match(s) and (k, n) == (16, 32) and s2 == s  # equal batch dims: one symbol
    assert _result_dims(g.module) == [(s, 32)]
    assert f'tensor<?x16xf32, #stax.sizes<["{s}", 16]>>' in str(g.module)
    assert g.inputs[0].shape == [s, 16]
    text = _fuse_and_reparse(g, ctx)
    # the matmul, then bias + gelu + residual + layer_norm in one kernel, as static
    assert len(_kernels(g.module)) == 1 == _static_kernels(_mlp, x, r)
    assert text.count('"stax.matmul"') == 1


def test_import_row_softmax():
    fn = lambda x: torch.softmax(x, -1)  # noqa: E731
    g, ctx = _import(fn, torch.randn(8, 16))
    ((s0, s1),) = _arg_dims(g.module)
    assert SYM.match(s0) and SYM.match(s1) and s0 != s1
    assert _result_dims(g.module) == [(s0, s1)]
    assert f'#stax.sizes<["{s0}", 1]>' in str(g.module)  # the row max / sum
    _fuse_and_reparse(g, ctx)
    (k,) = _kernels(g.module)
    assert ir.StringAttr(k.attributes["kind"]).value == "reduction"
    assert _static_kernels(fn, torch.randn(8, 16)) == 1


def _view2(x):
    x = x + _C  # specializes the last dim to 16
    return x.view(x.shape[0] * 2, -1)


def test_import_view_of_a_size_expression():
    g, ctx = _import(_view2, torch.randn(8, 16))
    ((s, c),) = _arg_dims(g.module)
    assert SYM.match(s) and c == 16
    assert _result_dims(g.module) == [(f"2*{s}", 8)]
    assert f'tensor<?x8xf32, #stax.sizes<["2*{s}", 8]>>' in str(g.module)
    text = _fuse_and_reparse(g, ctx)
    assert len(_kernels(g.module)) == 1 == _static_kernels(_view2, torch.randn(8, 16))
    assert text.count('"stax.reshape"') == 1


def test_import_symint_argument_binds_its_symbol():
    fn = lambda x, n: x.expand(n, -1) * 2  # noqa: E731
    g, ctx = _import(fn, torch.randn(1, 4), 3)
    f = _func(g.module)
    (one, s1), sym_arg = _arg_dims(g.module)
    assert one == 1 and SYM.match(s1) and sym_arg is None
    attrs = ir.DictAttr(ir.ArrayAttr(f.attributes["arg_attrs"])[1])
    n = ir.StringAttr(attrs["stax.symbol"]).value
    assert SYM.match(n) and n != s1
    assert str(f.regions[0].blocks[0].arguments[1].type) == "index"
    assert g.inputs[1].kind == "symbol"
    assert _result_dims(g.module) == [(n, s1)]
    _fuse_and_reparse(g, ctx)
    assert len(_kernels(g.module)) == 1


def test_import_distinct_sizes_get_distinct_symbols():
    fn = lambda x, y: (x.sum(-1), y.amax(-1))  # noqa: E731
    g, _ = _import(fn, torch.randn(8, 4), torch.randn(5, 4))
    (a, c), (b, c2) = _arg_dims(g.module)
    assert a != b and c == c2 and len({a, b, c}) == 3
    assert _result_dims(g.module) == [(a,), (b,)]


@pytest.mark.parametrize("fn,args,node,why", [
    # (cat has a symbolic rule now, test_dynamic_models, and flip runs as a library op,
    # test_dynamic_library_ops; diagonal, a view, has none)
    (lambda x: torch.diagonal(x) * 2, (torch.randn(8, 4),), "diagonal",
     "cannot be imported symbolically"),
    # a ratio of sizes as pow's exponent (n, a SymInt: `x * n` and `x ** n` are
    # stax.symbol_values, test_int_argument_is_a_symbol_value): eager's pow by 0.5 is
    # sqrt, by 1.5 std::pow, so the kernel would depend on the ratio's value
    (lambda x, n: torch.pow(x, n / 2), (torch.randn(8, 4), 3), "pow_1", "reads the size"),
    (lambda x: x.view(x.shape[0] * 2, -1), (torch.randn(8, 4),), "view", "not a polynomial"),
])
def test_import_unsupported_names_the_node(fn, args, node, why):
    gm = _trace(fn, *args)
    with pytest.raises(UnsupportedGraph, match=f"node {node} .*{why}"):
        import_graph(gm, None, new_context(), symbolic=True)


def test_int_argument_is_a_symbol_value():
    """A size no tensor's dims give (n, an int argument's own symbol) used as a value:
    a stax.symbol_value of its symbol, which a SymInt argument of @main binds."""
    gm = _trace(lambda x, n: x * n, torch.randn(8, 4), 3)
    g = import_graph(gm, None, new_context(), symbolic=True)
    text = str(g.module)
    assert '"stax.symbol_value"() {size = "s' in text, text
    assert "stax.symbol = " in text, text


def test_default_mode_still_refuses_symbolic_shapes():
    gm = _trace(lambda x: torch.softmax(x, -1), torch.randn(8, 16))
    with pytest.raises(UnsupportedGraph, match="symbolic shape.*shape_specialize"):
        import_graph(gm, None, new_context())


def _aot_graphs(fn, x, dynamic):
    """aot_autograd's forward and backward graphs of fn(x) (x's dim 0 dynamic or not)."""
    from torch._decomp import core_aten_decompositions
    from torch._dynamo.backends.common import aot_autograd
    graphs = []

    def cap(gm, example_inputs):
        graphs.append((gm, list(example_inputs)))
        return gm.forward

    torch._dynamo.reset()
    if dynamic:
        torch._dynamo.mark_dynamic(x, 0)
    backend = aot_autograd(fw_compiler=cap, bw_compiler=cap,
                           decompositions=core_aten_decompositions())
    torch.compile(fn, backend=backend, fullgraph=True)(x).sum().backward()
    torch._dynamo.reset()
    return graphs


def test_import_aot_autograd_training_graphs():
    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 32)
    def fn(x):
        return torch.nn.functional.layer_norm(torch.relu(lin(x)), (32,)).softmax(-1)
    dyn = _aot_graphs(fn, torch.randn(8, 16, requires_grad=True), True)
    static = _aot_graphs(fn, torch.randn(8, 16, requires_grad=True), False)
    assert len(dyn) == len(static) == 2
    for (gm, ex), (sgm, sex) in zip(dyn, static):
        ctx = new_context()
        g = import_graph(gm, ex, ctx, symbolic=True)
        verify_module(g.module)
        syms = [s.name for s in g.inputs if s.kind == "symbol"]
        assert len(syms) == 1  # the batch size, an index argument with stax.symbol
        assert "{stax.symbol = " in str(g.module) and "#stax.sizes<" in str(g.module)
        _fuse_and_reparse(g, ctx)
        s = import_graph(sgm, sex, new_context())
        fuse.run(s.module)
        assert len(_kernels(g.module)) == len(_kernels(s.module))


def test_import_mean_over_symbolic_dim_divides_by_size_value():
    # the divisor of a mean over a symbolic dim is a stax.size_value of that dim (a 0-d
    # f32), broadcast; over a static dim it stays a constant (static graphs unchanged)
    g, _ = _import(lambda x: (x.mean(0), x.mean(-1)), torch.randn(8, 4))
    text = str(g.module)
    assert text.count('"stax.size_value"') == 2, text   # dynamic=True: both dims symbolic
    assert "{dims = array<i64: 0>}" in text and "{dims = array<i64: 1>}" in text
    assert "-> tensor<f32>" in text
    static = import_graph(_trace_static(lambda x: x.mean(0), torch.randn(8, 4)), None,
                          new_context())
    assert "stax.size_value" not in str(static.module)


def _trace_static(fn, *args):
    from torch.fx.experimental.proxy_tensor import make_fx
    return make_fx(fn)(*args)


def _scaled_by_size_ratios(x):
    n = x.shape[0] * x.shape[2] * x.shape[3]
    return x * (1.0 / n), x * (n / (n - 1))


def test_import_a_float_of_sizes_as_a_ratio_of_size_values():
    # a SymFloat (BatchNorm's backward: 1.0 / (N*H*W); the unbiased variance's n / (n-1))
    # is a ratio of stax.size_value products evaluated in f32, divided, broadcast
    g, _ = _import(_scaled_by_size_ratios, torch.randn(4, 3, 5, 6))
    text = str(g.module)
    assert '"stax.size_value"' in text and "{dims = array<i64: 0, 2, 3>}" in text, text
    assert text.count('"stax.div"') >= 2, text
    from stax.importer import symbolic as isym
    gm = _trace(_scaled_by_size_ratios, torch.randn(4, 3, 5, 6))
    ratios = [isym.ratio(n.meta["val"]) for n in gm.graph.nodes
              if isinstance(n.meta.get("val"), torch.SymFloat)]
    got = {(r.num, r.den) for r in ratios}
    prod = next(r.num for r in ratios if r.den == 1)   # float(n): n / 1
    assert (1, prod) in got and (prod, f"{prod} - 1") in got, ratios


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_a_float_of_sizes_compiles_once_and_matches_eager(dtype, monkeypatch):
    import stax.backend as B
    monkeypatch.setenv("STAX_STRICT", "1")
    torch._dynamo.reset()
    cf = torch.compile(_scaled_by_size_ratios, backend="stax", dynamic=True)
    for shape in [(4, 3, 5, 6), (7, 3, 2, 9), (2, 3, 13, 1), (300, 3, 4, 5)]:
        x = torch.randn(shape, dtype=dtype)
        for got, want in zip(cf(x), _scaled_by_size_ratios(x)):
            tol = dict(rtol=1e-6, atol=0) if dtype == torch.float32 else {}
            torch.testing.assert_close(got, want, **tol)
    reps = [r for r in B.reports() if r.specializer is not None]
    assert reps and all(len(r.variants) == 1 and r.variants[0].dynamic for r in reps), \
        [r.summary() for r in B.reports()]
    assert all(r.route == "stax-cpu" for r in reps)
