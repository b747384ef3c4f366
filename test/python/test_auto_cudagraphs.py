"""Default-mode CUDA graphs (issue 14 item 4, option stax.auto_cudagraphs).

CPU: which graphs the default mode captures (`auto_capture_blocker`: inference only, no
fallback op, at least AUTO_MIN_LAUNCHES launches, nothing uncapturable), that the
backend gives such a graph an auto runner with a note and that the option and
`max-autotune-no-cudagraphs` turn it off.

GPU (skipped without CUDA): a small graph is captured after its first call and its
outputs are fresh tensors that later calls do not overwrite; a 1-kernel graph and a
graph with large inputs are not captured (with the reason); callers on two threads and
two streams get right answers; the option turns it off.
"""
from __future__ import annotations

import threading
import types

import pytest
import torch

import stax.backend as B
from threads_harness import run_threads
from stax.cudagraphs import AUTO_MIN_LAUNCHES, auto_capture_blocker
from stax.options import resolve_config

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")


@pytest.fixture(autouse=True)
def _env(monkeypatch, fresh_stax):
    monkeypatch.setenv("STAX_STRICT", "1")
    monkeypatch.delenv("STAX_CUDAGRAPH_COPY_OUTPUTS", raising=False)


def _cg(launches=5, fallback_ops=(), source=""):
    return types.SimpleNamespace(launches_per_call=launches, fallback_ops=list(fallback_ops),
                                 source=source, route="triton", notes=[], graph_id="g",
                                 _call=lambda args: None, device="cuda:0")


# ----------------------------------------------------------------------------- CPU

def test_which_graphs_the_default_mode_captures():
    assert auto_capture_blocker(_cg(), "inference") is None
    assert "inference graphs only" in auto_capture_blocker(_cg(), "forward")
    assert "fallback ops" in auto_capture_blocker(_cg(fallback_ops=["aten.sort.default"]),
                                                  "inference")
    few = auto_capture_blocker(_cg(launches=AUTO_MIN_LAUNCHES - 1), "inference")
    assert f"{AUTO_MIN_LAUNCHES - 1} launch(es) per call" in few


def test_the_backend_gives_small_graphs_an_auto_runner_and_the_option_turns_it_off():
    cfg = resolve_config(None, target="triton")
    assert cfg.auto_cudagraphs and not cfg.cudagraphs
    rep = B.StaxReport(config=cfg, graph_names=[])
    cg = _cg()
    runner = B._cudagraph_runner(cg, "inference", cfg, rep)
    assert runner is not None and runner.auto and runner.clone_outputs
    assert rep.runners == [runner] and any("auto cudagraphs" in n for n in cg.notes)
    assert "(auto: default mode, outputs copied)" in runner.status()
    assert B._cudagraph_runner(_cg(launches=1), "inference", cfg, rep) is None
    off = resolve_config(None, {"stax.auto_cudagraphs": False}, target="triton")
    assert B._cudagraph_runner(_cg(), "inference", off, rep) is None
    assert not resolve_config("max-autotune-no-cudagraphs", target="triton").auto_cudagraphs
    ro = B._cudagraph_runner(_cg(), "inference", resolve_config("reduce-overhead",
                                                                  target="triton"), rep)
    assert ro is not None and not ro.auto and not ro.clone_outputs


def test_the_option_is_a_note_on_the_cpu():
    cfg = resolve_config(None, {"stax.auto_cudagraphs": True}, target="stax-cpu")
    assert any("stax.auto_cudagraphs" in n and "not applicable on CPU" in n
               for n in cfg.notes)


# ----------------------------------------------------------------------------- GPU

def _chain(x):
    for i in range(4):
        x = torch.tanh(x * 1.01 + 0.1)
        x = x - x.amax(dim=i % 2, keepdim=True)
    return x


@needs_cuda
def test_a_small_graph_is_captured_and_its_outputs_are_fresh():
    f = torch.compile(_chain, backend="stax", fullgraph=True, dynamic=False)
    xs = [torch.randn(32, 32, device="cuda") for _ in range(5)]
    outs = [f(x) for x in xs]
    rep = B.last_report()
    assert rep.route == "triton"
    (status,) = rep.cudagraphs
    assert "captured in a CUDA graph (auto" in status, status
    for x, o in zip(xs, outs):   # every output survives the later calls
        torch.testing.assert_close(o, _chain(x), rtol=1e-5, atol=1e-5)
    assert len({o.data_ptr() for o in outs}) == len(outs)


def _aliased_outputs(x):
    # found by the fuzzer on the H200 (program 3103009348): v9 and v8 are one tensor
    y = torch.log_softmax(x, -1)
    z = torch.logsumexp(y, [1, 2], keepdim=True).mT
    w = z.mul_(-2.0)
    return w, z, y, y[:, 1:]


@needs_cuda
@pytest.mark.parametrize("shape", [(1, 1, 1), (256, 4, 512)], ids=["1x1x1", "256x4x512"])
def test_captured_outputs_that_alias_each_other_still_do(shape):
    """The copies a captured graph hands out keep which outputs share a storage (each
    output was copied on its own, so w and z stopped aliasing from the first replay)."""
    f = torch.compile(_aliased_outputs, backend="stax", fullgraph=True, dynamic=False)
    for _ in range(4):
        x = torch.randn(shape, device="cuda")
        got, want = f(x), _aliased_outputs(x)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
            assert (g.stride(), g.storage_offset()) == (w.stride(), w.storage_offset())
        sp = [t.untyped_storage().data_ptr() for t in got]
        assert sp[0] == sp[1] and sp[2] == sp[3] and sp[0] != sp[2] and x.data_ptr() not in sp
    (status,) = B.last_report().cudagraphs
    assert "captured in a CUDA graph (auto" in status, status


@needs_cuda
def test_one_kernel_and_large_inputs_are_not_captured():
    f = torch.compile(lambda a, b: a + b, backend="stax", fullgraph=True, dynamic=False)
    a = torch.randn(1024, device="cuda")
    for _ in range(3):
        f(a, a)
    assert B.last_report().cudagraphs == []
    torch._dynamo.reset()
    B.clear()
    g = torch.compile(_chain, backend="stax", fullgraph=True, dynamic=False)
    big = torch.randn(4096, 2048, device="cuda")   # 32 MiB to copy in per call
    for _ in range(3):
        torch.testing.assert_close(g(big), _chain(big), rtol=1e-5, atol=1e-5)
    (status,) = B.last_report().cudagraphs
    assert "not captured" in status and "bytes of inputs to copy" in status, status


@needs_cuda
def test_two_threads_on_two_streams_get_their_own_answers():
    f = torch.compile(_chain, backend="stax", fullgraph=True, dynamic=False)
    f(torch.randn(32, 32, device="cuda"))
    f(torch.randn(32, 32, device="cuda"))
    errors = []

    def worker(seed):
        g = torch.Generator(device="cuda").manual_seed(seed)
        s = torch.cuda.Stream()
        try:
            with torch.cuda.stream(s):
                for _ in range(50):
                    x = torch.randn(32, 32, device="cuda", generator=g)
                    got = f(x)
                    torch.testing.assert_close(got, _chain(x), rtol=1e-5, atol=1e-5)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
    run_threads(ts)
    assert not errors, errors[0]
    assert "captured in a CUDA graph (auto" in B.last_report().cudagraphs[0]


@needs_cuda
def test_the_option_turns_it_off_on_the_gpu():
    import functools
    be = functools.partial(B.stax, options={"stax.auto_cudagraphs": False})
    f = torch.compile(_chain, backend=be, fullgraph=True, dynamic=False)
    for _ in range(3):
        f(torch.randn(32, 32, device="cuda"))
    assert B.last_report().cudagraphs == []
