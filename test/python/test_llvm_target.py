"""The CPU target on hand-written kernels: every op kind, against torch on random data."""
import pytest
import torch

from kernel_harness import run_kernel, ttype

torch.manual_seed(0)

F32 = torch.float32
UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "exp2": torch.exp2,
    "expm1": torch.expm1, "log": lambda x: torch.log(x.abs() + 0.1),
    "log2": lambda x: torch.log2(x.abs() + 0.1), "log1p": lambda x: torch.log1p(x.abs()),
    "sqrt": lambda x: torch.sqrt(x.abs()), "rsqrt": lambda x: torch.rsqrt(x.abs() + 0.1),
    "sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
    "erf": torch.erf, "reciprocal": lambda x: torch.reciprocal(x + 10), "floor": torch.floor,
    "ceil": torch.ceil, "round": torch.round, "trunc": torch.trunc, "sign": torch.sign,
}
# ops whose input must be pre-transformed to stay in the domain
PRE = {"log": lambda x: x.abs() + 0.1, "log2": lambda x: x.abs() + 0.1, "log1p": torch.abs,
       "sqrt": torch.abs, "rsqrt": lambda x: x.abs() + 0.1, "reciprocal": lambda x: x + 10}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("shape", [(3, 37), (64,)])
def test_unary(name, shape):
    x = torch.randn(*shape) * 3
    xin = PRE.get(name, lambda t: t)(x)
    T = ttype(shape, F32)
    body = f'    %r = "stax.{name}"(%a0) : ({T}) -> {T}\n    "stax_graph.yield"(%r) : ({T}) -> ()'
    (out,), k = run_kernel(body, [xin], [(shape, F32)])
    want = {"log": torch.log, "log2": torch.log2, "log1p": torch.log1p, "sqrt": torch.sqrt,
            "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal}.get(name, UNARY[name])(xin)
    torch.testing.assert_close(out, want, rtol=2e-6, atol=2e-6)


BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
          "maximum": torch.maximum, "minimum": torch.minimum, "remainder": torch.remainder,
          "atan2": torch.atan2, "pow": lambda a, b: torch.pow(a.abs() + 0.5, b)}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_with_broadcast_and_transposed_input(name):
    a = torch.randn(40, 24)
    b = torch.randn(24, 40).t()  # strided input: a gather per vector
    c = torch.randn(24)
    if name == "pow":
        a = a.abs() + 0.5
    if name == "remainder":
        b = b + 3 * b.sign()
    T = ttype((40, 24), F32)
    C = ttype((24,), F32)
    body = f'''    %cb = "stax.broadcast_in_dim"(%a2) {{dims = array<i64: 1>}} : ({C}) -> {T}
    %bb = "stax.add"(%a1, %cb) : ({T}, {T}) -> {T}
    %r = "stax.{name}"(%a0, %bb) : ({T}, {T}) -> {T}
    "stax_graph.yield"(%r) : ({T}) -> ()'''
    (out,), k = run_kernel(body, [a, b, c], [((40, 24), F32)])
    want = (torch.pow(a, b + c) if name == "pow" else BINARY[name](a, b + c))
    torch.testing.assert_close(out, want, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.int8])
def test_integer_ops_bit_exact(dtype):
    lo, hi = (0, 200) if dtype == torch.uint8 else (-100, 100)
    a = torch.randint(lo, hi, (7, 33), dtype=dtype)
    b = torch.randint(1, 50, (7, 33), dtype=dtype)
    T = ttype((7, 33), dtype)
    B = ttype((7, 33), torch.bool)
    body = f'''    %s = "stax.add"(%a0, %a1) : ({T}, {T}) -> {T}
    %m = "stax.maximum"(%s, %a1) : ({T}, {T}) -> {T}
    %r = "stax.remainder"(%m, %a1) : ({T}, {T}) -> {T}
    %c = "stax.cmp_lt"(%a0, %a1) : ({T}, {T}) -> {B}
    "stax_graph.yield"(%m, %r, %c) : ({T}, {T}, {B}) -> ()'''
    (m, r, c), k = run_kernel(body, [a, b], [((7, 33), dtype), ((7, 33), dtype), ((7, 33), torch.bool)])
    s = a + b
    assert torch.equal(m, torch.maximum(s, b))
    assert torch.equal(r, torch.remainder(torch.maximum(s, b), b))
    assert torch.equal(c, a < b)


def test_bf16_computes_in_f32_rounds_once():
    x = torch.randn(16, 100, dtype=torch.bfloat16)
    T = ttype((16, 100), torch.bfloat16)
    body = f'''    %e = "stax.exp"(%a0) : ({T}) -> {T}
    %m = "stax.mul"(%e, %a0) : ({T}, {T}) -> {T}
    "stax_graph.yield"(%m) : ({T}) -> ()'''
    (out,), k = run_kernel(body, [x], [((16, 100), torch.bfloat16)])
    want = (x.float().exp() * x.float()).bfloat16()
    torch.testing.assert_close(out, want, rtol=0, atol=0)


@pytest.mark.parametrize("src,dst", [(torch.float32, torch.bfloat16), (torch.float32, torch.int64),
                                     (torch.int32, torch.float32), (torch.float32, torch.bool),
                                     (torch.bool, torch.float32), (torch.uint8, torch.int64),
                                     (torch.float32, torch.float16), (torch.int64, torch.int8)])
def test_convert_matches_torch_cast(src, dst):
    x = (torch.randn(5, 50) * 100)
    if src == torch.bool:
        x = x > 0
    else:
        x = x.to(src) if not src.is_floating_point else x.to(src)
    if src == torch.uint8:
        x = torch.randint(0, 255, (5, 50), dtype=torch.uint8)
    S, D = ttype((5, 50), src), ttype((5, 50), dst)
    body = f'    %r = "stax.convert"(%a0) : ({S}) -> {D}\n    "stax_graph.yield"(%r) : ({D}) -> ()'
    (out,), k = run_kernel(body, [x], [((5, 50), dst)])
    assert torch.equal(out, x.to(dst))


def _prod(x, dims):
    for d in sorted(dims, reverse=True):
        x = x.prod(d)
    return x


@pytest.mark.parametrize("kind,fn", [("reduce_sum", lambda x, d: x.sum(d)),
                                     ("reduce_max", lambda x, d: x.amax(d)),
                                     ("reduce_min", lambda x, d: x.amin(d)),
                                     ("reduce_prod", lambda x, d: _prod(x, d))])
@pytest.mark.parametrize("dims", [[2], [1], [0, 2], [0, 1, 2]])
def test_reductions_any_dims(kind, fn, dims):
    x = torch.rand(6, 20, 35) + 0.5
    out_shape = tuple(s for i, s in enumerate(x.shape) if i not in dims)
    X, R = ttype(x.shape, F32), ttype(out_shape, F32)
    dl = ", ".join(map(str, dims))
    body = (f'    %r = "stax.{kind}"(%a0) {{dims = array<i64: {dl}>, keepdim = false}} : ({X}) -> {R}\n'
            f'    "stax_graph.yield"(%r) : ({R}) -> ()')
    (out,), k = run_kernel(body, [x], [(out_shape, F32)])
    rt = 1e-4 if kind == "reduce_prod" else 2e-5
    torch.testing.assert_close(out, fn(x, dims), rtol=rt, atol=1e-5)


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_arg_reductions_first_index_on_ties(kind):
    x = torch.randint(0, 4, (9, 31)).float()
    X, R = ttype(x.shape, F32), ttype((9,), torch.int64)
    body = (f'    %r = "stax.{kind}"(%a0) {{dim = 1 : i64, keepdim = false}} : ({X}) -> {R}\n'
            f'    "stax_graph.yield"(%r) : ({R}) -> ()')
    (out,), k = run_kernel(body, [x], [((9,), torch.int64)])
    assert torch.equal(out, getattr(torch, kind)(x, 1))


def test_layernorm_one_kernel_row_values_and_outputs():
    x = torch.randn(33, 70)
    w = torch.randn(70)
    b = torch.randn(70)
    S, R, V = ttype((33, 70), F32), ttype((33, 1), F32), ttype((70,), F32)
    body = f'''    %s = "stax.reduce_sum"(%a0) {{dims = array<i64: 1>, keepdim = true}} : ({S}) -> {R}
    %n = "stax.full"() {{value = 70.0 : f32}} : () -> {R}
    %mean = "stax.div"(%s, %n) : ({R}, {R}) -> {R}
    %mb = "stax.broadcast_in_dim"(%mean) {{dims = array<i64: 0, 1>}} : ({R}) -> {S}
    %xc = "stax.sub"(%a0, %mb) : ({S}, {S}) -> {S}
    %sq = "stax.mul"(%xc, %xc) : ({S}, {S}) -> {S}
    %vs = "stax.reduce_sum"(%sq) {{dims = array<i64: 1>, keepdim = true}} : ({S}) -> {R}
    %var = "stax.div"(%vs, %n) : ({R}, {R}) -> {R}
    %eps = "stax.full"() {{value = 1.0e-5 : f32}} : () -> {R}
    %ve = "stax.add"(%var, %eps) : ({R}, {R}) -> {R}
    %rstd = "stax.rsqrt"(%ve) : ({R}) -> {R}
    %rb = "stax.broadcast_in_dim"(%rstd) {{dims = array<i64: 0, 1>}} : ({R}) -> {S}
    %y = "stax.mul"(%xc, %rb) : ({S}, {S}) -> {S}
    %wb = "stax.broadcast_in_dim"(%a1) {{dims = array<i64: 1>}} : ({V}) -> {S}
    %bb = "stax.broadcast_in_dim"(%a2) {{dims = array<i64: 1>}} : ({V}) -> {S}
    %yw = "stax.mul"(%y, %wb) : ({S}, {S}) -> {S}
    %o = "stax.add"(%yw, %bb) : ({S}, {S}) -> {S}
    "stax_graph.yield"(%o, %mean, %rstd) : ({S}, {R}, {R}) -> ()'''
    (o, mean, rstd), k = run_kernel(body, [x, w, b], [((33, 70), F32), ((33, 1), F32), ((33, 1), F32)])
    want, m2, r2 = torch.ops.aten.native_layer_norm(x, [70], w, b, 1e-5)
    torch.testing.assert_close(o, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(mean, m2)
    torch.testing.assert_close(rstd, r2, rtol=1e-5, atol=1e-5)
    assert k.vector_width == 16


def test_views_reshape_permute_slice_concat_pad_iota():
    x = torch.randn(4, 6, 8)
    y = torch.randn(4, 3, 8)
    X, Y = ttype((4, 6, 8), F32), ttype((4, 3, 8), F32)
    P = ttype((8, 4, 6), F32)
    body = f'''    %p = "stax.permute"(%a0) {{perm = array<i64: 2, 0, 1>}} : ({X}) -> {P}
    %r = "stax.reshape"(%p) : ({P}) -> tensor<32x6xf32>
    %s = "stax.slice"(%a0) {{start = array<i64: 0, 1, 0>, limit = array<i64: 4, 6, 8>, step = array<i64: 1, 2, 1>}} : ({X}) -> {Y}
    %c = "stax.concat"(%s, %a1) {{dim = 1 : i64}} : ({Y}, {Y}) -> tensor<4x6x8xf32>
    %pd = "stax.pad"(%a1) {{low = array<i64: 0, 1, 2>, high = array<i64: 0, 2, 0>, value = 7.0 : f32}} : ({Y}) -> tensor<4x6x10xf32>
    %io = "stax.iota"() {{dim = 2 : i64}} : () -> tensor<4x6x10xi64>
    "stax_graph.yield"(%r, %c, %pd, %io) : (tensor<32x6xf32>, tensor<4x6x8xf32>, tensor<4x6x10xf32>, tensor<4x6x10xi64>) -> ()'''
    (r, c, pd, io), k = run_kernel(body, [x, y], [((32, 6), F32), ((4, 6, 8), F32), ((4, 6, 10), F32),
                                                  ((4, 6, 10), torch.int64)])
    assert torch.equal(r, x.permute(2, 0, 1).reshape(32, 6))
    assert torch.equal(c, torch.cat([x[:, 1::2], y], 1))
    assert torch.equal(pd, torch.nn.functional.pad(y, (2, 0, 1, 2), value=7.0))
    assert torch.equal(io, torch.arange(10).expand(4, 6, 10))


def test_strided_output_matches_requested_layout():
    x = torch.randn(16, 48)
    T = ttype((16, 48), F32)
    body = f'    %r = "stax.tanh"(%a0) : ({T}) -> {T}\n    "stax_graph.yield"(%r) : ({T}) -> ()'
    from stax._mlir import ir, new_context
    from stax.targets.llvm import compile_kernel
    import kernel_harness as kh
    out = torch.empty(48, 16).t()  # column-major output
    (tmp,), k = run_kernel(body, [x], [((16, 48), F32)])
    text = None  # recompile for the transposed output
    ctx = new_context()
    with ctx, ir.Location.unknown():
        m = ir.Module.parse(
            f'func.func @main(%x0: {T}) {{\n  %r = "stax_graph.kernel"(%x0) ({{\n  ^bb0(%a0: {T}):\n{body}\n'
            f'  }}) : ({T}) -> {T}\n  return\n}}\n')
        kop = [o for o in m.body.operations[0].regions[0].blocks[0].operations
               if o.operation.name == "stax_graph.kernel"][0]
        k2 = compile_kernel(kop.operation, [x.stride()], [out.stride()], "k2")
        k2(x, out)
    torch.testing.assert_close(out, torch.tanh(x), rtol=2e-6, atol=2e-6)


def test_column_reduction_over_batch_dim_with_full_output():
    # Reduced dim precedes the kept (contiguous) dim: emitted in column mode.
    x = torch.randn(37, 50)
    S, R = ttype((37, 50), F32), ttype((1, 50), F32)
    body = f'''    %s = "stax.reduce_sum"(%a0) {{dims = array<i64: 0>, keepdim = true}} : ({S}) -> {R}
    %n = "stax.full"() {{value = 37.0 : f32}} : () -> {R}
    %m = "stax.div"(%s, %n) : ({R}, {R}) -> {R}
    %mb = "stax.broadcast_in_dim"(%m) {{dims = array<i64: 0, 1>}} : ({R}) -> {S}
    %c = "stax.sub"(%a0, %mb) : ({S}, {S}) -> {S}
    %mx = "stax.reduce_max"(%c) {{dims = array<i64: 0>, keepdim = true}} : ({S}) -> {R}
    "stax_graph.yield"(%c, %m, %mx) : ({S}, {R}, {R}) -> ()'''
    (c, m, mx), k = run_kernel(body, [x], [((37, 50), F32), ((1, 50), F32), ((1, 50), F32)])
    mean = x.mean(0, keepdim=True)
    torch.testing.assert_close(m, mean)
    torch.testing.assert_close(c, x - mean)
    torch.testing.assert_close(mx, (x - mean).amax(0, keepdim=True))
    assert "vector.load" in k.mlir and k.vector_width == 16


def test_softmax_one_kernel_exp_computed_once_per_element():
    x = torch.randn(8, 100) * 4
    S, R = ttype((8, 100), F32), ttype((8, 1), F32)
    body = f'''    %m = "stax.reduce_max"(%a0) {{dims = array<i64: 1>, keepdim = true}} : ({S}) -> {R}
    %mb = "stax.broadcast_in_dim"(%m) {{dims = array<i64: 0, 1>}} : ({R}) -> {S}
    %d = "stax.sub"(%a0, %mb) : ({S}, {S}) -> {S}
    %e = "stax.exp"(%d) : ({S}) -> {S}
    %s = "stax.reduce_sum"(%e) {{dims = array<i64: 1>, keepdim = true}} : ({S}) -> {R}
    %sb = "stax.broadcast_in_dim"(%s) {{dims = array<i64: 0, 1>}} : ({R}) -> {S}
    %o = "stax.div"(%e, %sb) : ({S}, {S}) -> {S}
    "stax_graph.yield"(%o) : ({S}) -> ()'''
    (o,), k = run_kernel(body, [x], [((8, 100), F32)])
    torch.testing.assert_close(o, torch.softmax(x, -1))
    # exp's range reduction (one math.roundeven per exp) appears once in the 16-lane
    # loop and once in the tail: the output phase re-reads the stashed exp.
    assert k.mlir.count("math.roundeven") == 2


def test_reduction_kernel_outputs_reshaped_input_and_broadcast_row_value():
    # The domain S = [2, 8, 24] reduced over dim 2; an input of shape [16, 24] reshaped
    # into S is per element, and a row value broadcast back to S is an S-sized output.
    g = torch.randn(16, 24)
    x = torch.randn(2, 8, 24)
    S, R, G = ttype((2, 8, 24), F32), ttype((2, 8, 1), F32), ttype((16, 24), F32)
    body = f'''    %gr = "stax.reshape"(%a0) : ({G}) -> {S}
    %p = "stax.mul"(%gr, %a1) : ({S}, {S}) -> {S}
    %s = "stax.reduce_sum"(%p) {{dims = array<i64: 2>, keepdim = true}} : ({S}) -> {R}
    %sb = "stax.broadcast_in_dim"(%s) {{dims = array<i64: 0, 1, 2>}} : ({R}) -> {S}
    %back = "stax.reshape"(%p) : ({S}) -> {G}
    "stax_graph.yield"(%gr, %sb, %back, %s) : ({S}, {S}, {G}, {R}) -> ()'''
    (gr, sb, back, s), k = run_kernel(body, [g, x], [((2, 8, 24), F32), ((2, 8, 24), F32),
                                                    ((16, 24), F32), ((2, 8, 1), F32)])
    p = g.reshape(2, 8, 24) * x
    assert torch.equal(gr, g.reshape(2, 8, 24))
    torch.testing.assert_close(s, p.sum(2, keepdim=True))
    torch.testing.assert_close(sb, p.sum(2, keepdim=True).expand(2, 8, 24))
    torch.testing.assert_close(back, p.reshape(16, 24))


def test_gather_rows_and_columns_negative_indices():
    x = torch.randn(6, 40)
    rows = torch.tensor([5, -1, 0, 2], dtype=torch.int64)
    cols = torch.tensor([3, 39, -40, 7, 7], dtype=torch.int32)
    X = ttype((6, 40), F32)
    body = f'''    %r = "stax.gather"(%a0, %a1) {{dim = 0 : i64}} : ({X}, tensor<4xi64>) -> tensor<4x40xf32>
    %c = "stax.gather"(%a0, %a2) {{dim = 1 : i64}} : ({X}, tensor<5xi32>) -> tensor<6x5xf32>
    "stax_graph.yield"(%r, %c) : (tensor<4x40xf32>, tensor<6x5xf32>) -> ()'''
    (r, c), k = run_kernel(body, [x, rows, cols], [((4, 40), F32), ((6, 5), F32)])
    assert torch.equal(r, x[rows])
    assert torch.equal(c, x[:, cols.long()])
