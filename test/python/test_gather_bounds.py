"""An index out of range raises IndexError on the CPU, as eager does, instead of reading a
clamped position (before, `F.embedding(torch.tensor([12]), w)` of a 10-row table
returned row 9 where eager and Inductor raise).

A gather (embedding, index_select, one-tensor indexing) records the first bad index it
meets in its kernel's index-error global (targets/cpu_emitter.gather_index); the runtime
(runtime/cpu_kernel) raises after the call, naming the index, the dim's size and the
kernel, and clears the record, so the next call with good indices runs. The gather still
reads the clamped position, never outside the buffer. Static kernels and kernels with
runtime sizes (the dynamic path), at sizes whose kernels are split over threads; the
route is stax-cpu every time (the error is stax's, not a fallback's).
"""
from __future__ import annotations

import os
import re
import sys

import pytest
import torch
import torch.nn.functional as F

import stax.backend as B
from stax.errors import StaxIndexError

pytestmark = pytest.mark.usefixtures("stax_strict")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # ttir_interp, test_triton_compile


def _embed(w, i):
    return F.embedding(i, w) * 2.0


def _index_select(x, i):
    return torch.index_select(x, 1, i) + 1.0


def _getitem(x, i):
    return torch.tanh(x[i])


def _computed_index(x, i):
    # the index is computed inside the kernel (i + 3), not read from a graph input
    return x[i + 3] * 0.5


CASES = {
    "embedding": (_embed, lambda: torch.randn(10, 4), 10),
    "index_select": (_index_select, lambda: torch.randn(3, 10), 10),
    "getitem": (_getitem, lambda: torch.randn(10, 5), 10),
    "computed_index": (_computed_index, lambda: torch.randn(10, 5), 7),
}


def _routes():
    return {r.route for r in B.reports()}


def _eager_raises(fn, x, i):
    # IndexError (embedding, indexing) or RuntimeError (index_select on an inner dim);
    # stax's StaxIndexError is both
    with pytest.raises((IndexError, RuntimeError)):
        fn(x, i)


@pytest.mark.parametrize("name", list(CASES))
def test_out_of_range_index_raises_as_eager(name):
    fn, make, n = CASES[name]
    cf = torch.compile(fn, backend="stax", dynamic=False)
    x = make()
    good = torch.tensor([0, n - 1, 2])
    torch.testing.assert_close(cf(x, good), fn(x, good))
    for bad_value in (n, n + 5, 10_000):
        bad = torch.tensor([1, bad_value, 2])
        _eager_raises(fn, x, bad)
        with pytest.raises(StaxIndexError) as e:
            cf(x, bad)
        assert isinstance(e.value, IndexError) and isinstance(e.value, RuntimeError)
        msg = str(e.value)
        want = bad_value + (3 if name == "computed_index" else 0)
        assert f"index {want} is out of bounds" in msg and "stax kernel" in msg, msg
        # the record is cleared: good indices run again
        torch.testing.assert_close(cf(x, good), fn(x, good))
    assert _routes() == {"stax-cpu"}


def test_negative_index_of_tensor_indexing_wraps_as_eager():
    x = torch.randn(10, 5)
    cf = torch.compile(_getitem, backend="stax", dynamic=False)
    i = torch.tensor([-1, -10, 3])
    torch.testing.assert_close(cf(x, i), _getitem(x, i))
    bad = torch.tensor([-11, 0, 0])
    _eager_raises(_getitem, x, bad)
    with pytest.raises(IndexError, match=r"index -11 is out of bounds for a dimension of size 10 "
                       r"\(valid: -10 to 9\)"):
        cf(x, bad)


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("name", ["embedding", "index_select"])
def test_negative_index_of_embedding_and_index_select_raises_as_eager(name, dynamic):
    """F.embedding and index_select do not count a negative index from the end: eager
    raises, and so does stax (stax.gather's no_negative_wrap); before, stax wrapped it
    and returned the last row."""
    fn, make, n = CASES[name]
    cf = torch.compile(fn, backend="stax", dynamic=dynamic)
    x = make()
    for k in (3, 5):
        good = torch.randint(0, n, (k,))
        torch.testing.assert_close(cf(x, good), fn(x, good))
        bad = good.clone()
        bad[1] = -1
        _eager_raises(fn, x, bad)
        # the valid range it names is the op's: no negative index
        with pytest.raises(StaxIndexError, match=r"index -1 is out of bounds for a dimension "
                           rf"of size {n} \(valid: 0 to {n - 1}\)"):
            cf(x, bad)
    assert _routes() == {"stax-cpu"}


def test_large_embedding_split_over_threads_raises():
    """A 50257 x 768 table and 256 x 64 token ids: the kernel is split over the threads;
    a bad id in the last part is seen after the parts join."""
    old = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        w = torch.randn(50257, 768)
        cf = torch.compile(_embed, backend="stax", dynamic=False)
        ids = torch.randint(0, 50257, (256, 64))
        torch.testing.assert_close(cf(w, ids), _embed(w, ids))
        bad = ids.clone()
        bad[-1, -1] = 50257
        _eager_raises(_embed, w, bad)
        with pytest.raises(IndexError, match="index 50257 is out of bounds for a dimension "
                                             "of size 50257"):
            cf(w, bad)
        ids2 = torch.randint(0, 50257, (256, 64))
        torch.testing.assert_close(cf(w, ids2), _embed(w, ids2))
        (c,) = B.compiled_callables
        kernels = [k for g in c.stax_graphs for k in g.kernels]
        assert any(k._may_split for k in kernels), [k.name for k in kernels]
    finally:
        torch.set_num_threads(old)
    assert _routes() == {"stax-cpu"}


def test_runtime_size_kernel_raises():
    """The dynamic path (one compile, runtime sizes): token ids of several lengths, a bad
    one at the second length."""
    w = torch.randn(100, 64)
    cf = torch.compile(_embed, backend="stax", dynamic=True)
    for n in (5, 17, 31):
        ids = torch.randint(0, 100, (n,))
        torch.testing.assert_close(cf(w, ids), _embed(w, ids))
        if n == 17:
            bad = ids.clone()
            bad[7] = 100
            _eager_raises(_embed, w, bad)
            with pytest.raises(IndexError, match="index 100 is out of bounds"):
                cf(w, bad)
    sized = [k for c in B.compiled_callables for g in getattr(c, "stax_graphs", ())
             for k in g.kernels]
    reps = B.reports()
    assert all(r.route == "stax-cpu" for r in reps), [r.summary() for r in reps]
    assert any(getattr(v, "dynamic", False) for r in reps for v in r.variants), \
        ([r.summary() for r in reps], sized)


# --------------------------------------------------------------------- the Triton target
# On the GPU an index out of range is a device-side assert (`tt.assert`), as eager
# CUDA's gathers assert: the CUDA context is lost, as in eager. Before, the Triton
# kernels clamped the index and returned a row silently.

_EMBED_IR = """
func.func @main(%w: tensor<50x16xf32>, %i: tensor<37xi64>) -> tensor<37x16xf32> {
  %r = "stax_graph.kernel"(%w, %i) ({
  ^bb0(%a: tensor<50x16xf32>, %b: tensor<37xi64>):
    %g = "stax.gather"(%a, %b) {dim = 0 : i64} : (tensor<50x16xf32>, tensor<37xi64>) -> tensor<37x16xf32>
    %s = "stax.add"(%g, %g) : (tensor<37x16xf32>, tensor<37x16xf32>) -> tensor<37x16xf32>
    "stax_graph.yield"(%s) : (tensor<37x16xf32>) -> ()
  }) {kind = "pointwise", name = "k0_embedding"} : (tensor<50x16xf32>, tensor<37xi64>) -> tensor<37x16xf32>
  return %r : tensor<37x16xf32>
}
"""


def _static_embedding_ttir(no_wrap=False):
    """The TTIR of a static gather kernel (a 50 x 16 table, 37 indices; out = 2 * row)."""
    from test_triton_compile import ttir_of
    from stax._mlir import ir, new_context
    from stax.targets.kernel_ir import kernel_ops
    ctx = new_context()
    with ctx:
        m = ir.Module.parse(_EMBED_IR.replace(
            "{dim = 0 : i64}", "{dim = 0 : i64, no_negative_wrap}" if no_wrap else "{dim = 0 : i64}"))
        (k,) = kernel_ops(m)
        return ttir_of(k, "k0_embedding")


def test_triton_gather_asserts_in_range_in_the_interpreter():
    pytest.importorskip("triton")
    from ttir_interp import DeviceAssert, run_ttir
    t = _static_embedding_ttir()
    assert "tt.assert" in t.text
    w = torch.randn(50, 16)
    ids = torch.randint(-50, 50, (37,))
    out = torch.empty(37, 16)
    run_ttir(t.text, t.grid, [w, ids, out], t.name)
    g = F.embedding(torch.where(ids < 0, ids + 50, ids), w)
    torch.testing.assert_close(out, g + g)
    for bad in (50, -51, 1 << 40):
        ids2 = ids.clone()
        ids2[-1] = bad
        with pytest.raises(DeviceAssert):
            run_ttir(t.text, t.grid, [w, ids2, torch.empty(37, 16)], t.name)


def test_triton_gather_without_negative_wrap_asserts_on_a_negative_index():
    pytest.importorskip("triton")
    from ttir_interp import DeviceAssert, run_ttir
    t = _static_embedding_ttir(no_wrap=True)
    w = torch.randn(50, 16)
    ids = torch.randint(0, 50, (37,))
    out = torch.empty(37, 16)
    run_ttir(t.text, t.grid, [w, ids, out], t.name)
    torch.testing.assert_close(out, 2 * F.embedding(ids, w))
    ids[5] = -1
    with pytest.raises(DeviceAssert):
        run_ttir(t.text, t.grid, [w, ids, torch.empty(37, 16)], t.name)


def test_triton_gather_assert_compiles_to_ptx():
    pytest.importorskip("triton")
    from stax.targets.triton import compile_ttir
    t = _static_embedding_ttir()
    compiled, _ = compile_ttir(t, arch=90)
    assert "__assertfail" in compiled.asm["ptx"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_out_of_range_index_is_a_device_assert_as_in_eager():
    """In a subprocess (a device-side assert loses the process's CUDA context): eager and
    stax both fail with a device-side assert on an index past the table and on a
    negative one (F.embedding does not wrap it), and both run the in-range call; the
    stax graph's route is triton."""
    import subprocess
    import textwrap
    code = textwrap.dedent("""
        import sys, torch, torch.nn.functional as F
        import stax.backend as B
        def f(w, i):
            return F.embedding(i, w) * 2.0
        w = torch.randn(50257, 768, device="cuda")
        i = torch.randint(0, 50257, (4096,), device="cuda")
        cf = torch.compile(f, backend="stax")
        torch.testing.assert_close(cf(w, i), f(w, i))
        assert {r.route for r in B.reports()} == {"triton"}, [r.summary() for r in B.reports()]
        bad = i.clone(); bad[-1] = int(sys.argv[2])
        fn = f if sys.argv[1] == "eager" else cf
        try:
            fn(w, bad); torch.cuda.synchronize()
        except Exception as e:
            print("RAISED", type(e).__name__, str(e).splitlines()[0][:200])
            sys.exit(0)
        print("NO ERROR"); sys.exit(1)
    """)
    for who, bad in (("eager", 50257), ("stax", 50257), ("eager", -1), ("stax", -1)):
        r = subprocess.run([sys.executable, "-c", code, who, str(bad)], capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0 and "RAISED" in r.stdout, (who, r.stdout[-2000:],
                                                            r.stderr[-2000:])
        assert "device-side assert" in r.stdout or "assert" in r.stdout.lower(), r.stdout


def test_concurrent_calls_each_get_their_own_error():
    """Threads calling one compiled graph at once, some with a bad index: exactly the
    calls with a bad index raise (the kernel's record is taken under its lock), the rest
    return eager's values."""
    import concurrent.futures
    w = torch.randn(1000, 256)
    cf = torch.compile(_embed, backend="stax", dynamic=False)
    good = torch.randint(0, 1000, (512,))
    cf(w, good)
    bad = good.clone()
    bad[100] = 1000
    want = _embed(w, good)

    def call(k):
        try:
            out = cf(w, bad if k % 3 == 0 else good)
        except StaxIndexError:
            return k, "raised"
        return k, "ok" if torch.equal(out, want) else "wrong"
    # torch.compile(dynamic=False) patches Dynamo's config around each call; calls from
    # several threads can restore it out of order and leave automatic dynamic shapes
    # off for the rest of the process (torch 2.11: a later test got no dynamic graph)
    saved = torch._dynamo.config.save_config()
    try:
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            got = dict(ex.map(call, range(60)))
    finally:
        torch._dynamo.config.load_config(saved)
    assert all(v == ("raised" if k % 3 == 0 else "ok") for k, v in got.items()), got


@pytest.mark.parametrize("name,fn,x", [
    ("getitem", lambda x, i: x[i] + 1, torch.randn(0, 5)),
    ("embedding", lambda x, i: F.embedding(i, x) * 2, torch.randn(0, 5)),
    ("index_select", lambda x, i: torch.index_select(x, 1, i) - 1, torch.randn(3, 0)),
    ("two_indices", lambda x, i: x[i, i] + 1, torch.randn(4, 0)),
])
def test_a_gather_from_an_empty_dim_raises_as_eager_without_reading(name, fn, x,
                                                                     monkeypatch):
    """Every call of a gather of indices from an empty dim is eager's error; a kernel
    read at the index clamped into the empty dim (-1) and crashed the process. PyTorch
    runs the op (a fallback, listed), so the call raises eager's own error; an empty
    index from the empty dim is no error, and a native gather."""
    monkeypatch.setenv("STAX_STRICT", "0")
    i = torch.tensor([0, 0])
    with pytest.raises((IndexError, RuntimeError)) as want:
        fn(x, i)
    with pytest.raises(type(want.value), match=re.escape(str(want.value)[:40])):
        torch.compile(fn, backend="stax")(x, i)
    assert any(r.fallback_ops for r in B.reports()), [r.summary() for r in B.reports()]
    torch._dynamo.reset()
    B.clear()
    none = torch.zeros(0, dtype=torch.int64)
    got, ref = torch.compile(fn, backend="stax")(x, none), fn(x, none)
    assert got.shape == ref.shape and got.stride() == ref.stride()
    assert all(not r.fallback_ops for r in B.reports()), [r.summary() for r in B.reports()]


def test_a_gather_from_an_unbacked_dim_of_size_0_raises_before_any_kernel():
    """x[i] along a dim marked unbacked (Dynamo does not specialize its 0): the dynamic
    graph checks the size before anything runs and raises IndexError at 0 (the kernel
    read at index -1 of an empty buffer and crashed the process); an empty index is no
    error; one compile serves every size."""
    def fn(x, i):
        return x[i] + 1

    cf = torch.compile(fn, backend="stax")
    for rows in (5, 300):
        x, i = torch.randn(rows, 3), torch.tensor([0, rows - 1, -rows])
        torch._dynamo.decorators.mark_unbacked(x, 0)
        assert torch.equal(cf(x, i), fn(x, i))
    x0 = torch.randn(0, 3)
    torch._dynamo.decorators.mark_unbacked(x0, 0)
    with pytest.raises(IndexError, match="out of bounds for dimension with size 0"):
        fn(x0, torch.tensor([0, 0]))
    with pytest.raises(StaxIndexError, match=r"index\(es\) would be gathered from a dim "
                       r"of size u\d+ = 0"):
        cf(x0, torch.tensor([0, 0]))
    none = torch.zeros(0, dtype=torch.int64)
    assert cf(x0, none).shape == fn(x0, none).shape == (0, 3)
    assert _routes() == {"stax-cpu"} and all(not r.fallback_ops for r in B.reports())
