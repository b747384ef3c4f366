"""Concat, pad and gather in Triton kernels with runtime sizes (targets/triton_symbolic):
a KV cache's append along its symbolic length, a concat along a static dim with a
symbolic batch, pad with symbolic extents (a constant value), gather / index_select /
embedding with a runtime number of indices (i64 and i32, negative and out-of-range ones
clamped as the static generator does: never read out of bounds).

On the CPU every kernel's chosen variant runs in the bounds-checked TTIR interpreter
(small shapes: the interpreter is slow) at >= 5 sizes incl. 1 and primes, against eager
(floats with tolerance, ints bit-exact; shapes, strides); with CUDA (skipped without),
the same kernels at real sizes (KV length up to 2048, width 768)."""
import os
import sys

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_triton_runtime_sizes import (CONCAT_SYMBOLIC, _routes, check,  # noqa: E402
                                       symbolic_graph, text_graph)
from ttir_interp import DeviceAssert, run_ttir  # noqa: E402

CUDA = torch.cuda.is_available()
gpu = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")


def _kv_append(cache, new):
    return torch.cat([cache, new], dim=2)


def _kv_make(dtype, heads, hd):
    def make(n):
        if dtype.is_floating_point:
            return torch.randn(2, heads, n, hd, dtype=dtype), torch.randn(2, heads, 1, hd, dtype=dtype)
        return (torch.randint(-9, 9, (2, heads, n, hd), dtype=dtype),
                torch.randint(-9, 9, (2, heads, 1, hd), dtype=dtype))
    return make


def _cat_static(a, b):
    return torch.cat([a, b * 2, a - 1], dim=1)


def _cat_text(et):
    # the widths static (make_fx's symbolic tracing would make them symbols too)
    A = f'tensor<?x3x{et}, #stax.sizes<["s0", 3]>>'
    B = f'tensor<?x5x{et}, #stax.sizes<["s0", 5]>>'
    AB = f'tensor<?x8x{et}, #stax.sizes<["s0", 8]>>'
    R = f'tensor<?x11x{et}, #stax.sizes<["s0", 11]>>'
    mul, sub = ("stax.mul", "stax.sub")
    one = "1.0" if et.startswith("f") else "1"
    two = "2.0" if et.startswith("f") else "2"
    return f"""
func.func @f(%a: {A}, %b: {B}) -> {R} {{
  %two = "stax.full"() {{value = {two} : {et}}} : () -> {B}
  %one = "stax.full"() {{value = {one} : {et}}} : () -> {A}
  %b2 = "{mul}"(%b, %two) : ({B}, {B}) -> {B}
  %a1 = "{sub}"(%a, %one) : ({A}, {A}) -> {A}
  %c = "stax.concat"(%a, %b2) {{dim = 1 : i64}} : ({A}, {B}) -> {AB}
  %r = "stax.concat"(%c, %a1) {{dim = 1 : i64}} : ({AB}, {A}) -> {R}
  return %r : {R}
}}
"""


def _cat_make(dtype):
    def make(n):
        if dtype.is_floating_point:
            return torch.randn(n, 3, dtype=dtype), torch.randn(n, 5, dtype=dtype)
        return torch.randint(-99, 99, (n, 3), dtype=dtype), torch.randint(-99, 99, (n, 5), dtype=dtype)
    return make


# pad: rows of the symbolic dim s0 gain 3 in front, the symbolic s1 1 before and 2 after
def _pad_text(et, value):
    X = f'tensor<?x?x{et}, #stax.sizes<["s0", "s1"]>>'
    Y = f'tensor<?x?x{et}, #stax.sizes<["s0 + 3", "s1 + 3"]>>'
    return f"""
func.func @f(%x: {X}) -> {Y} {{
  %p = "stax.pad"(%x) {{low = array<i64: 3, 1>, high = array<i64: 0, 2>, value = {value} : {et}}} : ({X}) -> {Y}
  %a = "stax.add"(%p, %p) : ({Y}, {Y}) -> {Y}
  return %a : {Y}
}}
"""


def _kernel_text(args, result, body, name):
    """One pointwise kernel written out: stax-fuse leaves a gather of symbolic sizes
    outside kernels for now (as test_runtime_size_kernels does)."""
    params = ", ".join(f"%p{i}: {t}" for i, t in enumerate(args))
    bb = ", ".join(f"%a{i}: {t}" for i, t in enumerate(args))
    ops = ", ".join(f"%p{i}" for i in range(len(args)))
    tys = ", ".join(args)
    return f"""
func.func @f({params}) -> {result} {{
  %k = "stax_graph.kernel"({ops}) ({{
  ^bb0({bb}):
{body}
    "stax_graph.yield"(%r) : ({result}) -> ()
  }}) {{kind = "{name}", name = "k0_{name}"}} : ({tys}) -> {result}
  return %k : {result}
}}
"""


def _gather_text(it, rows, width):
    W = f"tensor<{rows}x{width}xf32>"
    Ix = f'tensor<?x{it}, #stax.sizes<["s0"]>>'
    R = f'tensor<?x{width}xf32, #stax.sizes<["s0", {width}]>>'
    return _kernel_text([W, Ix], R, f"""\
    %g = "stax.gather"(%a0, %a1) {{dim = 0 : i64}} : ({W}, {Ix}) -> {R}
    %r = "stax.mul"(%g, %g) : ({R}, {R}) -> {R}""", "pointwise")


def _gather_ref(w, i):
    # in-range indices: a negative one wraps
    n = w.shape[0]
    i = i.long()
    i = torch.where(i < 0, i + n, i).clamp(0, n - 1)
    g = w.index_select(0, i)
    return g * g


def _gather_bad(it, rows, width):
    """In-range indices but the last, which is `rows` (one past the end)."""
    def make(n):
        i = torch.randint(-rows, rows, (n,), dtype=it)
        i[-1] = rows
        return torch.randn(rows, width), i
    return make


def _gather_make(it, rows, width, wild):
    def make(n):
        lo, hi = (-3 * rows, 3 * rows) if wild else (-rows, rows)
        return torch.randn(rows, width), torch.randint(lo, hi, (n,), dtype=it)
    return make


# ----------------------------------------------------------------- interpreted (no GPU)

KV_SIZES = [(1,), (17,), (31,), (64,), (2,)]
ROWS = [(1,), (17,), (31,), (64,), (5,)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32], ids=["f32", "i32"])
def test_kv_cache_append_symbolic_length(dtype):
    g = symbolic_graph(_kv_append, *_kv_make(dtype, 2, 8)(5))
    _routes(g)
    check(g, _kv_append, _kv_make(dtype, 2, 8), KV_SIZES)
    assert len(g.sized) == 1 and len({p.ttir.text for p in g.plans}) == 1   # one variant


def test_concat_of_one_tensor_twice_then_add():
    """[s0, 4] ++ [s0, 4] along s0 (`2*s0`), then an add (refused before this)."""
    g = text_graph(CONCAT_SYMBOLIC)
    _routes(g)
    check(g, lambda x, y: torch.cat([x, x]) + y,
          lambda n: (torch.randn(n, 4), torch.randn(2 * n, 4)), ROWS)


@pytest.mark.parametrize("dtype,et", [(torch.float32, "f32"), (torch.int64, "i64")],
                         ids=["f32", "i64"])
def test_concat_static_dim_symbolic_rows(dtype, et):
    g = text_graph(_cat_text(et))
    _routes(g)
    check(g, _cat_static, _cat_make(dtype), ROWS)


@pytest.mark.parametrize("et,dtype,value", [("f32", torch.float32, "1.5"),
                                            ("i32", torch.int32, "-7")])
def test_pad_symbolic_extents(et, dtype, value):
    g = text_graph(_pad_text(et, value))
    _routes(g)
    pv = float(value) if dtype.is_floating_point else int(value)

    def fn(x):
        p = F.pad(x, (1, 2, 3, 0), value=pv)
        return p + p

    def make(n, m):
        return ((torch.randn(n, m) if dtype.is_floating_point
                 else torch.randint(-50, 50, (n, m), dtype=dtype)),)
    check(g, fn, make, [(1, 1), (17, 3), (2, 31), (5, 13), (7, 16)])


@pytest.mark.parametrize("it", [torch.int64, torch.int32], ids=["i64", "i32"])
def test_gather_runtime_number_of_indices(it):
    et = {torch.int64: "i64", torch.int32: "i32"}[it]
    g = text_graph(_gather_text(et, 50, 16))
    _routes(g)

    def emb(w, i):   # embedding / index_select for in-range indices (negatives wrap)
        g_ = F.embedding(torch.where(i < 0, i + w.shape[0], i).long(), w)
        return g_ * g_
    check(g, emb, _gather_make(it, 50, 16, wild=False), ROWS)
    # an index out of range is a device-side assert (eager CUDA's too), never a read
    # outside the table
    for n in (1, 13, 37):
        with pytest.raises(DeviceAssert):
            check(g, _gather_ref, _gather_bad(it, 50, 16), [(n,)])


def test_gather_symbolic_table_rows():
    X = 'tensor<?x?xf32, #stax.sizes<["s1", "s2"]>>'
    Ix = 'tensor<?xi32, #stax.sizes<["s0"]>>'
    R = 'tensor<?x?xf32, #stax.sizes<["s0", "s2"]>>'
    g = text_graph(_kernel_text([X, Ix], R, f"""\
    %g = "stax.gather"(%a0, %a1) {{dim = 0 : i64}} : ({X}, {Ix}) -> {R}
    %r = "stax.add"(%g, %g) : ({R}, {R}) -> {R}""", "pointwise"))

    def ref(w, i):
        n = w.shape[0]
        i = torch.where(i < 0, i + n, i).long()
        s = w.index_select(0, i)
        return s + s
    check(g, ref, lambda n, r, c: (torch.randn(r, c), torch.randint(-r, r, (n,),
                                                                     dtype=torch.int32)),
          [(1, 1, 1), (17, 3, 5), (31, 7, 2), (5, 64, 3), (2, 13, 16)])
    with pytest.raises(DeviceAssert):   # -r - 1: out of range after wrapping
        check(g, lambda w, i: w[:i.shape[0]] * 0, lambda n, r, c: (torch.randn(r, c), torch.full((n,), -r - 1,
                                                                      dtype=torch.int32)),
              [(3, 7, 2)])


def test_gather_feeds_a_row_reduction():
    """embedding then a sum over the row: the reduction reads the gather's values."""
    W = "tensor<50x16xf32>"
    Ix = 'tensor<?xi64, #stax.sizes<["s0"]>>'
    R = 'tensor<?x16xf32, #stax.sizes<["s0", 16]>>'
    S = 'tensor<?xf32, #stax.sizes<["s0"]>>'
    g = text_graph(_kernel_text([W, Ix], S, f"""\
    %g = "stax.gather"(%a0, %a1) {{dim = 0 : i64}} : ({W}, {Ix}) -> {R}
    %r = "stax.reduce_sum"(%g) {{dims = array<i64: 1>, keepdim = false}} : ({R}) -> {S}""",
                                "reduction"))
    _routes(g)
    check(g, lambda w, i: F.embedding(i, w).sum(1),
          lambda n: (torch.randn(50, 16), torch.randint(0, 50, (n,))), [(1,), (17,), (31,),
                                                                         (3,), (5,)])


def test_variants_i64_and_div16():
    """The variants scheme holds for the new ops: the forced i64 body of a KV append, a
    pad and a gather is right at odd sizes, and the pad (its inner dim symbolic) gets the
    div16 variant exactly when that size is a multiple of 16."""
    from test_triton_runtime_sizes import _run_variant
    from stax.runtime.triton_sized import SizedVariant
    i64 = SizedVariant("i64", (), (False,) * 3)
    g = symbolic_graph(_kv_append, *_kv_make(torch.float32, 2, 8)(5))
    k = g.compiled[0]
    for n in (1, 17, 31):
        c, x = _kv_make(torch.float32, 2, 8)(n)
        out = torch.full((2, 2, n + 1, 8), 77.0)
        _run_variant(k, i64, [c, x, out], k.sizes_of([c, x, out]))
        torch.testing.assert_close(out, _kv_append(c, x), rtol=0, atol=0)
    gp = text_graph(_pad_text("f32", "1.5"))
    kp = gp.compiled[0]
    inner = kp.symbols[1]
    for n, m in ((3, 16), (2, 32), (5, 17), (1, 1)):
        x = torch.randn(n, m)
        out = torch.full((n + 3, m + 3), 77.0)
        p = kp.plan(x, out)
        assert (inner in p.variant.div16) == (m % 16 == 0), m
        run_ttir(p.ttir.text, p.grid, [x, out], kp.name, scalars=p.scalars)
        ref = F.pad(x, (1, 2, 3, 0), value=1.5)
        torch.testing.assert_close(out, ref + ref)
        out = torch.full((n + 3, m + 3), 77.0)
        _run_variant(kp, SizedVariant("i64", (), (False,) * 2), [x, out], [n, m])
        torch.testing.assert_close(out, ref + ref)
    gg = text_graph(_gather_text("i32", 50, 16))
    kg = gg.compiled[0]
    for n in (1, 13, 37):
        w, i = _gather_make(torch.int32, 50, 16, wild=False)(n)
        out = torch.full((n, 16), 77.0)
        _run_variant(kg, i64, [w, i, out], [n])
        torch.testing.assert_close(out, _gather_ref(w, i), rtol=0, atol=0)
        with pytest.raises(DeviceAssert):
            _run_variant(kg, i64, list(_gather_bad(torch.int32, 50, 16)(n)) + [out], [n])


def test_compiles_to_ptx():
    """No GPU needed: the new ops' TTIR (i32 and i64 bodies) goes through Triton's
    compiler to PTX for sm_90 (what the interpreter does not check: Triton's verifier)."""
    pytest.importorskip("triton")
    from stax.runtime.triton_sized import SizedVariant
    from stax.targets.triton import compile_ttir
    graphs = [symbolic_graph(_kv_append, *_kv_make(torch.float32, 2, 8)(5)),
              text_graph(_pad_text("f32", "1.5")), text_graph(_gather_text("i32", 50, 16)),
              text_graph(_cat_text("i64"))]
    for g in graphs:
        k = g.compiled[0]
        for index in ("i32", "i64"):
            compile_ttir(k.variant_ttir(SizedVariant(index, (), (True,) * k.n_args)), 90)


# ------------------------------------------------------------------------------ on a GPU

@gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_gpu_kv_cache_append(dtype):
    g = symbolic_graph(_kv_append, *_kv_make(dtype, 12, 64)(5), device="cuda")
    check(g, _kv_append, _kv_make(dtype, 12, 64),
          [(1,), (17,), (257,), (1023,), (2047,), (64,)], device="cuda")


@gpu
def test_gpu_concat_static_dim_and_pad():
    g = text_graph(_cat_text("f32"), device="cuda")
    check(g, _cat_static, _cat_make(torch.float32), [(1,), (257,), (4096,), (17,), (65537,)],
          device="cuda")
    g = text_graph(_pad_text("f32", "1.5"), device="cuda")

    def fn(x):
        p = F.pad(x, (1, 2, 3, 0), value=1.5)
        return p + p
    check(g, fn, lambda n, m: (torch.randn(n, m),), [(1, 1), (257, 768), (2048, 768),
                                                    (17, 1023), (5, 16)], device="cuda")


@gpu
@pytest.mark.parametrize("it", [torch.int64, torch.int32], ids=["i64", "i32"])
def test_gpu_embedding_gather(it):
    et = {torch.int64: "i64", torch.int32: "i32"}[it]
    g = text_graph(_gather_text(et, 50257, 768), device="cuda")
    check(g, _gather_ref, _gather_make(it, 50257, 768, wild=False),
          [(1,), (17,), (257,), (2048,), (4096,)], device="cuda")
    # (an index out of range is a device-side assert, which loses the CUDA context:
    # test_gather_bounds.py checks it in a subprocess)
