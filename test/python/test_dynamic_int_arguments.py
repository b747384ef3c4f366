"""Python int arguments used as values, compiled once for every value: Dynamo makes an
int argument symbolic (a SymInt) once it sees a second value, or at once under
`dynamic=True`, so `x * n`, `arange(start, start + T)` (a decode loop's positions) and
`x.sum(-1) / n` read a size that no tensor's dims carry.

Before, the symbolic importer refused such a graph ("the size s86 is used as a value, and
no tensor of the graph has dims that multiply to it") and stax compiled one static variant
per value. Now the value is a `stax.symbol_value` of the symbol, which the kernels read
from their size arguments. On the CPU, the Triton target interpreted and CUDA; forward
and backward; every call against eager, one compile.
"""
from __future__ import annotations

import pytest
import torch

import stax.backend as B
from test_dynamic_gpu import counts, interpreted_triton  # noqa: F401
from stax.dynamic_compile import DynamicShapes
from test_dynamic_prefix_slices import _where, assert_dynamic_only

pytestmark = pytest.mark.usefixtures("stax_strict")
TOL = dict(rtol=1e-5, atol=1e-5)


def scale(x, n):
    return x * n + 1


def positions(x, n):   # a decode step's positions, from the cache length so far
    return x + torch.arange(n, n + x.shape[0], device=x.device).unsqueeze(-1) * 0.5


def mean_by(x, n):
    return x.sum(-1) / n


def int_result(x, n):
    return (x > 0).to(torch.int64) * n - n * n


def softmax_scaled(x, n):   # the int inside a row reduction's kernel
    return torch.softmax(x * n, dim=-1)


def remainder(x, n):   # `n % 3` and `rows % 4`: p - k*(p // k), a derived symbol
    return torch.softmax(x * (n % 3 + 1), dim=-1) * (x.shape[0] % 4)


def power(x, n):   # `x ** n`, `n ** x` and `x % n`: std::pow and remainder by the int
    return x ** (n % 4) + x.abs() ** (n % 3 - 1) + (n % 5 + 1) ** x.tanh() + x % (n % 7 + 1)


CASES = {"scale": scale, "positions": positions, "mean_by": mean_by,
         "int_result": int_result, "softmax_scaled": softmax_scaled,
         "remainder": remainder, "power": power}
VALUES = [3, 1, 257, 0, 17, 2]   # 0 and 1 too: Dynamo's 0/1 specialization is not met here


def _one_dynamic_compile(route, counts, most=1):
    for rep in assert_dynamic_only(route, counts, most):
        (v,) = rep.variants
        assert v.dynamic, rep.summary()


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_int_argument_values_compile_once(case, where, counts, request):
    dev, sizes, route = _where(where, request)
    fn = CASES[case]
    cf = torch.compile(fn, backend="stax", dynamic=True)
    for (rows, cols), n in zip(sizes, VALUES):
        x = torch.randn(rows, cols, device=dev)
        got, want = cf(x, n + 2), fn(x, n + 2)
        assert got.shape == want.shape and got.stride() == want.stride()
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, **TOL)
    # Dynamo of torch 2.11 on the GPU traces `x ** e` through _refs.pow, which guards
    # `e == 1.0` and `e != 2.0`: its recompiles, each graph still compiled once by stax
    _one_dynamic_compile(route, counts, most=3 if case == "power" else 1)


@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_int_argument_trains_with_one_compile(where, counts, request):
    dev, sizes, route = _where(where, request)

    def fn(x, w, n):
        return torch.tanh(x @ w) * n + x.sum(-1, keepdim=True) / n

    cf = torch.compile(fn, backend="stax", dynamic=True)
    for (rows, _), n in zip(sizes, VALUES):
        x = torch.randn(rows, 64, device=dev, requires_grad=True)
        w = torch.randn(64, 64, device=dev, requires_grad=True)
        x2, w2 = (t.detach().clone().requires_grad_(True) for t in (x, w))
        got, want = cf(x, w, n + 2), fn(x2, w2, n + 2)
        # (fp32 matmuls over 64 and over the rows, scaled by n: eager's own rounding)
        tol = dict(rtol=1e-4, atol=1e-4 * (n + 2))
        torch.testing.assert_close(got, want, **tol)
        g = torch.randn_like(want)
        got.backward(g)
        want.backward(g)
        torch.testing.assert_close(x.grad, x2.grad, **tol)
        torch.testing.assert_close(w.grad, w2.grad, **tol)
    _one_dynamic_compile(route, counts)


def test_automatic_dynamic_int_compiles_twice_not_per_value(counts):
    """No `dynamic=True`: Dynamo compiles the first value as a constant, then, on the
    second, makes the int symbolic; stax then serves every later value with that one
    dynamic compile."""
    cf = torch.compile(positions, backend="stax")
    for start in (5, 6, 7, 8, 100, 1000):
        x = torch.randn(256, 512)
        torch.testing.assert_close(cf(x, start), positions(x, start), **TOL)
    reps = B.reports()
    assert len(reps) == 2, [r.summary() for r in reps]
    assert isinstance(reps[1].specializer, DynamicShapes), reps[1].summary()
    assert reps[1].variants[0].calls == 5 and counts["dynamic"] == 1


# ----------------------------------------------------------------------------- random programs
# Small programs drawn from the forms an int argument takes in models (a scale, an
# offset, a divisor, a window start, a position range), composed at random with
# pointwise ops and row reductions: each compiled once and called at 5 sizes and values,
# against eager. They reach kernels the cases above do not (an int read inside a
# reduction's phases, next to a gather, in an integer kernel).

_FORMS = [
    lambda v, n, p: v * n,
    lambda v, n, p: v + n * 0.5,
    lambda v, n, p: v / (n + 1),
    lambda v, n, p: torch.softmax(v * (n % 3 + 1), dim=-1),   # (a remainder: derived)
    lambda v, n, p: v - v.sum(-1, keepdim=True) / (n + 1),
    lambda v, n, p: v[:, p:p + 3].repeat_interleave(1, dim=1).sum(-1, keepdim=True) + v,
    lambda v, n, p: v + torch.arange(p, p + v.shape[-1], dtype=v.dtype),
    lambda v, n, p: torch.where(v > 0, v, v * (n + 2)),
    lambda v, n, p: torch.tanh(v) * (n - p),
    # pads by sizes (a fill concatenated on) and a crop, the next form seeing the new width
    lambda v, n, p: torch.nn.functional.pad(v, (n % 4, 1), value=0.5),
    lambda v, n, p: torch.nn.functional.pad(v, (-1, n % 3)),
]


def _random_program(seed):
    import random
    rng = random.Random(seed)
    picks = [rng.randrange(len(_FORMS)) for _ in range(rng.randint(2, 4))]

    def fn(x, n, p):
        v = x
        for k in picks:
            v = _FORMS[k](v, n, p)
        return v
    return fn, picks


@pytest.mark.parametrize("seed", range(16))
def test_random_int_programs_compile_once(seed, counts):
    import random
    fn, picks = _random_program(seed)
    rng = random.Random(1000 + seed)
    cf = torch.compile(fn, backend="stax", dynamic=True)
    for call in range(5):
        rows, cols = rng.choice([2, 3, 7, 256, 300]), rng.choice([9, 512, 1031])
        n, p = rng.randint(2, 300), rng.randint(0, cols - 8)   # (crops take up to 4)
        x = torch.randn(rows, cols)
        got, want, exact = cf(x, n, p), fn(x, n, p), fn(x.double(), n, p)
        assert got.shape == want.shape and got.stride() == want.stride(), picks
        # against float64: stax's error at most a few times eager's own (the forms
        # multiply by n up to ~1e5, so float32 rounding grows with them)
        err, eager_err = ((t.double() - exact).abs().max().item() for t in (got, want))
        assert err <= 4 * eager_err + 1e-6 * exact.abs().max().item(), \
            (picks, call, err, eager_err)
    assert_dynamic_only("stax-cpu", counts, most=2)


# ----------------------------------------------------------------------------- PTX

def test_int_argument_kernels_compile_to_ptx(tmp_path, monkeypatch):
    """No GPU needed: the Triton kernels that read int arguments (a scale, a remainder,
    a position range), a window at an int start and a write at it each compile to PTX
    for sm_90, their symbols (a derived one too) as size arguments."""
    pytest.importorskip("triton")
    from torch._dynamo.backends.common import aot_autograd

    from stax._mlir import ir, new_context
    from stax.dialects import symbolic
    from stax.dialects.stax_dialect import KERNEL
    from stax.dynamic_graph import _torch_dtype
    from stax.importer import import_graph
    from stax.passes import fuse
    from stax.targets import triton as stax_triton
    monkeypatch.setenv("STAX_CACHE_DIR", str(tmp_path))

    def fn(x, n, start, cache, k):
        y = torch.softmax(x * n, dim=-1) + torch.arange(start, start + x.shape[-1]) * (n % 3)
        return y, x[:, start:start + 3] * 2, torch.slice_scatter(cache, k, 1, start, start + 1)

    graphs = []
    backend = aot_autograd(fw_compiler=lambda gm, ex: graphs.append((gm, ex)) or gm.forward,
                           decompositions=B.stax_decompositions())
    torch._dynamo.reset()
    torch.compile(fn, backend=backend, dynamic=True, fullgraph=True)(
        torch.randn(4, 6), 3, 1, torch.randn(2, 9, 5), torch.randn(2, 1, 5))
    torch._dynamo.reset()
    gm, ex = graphs[0]
    values = iter([300, 512, 7, 5, 2, 40, 64])   # the SymInt arguments, in order
    env = {}
    for v in ex:
        if isinstance(v, torch.SymInt):
            env[str(v.node.expr)] = next(values)
    ctx = new_context()
    g = import_graph(gm, None, ctx, symbolic=True)
    fuse.run(g.module)
    block = g.module.body.operations[0].regions[0].blocks[0]
    kops = [o.operation for o in block.operations if o.operation.name == KERNEL]
    assert len(kops) >= 4
    read = set()
    for kop in kops:
        with ctx:
            k = stax_triton.compile_kernel(kop, None, None, ir.StringAttr(
                kop.attributes["name"]).value)
            dts = [_torch_dtype(ir.RankedTensorType(v.type).element_type)
                   for v in list(kop.operands) + list(kop.results)]
        sizes = [env[s] if s in env else symbolic.derived_value(s, env) for s in k.symbols]
        read |= set(k.symbols)
        tensors = [torch.zeros(shape, dtype=dt) for shape, dt in zip(k.shapes_for(sizes), dts)]
        var, _ = k.choose(tensors, sizes)
        assert ".visible .entry" in k.compiled_for(var).asm["ptx"], k.name
    # n and start: the SymInt arguments after x's two dims
    n_sym, start_sym = [str(v.node.expr) for v in ex if isinstance(v, torch.SymInt)][2:4]
    assert {n_sym, start_sym, f"fdiv3_{n_sym}"} <= read, read
