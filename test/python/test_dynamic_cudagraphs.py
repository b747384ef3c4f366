"""CUDA graphs for graphs compiled once for every size (stax.cudagraphs_sized): one
capture per size over the one dynamic compile, in the default mode (auto) and under
reduce-overhead.

CPU: the runner's bookkeeping with a stand-in graph (one runner per size, the guards
before anything, least recently used sizes dropped, an uncaptured size skipping the
runner) and the backend's wiring on the triton route with CPU tensors (TTIR
interpreted): the runner is there, every call matches eager, a CPU tensor keeps a size
uncaptured with the reason, reduce-overhead no longer compiles per size, a wrong
argument raises StaxGuardError before anything runs.

GPU (skipped without CUDA): sizes captured on their second call and replayed, values
against eager at every call, fresh outputs in the default mode, reduce-overhead's stale
outputs, one compile for every size.
"""
from __future__ import annotations

import types

import pytest
import torch
import torch.fx.experimental._config as fx_config

import stax.backend as B
from stax import dynamic_compile
from stax.cudagraphs_sized import SizedCudaGraphs
from stax.dynamic_compile import DynamicShapes
from stax.errors import StaxGuardError

from test_dynamic_gpu import MLP, _close, counts, interpreted_triton  # noqa: F401 (fixtures)

pytestmark = pytest.mark.usefixtures("stax_strict")
HAS_CUDA = torch.cuda.is_available()


# ----------------------------------------------------------------------------- stand-ins

class _Graph:
    """What SizedCudaGraphs reads of a DynamicGraph: bind (the guards) and run_bound."""
    graph_id = "g"
    fallback_ops: list = []
    launches_per_call = 5
    device = "cuda"

    def __init__(self):
        self.binds, self.runs = 0, []

    def bind(self, args):
        self.binds += 1
        if not isinstance(args[0], int):
            raise StaxGuardError("argument 0: expected an int")
        return {"s0": args[0]}

    def run_bound(self, args, env):
        self.runs.append(env["s0"])
        return [env["s0"]]

    def __call__(self, args):
        return self.run_bound(args, self.bind(args))


class _Runner:
    made = []

    def __init__(self, call, cg, kind, copy_outputs=None, ledger=None, auto=False):
        self.call, self.cg, self.kind, self.ledger, self.auto = call, cg, kind, ledger, auto
        self.reason = "uncapturable" if cg.graph_id.endswith("[s0=13]") else None
        self.captured, self.replays, self.calls = False, 0, 0
        _Runner.made.append(self)

    def __call__(self, args):
        self.calls += 1
        self.captured = self.calls >= 2
        self.replays = max(0, self.calls - 2)
        return self.call(args)


def test_one_runner_per_size_guards_first_and_lru():
    _Runner.made = []
    g = _Graph()
    r = SizedCudaGraphs(g, auto=True, max_sizes=2, runner_factory=_Runner)
    assert r([4]) == [4] and r([4]) == [4] and r([7]) == [7]
    assert [x.cg.graph_id for x in _Runner.made] == ["g[s0=4]", "g[s0=7]"]
    assert g.binds == 3 * 2   # the sized runner binds every call; the stand-in runner runs the graph (binding) each call too
    assert all(x.ledger is r.ledger for x in _Runner.made)   # one ledger for every size
    r([4])                    # 4 becomes the most recent: 7 goes when 9 comes
    r([9])
    assert list(k for k, in r.runners) == [("s0", 4), ("s0", 9)] and r.evictions == 1
    with pytest.raises(StaxGuardError):
        r(["bad"])            # the guards run before a runner is picked
    assert len(_Runner.made) == 3
    # a size whose runner says it cannot capture runs the graph directly (no second bind)
    before = g.binds
    r([13])
    assert g.binds == before + 1 and g.runs[-1] == 13 and _Runner.made[-1].calls == 0
    s = r.status()
    assert "one CUDA graph per size (auto" in s and "s0=13: uncapturable" in s, s
    assert "dropped" in s


@pytest.mark.parametrize("auto", [True, False])
def test_sizes_that_never_come_back_stop_the_default_modes_captures(auto):
    """A decode loop's growing length: every size is new, so every runner is dropped
    before it replays. After max_sizes such drops the default mode makes no runner for a
    new size (it runs uncaptured, the graph once per call) and its status says why; a
    size that replayed keeps its runner. reduce-overhead keeps its LRU."""
    _Runner.made = []
    g = _Graph()
    r = SizedCudaGraphs(g, auto=auto, max_sizes=3, runner_factory=_Runner)
    for _ in range(3):
        assert r([7]) == [7]          # a hot size: captured, then replayed
    for n in range(20, 25):
        assert r([n]) == [n] and r([7]) == [7]   # each a new size; 7 stays hot
    made = len(_Runner.made)
    assert r([30]) == [30] and r([30]) == [30] and r([7]) == [7]
    if auto:   # 20, 21, 22 dropped unreplayed: 24 gets no runner, 23's is dropped
        assert made == 5 and len(_Runner.made) == made, made
        assert list(r.runners) == [(("s0", 7),)] and r.runners[(("s0", 7),)].calls == 9
        assert "auto-capture of new sizes stopped: 3 sizes were dropped" in r.status()
    else:
        assert len(_Runner.made) == made + 1 and r.capture_stopped is None
    assert g.runs[-3:] == [30, 30, 7]


def test_max_sizes_must_be_positive():
    with pytest.raises(ValueError, match="max_sizes"):
        SizedCudaGraphs(_Graph(), auto=True, max_sizes=0)


# ----------------------------------------------------------------------------- the backend

def _sized_runner():
    reps = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    assert len(reps) == 1, [r.summary() for r in B.reports()]
    (runner,) = reps[0].runners
    assert isinstance(runner, SizedCudaGraphs)
    return reps[0], runner


def _run_sizes(cf, model, sizes, width, device, repeat=2, dtype=torch.float32):
    outs = []
    with torch.no_grad(), fx_config.patch(backed_size_oblivious=True):
        for n in sizes:
            for _ in range(repeat):   # fresh inputs every call
                x = torch.randn(n, width, device=device, dtype=dtype)
                got = cf(x)
                _close(got, model(x))
                outs.append(got)
    return outs


def test_default_mode_wraps_the_dynamic_graph_interpreted(counts, interpreted_triton):
    torch.manual_seed(0)
    model = MLP().eval()
    cf = torch.compile(model, backend="stax", dynamic=True)
    _run_sizes(cf, model, [8, 1, 17, 8], 64, "cpu")
    assert counts == {"static": 0, "dynamic": 1}
    rep, runner = _sized_runner()
    assert runner.auto and rep.route == "triton"
    assert any("one CUDA graph per size" in n for n in rep.notes), rep.notes
    # CPU tensors: nothing is captured, and the report says why
    assert runner.runners == {} and "not a CUDA device" in runner.reason
    assert "not captured" in rep.cudagraphs[0] and "cpu" in rep.cudagraphs[0], rep.cudagraphs
    # the guards are the graph's: a wrong argument is refused before anything runs
    with pytest.raises(StaxGuardError, match="arguments expected"):
        runner([])
    args = []
    for c in sorted(runner.graph.checks, key=lambda c: c.index):
        if c.kind == "tensor":
            dims = [d if isinstance(d, int) else 5 for d in c.dims]
            args.append(torch.randn(dims, dtype=torch.float64))   # the wrong dtype
        else:
            args.append(5)
    with pytest.raises(StaxGuardError, match="dtype"):
        runner(args)


def test_reduce_overhead_compiles_inference_once_interpreted(counts, interpreted_triton):
    torch.manual_seed(0)
    model = MLP().eval()
    cf = torch.compile(model, backend="stax", dynamic=True, mode="reduce-overhead")
    _run_sizes(cf, model, [8, 3, 33], 64, "cpu")
    assert counts == {"static": 0, "dynamic": 1}
    rep, runner = _sized_runner()
    assert not runner.auto and len(rep.variants) == 1 and rep.variants[0].dynamic


def test_no_runner_when_auto_cudagraphs_is_off(counts, interpreted_triton):
    model = MLP().eval()
    cf = torch.compile(model, backend="stax", dynamic=True,
                       options={"stax.auto_cudagraphs": False})
    _run_sizes(cf, model, [8, 3], 64, "cpu", repeat=1)
    reps = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    assert len(reps) == 1 and reps[0].runners == []


def test_training_under_reduce_overhead_stays_per_size():
    cfg = types.SimpleNamespace(target="triton", cudagraphs=True)
    gm = torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())
    x = torch.randn(3, 4, requires_grad=True)
    with pytest.raises(dynamic_compile.CannotStayDynamic, match="training graphs"):
        dynamic_compile.compile_dynamic(gm, [x], None, cfg)


# ------------------------------------------------------------------------------ on a GPU

@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_each_size_captured_and_replayed_cuda(counts, dtype):
    torch.manual_seed(0)
    model = MLP(512, 2048, 512).to("cuda", dtype).eval()
    cf = torch.compile(model, backend="stax", dynamic=True)
    sizes = [256, 1, 257, 17, 1000, 256]
    outs = _run_sizes(cf, model, sizes, 512, "cuda", repeat=3, dtype=dtype)
    assert counts == {"static": 0, "dynamic": 1}
    rep, runner = _sized_runner()
    assert rep.route == "triton" and rep.fallback_reason is None
    assert len(runner.runners) == 5
    for key, r in runner.runners.items():
        assert r.captured and r.reason is None, (key, r.status())
    assert runner.replays >= 5, runner.status()
    # default mode: every output is a fresh tensor, never a static buffer handed out twice
    ptrs = [o.untyped_storage().data_ptr() for o in outs]
    live = {}
    for o, p in zip(outs, ptrs):
        assert p not in live, "two outputs share storage"
        live[p] = o


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_reduce_overhead_dynamic_stale_outputs_cuda(counts):
    torch.manual_seed(0)
    model = MLP(512, 2048, 512).cuda().eval()
    cf = torch.compile(model, backend="stax", dynamic=True, mode="reduce-overhead")
    with torch.no_grad(), fx_config.patch(backed_size_oblivious=True):
        for n in (64, 64, 64, 33, 33, 33):
            x = torch.randn(n, 512, device="cuda")
            _close(cf(x).clone(), model(x))
        x = torch.randn(64, 512, device="cuda")
        first = cf(x)
        kept = first.clone()
        cf(torch.randn(33, 512, device="cuda"))   # another size's replay
        with pytest.raises(RuntimeError, match="overwr|stale|replay"):
            first.sum().item()
        _close(kept, model(x))
    assert counts == {"static": 0, "dynamic": 1}
    _, runner = _sized_runner()
    assert not runner.auto and all(r.captured for r in runner.runners.values())


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_gpt2_block_sizes_captured_cuda(counts):
    from models import GPT2Block
    torch.manual_seed(0)
    model = GPT2Block(768, 12, max_seq=1024).cuda().eval()
    cf = torch.compile(model, backend="stax", dynamic=True)
    with torch.no_grad():
        # batches >= 2: Dynamo specializes a size of 1 (a static graph of its own)
        for b, t in [(2, 32), (2, 32), (2, 32), (4, 17), (4, 17), (4, 17), (3, 128),
                     (3, 128), (2, 32)]:
            x = torch.randn(b, t, 768, device="cuda")
            _close(cf(x), model(x))
    assert counts == {"static": 0, "dynamic": 1}
    _, runner = _sized_runner()
    assert sum(r.captured for r in runner.runners.values()) == 3, runner.status()
