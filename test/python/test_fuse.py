"""stax-fuse driven directly (fuse_function / run) on parsed IR."""
import pytest

from stax._mlir import ir, new_context
from stax.dialects.stax_dialect import KERNEL, YIELD, verify_module
from stax.passes import fuse

T = "tensor<8x16xf32>"
R = "tensor<8x1xf32>"

SOFTMAX = f"""
func.func @softmax(%x: {T}) -> {T} {{
  %m = "stax.reduce_max"(%x) {{dims = array<i64: 1>, keepdim = true}} : ({T}) -> {R}
  %mb = "stax.broadcast_in_dim"(%m) {{dims = array<i64: 0, 1>}} : ({R}) -> {T}
  %d = "stax.sub"(%x, %mb) : ({T}, {T}) -> {T}
  %e = "stax.exp"(%d) : ({T}) -> {T}
  %s = "stax.reduce_sum"(%e) {{dims = array<i64: 1>, keepdim = true}} : ({T}) -> {R}
  %sb = "stax.broadcast_in_dim"(%s) {{dims = array<i64: 0, 1>}} : ({R}) -> {T}
  %r = "stax.div"(%e, %sb) : ({T}, {T}) -> {T}
  return %r : {T}
}}
"""

LAYERNORM = f"""
func.func @layernorm(%x: {T}, %w: tensor<16xf32>, %b: tensor<16xf32>) -> {T} {{
  %s = "stax.reduce_sum"(%x) {{dims = array<i64: 1>, keepdim = true}} : ({T}) -> {R}
  %n = "stax.full"() {{value = 0.0625 : f32}} : () -> {R}
  %mean = "stax.mul"(%s, %n) : ({R}, {R}) -> {R}
  %mb = "stax.broadcast_in_dim"(%mean) {{dims = array<i64: 0, 1>}} : ({R}) -> {T}
  %xm = "stax.sub"(%x, %mb) : ({T}, {T}) -> {T}
  %sq = "stax.mul"(%xm, %xm) : ({T}, {T}) -> {T}
  %vs = "stax.reduce_sum"(%sq) {{dims = array<i64: 1>, keepdim = true}} : ({T}) -> {R}
  %var = "stax.mul"(%vs, %n) : ({R}, {R}) -> {R}
  %eps = "stax.full"() {{value = 1.0e-05 : f32}} : () -> {R}
  %ve = "stax.add"(%var, %eps) : ({R}, {R}) -> {R}
  %rstd = "stax.rsqrt"(%ve) : ({R}) -> {R}
  %rb = "stax.broadcast_in_dim"(%rstd) {{dims = array<i64: 0, 1>}} : ({R}) -> {T}
  %y = "stax.mul"(%xm, %rb) : ({T}, {T}) -> {T}
  %wb = "stax.broadcast_in_dim"(%w) {{dims = array<i64: 1>}} : (tensor<16xf32>) -> {T}
  %yw = "stax.mul"(%y, %wb) : ({T}, {T}) -> {T}
  %bb = "stax.broadcast_in_dim"(%b) {{dims = array<i64: 1>}} : (tensor<16xf32>) -> {T}
  %out = "stax.add"(%yw, %bb) : ({T}, {T}) -> {T}
  return %out : {T}
}}
"""

POINTWISE = f"""
func.func @pw(%x: {T}, %b: tensor<16xf32>) -> {T} {{
  %bb = "stax.broadcast_in_dim"(%b) {{dims = array<i64: 1>}} : (tensor<16xf32>) -> {T}
  %a = "stax.add"(%x, %bb) : ({T}, {T}) -> {T}
  %t = "stax.tanh"(%a) : ({T}) -> {T}
  %dead = "stax.exp"(%a) : ({T}) -> {T}
  %c = "stax.cmp_gt"(%t, %x) : ({T}, {T}) -> tensor<8x16xi1>
  %s = "stax.select"(%c, %t, %x) : (tensor<8x16xi1>, {T}, {T}) -> {T}
  return %s : {T}
}}
"""

CYCLE = """
func.func @cycle(%x: tensor<8x8xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %a = "stax.exp"(%x) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %m = "stax.matmul"(%a, %w) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %c = "stax.add"(%a, %m) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %c : tensor<8x8xf32>
}
"""

TWO_SIGNATURES = f"""
func.func @two(%x: {T}) -> (tensor<8xf32>, tensor<16xf32>) {{
  %a = "stax.reduce_sum"(%x) {{dims = array<i64: 1>, keepdim = false}} : ({T}) -> tensor<8xf32>
  %b = "stax.reduce_max"(%x) {{dims = array<i64: 0>, keepdim = false}} : ({T}) -> tensor<16xf32>
  return %a, %b : tensor<8xf32>, tensor<16xf32>
}}
"""


@pytest.fixture
def ctx():
    c = new_context()
    with c, ir.Location.unknown():
        yield c


def parse(text, ctx):
    m = ir.Module.parse(text, context=ctx)
    verify_module(m)
    return m


def top_ops(module):
    func = module.body.operations[0]
    return [o.operation for o in func.regions[0].blocks[0].operations]


def kernels(module):
    return [o for o in top_ops(module) if o.name == KERNEL]


def body_names(kernel):
    return [o.operation.name for o in kernel.regions[0].blocks[0].operations]


def test_softmax_is_one_reduction_kernel(ctx):
    m = parse(SOFTMAX, ctx)
    assert fuse.fuse_function(m.body.operations[0]) == 1
    verify_module(m)
    (k,) = kernels(m)
    assert [o.name for o in top_ops(m)] == [KERNEL, "func.return"]
    assert ir.StringAttr(k.attributes["kind"]).value == "reduction"
    assert ir.StringAttr(k.attributes["name"]).value == "k0_max_fused_div_exp_sub_sum"
    names = body_names(k)
    assert names.count("stax.reduce_max") == 1 and names.count("stax.reduce_sum") == 1
    assert names[-1] == YIELD
    assert len(k.operands) == 1 and len(k.results) == 1


def test_layernorm_is_one_kernel_with_weight_and_bias_inputs(ctx):
    m = parse(LAYERNORM, ctx)
    fuse.run(m)
    (k,) = kernels(m)
    func_args = list(m.body.operations[0].regions[0].blocks[0].arguments)
    assert list(k.operands) == func_args  # x, w, b in first-use order
    assert body_names(k).count("stax.broadcast_in_dim") == 4
    assert body_names(k).count("stax.full") == 2  # cloned, not inputs


def test_pointwise_chain_one_kernel_dead_op_dropped(ctx):
    m = parse(POINTWISE, ctx)
    fuse.run(m)
    (k,) = kernels(m)
    assert ir.StringAttr(k.attributes["kind"]).value == "pointwise"
    names = body_names(k)
    assert "stax.exp" not in names  # dead
    assert names == ["stax.broadcast_in_dim", "stax.add", "stax.tanh", "stax.cmp_gt",
                     "stax.select", YIELD]
    # nothing fusible is left outside
    assert [o.name for o in top_ops(m)] == [KERNEL, "func.return"]


def test_no_fusion_through_a_cycle(ctx):
    m = parse(CYCLE, ctx)
    fuse.run(m)
    assert [o.name for o in top_ops(m)] == [KERNEL, "stax.matmul", KERNEL, "func.return"]
    k0, k1 = kernels(m)
    assert list(k1.operands) == [k0.results[0], top_ops(m)[1].results[0]]


def test_different_reduction_signatures_split(ctx):
    m = parse(TWO_SIGNATURES, ctx)
    fuse.run(m)
    ks = kernels(m)
    assert len(ks) == 2
    assert [ir.StringAttr(k.attributes["name"]).value for k in ks] == ["k0_sum", "k1_max"]


def test_run_twice_is_stable(ctx):
    m = parse(SOFTMAX + LAYERNORM, ctx)
    fuse.run(m)
    once = str(m)
    fuse.run(m)
    assert str(m) == once
    again = parse(once, ctx)
    assert str(again) == once


def test_kernel_names_unique_across_functions(ctx):
    m = parse(SOFTMAX + POINTWISE + CYCLE, ctx)
    fuse.run(m)
    names = []

    def visit(op):
        if op.name == KERNEL:
            names.append(ir.StringAttr(op.attributes["name"]).value)
        return ir.WalkResult.ADVANCE

    m.operation.walk(visit)
    # numbered across functions (unique), each named from its ops, valid identifiers
    assert sorted(int(n[1:].split("_")[0]) for n in names) == list(range(4))
    assert all(n.isidentifier() and len(n) <= 48 for n in names), names


def test_invalid_input_raises_located_pass_error(ctx):
    from stax.passes.registry import PassError

    m = parse(SOFTMAX, ctx)
    red = top_ops(m)[0]
    red.attributes["keepdim"] = ir.BoolAttr.get(False)  # result shape now wrong
    with pytest.raises(PassError) as info:
        fuse.run(m)
    text = str(info.value)
    assert "stax.reduce_max" in text and ":3:" in text  # the op's line in SOFTMAX


def test_module_level_contract():
    assert fuse.PASS_NAME == "stax-fuse"
    first = fuse.__doc__.strip().splitlines()[0]
    assert "kernel" in first
    from stax.passes.registry import PASSES
    assert PASSES["stax-fuse"].run is fuse.run
