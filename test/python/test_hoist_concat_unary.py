"""stax-hoist-concat-unary end to end (passes/hoist_concat_unary.py): rotate-half and other
unary ops on a concat's operands compile to one kernel with the concat and its readers,
with eager's values, strides and gradients, on the CPU route and on the Triton route
(its TTIR interpreted on the CPU, every load bounds-checked)."""
from __future__ import annotations

import pytest
import torch

import stax.backend as B
from models import make_model

pytestmark = pytest.mark.usefixtures("stax_strict")

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}


def _rotary(x, cos, sin):
    h = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., h:], x[..., :h]), dim=-1) * sin


def _mixed(x, y):
    """Unary ops on both operands of a cat along a middle dim, read by a reduction."""
    return torch.cat((torch.exp(x), torch.tanh(y)), dim=1).sum(-1)


def _close(got, want):
    assert got.shape == want.shape and got.stride() == want.stride()
    torch.testing.assert_close(got, want, **TOL[want.dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_rotate_half_is_one_kernel(dtype):
    x = torch.randn(4, 8, 256, 128, dtype=dtype)   # [B, H, T, D]: 1M elements
    cos, sin = torch.randn(256, 128, dtype=dtype), torch.randn(256, 128, dtype=dtype)
    cf = torch.compile(_rotary, backend="stax")
    _close(cf(x, cos, sin), _rotary(x, cos, sin))
    r = B.last_report()
    assert r.route == "stax-cpu" and sum(len(g.kernels) for g in r.graphs) == 1, r.summary()


def test_rotate_half_gradients():
    x = torch.randn(2, 4, 512, 64, requires_grad=True)
    cos, sin = torch.randn(512, 64), torch.randn(512, 64)
    xr = x.detach().clone().requires_grad_(True)
    cf = torch.compile(_rotary, backend="stax")
    got, want = cf(x, cos, sin), _rotary(xr, cos, sin)
    _close(got, want)
    g = torch.randn_like(want)
    got.backward(g)
    want.backward(g)
    _close(x.grad, xr.grad)
    assert all(r.route == "stax-cpu" for r in B.reports())


def test_rotate_half_with_symbolic_sizes_is_one_kernel():
    """Batch and sequence symbolic, the concat along the static head dim: one kernel with
    runtime sizes serves every size."""
    from stax.dynamic_compile import DynamicShapes
    cf = torch.compile(_rotary, backend="stax")
    for b, t in ((2, 16), (3, 33), (5, 100), (2, 515)):
        x = torch.randn(b, 4, t, 64)
        cos, sin = torch.randn(t, 64), torch.randn(t, 64)
        for a, d in ((x, 0), (x, 2), (cos, 0), (sin, 0)):   # the head dim stays static
            torch._dynamo.mark_dynamic(a, d)
        _close(cf(x, cos, sin), _rotary(x, cos, sin))
    (rep,) = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    (v,) = rep.variants
    assert v.dynamic and v.calls == 4 and rep.route == "stax-cpu", rep.summary()
    assert sum(len(g.kernels) for g in rep.graphs) == 1, rep.summary()


def test_unary_ops_on_both_operands():
    x, y = torch.randn(300, 7, 520), torch.randn(300, 5, 520)
    cf = torch.compile(_mixed, backend="stax")
    _close(cf(x, y), _mixed(x, y))
    assert B.last_report().route == "stax-cpu"


def test_one_negation_on_both_sides():
    """`cat((n, n))` of one `neg`: the op is both operands (it crashed the pass once)."""
    def f(x):
        n = -x
        return torch.cat((n, n), dim=-1).exp()
    x = torch.randn(256, 520)
    cf = torch.compile(f, backend="stax")
    _close(cf(x), f(x))


def test_a_negated_half_with_another_reader_keeps_its_value():
    """The neg is returned too: it stays, and the concat reads it as before."""
    def f(x):
        n = -x[:, 256:]
        return torch.cat((n, x[:, :256]), dim=1) * 2, n
    x = torch.randn(512, 512)
    cf = torch.compile(f, backend="stax")
    for got, want in zip(cf(x), f(x)):
        _close(got, want)


def test_triton_route_interpreted(monkeypatch):
    """The Triton kernel of the hoisted rotate-half (a concat read through slices, a neg
    and a select over an iota) gives eager's values and gradients."""
    pytest.importorskip("triton")
    from test_gpu_training_sizes import _interpreted_step
    monkeypatch.setenv("STAX_TRITON_ARCH", "90")
    x = torch.randn(2, 2, 16, 32, requires_grad=True)
    cos, sin = torch.randn(16, 32), torch.randn(16, 32)
    loss = _interpreted_step(lambda x: (_rotary(x, cos, sin) ** 2).sum())(x)
    loss.backward()
    got = x.grad.clone()
    x.grad = None
    want = (_rotary(x, cos, sin) ** 2).sum()
    want.backward()
    torch.testing.assert_close(loss, want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got, x.grad, rtol=1e-4, atol=1e-4)


def test_llama_block_loses_the_two_neg_kernels(monkeypatch):
    """The Llama test model's rotary embedding of q and k: two kernels fewer than with
    the pass left out of the pipeline, same values."""
    from stax import driver
    m = make_model("llama", torch.float32, dim=512, n_heads=8, max_seq=256).eval()
    x = torch.randn(2, 256, 512)
    counts = []
    for pipeline in (driver.FUSED_PIPELINE,
                     [p for p in driver.FUSED_PIPELINE if p != "stax-hoist-concat-unary"]):
        monkeypatch.setattr(driver, "FUSED_PIPELINE", pipeline)
        torch._dynamo.reset()
        with torch.no_grad():
            cf = torch.compile(m, backend="stax")
            _close(cf(x), m(x))
        counts.append(sum(len(g.kernels) for g in B.last_report().graphs))
    assert counts[0] == counts[1] - 2, counts


_OPS = {"neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "tanh": torch.tanh,
        "sigmoid": torch.sigmoid, "sin": torch.sin, "floor": torch.floor,
        "reciprocal": torch.reciprocal}


@pytest.mark.parametrize("seed", range(10))
def test_random_concats(seed):
    """Random ranks, concat dims, sizes (1 and some hundreds included), operand counts,
    unary ops on random operands and dtypes: eager's values and strides. Integer cats
    (neg, abs) are bit-exact."""
    import random
    rng = random.Random(seed)
    rank = rng.randint(1, 4)
    dim = rng.randrange(rank)
    shape = [rng.choice([1, 3, 8, 33]) for _ in range(rank)]
    shape[rng.randrange(rank)] = rng.choice([256, 520, 600])
    dtype = rng.choice([torch.float32, torch.bfloat16, torch.int32])
    names = ["neg", "abs"] if dtype == torch.int32 else sorted(_OPS)
    sizes = [rng.choice([1, 2, 7, 64]) for _ in range(rng.randint(2, 3))]
    ops = [rng.choice(names) if rng.random() < 0.7 else None for _ in sizes]

    def make(n):
        s = list(shape)
        s[dim] = n
        if dtype == torch.int32:
            return torch.randint(-1000, 1000, s, dtype=dtype)
        return torch.randn(s, dtype=dtype)
    xs = [make(n) for n in sizes]

    def f(*xs):
        parts = [_OPS[o](x) if o else x for o, x in zip(ops, xs)]
        return torch.cat(parts, dim) * 3
    cf = torch.compile(f, backend="stax")
    got, want = cf(*xs), f(*xs)
    assert got.shape == want.shape and got.stride() == want.stride()
    if dtype == torch.int32:
        assert torch.equal(got, want)
    else:
        torch.testing.assert_close(got, want, **TOL[dtype])
    assert B.last_report().route == "stax-cpu", B.last_report().summary()
