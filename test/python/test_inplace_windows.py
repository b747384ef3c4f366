"""stax.inplace_windows: a decode step's cache write `cache[:, pos:pos + T] = k` into a
preallocated buffer runs in place (PyTorch's `index_copy_` into the buffer aot_autograd
copies back) in a graph compiled once for every position, instead of a select that
rebuilds the whole cache every step and aot's copy of all of it.

Checked: values of the output and both caches against eager at every step; the buffers
are the model's own (written in place, the same storage); the report names the write;
and where the old cache is read too, nothing is rewritten and the values stay right.
"""
from __future__ import annotations

import pytest
import torch

import stax.backend as B
from stax.dynamic_compile import DynamicShapes
from test_dynamic_gpu import counts  # noqa: F401
from test_dynamic_windows import DecodeAttention

pytestmark = pytest.mark.usefixtures("stax_strict")
TOL = dict(rtol=1e-4, atol=1e-4)


def _dynamic_report():
    reps = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    assert len(reps) == 1, [r.summary() for r in B.reports()]
    return reps[0]


def test_decode_caches_are_written_in_place(counts):
    torch.manual_seed(0)
    model, ref = DecodeAttention().eval(), DecodeAttention().eval()
    ref.load_state_dict(model.state_dict())
    ptrs = (model.cache_k.data_ptr(), model.cache_v.data_ptr())
    cf = torch.compile(model, backend="stax")
    with torch.no_grad():
        x = torch.randn(2, 5, 64)
        torch.testing.assert_close(cf(x, 0), ref(x, 0), **TOL)
        for pos in range(5, 17):
            x = torch.randn(2, 1, 64)
            torch.testing.assert_close(cf(x, pos), ref(x, pos), **TOL)
            torch.testing.assert_close(model.cache_k, ref.cache_k)
            torch.testing.assert_close(model.cache_v, ref.cache_v)
    assert (model.cache_k.data_ptr(), model.cache_v.data_ptr()) == ptrs
    rep = _dynamic_report()
    text = rep.summary()
    assert "2 cache write(s) in place" in text, text
    ops = {o for g in rep.graphs for o in getattr(g, "fallback_ops", ())}
    assert ops == {"aten.index_copy_.default"}, ops
    assert "writes a cache window in place" in B.reports()[-1].explain()
    assert rep.variants[0].dynamic and counts["dynamic"] == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_decode_caches_on_cuda_are_written_in_place_through_cuda_graphs(counts):
    """On CUDA the caches (module buffers: Dynamo's static inputs, which a CUDA graph
    reads in place) are written in place too, in the default mode whose CUDA graphs
    capture a position on its second call and replay it from the third: three passes
    over the positions cover the uncaptured, capturing and replaying calls."""
    torch.manual_seed(0)
    model, ref = DecodeAttention().cuda().eval(), DecodeAttention().cuda().eval()
    ref.load_state_dict(model.state_dict())
    ptrs = (model.cache_k.data_ptr(), model.cache_v.data_ptr())
    cf = torch.compile(model, backend="stax")
    with torch.no_grad():
        for _ in range(3):
            for m in (model, ref):
                m.cache_k.zero_()
                m.cache_v.zero_()
            x = torch.randn(2, 5, 64, device="cuda")
            torch.testing.assert_close(cf(x, 0), ref(x, 0), **TOL)
            for pos in range(5, 17):
                x = torch.randn(2, 1, 64, device="cuda")
                torch.testing.assert_close(cf(x, pos), ref(x, pos), **TOL)
                torch.testing.assert_close(model.cache_k, ref.cache_k)
                torch.testing.assert_close(model.cache_v, ref.cache_v)
    assert (model.cache_k.data_ptr(), model.cache_v.data_ptr()) == ptrs
    rep = _dynamic_report()
    assert rep.route == "triton" and "2 cache write(s) in place" in rep.summary(), \
        rep.summary()
    ops = {o for g in rep.graphs for o in getattr(g, "fallback_ops", ())}
    assert ops == {"aten.index_copy_.default"}, ops


class ReadsTheOldCache(torch.nn.Module):
    """The old cache is read besides the write (its sum before the step): the write must
    not run in place before that read."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.randn(2, 64, 16))

    def forward(self, x, pos: int):
        before = self.cache.sum(dim=(1, 2))
        self.cache[:, pos:pos + 1] = x
        return before, self.cache[:, :pos + 1].sum(dim=(1, 2))


def test_a_write_whose_old_value_is_read_is_not_in_place():
    model, ref = ReadsTheOldCache().eval(), ReadsTheOldCache().eval()
    ref.load_state_dict(model.state_dict())
    cf = torch.compile(model, backend="stax")
    with torch.no_grad():
        for pos in range(3, 12):
            x = torch.randn(2, 1, 16)
            for got, want in zip(cf(x, pos), ref(x, pos)):
                torch.testing.assert_close(got, want, **TOL)
            torch.testing.assert_close(model.cache, ref.cache)
    rep = _dynamic_report()
    assert "in place" not in rep.summary(), rep.summary()
    assert not [o for g in rep.graphs for o in getattr(g, "fallback_ops", ())]


def test_training_graphs_are_not_rewritten():
    """A graph with a backward is left functional (the rewrite is for inference)."""
    model = torch.nn.Linear(16, 16)
    cache = torch.zeros(2, 32, 16)

    def step(x, pos):
        y = model(x)
        cache[:, pos:pos + 1] = y.detach()
        return y.sum()

    cf = torch.compile(step, backend="stax")
    for pos in range(3, 9):
        cf(torch.randn(2, 1, 16), pos).backward()
    reps = B.reports()
    assert reps and all("in place" not in r.summary() for r in reps)
