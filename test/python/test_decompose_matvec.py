"""A batched matmul with one row or one column as a multiply and a sum, in kernels
(stax-decompose-matvec: on by default, `stax.decompose_matvec="off"` leaves it out).

A decode step's `q @ k^T` and `p @ v` over a KV-cache window were library bmms on heads
copied out of the cache every step (`[b, h, n, d]` regrouped to `[b*h, n, d]`). Now the
attention is kernels that read the cache where it lies: no library call is left. Checked
against eager on fresh random inputs, static and with the cache length symbolic (one
compile for every length, 1 and a prime among them), f32 and bf16, forward and backward,
values, shapes and strides.
"""
from __future__ import annotations

import pytest
import torch

import stax.backend as B
from stax.fuzz.compare import _significant_strides
from test_dynamic_gpu import counts, interpreted_triton  # noqa: F401
from test_dynamic_prefix_slices import assert_dynamic_only

pytestmark = pytest.mark.usefixtures("stax_strict")
BATCH, HEADS, HEAD_DIM, MOST = 4, 8, 64, 520
ON = {"stax.decompose_matvec": "on"}
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}


def decode_attention(q, cache_k, cache_v, n: int):
    """One query token per sequence against the first n cached positions."""
    b = q.shape[0]
    keys = cache_k[:b, :n].view(b, n, HEADS, HEAD_DIM).transpose(1, 2)
    vals = cache_v[:b, :n].view(b, n, HEADS, HEAD_DIM).transpose(1, 2)
    q = q.view(b, 1, HEADS, HEAD_DIM).transpose(1, 2)
    att = torch.softmax(q @ keys.transpose(-1, -2) * HEAD_DIM ** -0.5, dim=-1)
    return (att @ vals).transpose(1, 2).reshape(b, 1, HEADS * HEAD_DIM)


def _caches(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    shape = (BATCH, MOST, HEADS * HEAD_DIM)
    return (torch.randn(shape, generator=g).to(dtype), torch.randn(shape, generator=g).to(dtype))


def _assert_like_eager(got, want, dtype):
    """Values, shape, dtype, offset and the strides of dims of more than one element
    (a size-1 dim's stride is no layout: stax.fuzz.compare's rule)."""
    assert got.shape == want.shape and _significant_strides(got) == _significant_strides(want)
    assert got.dtype == want.dtype and got.storage_offset() == want.storage_offset()
    torch.testing.assert_close(got, want, **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_decode_attention_is_kernels_without_a_library_matmul(dtype):
    ck, cv = _caches(dtype)
    q = torch.randn(BATCH, 1, HEADS * HEAD_DIM).to(dtype)
    torch._dynamo.reset()
    cf = torch.compile(decode_attention, backend="stax", dynamic=False, options=ON)
    _assert_like_eager(cf(q, ck, cv, 300), decode_attention(q, ck, cv, 300), dtype)
    rep = B.reports()[-1]
    assert rep.route == "stax-cpu" and rep.library_calls == [], rep.summary()
    assert rep.fallback_ops == [], rep.summary()


def test_decode_attention_compiles_once_for_every_cache_length(counts):
    ck, cv = _caches(torch.float32, seed=1)
    cf = torch.compile(decode_attention, backend="stax", dynamic=True, options=ON)
    g = torch.Generator().manual_seed(2)
    for n in (300, 1, 2, 97, 513, 512, 64):
        q = torch.randn(BATCH, 1, HEADS * HEAD_DIM, generator=g)
        _assert_like_eager(cf(q, ck, cv, n), decode_attention(q, ck, cv, n), torch.float32)
    # (n = 1 is Dynamo's own specialization: a second graph, also dynamic in the rest)
    for rep in assert_dynamic_only("stax-cpu", counts, most=2):
        assert rep.library_calls == [], rep.summary()


def test_matrix_times_a_column_and_a_row_train():
    """`a @ x` with x one column and `y @ b` with y one row, through their backward."""
    def fn(a, x, y, b):
        return torch.tanh(a @ x).sum(-1) + (y @ b).sum(-2) * 0.5

    g = torch.Generator().manual_seed(3)
    shapes = [(256, 7, 512), (256, 512, 1), (256, 1, 600), (256, 600, 7)]
    inputs = [torch.randn(s, generator=g) for s in shapes]
    mine = [t.clone().requires_grad_() for t in inputs]
    ref = [t.clone().requires_grad_() for t in inputs]
    torch._dynamo.reset()
    got = torch.compile(fn, backend="stax", options=ON)(*mine)
    want = fn(*ref)
    _assert_like_eager(got, want, torch.float32)
    w = torch.randn(want.shape, generator=g)
    (got * w).sum().backward()
    (want * w).sum().backward()
    for a, e in zip(mine, ref):
        torch.testing.assert_close(a.grad, e.grad, rtol=1e-4, atol=1e-4)
    rep = B.reports()[-1]   # the forward and the backward (its outer products too)
    assert rep.route == "stax-cpu" and rep.library_calls == [], rep.summary()


@pytest.mark.parametrize("choice", ["auto", "off"])
def test_off_the_bmms_stay_and_by_default_the_cpu_decomposes_them(choice):
    """"off" keeps the library bmms; the default ("auto") decomposes them on the CPU."""
    ck, cv = _caches(torch.float32, seed=4)
    q = torch.randn(BATCH, 1, HEADS * HEAD_DIM)
    torch._dynamo.reset()
    # (with "off", stax-fuse-attention would make the step one attention call)
    cf = torch.compile(decode_attention, backend="stax",
                       options={"stax.decompose_matvec": choice, "stax.fuse_attention": "off"})
    _assert_like_eager(cf(q, ck, cv, 200), decode_attention(q, ck, cv, 200), torch.float32)
    calls = B.reports()[-1].library_calls
    if choice == "off":
        assert len(calls) == 2 and all("bmm" in c for c in calls), calls
    else:
        assert calls == [], calls


def test_by_default_the_triton_route_decomposes_them_too(interpreted_triton, counts):
    """"auto" puts the pass in on the triton route too (decode.py on the H100: 0.39
    against 0.49 ms a step)."""
    ck, cv = _caches(torch.float32, seed=6)
    cf = torch.compile(decode_attention, backend="stax", dynamic=True)
    for n in (5, 3):
        q = torch.randn(BATCH, 1, HEADS * HEAD_DIM)
        _assert_like_eager(cf(q, ck, cv, n), decode_attention(q, ck, cv, n), torch.float32)
    for rep in assert_dynamic_only("triton", counts, most=1):
        assert rep.library_calls == [], rep.summary()


def test_on_the_triton_route_when_asked(interpreted_triton, counts):
    """"on" compiles the same kernels through Triton (interpreted here), one compile for
    every cache length."""
    ck, cv = _caches(torch.float32, seed=5)
    cf = torch.compile(decode_attention, backend="stax", dynamic=True,
                       options={"stax.decompose_matvec": "on"})
    for n in (5, 3, 11):
        q = torch.randn(BATCH, 1, HEADS * HEAD_DIM)
        _assert_like_eager(cf(q, ck, cv, n), decode_attention(q, ck, cv, n), torch.float32)
    for rep in assert_dynamic_only("triton", counts, most=1):
        assert rep.library_calls == [], rep.summary()
