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

import pytest
import torch
import torch.nn.functional as F

import stax.backend as B
from stax.errors import StaxIndexError

pytestmark = pytest.mark.usefixtures("stax_strict")


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
    with pytest.raises(IndexError, match="index -11 is out of bounds for a dimension of size 10"):
        cf(x, bad)


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
