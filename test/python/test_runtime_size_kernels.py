"""CPU kernels with runtime sizes (targets/cpu_symbolic): a kernel with `?` dims is compiled
ONCE and then run at many sizes (1, primes, sizes not a multiple of the vector width, and
512+ rows of 768), compared to eager on random inputs. Kernels come from make_fx's
symbolic tracing through the symbolic importer and stax-fuse, or from MLIR text (static
inner dims next to symbolic rows); what the generator does not support is refused with a
KernelLoweringError naming the kernel."""
import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from stax._mlir import ir, new_context
from stax.dialects import symbolic
from stax.dialects.stax_dialect import KERNEL, verify_module
from stax.importer import import_graph
from stax.passes import fuse
from stax.runtime.cpu_kernel import SizedCpuKernel, kernel_text, load_cpu_kernels
from stax.targets import cpu_symbolic, llvm
from stax.targets.cpu_errors import KernelLoweringError
from stax.targets.kernel_ir import contiguous_strides
from stax.targets.kernel_ir import shape as _shape

TOL = {torch.float32: (2e-5, 2e-5), torch.bfloat16: (2e-2, 2e-2), torch.float64: (1e-12, 1e-12)}


@pytest.fixture
def compiles(monkeypatch):
    """How many times a runtime-size kernel was lowered (each is one compile)."""
    count = [0]
    orig = cpu_symbolic._RuntimeSizeLowering.lower

    def lower(self):
        count[0] += 1
        return orig(self)
    monkeypatch.setattr(cpu_symbolic._RuntimeSizeLowering, "lower", lower)
    return count


class Graph:
    """A symbolic graph of kernels only, each compiled once (llvm.compile_kernel), run at
    any size: kernel operands are function arguments or earlier kernels' results."""

    def __init__(self, module, ctx, constants=()):
        self.ctx = ctx
        self.module = module  # keeps the IR alive
        self.func = module.body.operations[0]
        block = self.func.regions[0].blocks[0]
        self.params = list(block.arguments)
        self.constants = list(constants)
        self.ops = [o.operation for o in block.operations]
        self.kernels = [o for o in self.ops if o.name == KERNEL]
        assert all(o.name in (KERNEL, "func.return") for o in self.ops), \
            [o.name for o in self.ops]
        self.compiled = []
        with ctx:
            for i, k in enumerate(self.kernels):
                if cpu_symbolic.has_runtime_sizes(k):
                    self.compiled.append(llvm.compile_kernel(k, None, None, f"rk{i}"))
                else:  # a static kernel of the graph (a constant's convert)
                    st = lambda vs: [contiguous_strides(_shape(v)) for v in vs]  # noqa: E731
                    self.compiled.append(llvm.compile_kernel(
                        k, st(k.operands), st(k.results), f"rk{i}"))
        self.sized = [k for k in self.compiled if isinstance(k, SizedCpuKernel)]

    def __call__(self, *args):
        args = list(args) + self.constants
        env = {}
        values = {}
        for p, t in zip(self.params, args):
            values[p] = t
            for d, n in enumerate(symbolic.dims_of(p.type)):
                if isinstance(n, str) and symbolic.free_symbols(n) == {n}:
                    env[n] = t.shape[d]
        for k, ck in zip(self.kernels, self.compiled):
            ins = [values[v] for v in k.operands]
            outs = []
            for r in k.results:
                dims = [n if isinstance(n, int) else _eval_size(n, env)
                        for n in symbolic.dims_of(r.type)]
                dt = _torch_dtype(ir.RankedTensorType(r.type).element_type)
                outs.append(torch.empty(dims, dtype=dt))
            if isinstance(ck, SizedCpuKernel):
                ck(*ins, *outs, sizes=[env[s] for s in ck.symbols], check=True)
            else:
                ck(*ins, *outs)
            for r, t in zip(k.results, outs):
                values[r] = t
        ret = self.ops[-1]
        res = [values[v] for v in ret.operands]
        return res[0] if len(res) == 1 else tuple(res)


def _eval_size(expr, env):
    total = 0
    for mono, c in symbolic.parse(expr):
        t = c
        for s, e in mono:
            t *= env[s] ** e
        total += t
    return total


def _torch_dtype(et):
    s = str(et)
    return {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16,
            "f64": torch.float64, "i32": torch.int32, "i64": torch.int64, "i1": torch.bool,
            "i8": torch.int8, "ui8": torch.uint8}[s]


def symbolic_graph(fn, *example):
    gm = make_fx(fn, tracing_mode="symbolic", _allow_non_fake_inputs=True)(*example)
    ctx = new_context()
    g = import_graph(gm, None, ctx, symbolic=True)
    fuse.run(g.module)
    verify_module(g.module)
    consts = [g.constants[s.name] for s in g.inputs if s.kind == "constant"]
    return Graph(g.module, ctx, consts)


def text_graph(text, fused=False):
    """A graph from MLIR text: stax ops that stax-fuse puts into kernels, or (`fused`)
    the kernels written out."""
    ctx = new_context()
    with ctx, ir.Location.unknown():
        m = ir.Module.parse(text)
    if not fused:
        fuse.run(m)
    verify_module(m)
    return Graph(m, ctx)


def check(graph, fn, make, sizes):
    for sz in sizes:
        args = make(*sz)
        want = fn(*args)
        got = graph(*args)
        want = want if isinstance(want, tuple) else (want,)
        got = got if isinstance(got, tuple) else (got,)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype, (sz, g.shape, w.shape)
            if w.is_floating_point():
                rtol, atol = TOL[w.dtype]
                torch.testing.assert_close(g, w, rtol=rtol, atol=atol, equal_nan=True,
                                           msg=lambda m: f"{sz}: {m}")
            else:
                assert torch.equal(g, w), sz


ROWS = [(1,), (2,), (7,), (257,), (512,), (1000,)]
SHAPES_2D = [(1, 1), (3, 16), (5, 17), (257, 31), (2, 1023), (512, 768)]


def _route(graph, width=16):
    assert graph.sized
    for k in graph.sized:
        assert k.addressing == "runtime-sizes"
        assert k.vector_width == width, k.mlir
        if width > 1:
            assert "vector.load" in k.mlir
        assert k.n_sizes == len(k.symbols) >= 1


# ----------------------------------------------------------------------------- pointwise

BIAS_TANH = """
func.func @bias_tanh(%x: tensor<?x768xf32, #stax.sizes<["s0", 768]>>, %b: tensor<768xf32>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>> {
  %0 = "stax.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<768xf32>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
  %1 = "stax.add"(%x, %0) : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>, tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
  %2 = "stax.tanh"(%1) : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
  %3 = "stax.mul"(%2, %x) : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>, tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
  return %3 : tensor<?x768xf32, #stax.sizes<["s0", 768]>>
}
"""


def test_bias_tanh_static_inner_dim(compiles):
    g = text_graph(BIAS_TANH)
    assert len(g.kernels) == 1 and g.compiled[0].symbols == ["s0"]
    _route(g)
    check(g, lambda x, b: torch.tanh(x + b) * x,
          lambda n: (torch.randn(n, 768), torch.randn(768)), ROWS)
    assert compiles[0] == 1


def _gelu_mix(x, y):
    return x * torch.sigmoid(1.702 * x) + torch.where(x > y, x, 0.1 * y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_pointwise_symbolic_inner_dim_vector_tail(compiles, dtype):
    """Both dims symbolic: the inner dim 17, 1023, 1 ... runs the vector loop and the tail."""
    g = symbolic_graph(_gelu_mix, torch.randn(4, 6, dtype=dtype), torch.randn(4, 6, dtype=dtype))
    assert len(g.kernels) == 1
    _route(g)
    check(g, _gelu_mix, lambda m, n: (torch.randn(m, n, dtype=dtype), torch.randn(m, n, dtype=dtype)),
          SHAPES_2D)
    assert compiles[0] == 1


def test_broadcast_symbolic_and_static_dims(compiles):
    """[s0, s1] with a [s1] bias (a symbolic dim broadcast) and a [s0, 1] column."""
    fn = lambda x, b, c: (x + b) * c - c.exp()  # noqa: E731
    g = symbolic_graph(fn, torch.randn(4, 6), torch.randn(6), torch.randn(4, 1))
    check(g, fn, lambda m, n: (torch.randn(m, n), torch.randn(n), torch.randn(m, 1)), SHAPES_2D)
    assert compiles[0] == len(g.kernels)


def test_integer_bit_exact(compiles):
    fn = lambda a, b: (torch.where(a > b, a * b + 3, a - b), torch.maximum(a, -b).abs(),  # noqa: E731
                       a.to(torch.int64) * 5)
    mk = lambda m, n: (torch.randint(-1000, 1000, (m, n), dtype=torch.int32),  # noqa: E731
                       torch.randint(-1000, 1000, (m, n), dtype=torch.int32))
    g = symbolic_graph(fn, *mk(4, 6))
    _route(g)
    check(g, fn, mk, SHAPES_2D)
    assert compiles[0] == len(g.kernels)


def test_converts_and_compare_outputs(compiles):
    fn = lambda x: ((x * 3).to(torch.bfloat16), (x > 0.5), x.to(torch.int32) + 1)  # noqa: E731
    g = symbolic_graph(fn, torch.randn(4, 6) * 4)
    check(g, fn, lambda m, n: (torch.randn(m, n) * 4,), SHAPES_2D)
    assert compiles[0] == len(g.kernels)


def test_reshape_and_3d(compiles):
    """[s0, s1, s2] viewed as [s0*s1, s2] (the trailing dim passes through the reshape)."""
    fn = lambda x, y: x.reshape(-1, x.shape[-1]) * 2 + y  # noqa: E731
    g = symbolic_graph(fn, torch.randn(2, 3, 5), torch.randn(6, 5))
    _route(g)
    check(g, fn, lambda a, b, c: (torch.randn(a, b, c), torch.randn(a * b, c)),
          [(1, 1, 1), (2, 3, 17), (3, 7, 1023), (4, 128, 768), (1, 257, 5), (5, 2, 16)])
    assert compiles[0] == 1


@pytest.mark.parametrize("src, dst, groups", [
    ([4, "s0 + 1", 512], [4, "s0 + 1", 8, 64], [([0], [0]), ([1], [1]), ([2], [2, 3])]),
    ([4, 8, "s0", 64], [32, "s0", 64], [([0, 1], [0]), ([2], [1]), ([3], [2])]),
    (["4*s0"], [4, "s0"], [([0], [0, 1])]),
    (["s0", "s1"], ["s0*s1"], [([0, 1], [0])]),
    ([2, 3], [3, 2], [([0, 1], [0, 1])]),
    ([1, "s0", 1], ["s0"], [([0, 1, 2], [0])]),
    ([6, "s0"], [2, 3, "s0"], [([0], [0, 1]), ([1], [2])]),
    (["s0", 6], [3, "s0", 2], None),       # no grouping: the whole index is re-linearized
    (["s0 + 1", 2], [2, "s0 + 1"], None),
])
def test_reshape_groups(src, dst, groups):
    got = symbolic.reshape_groups(src, dst)
    assert (got and [(list(a), list(b)) for a, b in got]) == groups


def test_heads_split_next_to_a_symbolic_dim_divide_by_no_runtime_size(compiles):
    """[b, n, 512] read as [b, h, n, 64] heads (a KV cache's window): the reshape groups
    [512] with [8, 64], so the kernel divides only by constants and stays vectorized."""
    fn = lambda x: x.view(x.shape[0], x.shape[1], 8, 64).transpose(1, 2).contiguous() * 2  # noqa: E731
    g = symbolic_graph(fn, torch.randn(2, 5, 512))
    _route(g)
    for k in g.sized:
        lines = k.mlir.splitlines()
        consts = {ln.split("=")[0].strip() for ln in lines if "arith.constant" in ln}
        divisors = [ln.split(":")[0].split(",")[-1].strip() for ln in lines
                    if "arith.divui" in ln or "arith.remui" in ln]
        # (the thread split divides the rows by the part count)
        assert all(d in consts or d == "%nparts" for d in divisors), divisors
    check(g, fn, lambda b, n: (torch.randn(b, n, 512),),
          [(1, 1), (2, 7), (4, 300), (3, 513), (1, 64)])
    assert compiles[0] == 1


def test_one_lane_fallback_is_still_right(compiles):
    """A transpose puts a runtime stride on the lane: the kernel is emitted 1-lane."""
    fn = lambda x, y: x.t() + y  # noqa: E731
    g = symbolic_graph(fn, torch.randn(4, 6), torch.randn(6, 4))
    _route(g, width=1)
    check(g, fn, lambda m, n: (torch.randn(m, n), torch.randn(n, m)), SHAPES_2D)
    fl = lambda x: x.reshape(-1) * 2  # noqa: E731
    g2 = symbolic_graph(fl, torch.randn(4, 6))
    check(g2, fl, lambda m, n: (torch.randn(m, n),), SHAPES_2D)
    assert compiles[0] == 2


# ----------------------------------------------------------------------------- reductions

SOFTMAX_768 = """
func.func @softmax(%x: tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> (tensor<?x768xf32, #stax.sizes<["s0", 768]>>, tensor<?x1xf32, #stax.sizes<["s0", 1]>>) {
  %m = "stax.reduce_max"(%x) {dims = array<i64: 1>, keepdim = true} : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x1xf32, #stax.sizes<["s0", 1]>>
  %mb = "stax.broadcast_in_dim"(%m) {dims = array<i64: 0, 1>} : (tensor<?x1xf32, #stax.sizes<["s0", 1]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
  %d = "stax.sub"(%x, %mb) : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>, tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
  %e = "stax.exp"(%d) : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
  %s = "stax.reduce_sum"(%e) {dims = array<i64: 1>, keepdim = true} : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x1xf32, #stax.sizes<["s0", 1]>>
  %sb = "stax.broadcast_in_dim"(%s) {dims = array<i64: 0, 1>} : (tensor<?x1xf32, #stax.sizes<["s0", 1]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
  %r = "stax.div"(%e, %sb) : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>, tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
  return %r, %s : tensor<?x768xf32, #stax.sizes<["s0", 768]>>, tensor<?x1xf32, #stax.sizes<["s0", 1]>>
}
"""


def test_softmax_static_reduced_dim_symbolic_rows(compiles):
    g = text_graph(SOFTMAX_768)
    assert len(g.kernels) == 1
    _route(g)

    def fn(x):
        e = (x - x.amax(-1, keepdim=True)).exp()
        s = e.sum(-1, keepdim=True)
        return e / s, s
    check(g, fn, lambda n: (torch.randn(n, 768) * 3,), ROWS)
    assert compiles[0] == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_softmax_symbolic_reduced_dim(compiles, dtype):
    fn = lambda x: torch.softmax(x, -1)  # noqa: E731
    g = symbolic_graph(fn, torch.randn(4, 6, dtype=dtype))
    assert len(g.kernels) == 1
    _route(g)
    check(g, fn, lambda m, n: (torch.randn(m, n, dtype=dtype) * 3,), SHAPES_2D)
    assert compiles[0] == 1


def test_layer_norm_rows_of_768(compiles):
    """[s0, s1, 768]: two symbolic row dims, the reduced dim static; mean/rstd stored."""
    def fn(x, w, b):
        return torch.ops.aten.native_layer_norm(x, [768], w, b, 1e-5)
    g = symbolic_graph(fn, torch.randn(2, 3, 768), torch.randn(768), torch.randn(768))
    assert len(g.kernels) == 1
    _route(g)
    check(g, fn, lambda a, b: (torch.randn(a, b, 768) * 2 + 1, torch.randn(768), torch.randn(768)),
          [(1, 1), (2, 3), (1, 257), (4, 128), (3, 171), (2, 300)])
    assert compiles[0] == 1


def test_layer_norm_after_flatten_to_rows(compiles):
    fn = lambda x: F.layer_norm(x.reshape(-1, 768), (768,))  # noqa: E731
    g = symbolic_graph(fn, torch.randn(2, 3, 768))
    check(g, fn, lambda a, b: (torch.randn(a, b, 768),), [(1, 1), (2, 3), (1, 257), (4, 130)])
    assert compiles[0] == len(g.kernels)


W768 = torch.randn(768)


def _rms_bf16(x):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * \
        W768.to(x.dtype)


def test_rms_norm_bf16(compiles):
    g = symbolic_graph(_rms_bf16, torch.randn(2, 3, 768).bfloat16())
    check(g, _rms_bf16, lambda a, b: (torch.randn(a, b, 768).bfloat16(),),
          [(1, 1), (2, 3), (1, 257), (4, 128), (3, 13), (1, 600)])
    assert compiles[0] == len(g.sized) >= 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_sum_amax_last_dim(compiles, dtype):
    fn = lambda x: (x.sum(-1), x.amax(-1), x.amin(-1, keepdim=True))  # noqa: E731
    if dtype == torch.int32:
        mk = lambda a, b, c: (torch.randint(-50, 50, (a, b, c), dtype=dtype),)  # noqa: E731
        fn = lambda x: (x.sum(-1, dtype=torch.int32), x.amax(-1), x.amin(-1, keepdim=True))  # noqa: E731
    else:
        mk = lambda a, b, c: (torch.randn(a, b, c, dtype=dtype),)  # noqa: E731
    g = symbolic_graph(fn, *mk(2, 3, 5))
    _route(g)
    check(g, fn, mk, [(1, 1, 1), (2, 3, 17), (1, 257, 31), (3, 2, 1023), (2, 256, 768), (5, 1, 16)])
    assert compiles[0] == len(g.kernels)  # one compile per kernel, for all six sizes


SHAPES_3D = [(1, 1, 1), (2, 3, 17), (1, 257, 31), (3, 2, 1023), (2, 256, 768), (5, 1, 16)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_column_reductions_bias_grad(compiles, dtype):
    """The last dim kept (a bias gradient's sum over the batch): one accumulator lane per
    column, vectorized along the kept dim with a 1-lane tail."""
    fn = lambda x: (x.sum(0), x.amax(0, keepdim=True))  # noqa: E731
    g = symbolic_graph(fn, torch.randn(4, 6, dtype=dtype))
    _route(g)
    check(g, fn, lambda m, n: (torch.randn(m, n, dtype=dtype),),
          SHAPES_2D + [(1000, 17), (4099, 3)])
    assert compiles[0] == len(g.kernels)


def test_column_reduction_of_a_transposed_input_one_lane(compiles):
    """x.t().sum(0): the kept dim is strided by a runtime size, so the kernel is 1-lane;
    its 1-lane loop must cover every column (it covered none: stax-fuzz --dynamic seed
    7373, program 7373022141, a bool amin of a permute)."""
    fn = lambda x: (x.permute(1, 0).sum(-2, keepdim=True),)  # noqa: E731
    g = symbolic_graph(fn, torch.randn(4, 6))
    _route(g, width=1)
    check(g, fn, lambda m, n: (torch.randn(m, n),), SHAPES_2D)
    fb = lambda x: (x.permute(1, 0).amin(-2, keepdim=True),)  # noqa: E731
    g = symbolic_graph(fb, torch.randn(4, 6) > 0)
    check(g, fb, lambda m, n: (torch.randn(m, n) > 0,), SHAPES_2D)


def test_column_reduction_over_two_dims_and_full_output(compiles):
    fn = lambda x: (x.sum((0, 1)), x - x.amax((0, 1), keepdim=True))  # noqa: E731
    g = symbolic_graph(fn, torch.randn(2, 3, 5))
    _route(g)
    check(g, fn, lambda a, b, c: (torch.randn(a, b, c),), SHAPES_3D)
    assert compiles[0] == len(g.kernels)


def test_row_reduction_over_several_dims(compiles):
    """The last dim reduced with others: [a, b, c] over (1, 2) and over (0, 2) (a kept
    dim between reduced ones)."""
    fn = lambda x: (x.sum((1, 2)), x.amax((0, 2)), x.amin((1, 2), keepdim=True))  # noqa: E731
    # seeded: a sum of 196608 randn values can land near 0, where its f32 rounding
    # (~1e-4, eager's and stax's orders differ) is past `check`'s atol (failed once in CI)
    torch.manual_seed(0)
    g = symbolic_graph(fn, torch.randn(2, 3, 5))
    _route(g)
    check(g, fn, lambda a, b, c: (torch.randn(a, b, c),), SHAPES_3D)
    assert compiles[0] == len(g.kernels)


def test_column_sum_of_long_columns_is_blocked():
    fn = lambda x: x.sum(0)  # noqa: E731
    g = symbolic_graph(fn, torch.randn(3, 5))
    for m, n in [(300_001, 3), (200_003, 17)]:
        x = torch.rand(m, n) + 100
        exact = x.double().sum(0)
        err = ((g(x).double() - exact) / exact).abs().max().item()
        eager = ((x.sum(0).double() - exact) / exact).abs().max().item()
        assert err < max(4 * eager, 1e-6), (m, n, err, eager)


# ----------------------------------------------------------------------------- refused

TWO_SIGNATURES = """
func.func @f(%x: tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) {
  %k = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<?x768xf32, #stax.sizes<["s0", 768]>>):
    %r = "stax.reduce_sum"(%a) {dims = array<i64: 1>, keepdim = true} : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x1xf32, #stax.sizes<["s0", 1]>>
    %c = "stax.reduce_sum"(%a) {dims = array<i64: 0>, keepdim = true} : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<1x768xf32>
    %rb = "stax.broadcast_in_dim"(%r) {dims = array<i64: 0, 1>} : (tensor<?x1xf32, #stax.sizes<["s0", 1]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
    %cb = "stax.broadcast_in_dim"(%c) {dims = array<i64: 0, 1>} : (tensor<1x768xf32>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
    %y = "stax.add"(%rb, %cb) : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>, tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
    "stax_graph.yield"(%y) : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> ()
  }) {kind = "reduction", name = "k0"} : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
  return %k : tensor<?x768xf32, #stax.sizes<["s0", 768]>>
}
"""


CONCAT_SYMBOLIC = """
func.func @f(%x: tensor<?x4xf32, #stax.sizes<["s0", 4]>>, %y: tensor<?x4xf32, #stax.sizes<["2*s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["2*s0", 4]>> {
  %c = "stax.concat"(%x, %x) {dim = 0 : i64} : (tensor<?x4xf32, #stax.sizes<["s0", 4]>>, tensor<?x4xf32, #stax.sizes<["s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["2*s0", 4]>>
  %a = "stax.add"(%c, %y) : (tensor<?x4xf32, #stax.sizes<["2*s0", 4]>>, tensor<?x4xf32, #stax.sizes<["2*s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["2*s0", 4]>>
  return %a : tensor<?x4xf32, #stax.sizes<["2*s0", 4]>>
}
"""


def _first_kernel(fn=None, text=None):
    ctx = new_context()
    if text is None:
        gm = make_fx(fn, tracing_mode="symbolic", _allow_non_fake_inputs=True)(torch.randn(4, 6))
        m = import_graph(gm, None, ctx, symbolic=True).module
    else:
        with ctx, ir.Location.unknown():
            m = ir.Module.parse(text)
    fuse.run(m)
    block = m.body.operations[0].regions[0].blocks[0]
    return m, ctx, next(o.operation for o in block.operations if o.operation.name == KERNEL)


def test_concat_along_a_symbolic_dim():
    """[s0, 4] ++ [s0, 4] along the symbolic dim (`2*s0`), then an add: the split point
    is the runtime size s0 (a KV cache's cat along its length is the same form)."""
    m, ctx, k = _first_kernel(None, CONCAT_SYMBOLIC)
    with ctx:
        ck = llvm.compile_kernel(k, None, None, "cat_rows")
    for n in (1, 2, 17, 257, 1000):
        x, y = torch.randn(n, 4), torch.randn(2 * n, 4)
        out = torch.empty(2 * n, 4)
        ck(x, y, out, check=True)
        torch.testing.assert_close(out, torch.cat([x, x]) + y)


@pytest.mark.parametrize("fn,text,what", [
    (None, TWO_SIGNATURES, "reductions of different signatures"),
])
def test_unsupported_is_refused_naming_the_kernel(fn, text, what):
    m, ctx, k = _first_kernel(fn, text)
    with ctx, pytest.raises(KernelLoweringError) as e:
        llvm.compile_kernel(k, None, None, "refused_kernel")
    assert "refused_kernel" in str(e.value) and what in str(e.value)
    assert "not supported" in str(e.value)


def test_non_contiguous_strides_are_refused():
    g = text_graph(BIAS_TANH)
    with g.ctx, pytest.raises(KernelLoweringError, match="only contiguous"):
        llvm.compile_kernel(g.kernels[0], [["s0", 1], [1]], None, "strided")
    # the contiguous strides written out are accepted
    with g.ctx:
        k = llvm.compile_kernel(g.kernels[0], [[768, 1], [1]], [[768, 1]], "contig")
    x, b = torch.randn(3, 768), torch.randn(768)
    out = torch.empty(3, 768)
    k(x, b, out)
    torch.testing.assert_close(out, torch.tanh(x + b) * x)


# ----------------------------------------------------------------------------- runtime

def test_runtime_loads_a_sized_kernel_from_its_llvm_text():
    """What an artifact stores (the LLVM-dialect text, the symbols) loads without the
    compiler and runs at any size; the sizes may be passed explicitly."""
    g = text_graph(SOFTMAX_768)
    k = g.compiled[0]
    spec = dict(text=kernel_text(k), name=k.name, n_args=k.n_args, vector_width=k.vector_width,
                splittable=k.splittable, work=0, symbols=k.symbols,
                symbol_sources=k.symbol_sources, arg_dims=k.arg_dims)
    (loaded,) = load_cpu_kernels([spec])
    assert isinstance(loaded, SizedCpuKernel) and loaded.symbols == ["s0"]
    # the kernel's results: the row sums [s0, 1], then the softmax [s0, 768]
    assert [symbolic.dims_of(r.type) for r in g.kernels[0].results] == [("s0", 1), ("s0", 768)]
    for n in (1, 13, 700):
        x = torch.randn(n, 768)
        s, out = torch.empty(n, 1), torch.empty(n, 768)
        loaded(x, s, out, sizes=[n])
        torch.testing.assert_close(out, torch.softmax(x, -1), rtol=2e-5, atol=2e-6)
        torch.testing.assert_close(s, (x - x.amax(-1, keepdim=True)).exp().sum(-1, keepdim=True))
    with pytest.raises(TypeError, match="takes 1 sizes"):
        loaded(x, s, out, sizes=[1, 2])
    # check=True: shapes and contiguity against the sizes, before any native code runs
    loaded(x, s, out, check=True)
    with pytest.raises(TypeError, match=r"tensor 0 is \[700, 768\].*contiguous \[701, 768\]"):
        loaded(x, s, out, sizes=[701], check=True)
    with pytest.raises(TypeError, match="tensor 0"):
        loaded(torch.randn(768, 700).t(), s, out, check=True)
    # a module whose function does not take the sizes the metadata names is refused
    with pytest.raises(Exception, match="takes"):
        load_cpu_kernels([dict(spec, symbols=["s0", "s1"])])


def test_threads_split_rows_at_runtime_sizes(monkeypatch):
    """Large calls split over threads (parts decided per call); small ones run whole."""
    g = text_graph(BIAS_TANH)
    k = g.compiled[0]
    seen = set()
    orig, orig_split = SizedCpuKernel._packed, SizedCpuKernel._run_split

    def packed(self, slot, part, nparts):
        seen.add((part, nparts))
        return orig(self, slot, part, nparts)

    def run_split(self, slot, nparts):  # (the OpenMP team numbers its parts natively)
        seen.update((p, nparts) for p in range(nparts))
        return orig_split(self, slot, nparts)
    monkeypatch.setattr(SizedCpuKernel, "_packed", packed)
    monkeypatch.setattr(SizedCpuKernel, "_run_split", run_split)
    monkeypatch.setattr("stax.runtime.cpu_kernel.cpu_parallelism", lambda: 3)
    for n in (5, 1001):
        seen.clear()
        x, b = torch.randn(n, 768), torch.randn(768)
        out = torch.empty(n, 768)
        k(x, b, out)
        torch.testing.assert_close(out, torch.tanh(x + b) * x)
        assert seen == ({(0, 1)} if n == 5 else {(0, 3), (1, 3), (2, 3)}), seen


def test_long_symbolic_rows_sum_is_blocked(compiles):
    """A float sum over a row of runtime length is blocked: about eager's accuracy on
    rows of a million values near 100 (one running sum per lane would lose ~3 digits)."""
    fn = lambda x: x.sum(-1)  # noqa: E731
    g = symbolic_graph(fn, torch.randn(3, 5))
    for m, n in [(2, 3), (3, 1023), (1, 1_000_003), (4, 100_003)]:
        x = torch.rand(m, n) + 100
        exact = x.double().sum(-1)
        err = ((g(x).double() - exact) / exact).abs().max().item()
        eager = ((x.sum(-1).double() - exact) / exact).abs().max().item()
        assert err < max(4 * eager, 1e-6), (m, n, err, eager)
    assert compiles[0] == 1


BOOL_ANY_ALL = """
func.func @f(%x: tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>, %t: tensor<f32>) -> (tensor<?xi1, #stax.sizes<["s0"]>>, tensor<?xi1, #stax.sizes<["s0"]>>) {
  %tb = "stax.broadcast_in_dim"(%t) {dims = array<i64>} : (tensor<f32>) -> tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>
  %c = "stax.cmp_gt"(%x, %tb) : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>, tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?x?xi1, #stax.sizes<["s0", "s1"]>>
  %any = "stax.reduce_max"(%c) {dims = array<i64: 1>, keepdim = false} : (tensor<?x?xi1, #stax.sizes<["s0", "s1"]>>) -> tensor<?xi1, #stax.sizes<["s0"]>>
  %all = "stax.reduce_min"(%c) {dims = array<i64: 1>, keepdim = false} : (tensor<?x?xi1, #stax.sizes<["s0", "s1"]>>) -> tensor<?xi1, #stax.sizes<["s0"]>>
  return %any, %all : tensor<?xi1, #stax.sizes<["s0"]>>, tensor<?xi1, #stax.sizes<["s0"]>>
}
"""


def test_bool_reductions_any_all(compiles):
    g = text_graph(BOOL_ANY_ALL)
    _route(g)
    fn = lambda x, t: ((x > t).any(-1), (x > t).all(-1))  # noqa: E731
    check(g, fn, lambda m, n: (torch.randn(m, n), torch.tensor(-1.5 if n % 2 else 1.5)),
          SHAPES_2D + [(3, 40), (8, 1), (4, 33)])
    assert compiles[0] == len(g.kernels)


# ----------------------------------------------------------------------------- training graphs

def _aot_graphs(fn, x, dynamic):
    """aot_autograd's forward and backward graphs of fn(x) (dim 0 dynamic or not)."""
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


def _graph_kernels(gm, ex, symbolic_import):
    ctx = new_context()
    g = import_graph(gm, ex, ctx, symbolic=symbolic_import)
    fuse.run(g.module)
    block = g.module.body.operations[0].regions[0].blocks[0]
    return g, ctx, [o.operation for o in block.operations if o.operation.name == KERNEL]


def _random_like(t):
    dt = _torch_dtype(ir.RankedTensorType(t).element_type)
    shape = list(ir.RankedTensorType(t).shape)
    if dt.is_floating_point:
        return torch.randn(shape).to(dt)
    if dt == torch.bool:
        return torch.rand(shape) > 0.5
    return torch.randint(-20, 20, shape).to(dt)


def test_training_graph_kernels_match_the_static_generator(compiles):
    """Every kernel of a Linear + gelu + layer_norm + softmax block's forward and backward
    (aot_autograd, batch dynamic): compiled once with runtime sizes, it agrees with the
    static generator's kernel for each batch size on the same random operands."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(24, 48)

    def fn(x):
        return F.layer_norm(F.gelu(lin(x)) + 1, (48,)).softmax(-1)
    dyn = _aot_graphs(fn, torch.randn(8, 24, requires_grad=True), True)
    runtime = []   # (graph, its kernels, their compiled forms), kept alive
    for gm, ex in dyn:
        g, ctx, ks = _graph_kernels(gm, ex, True)
        with ctx:
            runtime.append((g, ctx, ks, [llvm.compile_kernel(k, None, None, f"dyn{i}")
                                         for i, k in enumerate(ks)]))
    n_runtime = sum(len(r[2]) for r in runtime)
    assert compiles[0] == n_runtime >= 4
    compared = 0
    for batch in (3, 8, 37, 130):
        static = _aot_graphs(fn, torch.randn(batch, 24, requires_grad=True), False)
        assert len(static) == len(runtime)
        for (sgm, sex), (_, _, ks, cks) in zip(static, runtime):
            sg, sctx, sks = _graph_kernels(sgm, sex, False)
            assert [str(k.attributes["name"]) for k in sks] == \
                [str(k.attributes["name"]) for k in ks]
            for i, (sk, ck) in enumerate(zip(sks, cks)):
                st = lambda vs: [contiguous_strides(_shape(v)) for v in vs]  # noqa: E731
                with sctx:
                    sc = llvm.compile_kernel(sk, st(sk.operands), st(sk.results), f"st{i}")
                ins = [_random_like(v.type) for v in sk.operands]
                outs_s = [torch.empty(_shape(r), dtype=_torch_dtype(
                    ir.RankedTensorType(r.type).element_type)) for r in sk.results]
                outs_r = [torch.empty_like(o) for o in outs_s]
                sc(*ins, *outs_s)
                ck(*ins, *outs_r)
                for a, b in zip(outs_r, outs_s):
                    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5,
                                               msg=lambda m: f"batch {batch} kernel {i}: {m}")
                compared += 1
    assert compiles[0] == n_runtime  # still one compile per kernel, for all four batches
    assert compared == 4 * n_runtime


REDUCE_SIZE_ONE = """
func.func @f(%x: tensor<?x1xf32, #stax.sizes<["s0", 1]>>) -> (tensor<?x1xf32, #stax.sizes<["s0", 1]>>, tensor<?x1xf32, #stax.sizes<["s0", 1]>>) {
  %s = "stax.reduce_sum"(%x) {dims = array<i64: 1>, keepdim = true} : (tensor<?x1xf32, #stax.sizes<["s0", 1]>>) -> tensor<?x1xf32, #stax.sizes<["s0", 1]>>
  %d = "stax.sub"(%x, %s) : (tensor<?x1xf32, #stax.sizes<["s0", 1]>>, tensor<?x1xf32, #stax.sizes<["s0", 1]>>) -> tensor<?x1xf32, #stax.sizes<["s0", 1]>>
  %e = "stax.exp"(%x) : (tensor<?x1xf32, #stax.sizes<["s0", 1]>>) -> tensor<?x1xf32, #stax.sizes<["s0", 1]>>
  %t = "stax.add"(%e, %s) : (tensor<?x1xf32, #stax.sizes<["s0", 1]>>, tensor<?x1xf32, #stax.sizes<["s0", 1]>>) -> tensor<?x1xf32, #stax.sizes<["s0", 1]>>
  return %d, %t : tensor<?x1xf32, #stax.sizes<["s0", 1]>>, tensor<?x1xf32, #stax.sizes<["s0", 1]>>
}
"""


def test_reduction_over_a_size_one_dim(compiles):
    """A reduced dim of static size 1 (the row values have the domain's shape)."""
    g = text_graph(REDUCE_SIZE_ONE)
    fn = lambda x: (x - x.sum(1, keepdim=True), x.exp() + x.sum(1, keepdim=True))  # noqa: E731
    check(g, fn, lambda n: (torch.randn(n, 1),), ROWS)
    assert compiles[0] == len(g.kernels)


ARG_ROWS = """
func.func @f(%x: tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> (tensor<?xi64, #stax.sizes<["s0"]>>, tensor<?x1xi64, #stax.sizes<["s0", 1]>>, tensor<?xf32, #stax.sizes<["s0"]>>) {
  %a = "stax.argmax"(%x) {dim = 1 : i64, keepdim = false} : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?xi64, #stax.sizes<["s0"]>>
  %b = "stax.argmin"(%x) {dim = 1 : i64, keepdim = true} : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?x1xi64, #stax.sizes<["s0", 1]>>
  %m = "stax.reduce_max"(%x) {dims = array<i64: 1>, keepdim = false} : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?xf32, #stax.sizes<["s0"]>>
  return %a, %b, %m : tensor<?xi64, #stax.sizes<["s0"]>>, tensor<?x1xi64, #stax.sizes<["s0", 1]>>, tensor<?xf32, #stax.sizes<["s0"]>>
}
"""


def test_argmax_argmin_rows(compiles):
    """Greedy decoding's argmax over the vocabulary: first index on ties, NaN the max."""
    g = text_graph(ARG_ROWS)
    fn = lambda x: (x.argmax(1), x.argmin(1, keepdim=True), x.amax(1))  # noqa: E731

    def make(m, n):
        x = torch.randint(-3, 4, (m, n)).float()   # many ties
        if m > 2 and n > 3:
            x[1, n // 2] = float("nan")
        return (x,)
    check(g, fn, make, SHAPES_2D + [(3, 50257)])
    assert compiles[0] == len(g.kernels)


ARG_COLUMNS = """
func.func @f(%x: tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> (tensor<?xi64, #stax.sizes<["s1"]>>, tensor<1x?xi64, #stax.sizes<[1, "s1"]>>, tensor<?xf32, #stax.sizes<["s1"]>>) {
  %a = "stax.argmax"(%x) {dim = 0 : i64, keepdim = false} : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?xi64, #stax.sizes<["s1"]>>
  %b = "stax.argmin"(%x) {dim = 0 : i64, keepdim = true} : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<1x?xi64, #stax.sizes<[1, "s1"]>>
  %m = "stax.reduce_max"(%x) {dims = array<i64: 0>, keepdim = false} : (tensor<?x?xf32, #stax.sizes<["s0", "s1"]>>) -> tensor<?xf32, #stax.sizes<["s1"]>>
  return %a, %b, %m : tensor<?xi64, #stax.sizes<["s1"]>>, tensor<1x?xi64, #stax.sizes<[1, "s1"]>>, tensor<?xf32, #stax.sizes<["s1"]>>
}
"""


def test_argmax_argmin_columns(compiles):
    """`x.argmax(0)`: a column argmax (the kept dim last) runs its columns one lane at a
    time with the row argmax's phase; first index on ties, NaN the max. Before, the
    runtime-size generator refused it and every size compiled apart."""
    g = text_graph(ARG_COLUMNS)
    fn = lambda x: (x.argmax(0), x.argmin(0, keepdim=True), x.amax(0))  # noqa: E731

    def make(m, n):
        x = torch.randint(-3, 4, (m, n)).float()   # many ties
        if m > 3 and n > 2:
            x[m // 2, 1] = float("nan")
        return (x,)
    check(g, fn, make, SHAPES_2D + [(1000, 517), (256, 50257)])
    assert compiles[0] == len(g.kernels)


# stax-fuse leaves a gather of symbolic sizes outside kernels for now: the kernels written out
EMBED = """
func.func @f(%w: tensor<50x768xf32>, %i: tensor<?xi64, #stax.sizes<["s0"]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>> {
  %k = "stax_graph.kernel"(%w, %i) ({
  ^bb0(%a: tensor<50x768xf32>, %b: tensor<?xi64, #stax.sizes<["s0"]>>):
    %g = "stax.gather"(%a, %b) {dim = 0 : i64} : (tensor<50x768xf32>, tensor<?xi64, #stax.sizes<["s0"]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
    %e = "stax.exp"(%g) : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
    "stax_graph.yield"(%e) : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> ()
  }) {kind = "pointwise", name = "k0_embedding_exp"} : (tensor<50x768xf32>, tensor<?xi64, #stax.sizes<["s0"]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
  return %k : tensor<?x768xf32, #stax.sizes<["s0", 768]>>
}
"""

GATHER_SYMBOLIC_TABLE = """
func.func @f(%w: tensor<?x?xf32, #stax.sizes<["s1", "s2"]>>, %i: tensor<?xi32, #stax.sizes<["s0"]>>) -> tensor<?x?xf32, #stax.sizes<["s0", "s2"]>> {
  %k = "stax_graph.kernel"(%w, %i) ({
  ^bb0(%a: tensor<?x?xf32, #stax.sizes<["s1", "s2"]>>, %b: tensor<?xi32, #stax.sizes<["s0"]>>):
    %g = "stax.gather"(%a, %b) {dim = 0 : i64} : (tensor<?x?xf32, #stax.sizes<["s1", "s2"]>>, tensor<?xi32, #stax.sizes<["s0"]>>) -> tensor<?x?xf32, #stax.sizes<["s0", "s2"]>>
    "stax_graph.yield"(%g) : (tensor<?x?xf32, #stax.sizes<["s0", "s2"]>>) -> ()
  }) {kind = "pointwise", name = "k0_gather"} : (tensor<?x?xf32, #stax.sizes<["s1", "s2"]>>, tensor<?xi32, #stax.sizes<["s0"]>>) -> tensor<?x?xf32, #stax.sizes<["s0", "s2"]>>
  return %k : tensor<?x?xf32, #stax.sizes<["s0", "s2"]>>
}
"""


def test_gather_embedding_rows(compiles):
    """An embedding lookup: the table static or of runtime size; negative indices count
    from the end; the rows stay vectorized."""
    g = text_graph(EMBED, fused=True)
    _route(g)
    check(g, lambda w, i: w[i].exp(), lambda n: (torch.randn(50, 768), torch.randint(-50, 50, (n,))),
          ROWS)
    g2 = text_graph(GATHER_SYMBOLIC_TABLE, fused=True)
    _route(g2)
    check(g2, lambda w, i: w[i.long()],
          lambda n, v, d: (torch.randn(v, d), torch.randint(-v, v, (n,), dtype=torch.int32)),
          [(1, 1, 1), (7, 3, 17), (257, 1000, 64), (600, 50, 768), (3, 2, 1023), (16, 5, 16)])
    assert compiles[0] == 2


class _Block(torch.nn.Module):
    """A pre-norm transformer block (width 32, 4 heads): layer_norm, attention (its
    softmax over a symbolic key length), residuals, a tanh-gelu MLP."""

    def __init__(self, d=32):
        super().__init__()
        self.d = d
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.q, self.k, self.v = (torch.nn.Linear(d, d) for _ in range(3))
        self.proj, self.fc, self.out = (torch.nn.Linear(d, d), torch.nn.Linear(d, 4 * d),
                                        torch.nn.Linear(4 * d, d))

    def forward(self, x):
        B, L, d = x.shape
        h = self.ln1(x)
        q, k, v = (f(h).view(B, L, 4, d // 4).transpose(1, 2) for f in (self.q, self.k, self.v))
        a = (q @ k.transpose(-1, -2) * (d // 4) ** -0.5).softmax(-1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(B, L, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_transformer_block_kernels_match_the_static_generator(compiles, dtype):
    """Every runtime-size kernel of a transformer block's forward ([batch, seq, 32], both
    symbolic), compiled once, agrees with the static generator's kernel for three
    (batch, seq) on the same random operands."""
    torch.manual_seed(0)
    block = _Block().to(dtype)
    with torch.no_grad():
        gm = make_fx(block, tracing_mode="symbolic", _allow_non_fake_inputs=True)(
            torch.randn(2, 9, 32, dtype=dtype))
        g, ctx, ks = _graph_kernels(gm, None, True)
    batch_sym, seq_sym = g.inputs[0].shape[:2]
    sized = [i for i, k in enumerate(ks) if cpu_symbolic.has_runtime_sizes(k)]
    with ctx:
        compiled = {i: llvm.compile_kernel(ks[i], None, None, f"blk{i}") for i in sized}
    assert len(sized) >= 8 and compiles[0] == len(sized)
    for batch, seq in ((1, 1), (3, 17), (2, 40)):
        with torch.no_grad():
            x = torch.randn(batch, seq, 32, dtype=dtype)
            sgm = make_fx(block, tracing_mode="real")(x)
            sg, sctx, sks = _graph_kernels(sgm, [x], False)
        assert [str(k.attributes["name"]) for k in sks] == [str(k.attributes["name"]) for k in ks]
        env = {batch_sym: batch, seq_sym: seq}
        for i in sized:
            sk = sks[i]
            st = lambda vs: [contiguous_strides(_shape(v)) for v in vs]  # noqa: E731
            with sctx:
                sc = llvm.compile_kernel(sk, st(sk.operands), st(sk.results), f"st{i}")
            ins = [_random_like(v.type) for v in sk.operands]
            outs_s = [torch.empty(_shape(r), dtype=_torch_dtype(
                ir.RankedTensorType(r.type).element_type)) for r in sk.results]
            outs_r = [torch.empty_like(o) for o in outs_s]
            sc(*ins, *outs_s)
            ck = compiled[i]
            ck(*ins, *outs_r, sizes=[env[s] for s in ck.symbols])
            tol = 1e-5 if dtype == torch.float32 else 1e-2
            for a, b in zip(outs_r, outs_s):
                torch.testing.assert_close(a, b, rtol=tol, atol=tol, equal_nan=True,
                                           msg=lambda m: f"({batch}, {seq}) kernel {i}: {m}")
    assert compiles[0] == len(sized)


@pytest.mark.parametrize("fn", [lambda x: torch.softmax(x, -1), lambda x: x.sum(0),
                                lambda x: x.amax(-1), lambda x: x * 2 + 1])
def test_thread_split_of_each_kernel_kind(monkeypatch, fn):
    """Rows, columns and elements split over 3 parts at runtime sizes (parts of uneven
    length, a part shorter than the vector width) give eager's result."""
    monkeypatch.setattr("stax.runtime.cpu_kernel.cpu_parallelism", lambda: 3)
    g = symbolic_graph(fn, torch.randn(4, 6))
    check(g, fn, lambda m, n: (torch.randn(m, n),), [(1000, 101), (7, 20000), (3, 70001)])
