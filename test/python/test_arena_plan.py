"""Intermediates that share arena memory (stax.arena_plan): two buffers share a slot
exactly when one's last use (its own or a view's) comes before the other's allocation;
outputs and the graph's eager ops keep buffers out; the per-buffer and total limits
send a buffer to a per-call allocation. End to end: graphs whose intermediates share
slots give eager's values on fresh inputs call after call, at the sizes users run,
and hold fewer bytes than their buffers' sum.
"""
from __future__ import annotations

import functools
import re

import pytest
import torch
import torch.nn.functional as F

import stax.arena as A
import stax.backend as B
from stax.arena_plan import ArenaAlloc, lifetimes, plan_arena


@pytest.fixture(autouse=True)
def _env(monkeypatch, fresh_stax):
    monkeypatch.setenv("STAX_STRICT", "1")


def _alloc(line, nbytes):
    return ArenaAlloc(line, nbytes, (nbytes // 4,), (1,), "torch.float32")


# a wrapper body: v1 = ...; k(v1 -> v2); v3 = view of v2; k(v3 -> v4); k(v4 -> v5)
LINES = [
    "    v1 = empty_strided(...)",     # 0
    "    k0(a0, v1)",                  # 1
    "    v2 = empty_strided(...)",     # 2
    "    k1(v1, v2)",                  # 3
    "    del v1",                      # 4
    "    v3 = as_strided(v2, ...)",    # 5
    "    v4 = empty_strided(...)",     # 6
    "    k2(v3, v4)",                  # 7
    "    del v3",                      # 8
    "    v5 = empty_strided(...)",     # 9
    "    k3(v4, v5)",                  # 10
    "    return (v5,)",                # 11
]
ALLOCS = {"v1": _alloc(0, 4096), "v2": _alloc(2, 4096), "v4": _alloc(6, 8192),
          "v5": _alloc(9, 4096)}
VIEWS = {"v3": (5, "v2")}


def test_a_lifetime_runs_to_the_last_use_of_the_buffer_or_a_view_of_it():
    spans = lifetimes(LINES, ALLOCS, VIEWS)
    assert spans["v1"] == (0, 4)
    assert spans["v2"] == (2, 8)    # its view v3 is read at line 7 and deleted at 8
    assert spans["v4"] == (6, 10)


def test_buffers_share_a_slot_only_when_their_lifetimes_do_not_overlap():
    plan = plan_arena(LINES, ALLOCS, VIEWS, {"v5"}, False, gpu=False)
    assert set(plan.slot_of) == {"v1", "v2", "v4"}       # v5 is an output
    assert plan.slot_of["v1"] != plan.slot_of["v2"]      # v2 is written while v1 is read
    assert plan.slot_of["v4"] == plan.slot_of["v1"]      # v1 is dead by line 6: grown
    assert plan.slot_bytes[plan.slot_of["v4"]] == 8192
    assert plan.held_bytes == 8192 + 4096
    assert plan.views == {"v3": "v2"}
    # the slot of a buffer still read (v2, through v3) is not handed to v4
    assert plan.slot_of["v4"] != plan.slot_of["v2"]


def test_limits_and_eager_ops(monkeypatch):
    assert not plan_arena(LINES, ALLOCS, VIEWS, set(), True, gpu=False)  # eager ops: none
    monkeypatch.setattr(A, "ARENA_MAX_BUFFER_BYTES", 4096)
    plan = plan_arena(LINES, ALLOCS, VIEWS, set(), False, gpu=False)
    assert "v4" not in plan.slot_of and set(plan.slot_of) == {"v1", "v2", "v5"}
    assert plan.slot_of["v5"] == plan.slot_of["v1"]
    monkeypatch.setattr(A, "ARENA_MAX_BUFFER_BYTES", None)
    monkeypatch.setattr(A, "ARENA_MAX_BYTES", 8192)   # v1 and v2 fit, growing to 8192 not
    plan = plan_arena(LINES, ALLOCS, VIEWS, set(), False, gpu=False)
    assert set(plan.slot_of) == {"v1", "v2", "v5"} and plan.held_bytes == 8192


def test_device_defaults():
    assert A.arena_limits(False) == (128 << 20, 32 << 20)
    assert A.arena_limits(True) == (4 << 20, 1 << 20)


def _mlp_chain(x, w1, w2):
    h = F.gelu(x @ w1, approximate="tanh")        # [B, 4D]
    h = torch.softmax(h * 0.5, -1) + h            # reads h twice
    g = (h @ w2).t()                              # a view of an intermediate
    g = torch.tanh(g) * 2.0
    return torch.layer_norm(g.t() + x, (x.shape[1],))


@pytest.mark.parametrize("batch,width", [(256, 512), (7, 96)])
def test_shared_slots_give_eager_values_call_after_call(batch, width):
    torch.manual_seed(0)
    w1, w2 = torch.randn(width, 4 * width) / width ** .5, torch.randn(4 * width, width) / 16
    f = torch.compile(_mlp_chain, backend="stax", fullgraph=True, dynamic=False)
    for _ in range(4):   # fresh inputs each call; the same slots each call
        x = torch.randn(batch, width)
        got, want = f(x, w1, w2), _mlp_chain(x, w1, w2)
        assert got.shape == want.shape and got.stride() == want.stride()
        torch.testing.assert_close(got, want, rtol=2e-5, atol=2e-5)
    (cg,) = B.last_report().graphs
    arena = cg._globals["_arena"]
    assert arena.built == 1
    assert "_slot_tensor(" in cg.source
    (note,) = [n for n in cg.notes if n.startswith("intermediates in a reused arena")]
    m = re.search(r"\((\d+) buffers in (\d+) slots", note)
    assert int(m.group(2)) < int(m.group(1)), note     # some buffers share a slot
    bufs = arena.take()
    arena.give(bufs)
    storages = {b.untyped_storage().data_ptr() for b in bufs}
    assert len(storages) == int(m.group(2))
    assert got.untyped_storage().data_ptr() not in storages


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("batch,width", [(256, 512), (7, 96)])
def test_shared_slots_on_one_stream_give_eager_values(monkeypatch, batch, width):
    """On the GPU a slot is reused by kernels enqueued on one stream after every read of
    its previous buffer; the limits raised so that the large buffers share slots too."""
    monkeypatch.setattr(A, "ARENA_MAX_BUFFER_BYTES", 64 << 20)
    monkeypatch.setattr(A, "ARENA_MAX_BYTES", 256 << 20)
    torch.manual_seed(0)
    dev = "cuda"
    w1 = torch.randn(width, 4 * width, device=dev) / width ** .5
    w2 = torch.randn(4 * width, width, device=dev) / 16
    backend = functools.partial(B.stax, options={"stax.auto_cudagraphs": False})
    f = torch.compile(_mlp_chain, backend=backend, fullgraph=True, dynamic=False)
    xs = [torch.randn(batch, width, device=dev) for _ in range(6)]
    outs = [f(x, w1, w2) for x in xs]     # enqueued back to back, synchronized once
    torch.cuda.synchronize()
    for x, got in zip(xs, outs):
        want = _mlp_chain(x, w1, w2)
        assert got.shape == want.shape and got.stride() == want.stride()
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    (cg,) = B.last_report().graphs
    assert cg.route == "triton" and "_slot_tensor(" in cg.source
    (note,) = [n for n in cg.notes if n.startswith("intermediates in a reused arena")]
    m = re.search(r"\((\d+) buffers in (\d+) slots", note)
    assert int(m.group(2)) < int(m.group(1)), note
