"""Large CPU buffers on huge pages (stax.runtime.cpu_alloc): the wrapper allocates an
output of 4 MiB or more with `_empty_huge_pages` (advised MADV_HUGEPAGE before its
first touch), smaller ones with `empty_strided`; either way the output has eager's
shape, strides and values, is fresh each call, and a saved graph loads and runs it.
A large buffer is handed out again only when nothing else holds its storage (the
recycler): never while a tensor, a view, a saved tensor of autograd or a numpy array
still reads it.
"""
from __future__ import annotations

import pytest
import torch

import stax.backend as B
from stax.runtime import cpu_alloc
from stax.runtime.cpu_alloc import HUGE_PAGE_MIN_BYTES, OutputRecycler, empty_huge_pages


@pytest.fixture(autouse=True)
def _env(monkeypatch, fresh_stax):
    monkeypatch.setenv("STAX_STRICT", "1")


@pytest.mark.parametrize("shape,strides", [((8192, 1024), (1024, 1)), ((3, 5), (1, 3)),
                                           ((0, 4), (4, 1)), ((1025, 1031), (1, 1025))])
def test_empty_huge_pages_is_an_empty_strided(shape, strides):
    t = empty_huge_pages(shape, strides, torch.float32)
    assert tuple(t.shape) == shape and t.stride() == strides and t.storage_offset() == 0
    assert t.dtype == torch.float32 and t.device.type == "cpu"
    src = torch.randn(shape)
    t.copy_(src)
    assert torch.equal(t, src)


def _softmax(x):
    return torch.softmax(x * 0.5, -1)


@pytest.mark.parametrize("rows", [2048, 8])
def test_large_outputs_on_huge_pages_small_ones_plain(rows, tmp_path):
    f = torch.compile(_softmax, backend="stax", fullgraph=True)
    outs = []
    for _ in range(3):
        x = torch.randn(rows, 1024)
        got = f(x)
        assert got.stride() == (1024, 1)
        torch.testing.assert_close(got, _softmax(x))
        outs.append((x, got))
    for x, got in outs:     # each call's output is its own
        torch.testing.assert_close(got, _softmax(x))
    (cg,) = B.last_report().graphs
    big = rows * 1024 * 4 >= HUGE_PAGE_MIN_BYTES
    assert ("_empty_huge_pages(" in cg.source) == big, cg.source
    from stax.compiled_graph import CompiledGraph
    p = tmp_path / "g.pt"
    cg.save(str(p))
    x = torch.randn(rows, 1024)
    torch.testing.assert_close(CompiledGraph.load(str(p))(x)[0], _softmax(x))


def _ptr(t):
    return t.untyped_storage().data_ptr()


@pytest.fixture
def recycler(monkeypatch):
    r = OutputRecycler(1 << 30)
    monkeypatch.setattr(cpu_alloc, "RECYCLER", r)
    return r


def test_a_dropped_output_is_recycled_and_correct(recycler):
    f = torch.compile(_softmax, backend="stax", fullgraph=True)
    x = torch.randn(2048, 1024)
    first = _ptr(f(x))                       # dropped at once
    for _ in range(3):
        x = torch.randn(2048, 1024)
        got = f(x)
        assert _ptr(got) == first            # the same buffer, nobody else holds it
        torch.testing.assert_close(got, _softmax(x))
        del got
    assert recycler.stats["new"] == 1 and recycler.stats["recycled"] == 3


@pytest.mark.parametrize("holder", ["tensor", "view", "numpy", "list", "saved"])
def test_a_held_output_is_never_handed_out_again(recycler, holder):
    def fn(x):
        return torch.exp(x * 0.5)

    f = torch.compile(fn, backend="stax", fullgraph=True)
    req = holder == "saved"
    x = torch.randn(2048, 1024, requires_grad=req)
    out = f(x)
    want = fn(x).detach().clone()
    keep = {"tensor": lambda o: o, "view": lambda o: o[7:, 3:].t(),
            "numpy": lambda o: o.detach().numpy(), "list": lambda o: [o],
            # exp saves its output for the backward: autograd holds the buffer
            "saved": lambda o: o.sum()}[holder](out)
    ptr = _ptr(out)
    del out
    for _ in range(3):
        y = f(torch.randn(2048, 1024, requires_grad=req))
        assert _ptr(y) != ptr
        del y
    if holder == "saved":
        keep.backward()                      # autograd read what it saved: intact
        torch.testing.assert_close(x.grad, 0.5 * want)
    else:
        got = {"tensor": lambda k: k, "view": lambda k: k.t()[:, :],
               "numpy": lambda k: torch.from_numpy(k), "list": lambda k: k[0]}[holder](keep)
        ref = want[7:, 3:] if holder == "view" else want
        torch.testing.assert_close(got.detach(), ref)


def test_recycling_off_and_the_idle_cap(monkeypatch):
    r = OutputRecycler(0)
    monkeypatch.setattr(cpu_alloc, "RECYCLER", r)
    for _ in range(3):
        t = empty_huge_pages((2048, 1024), (1024, 1), torch.float32)
        del t
    assert r.stats == {"new": 3, "recycled": 0, "dropped": 0}
    r = OutputRecycler(10 << 20)             # room for one idle 8 MiB buffer, not two
    monkeypatch.setattr(cpu_alloc, "RECYCLER", r)
    a = empty_huge_pages((2048, 1024), (1024, 1), torch.float32)
    b = empty_huge_pages((2048, 1024), (1024, 1), torch.float32)
    del a, b
    c = empty_huge_pages((1024, 1024), (1024, 1), torch.float32)   # another size: trims
    assert r.stats["dropped"] == 1 and len(r._held) == 2
    del c


def test_bad_cache_size_names_the_variable(monkeypatch):
    monkeypatch.setenv("STAX_CPU_OUTPUT_CACHE_MB", "lots")
    with pytest.raises(ValueError, match="STAX_CPU_OUTPUT_CACHE_MB='lots'"):
        cpu_alloc._cap_from_env()


def test_concurrent_calls_never_share_a_live_buffer(recycler):
    import concurrent.futures
    f = torch.compile(_softmax, backend="stax", fullgraph=True)
    f(torch.randn(2048, 1024))

    def call(k):
        x = torch.full((2048, 1024), float(k % 7))
        out = f(x)
        ok = bool(torch.all(out == 1.0 / 1024))   # a constant row: exactly uniform
        return _ptr(out), ok, out

    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        results = list(ex.map(call, range(40)))
    assert all(ok for _, ok, _ in results)
    live = [p for p, _, _ in results]
    assert len(set(live)) == len(live)       # all 40 outputs alive: 40 buffers


def test_dynamic_graph_outputs_are_recycled_too(recycler):
    """A graph compiled once for every size (dynamic=True) takes its large kernel outputs
    from the same recycler: a dropped output's buffer serves the next call of its size,
    a held one never does, and every call's values are eager's."""
    f = torch.compile(_softmax, backend="stax", dynamic=True)
    for rows in (2048, 2000):
        x = torch.randn(rows, 1024)
        torch.testing.assert_close(f(x), _softmax(x))
    x = torch.randn(2048, 1024)
    first = _ptr(f(x))
    kept = f(x)
    assert _ptr(kept) == first               # the dropped one's buffer
    y = f(torch.randn(2048, 1024))
    assert _ptr(y) != _ptr(kept)             # kept is held: a buffer of its own
    torch.testing.assert_close(kept, _softmax(x))
    assert recycler.stats["recycled"] >= 2
