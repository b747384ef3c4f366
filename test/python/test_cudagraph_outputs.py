"""reduce-overhead outputs (stax.cudagraphs): a stale read raises, copies on request.

CPU: the error message (the graph, the output, both remedies), the copy-outputs choice
(argument, STAX_CUDAGRAPH_COPY_OUTPUTS, a bad value), the ledger's bookkeeping (one new
storage per static storage, the previous hand-out invalidated exactly once per replay,
outputs dropped by the caller are skipped, invalidation with a reason), which outputs a
runner hands out through the ledger, and a runner that cannot capture still calls
through. The CPU build of torch lacks the two CUDA primitives (a storage over device
memory, a storage that raises on access), so the ledger tests pass CPU stand-ins.

GPU (skipped without CUDA): an output held across two calls raises on access (so does a
view of it), the newest output and a previous output fed back as an argument are right;
the copy option gives independent outputs; outputs of a freed graph raise.
"""
from __future__ import annotations

import gc

import pytest
import torch

import stax.backend as B
from stax.cudagraphs import (COPY_OUTPUTS_ENV, CudaGraphRunner, OutputLedger,
                             copy_outputs_requested, stale_output_message)

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")


@pytest.fixture(autouse=True)
def _env(monkeypatch, fresh_stax):
    monkeypatch.delenv(COPY_OUTPUTS_ENV, raising=False)


# ----------------------------------------------------------------------------- CPU

def test_the_message_names_the_output_and_both_remedies():
    m = stale_output_message("inference", "g0007_inference_p1", 1, (4, 8), torch.float16)
    assert m.startswith("stax reduce-overhead: accessing output 1 (shape [4, 8], "
                        "torch.float16) of the CUDA-graph inference graph g0007_inference_p1")
    assert "a later call of the same compiled function replayed its CUDA graph" in m
    assert "out.clone()" in m and f"{COPY_OUTPUTS_ENV}=1" in m
    assert "it was freed" in stale_output_message("inference", "g", 0, (), torch.int64,
                                                  "the graph that produced it was freed")


def test_copy_outputs_choice(monkeypatch):
    assert copy_outputs_requested() is False
    assert copy_outputs_requested(True) is True
    monkeypatch.setenv(COPY_OUTPUTS_ENV, "1")
    assert copy_outputs_requested() is True and copy_outputs_requested(False) is False
    monkeypatch.setenv(COPY_OUTPUTS_ENV, "maybe")
    with pytest.raises(ValueError, match=f"{COPY_OUTPUTS_ENV}='maybe': expected 1"):
        copy_outputs_requested()


def test_copies_keep_which_outputs_share_a_storage():
    from stax.runtime.layout import clone_all_exact
    base = torch.randn(6, 8)
    alone = torch.randn(4, 5).t()[1:]
    outs = [base, base[2:].t(), None, alone, 3]
    got = clone_all_exact(outs)
    assert got[2] is None and got[4] == 3
    for g, o in zip(got[:2] + got[3:4], outs[:2] + outs[3:4]):
        assert torch.equal(g, o) and g.stride() == o.stride()
        assert g.storage_offset() == o.storage_offset()
    ptrs = [t.untyped_storage().data_ptr() for t in (got[0], got[1], got[3])]
    assert ptrs[0] == ptrs[1] != ptrs[2]
    assert base.untyped_storage().data_ptr() not in ptrs
    got[0][3, 0] = 7.0   # one storage: a write through one shows through the other
    assert got[1][0, 1] == 7.0 and base[3, 0] != 7.0


class _CpuPrimitives:
    """CPU stand-ins for the two CUDA primitives: a separate storage (no shared memory
    on the CPU build) and a record of each invalidation instead of the access error."""

    def __init__(self):
        self.poisoned: list = []

    def alias(self, static):
        return torch.UntypedStorage(static.untyped_storage().nbytes())

    def poison(self, storage, msg):
        self.poisoned.append((storage, msg))


def _describe(j, why=None):
    return stale_output_message("inference", "gT", j, (3,), torch.float32, why)


def test_ledger_invalidates_the_previous_hand_out_once_per_replay():
    p = _CpuPrimitives()
    led = OutputLedger(p.alias, p.poison)
    base = torch.zeros(6)
    a, b = base[:3], base[3:]          # two outputs on one static storage
    c = torch.zeros(3)
    first = led.hand_out([a, b, c, None], _describe)
    assert first[3] is None and p.poisoned == []
    # the layout is kept, and outputs sharing a static storage share the new one
    assert [t.storage_offset() for t in first[:3]] == [0, 3, 0]
    assert first[0].untyped_storage() is first[1].untyped_storage()
    assert first[2].untyped_storage() is not first[0].untyped_storage()
    second = led.hand_out([a, b, c, None], _describe)
    # two storages of the first hand-out invalidated, the first one's message is output 0's
    assert len(p.poisoned) == 2 and led.invalidated == 2
    assert p.poisoned[0][0] is first[0].untyped_storage()
    assert "accessing output 0" in p.poisoned[0][1] and "accessing output 2" in p.poisoned[1][1]
    # outputs the caller dropped are skipped (nothing can read them)
    del first, second
    p.poisoned.clear()
    gc.collect()
    third = led.hand_out([c], _describe)
    assert p.poisoned == []
    led.invalidate("the compiled inference graph gT that produced it was freed")
    assert len(p.poisoned) == 1 and "no longer valid: the compiled inference graph gT " \
        "that produced it was freed" in p.poisoned[0][1]
    led.invalidate("again")
    assert len(p.poisoned) == 1   # each storage once
    del third


class _CG:
    graph_id = "g_cpu"
    fallback_ops = ["aten.nonzero.default"]   # never captured: calls go straight through
    source = ""
    device = "cuda:0"
    input_names = ["x"]

    def __init__(self):
        self.notes: list = []


def test_runner_copy_option_and_passthrough(monkeypatch):
    call = lambda args: (args[0] * 2,)  # noqa: E731
    assert CudaGraphRunner(call, _CG(), "inference").clone_outputs is False
    assert CudaGraphRunner(call, _CG(), "inference", copy_outputs=True).clone_outputs
    assert CudaGraphRunner(call, _CG(), "forward").clone_outputs   # training: always
    monkeypatch.setenv(COPY_OUTPUTS_ENV, "1")
    assert CudaGraphRunner(call, _CG(), "inference").clone_outputs
    r = CudaGraphRunner(call, _CG(), "inference")
    x = torch.randn(4)
    assert torch.equal(r([x])[0], x * 2) and not r.captured and "aten.nonzero" in r.reason


def test_which_outputs_go_through_the_ledger():
    r = CudaGraphRunner(lambda a: a, _CG(), "inference")
    w = torch.nn.Parameter(torch.randn(4, 4))
    s = torch.randn(4)
    own, own_view = torch.randn(8), None
    own_view = own[2:]
    # outputs: the graph's own buffer, a view of it, an argument returned as such, a
    # view of a parameter read in place, a non-tensor
    r._static, r._borrowed = [s, w], [False, True]
    r._outs = [own, own_view, s, w.t(), 3]
    r._out_is_arg = [None, None, 0, None, None]
    assert r._hand_out_plan() == [True, True, False, False, False]


# ----------------------------------------------------------------------------- GPU

def _compiled(fn):
    return torch.compile(fn, backend="stax", mode="reduce-overhead", fullgraph=True)


def _f(x):
    return torch.sigmoid(x) * 3.0 + 1.0


@needs_cuda
def test_gpu_output_held_across_calls_raises():
    cf = _compiled(_f)
    xs = [torch.randn(256, 64, device="cuda") for _ in range(4)]
    cf(xs[0])                                   # warm-up (uncaptured, a fresh tensor)
    held = cf(xs[1])                            # capture + first replay
    view = held[:, :8]
    torch.testing.assert_close(held, _f(xs[1]))
    newest = cf(xs[2])                          # replays into the same buffer
    (runner,) = B.last_report().runners
    assert runner.captured and runner.replays >= 2
    for stale in (held, view):
        with pytest.raises(RuntimeError, match=r"stax reduce-overhead: accessing output 0 "
                           r"\(shape \[256, 64\], torch.float32\) of the CUDA-graph "
                           r"inference graph .*out\.clone\(\).*STAX_CUDAGRAPH_COPY_OUTPUTS=1"):
            stale.sum().item()
    torch.testing.assert_close(newest, _f(xs[2]))
    # the newest output fed back as the argument of the next call is read before the
    # replay overwrites it
    again = cf(newest.clone())
    fed = cf(again)
    torch.testing.assert_close(fed, _f(_f(_f(xs[2]))))


@needs_cuda
def test_gpu_copy_option_gives_independent_outputs(monkeypatch):
    monkeypatch.setenv(COPY_OUTPUTS_ENV, "1")
    cf = _compiled(_f)
    xs = [torch.randn(256, 64, device="cuda") for _ in range(5)]
    outs = [cf(x) for x in xs]
    (runner,) = B.last_report().runners
    assert runner.captured and runner.replays >= 3 and runner.clone_outputs
    for x, o in zip(xs, outs):
        torch.testing.assert_close(o, _f(x))
    ptrs = {o.data_ptr() for o in outs}
    assert len(ptrs) == len(outs)


@needs_cuda
def test_gpu_outputs_of_a_freed_graph_raise():
    cf = _compiled(_f)
    x = torch.randn(128, device="cuda")
    cf(x)
    held = cf(x)
    torch.testing.assert_close(held, _f(x))
    del cf
    torch._dynamo.reset()
    B.clear()
    gc.collect()
    with pytest.raises(RuntimeError, match="no longer valid: the compiled inference graph "
                                           ".* that produced it was freed"):
        held.sum().item()


def test_copy_outputs_option_resolves_and_is_noted_where_it_does_nothing():
    from stax.options import CPU_TARGET, TRITON_TARGET, resolve_config
    on = resolve_config("reduce-overhead", {"stax.cudagraph_copy_outputs": True},
                        target=TRITON_TARGET)
    assert on.cudagraph_copy_outputs is True and on.cudagraphs
    assert resolve_config("reduce-overhead", target=TRITON_TARGET).cudagraph_copy_outputs is None
    alone = resolve_config(None, {"stax.cudagraph_copy_outputs": True}, target=TRITON_TARGET)
    assert any("cudagraph_copy_outputs" in n and "does nothing" in n for n in alone.notes)
    cpu = resolve_config(None, {"stax.cudagraph_copy_outputs": True}, target=CPU_TARGET)
    assert any("cudagraph_copy_outputs" in n and "not applicable on CPU" in n for n in cpu.notes)


@needs_cuda
def test_gpu_copy_option_through_torch_compile_options():
    torch._dynamo.reset()
    B.clear()
    cf = torch.compile(_f, backend="stax", options={"stax.cudagraphs": True,
                                                    "stax.cudagraph_copy_outputs": True})
    xs = [torch.randn(256, 64, device="cuda") for _ in range(4)]
    outs = [cf(x) for x in xs]
    (runner,) = B.last_report().runners
    assert runner.clone_outputs
    for x, o in zip(xs, outs):
        torch.testing.assert_close(o, _f(x))
