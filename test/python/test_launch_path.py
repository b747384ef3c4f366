"""The lean per-call path (issue 14): fast guards, the intermediate-buffer arena, and
Triton kernels bound to their C launcher.

CPU: the wrapper checks its tensors with one C++ call (guards.FastTensorGuards) and
still names a bad argument exactly as the full guards do; a call whose tensors differ
only where the full guards do not look (the stride of a size-1 dim) still runs; the
arena (stax.arena) is used only where no output can alias it, gives fresh outputs that a
later call does not overwrite, builds one set for sequential calls and one per
concurrent call (threads), and is off for a graph with a fallback op or above its byte
limit.

GPU (skipped without CUDA): every kernel kind (pointwise with a vector tail, persistent,
looped and split reductions (rows and columns), fp8 encode) gives bit-identical outputs
through the bound launch and through Triton's checked path; a split reduction reuses its
workspaces on one stream and is right on a second stream; the arena and the split
workspaces are right under reduce-overhead (CUDA graph capture).
"""
from __future__ import annotations

import functools
import threading

import pytest
import torch

import stax.backend as B
from stax.errors import StaxGuardError
from threads_harness import run_threads

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")


@pytest.fixture(autouse=True)
def _env(monkeypatch, fresh_stax):
    monkeypatch.setenv("STAX_STRICT", "1")


def _graph():
    (cg,) = [g for g in B.last_report().graphs]
    return cg


def _chain(x, w):
    h = torch.tanh(x @ w) * 1.5
    h = h - h.amax(dim=1, keepdim=True)
    return torch.sigmoid(h) + 1.0


# ----------------------------------------------------------------------------- CPU

def test_fast_guards_run_and_still_name_a_bad_argument():
    f = torch.compile(_chain, backend="stax", fullgraph=True, dynamic=False)
    x, w = torch.randn(256, 512), torch.randn(512, 512)
    torch.testing.assert_close(f(x, w), _chain(x, w))
    cg = _graph()
    assert "_fast_guards.check(" in cg.source
    fast = cg._globals["_fast_guards"]
    assert fast.check(x, w) is True  # armed by the first call's arguments
    assert fast.check(x, w.t()) is False and fast.check(x.double(), w) is False
    with pytest.raises(StaxGuardError, match=r"argument 1 .* has strides \(1, 512\)"):
        cg(x, w.t())
    with pytest.raises(StaxGuardError, match=r"dtype torch.float64"):
        cg(x.double(), w)


def test_a_call_the_fast_check_refuses_but_the_guards_accept_runs():
    """A size-1 dim's stride is not checked by the guards but is by the C++ check."""
    def f(x):
        return torch.exp(x) * 2.0
    cf = torch.compile(f, backend="stax", fullgraph=True, dynamic=False)
    x = torch.randn(1, 4096)
    torch.testing.assert_close(cf(x), f(x))
    cg = _graph()
    odd = torch.as_strided(torch.randn(4096 * 8), (1, 4096), (7, 1))  # size-1 dim's stride
    assert odd.stride() != x.stride()
    torch.testing.assert_close(cg(odd)[0], f(odd))
    assert cg._globals["_fast_guards"].check(x) is True  # still armed with the first


def test_arena_outputs_are_fresh_and_survive_later_calls():
    f = torch.compile(_chain, backend="stax", fullgraph=True, dynamic=False)
    w = torch.randn(512, 512)
    xs = [torch.randn(256, 512) for _ in range(4)]
    outs = [f(x, w) for x in xs]
    cg = _graph()
    assert "_arena.take()" in cg.source, cg.source
    arena = cg._globals["_arena"]
    assert arena.built == 1, arena.built  # sequential calls share one set
    for x, o in zip(xs, outs):  # an earlier output is not overwritten by a later call
        torch.testing.assert_close(o, _chain(x, w))
    assert len({o.data_ptr() for o in outs}) == len(outs)
    bufs = arena.take()
    arena.give(bufs)
    out_storages = {o.untyped_storage().data_ptr() for o in outs}
    assert not out_storages & {b.untyped_storage().data_ptr() for b in bufs}


def test_arena_is_one_set_per_concurrent_call():
    f = torch.compile(_chain, backend="stax", fullgraph=True, dynamic=False)
    w = torch.randn(512, 512)
    f(torch.randn(256, 512), w)
    cg = _graph()
    errors: list = []
    barrier = threading.Barrier(4)

    def worker(seed):
        g = torch.Generator().manual_seed(seed)
        try:
            barrier.wait()
            for _ in range(20):
                x = torch.randn(256, 512, generator=g)
                torch.testing.assert_close(cg(x, w)[0], _chain(x, w))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    run_threads(threads)
    assert not errors, errors[0]
    # one set per concurrent call at most, not one per call (80 calls here)
    assert 1 <= cg._globals["_arena"].built <= 5, cg._globals["_arena"].built


def test_an_output_that_views_an_intermediate_stays_out_of_the_arena():
    def f(x):
        h = torch.exp(x) + 1.0          # an intermediate ...
        return h.t(), torch.tanh(h)     # ... that the first output views
    cf = torch.compile(f, backend="stax", fullgraph=True, dynamic=False)
    x1, x2 = torch.randn(256, 512), torch.randn(256, 512)
    o1 = cf(x1)
    cf(x2)
    for got, want in zip(o1, f(x1)):
        torch.testing.assert_close(got, want)
    arena = _graph()._globals.get("_arena")
    if arena is not None:   # the viewed intermediate is none of the arena's buffers
        bufs = arena.take()
        arena.give(bufs)
        held = {b.untyped_storage().data_ptr() for b in bufs}
        assert o1[0].untyped_storage().data_ptr() not in held


def test_arena_limit_and_fallback_ops_turn_it_off(monkeypatch):
    import stax.arena as A
    monkeypatch.setattr(A, "ARENA_MAX_BUFFER_BYTES", 1024)
    f = torch.compile(_chain, backend="stax", fullgraph=True, dynamic=False)
    x, w = torch.randn(256, 512), torch.randn(512, 512)
    torch.testing.assert_close(f(x, w), _chain(x, w))
    assert "_arena" not in _graph().source
    # (the planner's own cases: test_arena_plan.py)


def test_a_saved_graph_keeps_its_fast_guards_and_arena(tmp_path):
    from stax.compiled_graph import CompiledGraph
    f = torch.compile(_chain, backend="stax", fullgraph=True, dynamic=False)
    x, w = torch.randn(256, 512), torch.randn(512, 512)
    f(x, w)
    p = tmp_path / "g.pt"
    _graph().save(str(p))
    g = CompiledGraph.load(str(p))
    for _ in range(2):
        torch.testing.assert_close(g(x, w)[0], _chain(x, w))
    assert g._globals["_arena"].built == 1 and g._globals["_fast_guards"].check(x, w)


def test_bound_launch_calls_the_c_launcher_unless_a_hook_is_installed():
    """The bound launch calls Triton's C `launch` directly while no launch hook is
    installed, and Triton's full path once one is. Triton 3.6 keeps its hooks in a
    HookChain that is never None: an empty chain is no hook (taking it for one sent every
    launch of every graph through the full path on the H200)."""
    triton = pytest.importorskip("triton")
    from triton import knobs

    from stax.targets.triton_launch import bind_launch, hook_installed

    calls = []

    class Runner:
        launch_cooperative_grid = False
        launch_pdl = False
        global_scratch_size = 0
        profile_scratch_size = 0

        def launch(self, *args):
            calls.append(("c", args[:3], args[-1]))

    class Compiled:   # the parts of triton's CompiledKernel that bind_launch reads
        run = Runner()
        function = 1234
        packed_metadata = ("meta",)

        def _init_handles(self):
            pass

        def __getitem__(self, grid):
            return lambda *args, stream=None: calls.append(("full", grid, args[-1]))

    launch = bind_launch(Compiled(), (7, 1, 1))
    hook = knobs.runtime.launch_enter_hook
    assert not hook_installed(hook), f"triton {triton.__version__}: {hook!r} counts as a hook"
    launch(0, "x")
    assert calls == [("c", (7, 1, 1), "x")]

    def profiler_hook(metadata):
        pass

    if hasattr(hook, "add"):
        hook.add(profiler_hook)
        try:
            assert hook_installed(hook)
            launch(0, "y")
        finally:
            hook.remove(profiler_hook)
    else:   # older Triton: the hook is a plain attribute
        knobs.runtime.launch_enter_hook = profiler_hook
        try:
            launch(0, "y")
        finally:
            knobs.runtime.launch_enter_hook = None
    assert calls[-1] == ("full", (7, 1, 1), "y")
    launch(0, "z")
    assert calls[-1] == ("c", (7, 1, 1), "z")


# ----------------------------------------------------------------------------- GPU

def _bits(t):
    t = t.detach()
    if t.dtype.is_floating_point:
        t = t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[
            t.element_size()])
    return t.cpu()


def _fast_then_checked(fn, *args):
    """Outputs through the bound launch, then with every kernel on Triton's checked path
    (`TritonKernel.__call__`), for the same inputs; the kernels of the graph."""
    # uncaptured: a default-mode CUDA graph replay would not launch the patched kernels
    backend = functools.partial(B.stax, options={"stax.auto_cudagraphs": False})
    cf = torch.compile(fn, backend=backend, fullgraph=True, dynamic=False)
    cf(*args)
    fast = cf(*args)
    cg = _graph()
    kernels = list(cg.kernels)
    for k in kernels:
        assert callable(k.__dict__.get("launch")), f"{k.name} was not bound"
        k.launch = (lambda stream, *t, _k=k: _k(*t))
    slow = cf(*args)
    fast = fast if isinstance(fast, (tuple, list)) else (fast,)
    slow = slow if isinstance(slow, (tuple, list)) else (slow,)
    for a, b in zip(fast, slow):
        assert a.shape == b.shape and a.stride() == b.stride()
        assert torch.equal(_bits(a), _bits(b))
    return kernels, fast


def _softmax(x):
    return torch.softmax(x * 1.25, dim=-1)


CASES = {
    # pointwise with a vector tail (1000 columns)
    "pointwise": (lambda x, y: torch.tanh(x) * y + 1.0, [(1024, 1000), (1024, 1000)],
                  "pointwise"),
    "persistent": (_softmax, [(512, 1024)], "reduction-persistent"),
    "looped": (_softmax, [(64, 30000)], "reduction-looped"),
    "split_rows": (lambda x: x.sum(dim=1) * 2.0, [(4, 50000)], "reduction-split"),
    "split_columns": (lambda x: x.sum(dim=0) + 1.0, [(16384, 96)], "reduction-split"),
}


@needs_cuda
@pytest.mark.parametrize("case", list(CASES))
def test_bound_launch_is_bit_identical_to_the_checked_path(case):
    fn, shapes, kind = CASES[case]
    args = [torch.randn(s, device="cuda") for s in shapes]
    kernels, out = _fast_then_checked(fn, *args)
    assert kind in {k.kind for k in kernels}, [k.kind for k in kernels]
    ref = fn(*args)  # eager sums in another order: f32 rounding of up to 50,000 terms
    torch.testing.assert_close(out[0], ref, rtol=1e-4, atol=1e-4)


@needs_cuda
def test_bound_launch_fp8_encode_is_bit_identical():
    def f(x):
        return (x * 3.0).to(torch.float8_e4m3fn)
    x = torch.randn(1024, 1000, device="cuda") * 100
    x[0, :4] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0])
    _, out = _fast_then_checked(f, x)
    assert torch.equal(_bits(out[0]), _bits(f(x)))


@needs_cuda
def test_split_workspaces_are_reused_per_stream_and_right_on_another():
    def f(x):
        return x.sum(dim=0) * 0.5
    cf = torch.compile(f, backend="stax", fullgraph=True, dynamic=False)
    xs = [torch.randn(16384, 96, device="cuda") for _ in range(3)]
    outs = [cf(x) for x in xs]
    (k,) = [k for k in _graph().kernels if k.kind == "reduction-split"]
    assert len(k.launch.workspaces) == 1
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        side_out = cf(xs[0])
    torch.cuda.synchronize()
    assert len(k.launch.workspaces) == 2
    for x, o in zip(xs, outs):
        torch.testing.assert_close(o, f(x), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(side_out, f(xs[0]), rtol=1e-5, atol=1e-4)


@needs_cuda
def test_arena_and_split_under_reduce_overhead():
    def f(x, w):
        h = torch.tanh(x @ w)
        return h.sum(dim=0) + torch.softmax(h, dim=-1).amax(dim=0)
    cf = torch.compile(f, backend="stax", fullgraph=True, dynamic=False,
                       mode="reduce-overhead")
    w = torch.randn(512, 96, device="cuda")
    for _ in range(5):
        x = torch.randn(16384, 512, device="cuda")
        got = cf(x, w).clone()
        torch.testing.assert_close(got, f(x, w), rtol=2e-3, atol=2e-3)
    rep = B.last_report()
    assert rep.route == "triton" and rep.cudagraphs, (rep.route, rep.cudagraphs)
