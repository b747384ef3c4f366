"""Triton kernels with runtime sizes (targets/triton_symbolic, runtime/triton_sized): a kernel
with `?` dims becomes a SizedTritonKernel whose variants each compile once and serve every
size they are chosen for. On the CPU the chosen variant's TTIR, grid and size arguments
(`plan()`) run in the bounds-checked TTIR interpreter at sizes 1, 17, primes (257), 1023
and 512+ rows of 768 against eager on random inputs (fp32, bf16 with its tolerance, ints
bit-exact); a few compile to PTX (no GPU needed); the guards of every specialization are
checked; what is not supported is refused naming the kernel. With CUDA, the same kernels
launch on the GPU, also at large sizes."""
import sys
import os

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from stax._mlir import ir, new_context
from stax.dialects import symbolic
from stax.dialects.stax_dialect import KERNEL, verify_module
from stax.importer import import_graph
from stax.passes import fuse
from stax.runtime.triton_sized import SizedTritonKernel, SizedVariant, specialize_signature
from stax.targets import triton as stax_triton
from stax.targets import triton_symbolic
from stax.targets.kernel_ir import contiguous_strides
from stax.targets.kernel_ir import shape as _shape
from stax.targets.triton_ttir import emit_ttir
from stax.targets.llvm import KernelLoweringError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_runtime_size_kernels import (BIAS_TANH, SOFTMAX_768, _aot_graphs,  # noqa: E402
                                       _eval_size, _graph_kernels, _random_like,
                                       _torch_dtype)
from ttir_interp import OutOfBounds, run_kernel, run_ttir  # noqa: E402

TOL = {torch.float32: (2e-5, 2e-5), torch.bfloat16: (2e-2, 2e-2)}
CUDA = torch.cuda.is_available()


class Graph:
    """A symbolic graph of kernels, each a SizedTritonKernel; run on the CPU through the
    interpreter (`device="cpu"`, the chosen variant's plan) or launched on cuda."""

    def __init__(self, module, ctx, constants=(), device="cpu"):
        self.ctx, self.module, self.device = ctx, module, device
        block = module.body.operations[0].regions[0].blocks[0]
        self.params = list(block.arguments)
        self.constants = list(constants)
        self.ops = [o.operation for o in block.operations]
        self.kernels = [o for o in self.ops if o.name == KERNEL]
        assert all(o.name in (KERNEL, "func.return") for o in self.ops), \
            [o.name for o in self.ops]
        self.compiled = []
        with ctx:
            for i, k in enumerate(self.kernels):
                if triton_symbolic.has_runtime_sizes(k):
                    self.compiled.append(triton_symbolic.compile_sized_kernel(
                        k, f"tk{i}", compile=device != "cpu"))
                else:   # a static kernel of the graph (a constant's convert)
                    st = [contiguous_strides(_shape(v)) for v in k.operands]
                    rt = [contiguous_strides(_shape(v)) for v in k.results]
                    self.compiled.append(emit_ttir(k, st, rt, f"tk{i}") if device == "cpu"
                                         else stax_triton.compile_kernel(k, st, rt, f"tk{i}"))
        self.sized = [k for k in self.compiled if isinstance(k, SizedTritonKernel)]
        self.plans = []

    def __call__(self, *args):
        args = list(args) + [c.to(self.device) for c in self.constants]
        env, values = {}, {}
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
                # poison, so an element the kernel does not write shows
                outs.append(torch.full(dims, 77, dtype=dt, device=self.device)
                            if dt != torch.bool else torch.ones(dims, dtype=dt, device=self.device))
            tensors = ins + outs
            if not isinstance(ck, SizedTritonKernel):
                run_kernel(ck, *tensors) if self.device == "cpu" else ck(*tensors)
            elif self.device == "cpu":
                p = ck.plan(*tensors)   # sizes read from the tensors (symbol_sources)
                self.plans.append(p)
                if p.grid[0]:
                    run_ttir(p.ttir.text, p.grid, tensors, ck.name, scalars=p.scalars)
            else:
                ck(*tensors)
            for r, t in zip(k.results, outs):
                values[r] = t
        res = [values[v] for v in self.ops[-1].operands]
        return res[0] if len(res) == 1 else tuple(res)


def symbolic_graph(fn, *example, device="cpu"):
    gm = make_fx(fn, tracing_mode="symbolic", _allow_non_fake_inputs=True)(*example)
    ctx = new_context()
    g = import_graph(gm, None, ctx, symbolic=True)
    fuse.run(g.module)
    verify_module(g.module)
    consts = [g.constants[s.name] for s in g.inputs if s.kind == "constant"]
    return Graph(g.module, ctx, consts, device)


def text_graph(text, device="cpu"):
    ctx = new_context()
    with ctx, ir.Location.unknown():
        m = ir.Module.parse(text)
    fuse.run(m)
    verify_module(m)
    return Graph(m, ctx, (), device)


def check(graph, fn, make, sizes, device="cpu", sum_atol=None):
    """`graph` against eager at each size. The reference is eager on the CPU, as the
    graph was traced there (a bf16 native_layer_norm's mean and rstd are bf16 on the CPU
    and f32 on CUDA). `sum_atol`: the absolute tolerance for sums over long (16k) runs,
    whose float32 rounding grows with the length."""
    for sz in sizes:
        cpu_args = make(*sz)
        args = [a.to(device) for a in cpu_args]
        want = fn(*cpu_args)
        got = graph(*args)
        want = want if isinstance(want, tuple) else (want,)
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype, (sz, g.shape, w.shape, g.dtype,
                                                               w.dtype)
            assert g.stride() == w.contiguous().stride(), sz
            g = g.cpu()
            if w.is_floating_point():
                rtol, atol = TOL[w.dtype]
                atol = max(atol, sum_atol or 0)
                torch.testing.assert_close(g, w, rtol=rtol, atol=atol, equal_nan=True,
                                           msg=lambda m: f"{sz}: {m}")
            else:
                assert torch.equal(g, w), sz


def _routes(graph):
    assert graph.sized
    for k in graph.sized:
        assert isinstance(k, SizedTritonKernel) and k.route == "triton-runtime-sizes"
        assert k.symbols


ROWS = [(1,), (17,), (257,), (512,), (1023,), (600,)]
# reductions run one row per program in the interpreter: fewer rows, 512 of 768 once
ROWS_R = [(1,), (17,), (257,), (512,), (3,), (40,)]
SHAPES_2D = [(1, 1), (17, 16), (5, 17), (257, 31), (2, 1023), (512, 768)]
# the interpreter is slow: most tests take these (the 512 x 768 case runs in a few)
SMALL_2D = [(1, 1), (17, 16), (5, 17), (257, 31), (2, 1023), (3, 48)]


# ----------------------------------------------------------------------------- pointwise

def test_bias_tanh_rows_of_768_one_variant():
    g = text_graph(BIAS_TANH)
    _routes(g)
    k = g.compiled[0]
    assert k.symbols == ["s0"] and k.div16_candidates == ()
    check(g, lambda x, b: torch.tanh(x + b) * x,
          lambda n: (torch.randn(n, 768), torch.randn(768)), ROWS_R)
    # one body for all six sizes; the grid follows the size
    assert k.emits == 1 and len({p.variant for p in g.plans}) == 1
    assert [p.grid[0] for p in g.plans] == [-(-n * 768 // 1024) for (n,) in ROWS_R]
    assert "%sym_s0: i32" in g.plans[0].ttir.text


def _gelu_mix(x, y):
    return x * torch.sigmoid(1.702 * x) + torch.where(x > y, x, 0.1 * y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_pointwise_symbolic_inner_dim(dtype):
    g = symbolic_graph(_gelu_mix, torch.randn(4, 6, dtype=dtype), torch.randn(4, 6, dtype=dtype))
    assert len(g.kernels) == 1
    _routes(g)
    shapes = SMALL_2D
    check(g, _gelu_mix, lambda m, n: (torch.randn(m, n, dtype=dtype), torch.randn(m, n, dtype=dtype)),
          shapes)
    # the inner dim's symbol is promised divisible by 16 exactly where it is
    k = g.compiled[0]
    inner = k.symbols[1]
    for (m, n), p in zip(shapes, g.plans):
        assert (inner in p.variant.div16) == (n % 16 == 0), (m, n)
    assert k.emits == 1 and len(k.variants) == 2


def test_broadcast_symbolic_and_static_dims():
    fn = lambda x, b, c: (x + b) * c - c.exp()  # noqa: E731
    g = symbolic_graph(fn, torch.randn(4, 6), torch.randn(6), torch.randn(4, 1))
    _routes(g)
    check(g, fn, lambda m, n: (torch.randn(m, n), torch.randn(n), torch.randn(m, 1)), SMALL_2D)


def test_integer_bit_exact():
    fn = lambda a, b: (torch.where(a > b, a * b + 3, a - b), torch.maximum(a, -b).abs(),  # noqa: E731
                       a.to(torch.int64) * 5)
    mk = lambda m, n: (torch.randint(-1000, 1000, (m, n), dtype=torch.int32),  # noqa: E731
                       torch.randint(-1000, 1000, (m, n), dtype=torch.int32))
    g = symbolic_graph(fn, *mk(4, 6))
    _routes(g)
    check(g, fn, mk, SMALL_2D)


def test_converts_compare_and_full():
    fn = lambda x: ((x * 3).to(torch.bfloat16), (x > 0.5), x.to(torch.int32) + 1,  # noqa: E731
                    x + torch.ones_like(x))
    g = symbolic_graph(fn, torch.randn(4, 6) * 4)
    _routes(g)
    check(g, fn, lambda m, n: (torch.randn(m, n) * 4,), SMALL_2D)


def test_reshape_3d_to_rows():
    """[s0, s1, s2] viewed as [s0*s1, s2]."""
    fn = lambda x, y: x.reshape(-1, x.shape[-1]) * 2 + y  # noqa: E731
    g = symbolic_graph(fn, torch.randn(2, 3, 5), torch.randn(6, 5))
    _routes(g)
    check(g, fn, lambda a, b, c: (torch.randn(a, b, c), torch.randn(a * b, c)),
          [(1, 1, 1), (2, 3, 17), (3, 7, 1023), (2, 20, 768), (1, 257, 5), (5, 2, 16)])


def test_transposes_delinearize_by_runtime_sizes():
    fn = lambda x, y: (x.t() + y, x.reshape(-1) * 2)  # noqa: E731
    g = symbolic_graph(fn, torch.randn(4, 6), torch.randn(6, 4))
    _routes(g)
    check(g, fn, lambda m, n: (torch.randn(m, n), torch.randn(n, m)), SMALL_2D)
    fp = lambda x: x.permute(2, 0, 1) * 3  # noqa: E731
    g3 = symbolic_graph(fp, torch.randn(2, 3, 5))
    check(g3, fp, lambda a, b, c: (torch.randn(a, b, c),), [(1, 1, 1), (2, 3, 17), (3, 257, 2)])


IOTA = """
func.func @f(%x: tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>> {
  %io = "stax.iota"() {dim = 0 : i64} : () -> tensor<?x768xi32, #stax.sizes<["s0", 768]>>
  %f = "stax.convert"(%io) : (tensor<?x768xi32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
  %two = "stax.full"() {value = 2.0 : f32} : () -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
  %m = "stax.mul"(%f, %two) : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>, tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
  %a = "stax.add"(%m, %x) : (tensor<?x768xf32, #stax.sizes<["s0", 768]>>, tensor<?x768xf32, #stax.sizes<["s0", 768]>>) -> tensor<?x768xf32, #stax.sizes<["s0", 768]>>
  return %a : tensor<?x768xf32, #stax.sizes<["s0", 768]>>
}
"""


def test_iota_and_full_of_runtime_size():
    g = text_graph(IOTA)
    _routes(g)
    check(g, lambda x: x + 2 * torch.arange(x.shape[0]).float()[:, None],
          lambda n: (torch.randn(n, 768),), [(1,), (17,), (257,), (600,)])


# ----------------------------------------------------------------------------- reductions

def _softmax_pair(x):
    e = (x - x.amax(-1, keepdim=True)).exp()
    s = e.sum(-1, keepdim=True)
    return e / s, s


def test_softmax_rows_of_768_persistent():
    g = text_graph(SOFTMAX_768)
    _routes(g)
    check(g, _softmax_pair, lambda n: (torch.randn(n, 768) * 3,), ROWS_R)
    assert {p.variant.strategy for p in g.plans} == {"persistent"}
    assert {p.variant.rblock for p in g.plans} == {1024}
    assert g.compiled[0].emits == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_softmax_symbolic_row_persistent_or_looped_at_run_time(dtype):
    fn = lambda x: torch.softmax(x, -1)  # noqa: E731
    g = symbolic_graph(fn, torch.randn(4, 6, dtype=dtype))
    assert len(g.kernels) == 1
    _routes(g)
    sizes = SMALL_2D + [(3, 5000)]
    check(g, fn, lambda m, n: (torch.randn(m, n, dtype=dtype) * 3,), sizes)
    got = [(p.variant.strategy, p.variant.rblock) for p in g.plans]
    assert got == [("persistent", 1), ("persistent", 16), ("persistent", 32),
                   ("persistent", 32), ("persistent", 1024), ("persistent", 64),
                   ("looped", 2048)]


def test_layer_norm_mean_rstd_rows_of_768():
    def fn(x, w, b):
        return torch.ops.aten.native_layer_norm(x, [768], w, b, 1e-5)
    g = symbolic_graph(fn, torch.randn(2, 3, 768), torch.randn(768), torch.randn(768))
    assert len(g.kernels) == 1
    _routes(g)
    check(g, fn, lambda a, b: (torch.randn(a, b, 768) * 2 + 1, torch.randn(768), torch.randn(768)),
          [(1, 1), (1, 17), (1, 257), (2, 64), (3, 5), (2, 7)])


W768 = torch.randn(768)


def _rms_bf16(x):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * \
        W768.to(x.device, x.dtype)


def test_rms_norm_bf16():
    g = symbolic_graph(_rms_bf16, torch.randn(2, 3, 768).bfloat16())
    _routes(g)
    check(g, _rms_bf16, lambda a, b: (torch.randn(a, b, 768).bfloat16(),),
          [(1, 1), (1, 17), (1, 257), (2, 40), (3, 13), (2, 3)])


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_sum_amax_last_dim(dtype):
    if dtype == torch.int32:
        mk = lambda a, b, c: (torch.randint(-50, 50, (a, b, c), dtype=dtype),)  # noqa: E731
        fn = lambda x: (x.sum(-1, dtype=torch.int32), x.amax(-1), x.amin(-1, keepdim=True))  # noqa: E731
    else:
        mk = lambda a, b, c: (torch.randn(a, b, c, dtype=dtype),)  # noqa: E731
        fn = lambda x: (x.sum(-1), x.amax(-1), x.amin(-1, keepdim=True))  # noqa: E731
    g = symbolic_graph(fn, *mk(2, 3, 5))
    _routes(g)
    big = (1, 40, 768)
    check(g, fn, mk, [(1, 1, 1), (2, 3, 17), (1, 257, 31), (3, 2, 1023), big, (5, 1, 16)])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_column_reductions_bias_grad(dtype):
    """The last dim kept (a bias gradient's sum over a symbolic batch): XBLOCK
    neighbouring columns per program, persistent over a short batch, looped over
    16 x 64 tiles over one of more than 256 rows."""
    fn = lambda x: (x.sum(0), x.amax(0, keepdim=True))  # noqa: E731
    g = symbolic_graph(fn, torch.randn(4, 6, dtype=dtype))
    _routes(g)
    check(g, fn, lambda m, n: (torch.randn(m, n, dtype=dtype),),
          [(1, 1), (17, 16), (257, 31), (2, 1023), (5000, 3), (600, 17), (200, 40)])
    first = g.plans[::len(g.kernels)]   # the first kernel's plan at each size
    assert [p.variant.strategy for p in first][-3:] == ["looped", "looped", "persistent"]
    assert first[-2].variant.xblock == 16   # 600 rows: looped, 16 columns a program
    assert first[-1].variant.xblock == 16   # 200 (256) rows: persistent, 16 columns


def test_column_reduction_over_two_dims_and_full_output():
    fn = lambda x: (x.sum((0, 1)), x - x.amax((0, 1), keepdim=True))  # noqa: E731
    g = symbolic_graph(fn, torch.randn(2, 3, 5))
    _routes(g)
    check(g, fn, lambda a, b, c: (torch.randn(a, b, c),),
          [(1, 1, 1), (2, 3, 17), (1, 257, 31), (3, 2, 1023), (5, 1, 16)])


def test_row_reduction_over_several_dims():
    """[a, b, c] over (1, 2) and over (0, 2) (a kept dim between reduced ones)."""
    fn = lambda x: (x.sum((1, 2)), x.amin((1, 2), keepdim=True))  # noqa: E731
    g = symbolic_graph(fn, torch.randn(2, 3, 5))
    fm = lambda x: x.amax((0, 2))  # noqa: E731
    g2 = symbolic_graph(fm, torch.randn(2, 3, 5))
    for graph, f in ((g, fn), (g2, fm)):
        _routes(graph)
        check(graph, f, lambda a, b, c: (torch.randn(a, b, c),),
              [(1, 1, 1), (2, 3, 17), (1, 257, 31), (3, 2, 1023), (5, 1, 16)])


def test_training_graph_kernels_match_the_static_generator():
    """Every kernel of a Linear + gelu + layer_norm + softmax block's forward and backward
    (aot_autograd, batch dynamic; the backward has column sums): one SizedTritonKernel
    each, interpreted, agrees with the static generator's kernel (interpreted) at a batch
    that is no multiple of 16, on the same random operands."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(24, 48)

    def fn(x):
        return F.layer_norm(F.gelu(lin(x)) + 1, (48,)).softmax(-1)
    runtime = []
    for gm, ex in _aot_graphs(fn, torch.randn(8, 24, requires_grad=True), True):
        g, ctx, ks = _graph_kernels(gm, ex, True)
        with ctx:
            runtime.append((g, ctx, ks, [triton_symbolic.compile_sized_kernel(
                k, f"dyn{i}", compile=False) for i, k in enumerate(ks)]))
    sized = [ck for r in runtime for ck in r[3]]
    assert len(sized) >= 4
    compared = 0
    for batch in (37,):
        static = _aot_graphs(fn, torch.randn(batch, 24, requires_grad=True), False)
        for (sgm, sex), (_, _, ks, cks) in zip(static, runtime):
            sg, sctx, sks = _graph_kernels(sgm, sex, False)
            assert len(sks) == len(ks)
            for i, (sk, ck) in enumerate(zip(sks, cks)):
                with sctx:
                    tk = emit_ttir(sk, [contiguous_strides(_shape(v)) for v in sk.operands],
                                   [contiguous_strides(_shape(v)) for v in sk.results], f"st{i}")
                ins = [_random_like(v.type) for v in sk.operands]
                outs_s = [torch.full(_shape(r), 77, dtype=_torch_dtype(
                    ir.RankedTensorType(r.type).element_type)) for r in sk.results]
                outs_r = [torch.full_like(o, 33) for o in outs_s]
                run_kernel(tk, *ins, *outs_s)
                p = ck.plan(*ins, *outs_r)
                run_ttir(p.ttir.text, p.grid, ins + outs_r, ck.name, scalars=p.scalars)
                for a, b in zip(outs_r, outs_s):
                    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5,
                                               msg=lambda m: f"batch {batch} kernel {i}: {m}")
                compared += 1
    assert compared == len(sized)


# ----------------------------------------------------------------------------- guards

def test_divisibility_variant_only_for_multiples_of_16():
    """The launcher promises `tt.divisibility = 16` on a size argument only when the call's
    value is a multiple of 16; the promise sits in the signature only then; running the
    divisible variant with a size that is not is caught (the interpreter checks it)."""
    fn = lambda x: torch.softmax(x, -1)  # noqa: E731
    g = symbolic_graph(fn, torch.randn(4, 6))
    k = g.compiled[0]
    inner = k.symbols[1]
    assert k.div16_candidates == (inner,)
    for n in range(1, 70):
        x, out = torch.randn(3, n), torch.empty(3, n)
        p = k.plan(x, out)
        promised = f"%sym_{inner}: i32 {{tt.divisibility = 16 : i32}}" in p.ttir.text
        assert (inner in p.variant.div16) == promised == (n % 16 == 0), n
    x, out = torch.randn(3, 32), torch.empty(3, 32)
    p32 = k.plan(x, out)
    x, out = torch.randn(3, 17), torch.empty(3, 17)
    with pytest.raises(OutOfBounds, match="divisible by 16"):
        run_ttir(p32.ttir.text, (3, 1, 1), [x, out], scalars=(3, 17))


def test_i64_variant_for_large_element_counts():
    g = text_graph(BIAS_TANH)
    k = g.compiled[0]
    x, b, out = torch.randn(2, 768), torch.randn(768), torch.empty(2, 768)
    small, _ = k.choose([x, b, out], [2])
    big, grid = k.choose([x, b, out], [3_000_000])     # 2.3e9 elements
    assert small.index == "i32" and big.index == "i64"
    assert grid[0] == -(-3_000_000 * 768 // 1024)
    text = k.variant_ttir(big).text
    assert "%sym_s0: i64" in text and "tensor<1024xi64>" in text


def _run_variant(k, var, tensors, sizes):
    """Run one (forced) variant of k through the interpreter, with its grid rule."""
    text = k.variant_ttir(var).text
    _, grid = k.choose(tensors, sizes)
    rows = -(-k.shapes_for(sizes)[0][0] // var.xblock) if k.kind == "reduction" else grid[0]
    run_ttir(text, (rows, 1, 1), tensors, k.name, scalars=sizes)


def test_every_body_is_right_when_forced():
    """Looped with a small RBLOCK (many trips, a partial last one), persistent with
    several rows per program, and i64 index math, each at sizes that are not multiples of
    the block; and a persistent variant too narrow for the row stays in bounds (masked:
    wrong, never outside the tensors), which is why the launcher never picks it."""
    fn = lambda x: torch.softmax(x, -1)  # noqa: E731
    g = symbolic_graph(fn, torch.randn(4, 6))
    k = g.compiled[0]
    for var in (SizedVariant("i32", (), (True, True), "looped", 2, 16, 2),
                SizedVariant("i32", (), (True, True), "persistent", 4, 512, 4),
                SizedVariant("i64", (), (False, False), "persistent", 1, 512, 4)):
        for m, n in ((3, 257), (5, 17), (1, 1)):
            x, out = torch.randn(m, n) * 3, torch.full((m, n), 77.0)
            _run_variant(k, var, [x, out], [m, n])
            torch.testing.assert_close(out, fn(x), rtol=2e-5, atol=2e-5)
    narrow = SizedVariant("i32", (), (True, True), "persistent", 1, 16, 2)
    x, out = torch.randn(3, 257), torch.full((3, 257), 77.0)
    _run_variant(k, narrow, [x, out], [3, 257])   # no OutOfBounds
    assert not torch.allclose(out, fn(x))
    gb = text_graph(BIAS_TANH)
    kb = gb.compiled[0]
    x, b, out = torch.randn(17, 768), torch.randn(768), torch.empty(17, 768)
    _run_variant(kb, SizedVariant("i64", (), (False,) * 3), [x, b, out], [17])
    torch.testing.assert_close(out, torch.tanh(x + b) * x)


def test_shape_check_names_the_tensor():
    g = text_graph(BIAS_TANH)
    k = g.compiled[0]
    with pytest.raises(TypeError, match="tensor 2 is"):
        k.plan(torch.randn(5, 768), torch.randn(768), torch.empty(4, 768), sizes=[5])
    with pytest.raises(TypeError, match="contiguous"):
        k.plan(torch.randn(768, 5).t(), torch.randn(768), torch.empty(5, 768))


def test_specialize_signature_only_changes_the_signature():
    text = ("  tt.func public @k(%in0: !tt.ptr<f32>, %out0: !tt.ptr<bf16>, %sym_s0: i32, "
            "%sym_s1: i32) attributes {noinline = false} {\n    %in9 = tt.load %in0\n")
    got = specialize_signature(text, (True, False), ("s1",))
    assert got.split("\n")[0] == (
        "  tt.func public @k(%in0: !tt.ptr<f32> {tt.divisibility = 16 : i32}, "
        "%out0: !tt.ptr<bf16>, %sym_s0: i32, %sym_s1: i32 {tt.divisibility = 16 : i32}) "
        "attributes {noinline = false} {")
    assert got.split("\n")[1:] == text.split("\n")[1:]


# ----------------------------------------------------------------------------- refused

# concat is supported since (test_triton_sized_concat takes this kernel)
CONCAT_SYMBOLIC = """
func.func @f(%x: tensor<?x4xf32, #stax.sizes<["s0", 4]>>, %y: tensor<?x4xf32, #stax.sizes<["2*s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["2*s0", 4]>> {
  %c = "stax.concat"(%x, %x) {dim = 0 : i64} : (tensor<?x4xf32, #stax.sizes<["s0", 4]>>, tensor<?x4xf32, #stax.sizes<["s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["2*s0", 4]>>
  %a = "stax.add"(%c, %y) : (tensor<?x4xf32, #stax.sizes<["2*s0", 4]>>, tensor<?x4xf32, #stax.sizes<["2*s0", 4]>>) -> tensor<?x4xf32, #stax.sizes<["2*s0", 4]>>
  return %a : tensor<?x4xf32, #stax.sizes<["2*s0", 4]>>
}
"""

TWO_SIGNATURES = """
func.func @f(%x: tensor<?x8xf32, #stax.sizes<["s0", 8]>>) -> (tensor<?xf32, #stax.sizes<["s0"]>>, tensor<8xf32>) {
  %r:2 = "stax_graph.kernel"(%x) ({
  ^bb0(%a: tensor<?x8xf32, #stax.sizes<["s0", 8]>>):
    %0 = "stax.reduce_sum"(%a) {dims = array<i64: 1>, keepdim = false} : (tensor<?x8xf32, #stax.sizes<["s0", 8]>>) -> tensor<?xf32, #stax.sizes<["s0"]>>
    %1 = "stax.reduce_sum"(%a) {dims = array<i64: 0>, keepdim = false} : (tensor<?x8xf32, #stax.sizes<["s0", 8]>>) -> tensor<8xf32>
    "stax_graph.yield"(%0, %1) : (tensor<?xf32, #stax.sizes<["s0"]>>, tensor<8xf32>) -> ()
  }) {kind = "reduction", name = "k"} : (tensor<?x8xf32, #stax.sizes<["s0", 8]>>) -> (tensor<?xf32, #stax.sizes<["s0"]>>, tensor<8xf32>)
  return %r#0, %r#1 : tensor<?xf32, #stax.sizes<["s0"]>>, tensor<8xf32>
}
"""


def test_unsupported_is_refused_naming_the_kernel():
    """A kernel stax-fuse would not build (two reduction signatures) is refused, naming
    the kernel and what to do, not miscompiled."""
    ctx = new_context()
    with ctx, ir.Location.unknown():
        m = ir.Module.parse(TWO_SIGNATURES)
    block = m.body.operations[0].regions[0].blocks[0]
    k = next(o.operation for o in block.operations if o.operation.name == KERNEL)
    with ctx, pytest.raises(KernelLoweringError) as e:
        stax_triton.compile_kernel(k, None, None, "refused_kernel")
    msg = str(e.value)
    assert "refused_kernel" in msg and "reductions of different signatures" in msg
    assert "per size" in msg


def _argmax_last(x):
    return x.argmax(-1)


def _argmin_keepdim_and_max(x):
    return x.argmin(-1, keepdim=True), x.amax(-1)


def _greedy_next_token(x):
    return torch.softmax(x, -1).argmax(-1)


def _argmax_columns(x):
    return x.argmax(0)


def _ties(*shape):
    return (torch.randint(0, 3, shape).float(),)


def _nans(*shape):
    x = torch.randn(*shape)
    x[..., shape[-1] // 2] = float("nan")
    x[..., 0] = float("nan")
    return (x,)


@pytest.mark.parametrize("fn", [_argmax_last, _argmin_keepdim_and_max, _greedy_next_token])
def test_argmax_argmin_rows(fn):
    """argmax/argmin over the last dim with runtime sizes (greedy decoding's next token):
    the first index of the extreme wins ties, NaN is the maximum and the minimum (eager's
    rule), persistent rows and looped long ones (a vocabulary of 20000)."""
    g = symbolic_graph(fn, torch.randn(3, 5, 7))
    _routes(g)
    check(g, fn, lambda a, b, c: (torch.randn(a, b, c),),
          [(1, 1, 1), (2, 3, 17), (1, 17, 31), (2, 2, 1023), (1, 3, 768), (5, 1, 16)])
    check(g, fn, _ties, [(2, 3, 17), (1, 2, 1023)])
    check(g, fn, _nans, [(2, 3, 17), (1, 2, 513)])
    if fn is _argmax_last:
        check(g, fn, lambda a, b, c: (torch.randn(a, b, c),), [(1, 2, 20000)])
        assert any(p.ttir.kind == "reduction-looped" for p in g.plans)


def test_argmax_columns():
    g = symbolic_graph(_argmax_columns, torch.randn(3, 7))
    _routes(g)
    check(g, _argmax_columns, lambda a, b: (torch.randn(a, b),), [(1, 5), (17, 5), (300, 3),
                                                                   (2, 9)])
    check(g, _argmax_columns, _ties, [(33, 4), (257, 2)])


# ----------------------------------------------------------------------------- PTX

def test_compiles_to_ptx_once_per_variant(tmp_path, monkeypatch):
    """No GPU needed: each variant is one triton.compile, for every size it serves."""
    pytest.importorskip("triton")
    monkeypatch.setenv("STAX_CACHE_DIR", str(tmp_path))
    stax_triton.clear_memory_cache()
    misses = stax_triton.STATS["misses"]
    ctx = new_context()
    with ctx, ir.Location.unknown():
        m = ir.Module.parse(SOFTMAX_768)
    fuse.run(m)
    block = m.body.operations[0].regions[0].blocks[0]
    kop = next(o.operation for o in block.operations if o.operation.name == KERNEL)
    with ctx:
        k = stax_triton.compile_kernel(kop, None, None, "sm768")   # the dispatch
    assert isinstance(k, SizedTritonKernel)
    for n in (1, 17, 257, 1023, 600):
        x, out, s = torch.randn(n, 768), torch.empty(n, 768), torch.empty(n, 1)
        var, _ = k.choose([x, out, s], [n])
        ck = k.compiled_for(var)
    assert k.compiles == 1 and stax_triton.STATS["misses"] == misses + 1
    ptx = ck.asm["ptx"]
    assert ".visible .entry sm768" in ptx and "ld.global" in ptx
    # the sizes are kernel arguments: one pointer per tensor, then the i32 size
    assert [str(t) for t in ck.src.signature.values()] == ["*f32", "*f32", "*f32", "i32"]
    # a pointwise kernel with a symbolic inner dim: once for the sizes not divisible by
    # 16, once for those that are (16-byte loads there)
    fn = lambda x, y: x * torch.sigmoid(x) + y  # noqa: E731
    gm = make_fx(fn, tracing_mode="symbolic")(torch.randn(4, 6), torch.randn(4, 6))
    ctx2 = new_context()
    ig = import_graph(gm, None, ctx2, symbolic=True)
    fuse.run(ig.module)
    block = ig.module.body.operations[0].regions[0].blocks[0]
    kop = next(o.operation for o in block.operations if o.operation.name == KERNEL)
    with ctx2:
        kp = stax_triton.compile_kernel(kop, None, None, "pw")
    ptx = {}
    for m, n in ((1, 1), (17, 17), (257, 31), (2, 1023), (4, 48), (512, 768)):
        t = [torch.randn(m, n) for _ in range(3)]
        var, _ = kp.choose(t, [m, n])
        ptx[bool(var.div16)] = kp.compiled_for(var).asm["ptx"]
    assert kp.compiles == 2
    assert "ld.global.v4" in ptx[True] and "ld.global.v4" not in ptx[False]


# ----------------------------------------------------------------------------- GPU

gpu = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")


@gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_softmax_and_layer_norm_at_many_sizes(dtype):
    fn = lambda x: torch.softmax(x, -1)  # noqa: E731
    g = symbolic_graph(fn, torch.randn(4, 6, dtype=dtype), device="cuda")
    check(g, fn, lambda m, n: (torch.randn(m, n, dtype=dtype) * 3,),
          SHAPES_2D + [(64, 50257), (4096, 3072), (3, 5000)], device="cuda")

    def ln(x, w, b):
        return torch.ops.aten.native_layer_norm(x, [768], w, b, 1e-5)
    g = symbolic_graph(ln, torch.randn(2, 3, 768, dtype=dtype), torch.randn(768, dtype=dtype),
                       torch.randn(768, dtype=dtype), device="cuda")
    check(g, ln, lambda a, b: (torch.randn(a, b, 768, dtype=dtype), torch.randn(768, dtype=dtype),
                               torch.randn(768, dtype=dtype)),
          [(1, 1), (1, 17), (1, 257), (4, 128), (8, 1024), (16, 512)], device="cuda")


@gpu
def test_gpu_pointwise_at_many_sizes():
    g = symbolic_graph(_gelu_mix, torch.randn(4, 6), torch.randn(4, 6), device="cuda")
    check(g, _gelu_mix, lambda m, n: (torch.randn(m, n), torch.randn(m, n)),
          SHAPES_2D + [(4096, 3072)], device="cuda")
    fn = lambda x, y: (x.t() + y, x.reshape(-1) * 2)  # noqa: E731
    g = symbolic_graph(fn, torch.randn(4, 6), torch.randn(6, 4), device="cuda")
    check(g, fn, lambda m, n: (torch.randn(m, n), torch.randn(n, m)),
          SHAPES_2D + [(4096, 3072)], device="cuda")
    fi = lambda a, b: torch.where(a > b, a * b + 3, a - b)  # noqa: E731
    mk = lambda m, n: (torch.randint(-1000, 1000, (m, n), dtype=torch.int32),  # noqa: E731
                       torch.randint(-1000, 1000, (m, n), dtype=torch.int32))
    g = symbolic_graph(fi, *mk(4, 6), device="cuda")
    check(g, fi, mk, SHAPES_2D, device="cuda")


@gpu
def test_gpu_sum_amax_columns_rms_norm():
    fn = lambda x: (x.sum(-1), x.amax(-1), x.amin(-1, keepdim=True))  # noqa: E731
    g = symbolic_graph(fn, torch.randn(2, 3, 5), device="cuda")
    check(g, fn, lambda a, b, c: (torch.randn(a, b, c),),
          [(1, 1, 1), (2, 3, 17), (1, 257, 31), (3, 2, 1023), (2, 256, 768), (1, 64, 50257)],
          device="cuda")
    fc = lambda x: (x.sum(0), x.amax(0, keepdim=True))  # noqa: E731
    g = symbolic_graph(fc, torch.randn(4, 6), device="cuda")
    check(g, fc, lambda m, n: (torch.randn(m, n),),
          [(1, 1), (17, 16), (257, 31), (2, 1023), (16384, 768), (4096, 3072)], device="cuda",
          sum_atol=1e-3)   # sums of 16384 randn: |sum| ~ 128, f32 rounding ~ 1e-4
    g = symbolic_graph(_rms_bf16, torch.randn(2, 3, 768).bfloat16(), device="cuda")
    check(g, _rms_bf16, lambda a, b: (torch.randn(a, b, 768).bfloat16(),),
          [(1, 1), (1, 17), (1, 257), (4, 128), (16, 1024)], device="cuda")


# ----------------------------------------------------------------------------- prefetch

def _done(value=None, error=None):
    import concurrent.futures
    f = concurrent.futures.Future()
    f.set_exception(error) if error is not None else f.set_result(value)
    return f


def test_prefetch_starts_the_variant_a_call_at_those_sizes_chooses():
    """A graph compiled once for every size starts compiling each kernel's variant for
    its example sizes before the first call (dynamic_kernels.finish_compiles): the
    variant prefetched is the one that call plans, its compile is used, not repeated."""
    g = symbolic_graph(lambda x: torch.softmax(x, -1), torch.randn(4, 6))
    k = g.sized[0]
    x = torch.randn(300, 700)
    out = torch.empty_like(x)
    sizes = k.sizes_of([x, out])
    submitted = []

    def submit(tk):
        submitted.append(tk)
        return _done(("compiled", tk.text))
    var = k.prefetch(sizes, submit)
    assert var is not None and (var.strategy, var.rblock) == ("persistent", 1024)
    assert k.prefetch(sizes, submit) is None and len(submitted) == 1   # once per variant
    p = k.plan(x, out)
    assert p.variant == var and p.ttir.text == submitted[0].text
    assert k.compiled_for(var) == ("compiled", submitted[0].text)
    assert (k.prefetched, k.compiles) == (1, 1)
    # another size's variant is not prefetched: compiled at its first launch, as before
    wide = torch.randn(3, 5000)
    other = k.plan(wide, torch.empty_like(wide)).variant
    assert other != var and other.strategy == "looped"


def test_a_prefetched_compile_that_fails_raises_when_waited_for():
    g = symbolic_graph(lambda x: torch.softmax(x, -1), torch.randn(4, 6))
    k = g.sized[0]
    k.prefetch([8, 48] if len(k.symbols) == 2 else [8 * 48],
               lambda tk: _done(error=KernelLoweringError("ptxas failed")))
    with pytest.raises(KernelLoweringError, match="ptxas failed"):
        k.wait_prefetched()
