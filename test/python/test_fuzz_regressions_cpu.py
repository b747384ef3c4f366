"""Regressions stax-fuzz found on the CPU (seed 18908, `--count 100 --backward`); each
failed before its fix. Compiled with `backend="stax"` under the `stax_strict` fixture (a
lowering failure raises), compared with eager on fresh random inputs, forward and
backward, with the route checked."""
from __future__ import annotations

import pytest
import torch

import stax.backend as B
from stax._mlir import ir, new_context
from stax.dialects.stax_dialect import KERNEL
from stax.passes import fuse, schedule
from stax.runtime.cpu_kernel import LIBCALL_HELPERS, kernel_text, load_cpu_kernels
from stax.targets import llvm

pytestmark = pytest.mark.usefixtures("stax_strict")


def _train_both(fn, x):
    """(outputs, input grad) of fn compiled with stax and of eager, on copies of x."""
    torch._dynamo.reset()
    B.clear()
    got = []
    for f in (torch.compile(fn, backend="stax", fullgraph=True), fn):
        a = x.detach().clone().requires_grad_()
        out = f(a)
        w = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
        (out.double() * w.double()).sum().backward() if out.numel() else out.sum().backward()
        got.append((out.detach(), a.grad))
    assert all(r.route == "stax-cpu" for r in B.reports()), [r.summary() for r in B.reports()]
    return got


def test_zero_length_slice_backward_is_one_lane_where_a_generated_concat_splits():
    """x.narrow(0, 7, 0).to(f16): the backward's slice_scatter of an empty gradient into
    zeros is a concat of two slices of a `full`, boundary at 7 along the lane dim. No read
    carried the boundary, so the schedule gave 16 lanes and the CPU generator stopped
    with an internal error (passes/cpu_tiling.one_lane_reason missed it)."""
    (out, g), (ref, rg) = _train_both(lambda x: x.narrow(0, 7, 0).to(torch.float16),
                                      torch.randn(8))
    assert out.shape == ref.shape == (0,) and out.dtype == ref.dtype
    assert torch.equal(g, rg)


def test_bf16_constant_reduction_jits_where_llvm_makes_a_truncation_libcall():
    """The backward of ceil over a stride-0 view of a bf16 input sums a bf16 zeros
    buffer. LLVM (opt level 3) folded the kernel's f32 -> bf16 rounding back into an
    fptrunc, which the x86 backend lowers to a call of __truncsfbf2, a symbol this
    process lacks: the JIT produced no kernel. Every bf16 kernel module now defines it."""
    def fn(x):
        return torch.ceil(torch.as_strided(x.contiguous(), (2, 1, 16), (7, 1, 0), 0))
    (out, g), (ref, rg) = _train_both(fn, torch.randn(8, dtype=torch.bfloat16) * 4)
    assert torch.equal(out, ref) and out.stride() == ref.stride()
    assert torch.equal(g, rg)


BF16_SUMS = """
func.func @sums(%x: tensor<4x16xbf16>) -> (tensor<2x1xbf16>, tensor<4xbf16>) {
  %z = "stax.full"() {value = 0.000000e+00 : bf16} : () -> tensor<2x1x16xbf16>
  %s = "stax.reduce_sum"(%z) {dims = array<i64: 2>, keepdim = false} : (tensor<2x1x16xbf16>) -> tensor<2x1xbf16>
  %t = "stax.reduce_sum"(%x) {dims = array<i64: 1>, keepdim = false} : (tensor<4x16xbf16>) -> tensor<4xbf16>
  return %s, %t : tensor<2x1xbf16>, tensor<4xbf16>
}
"""


def test_kernels_defining_the_truncation_helper_load_into_one_module():
    """The helper is in every bf16 kernel's module; an artifact's kernels, loaded without
    the compiler, still share one module (the helper kept once) and run."""
    ctx = new_context()
    with ctx, ir.Location.unknown():
        m = ir.Module.parse(BF16_SUMS)
        fuse.run(m)
        schedule.run(m)
        kernels = [op for op in m.body.operations[0].regions[0].blocks[0].operations
                   if op.operation.name == KERNEL]
        assert len(kernels) == 2
        compiled = [llvm.compile_kernel(k, [[16, 1]] * (i == 1), [[1, 1]] if i == 0 else [[1]],
                                        f"k{i}") for i, k in enumerate(kernels)]
    texts = [kernel_text(k) for k in compiled]
    assert all("@__truncsfbf2" in t for t in texts) and "__truncsfbf2" in LIBCALL_HELPERS
    loaded = load_cpu_kernels([dict(text=t, name=k.name, n_args=k.n_args,
                                    vector_width=k.vector_width, splittable=k.splittable,
                                    work=0) for t, k in zip(texts, compiled)])
    assert loaded[0]._engine is loaded[1]._engine   # one module: the helper kept once
    s = torch.full((2, 1), 7.0, dtype=torch.bfloat16)
    loaded[0](s)
    assert torch.equal(s, torch.zeros(2, 1, dtype=torch.bfloat16))
    x = torch.randn(4, 16, dtype=torch.bfloat16)
    t = torch.empty(4, dtype=torch.bfloat16)
    loaded[1](x, t)
    torch.testing.assert_close(t, x.float().sum(1).bfloat16(), rtol=0, atol=0)


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("shape", [(1, 1), (256, 768), (300, 1000)])
def test_layer_norm_output_and_its_cos_read_the_stash_before_it_is_overwritten(shape, dynamic):
    """F.layer_norm(x) and cos of it, both returned, in training (stax-fuzz seed 3010,
    program 3010009048): the row kernel stashes x - mean in the layer norm's output buffer
    and reads it back in the output loop. It stored the layer norm's own value there
    first, then read that back as x - mean for the cos: cos(b) came out as cos of the
    output re-normalized (0.552 against 0.979 at [1, 1]). Now every output's value is
    computed before any is stored (static and runtime-size generators)."""
    d = shape[-1]
    w, b = torch.randn(d), torch.randn(d)

    def fn(x):
        y = torch.nn.functional.layer_norm(x, (d,), w, b)
        # y is saved for the backward: an output of the kernel, yielded before the cos
        return torch.cos(y).flatten(0) * 2.0

    cf = torch.compile(fn, backend="stax", fullgraph=True, dynamic=dynamic)
    for rows in ((shape[0], shape[0] + 3) if dynamic else (shape[0],)):
        x = torch.randn(rows, d, requires_grad=True)
        got, want = cf(x), fn(x)
        assert got.stride() == want.stride()
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert all(r.route == "stax-cpu" for r in B.reports()), [r.summary() for r in B.reports()]


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32])
@pytest.mark.parametrize("rows, width", [(1, 1), (256, 512), (300, 2047)])
def test_copy_into_a_cat_and_the_cat_share_a_fresh_storage_dynamic(rows, width, dtype):
    """`v = cat([a, b, b]); w = v.copy_(x); return w, v` (stax-fuzz --dynamic seed 3013,
    program 3013009090): eager returns one fresh tensor twice. aot_autograd hands stax
    `(copy, copy)`, a value the IR reads straight from the argument x (a broadcast of
    it), so the dynamic graph copied it once per output: two storages where eager has
    one. Now the copies of one eager storage group go into one new storage. Called at
    several sizes of one compile; values, strides and storage sharing as eager."""
    def fn(a, b, x):
        v = torch.cat([a, b, b], 0)
        w = v.copy_(x)
        return w, v

    def make(*shape):
        t = torch.randn(*shape)
        return t > 0 if dtype == torch.bool else t

    cf = torch.compile(fn, backend="stax", fullgraph=True, dynamic=True)
    for n in (width, width + 7, 3):
        a, b, x = make(rows, n), make(rows + 1, n), make(n)
        got, want = cf(a, b, x), fn(a, b, x)
        for g, e in zip(got, want):
            assert g.shape == e.shape and g.stride() == e.stride()
            assert torch.equal(g, e)
        assert got[0].untyped_storage().data_ptr() == got[1].untyped_storage().data_ptr()
        assert got[0].untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    assert all(r.route == "stax-cpu" for r in B.reports()), [r.summary() for r in B.reports()]


@pytest.mark.parametrize("dynamic", [False, True])
def test_atan2_of_an_empty_sum_is_zero_not_nan(dynamic):
    """Fuzz seed 31005 (program 31005093039, `--dynamic --backward`), at the size [0, 31,
    1]: `atan2(s, s)` of the sum of an empty tensor gave NaN where eager gives 0. The sum
    is a constant 0 there, and MLIR folds math.atan2 of two constant zeros to NaN (C and
    eager: +-0 or +-pi by the signs); the CPU lowering now picks the result by the signs
    where both are zero (cpu_ops._atan2), which folds right."""
    def fn(x):
        s = x.sum([0, 1, 2])
        return torch.atan2(s, s), torch.atan2(-s, -s), torch.atan2(s, -s), torch.atan2(-s, s)

    cf = torch.compile(fn, backend="stax", dynamic=dynamic)
    for shape in ((0, 31, 1), (4, 31, 1), (2, 0, 3), (0, 5, 3)):
        x = torch.randn(shape)
        for got, want in zip(cf(x), fn(x)):
            torch.testing.assert_close(got, want)
            assert torch.signbit(got) == torch.signbit(want)
    assert all(r.route == "stax-cpu" for r in B.reports())


def test_atan2_of_signed_zeros_matches_eager():
    """Every pair of +-0 (constants and computed), next to the general case."""
    def fn(x):
        z = torch.zeros_like(x)
        return torch.stack([torch.atan2(z, -z), torch.atan2(-z, -z), torch.atan2(-z, z),
                            torch.atan2(z, z), torch.atan2(x * 0, -x * 0), torch.atan2(x, x)])
    x = torch.randn(40)
    got, want = torch.compile(fn, backend="stax")(x), fn(x)
    torch.testing.assert_close(got, want)
    assert torch.equal(torch.signbit(got), torch.signbit(want))


def test_reshape_of_an_empty_source_compiles_once():
    """Fuzz seed 31007 (`--dynamic`): a concat of [n, 0] tensors and a view of one of them
    to [0]. The runtime-size CPU generator divided by the product of the source's inner
    dims, 0, to index the reshape (ZeroDivisionError in cpu_index.floordiv_mod); the graph
    went per size with that error. A source with a 0 dim has no element to read: its
    index is 0 (cpu_symbolic._divmod)."""
    def fn(a, b):
        c = torch.cat([a.unsqueeze(2), b.unsqueeze(2)], 2).long()
        v = b.view(0)
        return torch.full_like(v, -1.5) + v, c

    cf = torch.compile(fn, backend="stax", dynamic=True)
    for n in (3, 5, 7, 300):
        a, b = torch.randn(n, 0), torch.randn(n, 0)
        for got, want in zip(cf(a, b), fn(a, b)):
            assert got.shape == want.shape and got.dtype == want.dtype
            assert got.stride() == want.stride()
    notes = " ".join(n for r in B.reports() for n in r.notes)
    assert "ZeroDivisionError" not in notes and "could not stay dynamic" not in notes, notes


def test_layer_norm_backward_of_a_shifted_matmul_is_as_near_float64_as_eager():
    """stax-fuzz --dynamic --backward 31302093910: layer_norm of `v @ x3`, x3 near 100
    (rows with a mean far from their spread), at 5-200 rows of one dynamic compile. The
    input gradient was eager's uncentered `a g + b x + c` (b x and c cancel), 1.5-5x
    further from float64 than eager's; now centered, `a g - b (mean - x) - db a / n`,
    where b and c are finite (eager's form stays where they are not)."""
    from stax.fuzz.dynamic import check_dynamic
    from stax.fuzz.generate import InputSpec, Program, Stmt
    prog = Program([InputSpec("x1", (0,), "float32"),
                    InputSpec("x3", (0, 64), "float32", kind="shifted")],
                   [Stmt("v2", "x1 / (x1.abs() + 1)", ["x1", "x1"]),
                    Stmt("v4", "v2 @ x3", ["v2", "x3"]),
                    Stmt("v5", "F.layer_norm(v4, (64,))", ["v4"]),
                    Stmt("v6", "v5.reshape(v5.shape[0], -1)", ["v5"])],
                   ["v6"], seed=1999824084)
    o = check_dynamic(prog, backward=True)
    assert o.status == "pass", o


@pytest.mark.parametrize("dynamic", [False, True])
def test_bf16_mean_is_summed_and_divided_in_f32_then_rounded_once(dynamic):
    """stax-fuzz --backward 31506094601: var's backward (`x - x.mean(0)` in bf16) of 4
    values near 100. The mean's sum was a bf16 value (rounded to a step of 2 near 400)
    divided in bf16; eager sums and divides in f32 and rounds once, so x - mean came out
    0.5 off and the gradient 0.15 from eager's. Sums of bf16 values near 100 are exact
    in f32 at these sizes (multiples of 1/2 below 2^24), so the means are bit-exact."""
    g = torch.Generator().manual_seed(0)
    x = (100 + 0.3 * torch.randn(256, 520, generator=g)).to(torch.bfloat16)

    def fn(t):
        return t.mean(0), t.mean(1, keepdim=True), t.float().mean(0, dtype=torch.bfloat16)

    cf = torch.compile(fn, backend="stax", fullgraph=True, dynamic=dynamic)
    for rows in ((256, 300) if dynamic else (256,)):
        xs = x[:rows].contiguous()
        for got, want in zip(cf(xs), fn(xs)):
            assert got.dtype == want.dtype and got.stride() == want.stride()
            assert torch.equal(got, want), (got - want).abs().max()

    def var_grad(t):
        return torch.var_mean(t.to(torch.bfloat16), 0, correction=1, keepdim=True)[0]

    w = (100 + 0.3 * torch.randn(4, 1, generator=g)).requires_grad_()
    w2 = w.detach().clone().requires_grad_()
    cv = torch.compile(var_grad, backend="stax", fullgraph=True, dynamic=dynamic)
    cv(w).sum().backward()
    var_grad(w2).sum().backward()
    assert torch.equal(w.grad, w2.grad), (w.grad, w2.grad)
    assert all(r.route == "stax-cpu" for r in B.reports()), [r.summary() for r in B.reports()]
