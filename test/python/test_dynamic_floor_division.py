"""Sizes that are floor divisions of symbols compile once (dialects.symbolic's derived
symbols): a stride-2 convolution over dynamic spatial dims gives `(H - 1)//2 + 1`, CUDA's
memory-efficient attention pads its logsumexp to `32*ceil(T/32)`. Before, both sent the
graph per size ("not a polynomial of symbols").

- the derived symbol's name, parts and value; the importer's rewrite of torch's FloorDiv
  and CeilToInt(IntTrueDiv) (the two spellings of one ceiling give one symbol);
- CPU: a stride-2 convolution, ReLU and a global average pool at 6 spatial sizes,
  inference; conv + BatchNorm + ReLU in training (outputs, input and parameter gradients,
  running statistics against a float64 oracle): one compile, route stax-cpu every call;
- the Triton route (TTIR interpreted) of the inference case;
- a derived size checked by the guards (a backward's saved activation of the wrong size);
- a CNN with max, average and global pooling (library ops like the convolution; a pool
  after a strided conv is one floor division, `fdiv4_s1M2 + 1`): inference and training
  on the CPU, inference on the Triton route, one compile.
The GPU side (gpt2_sdpa in training on cuda) is in test_dynamic_gpu.
"""
from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

import stax.backend as B
from stax.dialects import symbolic
from stax.dynamic_compile import DynamicShapes
from stax.errors import StaxGuardError
from test_dynamic_gpu import (_close_to_oracle, counts, interpreted_triton,  # noqa: F401
                              train_step_against_oracle)

pytestmark = pytest.mark.usefixtures("stax_strict")

# (batch, H, W): batches >= 2 and spatial sizes >= 2 (Dynamo specializes 0 and 1),
# primes, sizes above the first; H != W at the first call (duck sizing would tie them)
SHAPES = [(4, 32, 24), (3, 17, 23), (2, 5, 64), (6, 64, 9), (5, 31, 7), (4, 32, 24)]


def test_derived_symbols():
    n = symbolic.derived_name("s53 - s27", 2)
    assert n == "fdiv2_Ms27Ps53"
    assert symbolic.derived_parts(n) == ("-s27 + s53", 2)
    assert symbolic.derived_value(n, {"s27": 3, "s53": 18}) == 7
    assert symbolic.derived_value(symbolic.derived_name("s0 - 5", 2), {"s0": 2}) == -2
    assert symbolic.derived_parts("s0") is None
    assert symbolic.base_symbols(f"32*{symbolic.derived_name('s1 + 31', 32)} + s0") == \
        {"s0", "s1"}
    with pytest.raises(symbolic.ExprError, match="positive integer divisor"):
        symbolic.derived_name("s0", 0)


def test_importer_writes_floor_divisions_as_derived_symbols():
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from stax.importer import symbolic as isym
    env = ShapeEnv()
    s = env.create_symintnode(env.create_symbol(37, ConstantSource("x")), hint=37)
    name = str(s.node.expr)
    ceil = isym.dim(32 * math.ceil(s / 32))
    assert ceil == isym.dim(32 * ((s + 31) // 32)) == f"32*fdiv32_{name}P31"
    assert isym.dim((s - 1) // 2 + 1) == f"fdiv2_{name}M1 + 1"
    r = isym.ratio(1.0 / ((s - 1) // 2 + 1))   # BatchNorm's 1/(N*H*W) after a stride
    assert (r.num, r.den) == (1, f"fdiv2_{name}M1 + 1")


def test_an_exact_division_of_sizes_is_its_quotient():
    """`x.reshape(-1).view(-1, n)` of an [n, n] tensor: Dynamo writes the new dim as
    `(s**2)//s`, which was no polynomial (per size, stax-fuzz seed 3025); an exact
    division of polynomials is its quotient. Forward and backward compile once."""
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from stax.importer import symbolic as isym
    env = ShapeEnv()
    s = env.create_symintnode(env.create_symbol(37, ConstantSource("x")), hint=37)
    name = str(s.node.expr)
    assert isym.dim((s * s) // s) == name
    assert isym.dim((s * s + 3 * s) // s) == f"{name} + 3"

    def f(x):
        n = x.shape[0]
        return (x.reshape(-1) * 2).view(-1, n).sin()
    cf = torch.compile(f, backend="stax", dynamic=True)
    for n in (3, 5, 17, 513):
        x = torch.randn(n, n, requires_grad=True)
        xr = x.detach().clone().requires_grad_(True)
        got, want = cf(x), f(xr)
        assert got.shape == want.shape and got.stride() == want.stride()
        torch.testing.assert_close(got, want)
        got.sum().backward()
        want.sum().backward()
        torch.testing.assert_close(x.grad, xr.grad)
    (rep,) = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    (v,) = rep.variants
    assert v.dynamic and v.calls == 4 and rep.route == "stax-cpu", rep.summary()


class StridedNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 3, stride=2, padding=1)

    def forward(self, x):
        y = torch.relu(self.conv(x)) * 2
        return y, y.mean((2, 3))   # the pool divides by a derived size


def _inference(shapes, route):
    torch.manual_seed(0)
    net = StridedNet()
    cf = torch.compile(net, backend="stax", dynamic=True)
    with torch.no_grad():
        for k, (b, h, w) in enumerate(shapes):
            x = torch.randn(b, 3, h, w)
            for got, ref in zip(cf(x), net(x)):
                assert got.shape == ref.shape and got.stride() == ref.stride()
                torch.testing.assert_close(got, ref, rtol=2e-4, atol=2e-4)
            (rep,) = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
            (v,) = rep.variants
            assert v.dynamic and v.calls == k + 1, rep.summary()
            assert rep.route == route and rep.fallback_reason is None, rep.summary()


def test_strided_conv_inference_cpu(counts):
    _inference(SHAPES, "stax-cpu")
    assert counts == {"static": 0, "dynamic": 1}


def test_a_derived_size_only_a_library_op_gives(counts):
    """The derived size appears in no kernel, only in the convolution's result (as in the
    CUDA attention forward's logsumexp): it is still computed for the result's check."""
    torch.manual_seed(0)
    w = torch.randn(8, 3, 3, 3)
    fn = lambda x: (F.conv2d(x, w, stride=2, padding=1), x * 2)   # noqa: E731
    cf = torch.compile(fn, backend="stax", dynamic=True)
    with torch.no_grad():
        for b, h, wd in SHAPES:
            x = torch.randn(b, 3, h, wd)
            for got, ref in zip(cf(x), fn(x)):
                assert got.shape == ref.shape and got.stride() == ref.stride()
                torch.testing.assert_close(got, ref, rtol=2e-4, atol=2e-4)
    (rep,) = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    assert rep.route == "stax-cpu" and rep.graphs[0].derived, rep.summary()
    assert counts == {"static": 0, "dynamic": 1}


def test_strided_conv_inference_triton(counts, interpreted_triton):
    _inference(SHAPES[:4], "triton")
    assert counts == {"static": 0, "dynamic": 1}
    assert interpreted_triton["sized"] > 0


def _strided_bn():
    return torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, stride=2, padding=1),
                               torch.nn.BatchNorm2d(16), torch.nn.ReLU())


def test_strided_conv_bn_training_cpu(counts):
    torch.manual_seed(0)
    ref = _strided_bn()
    mine, m64 = copy.deepcopy(ref), copy.deepcopy(ref).double()
    cf = torch.compile(mine, backend="stax", dynamic=True)
    for b, h, w in SHAPES:
        train_step_against_oracle(ref, mine, m64, cf, torch.randn(b, 3, h, w))
    for name in ("running_mean", "running_var"):
        _close_to_oracle(getattr(mine[1], name), getattr(ref[1], name),
                         getattr(m64[1], name), name)
    (rep,) = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    assert [g.kind for g in rep.graphs] == ["forward", "backward"]
    assert all(g.route == "stax-cpu" for g in rep.graphs), rep.summary()
    assert counts == {"static": 0, "dynamic": 2}


def test_a_derived_size_is_guarded():
    """The backward takes the forward's saved activations of [N, 16, (H-1)//2 + 1, ...]:
    one of another size is refused, naming the argument, the dim and its expression,
    before anything runs."""
    torch.manual_seed(0)
    net = _strided_bn()
    cf = torch.compile(net, backend="stax", dynamic=True)
    cf(torch.randn(4, 3, 32, 24, requires_grad=True)).sum().backward()
    (rep,) = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    fwd, bwd = rep.graphs
    assert bwd.kind == "backward" and bwd.derived, bwd.derived
    seen = []
    real_bind = bwd.bind
    bwd.bind = lambda args: seen.append(list(args)) or real_bind(args)
    cf(torch.randn(3, 3, 17, 23, requires_grad=True)).sum().backward()
    (args,) = seen
    env = real_bind(args)
    for name in bwd.derived:
        assert env[name] == symbolic.derived_value(name, env)
    c = next(c for c in bwd.checks if c.kind == "tensor" and
             any(isinstance(d, str) and "fdiv" in d for d in c.dims))
    d = next(k for k, e in enumerate(c.dims) if isinstance(e, str) and "fdiv" in e)
    bad = list(args)
    shape = list(args[c.index].shape)
    shape[d] += 1
    bad[c.index] = torch.randn(shape, dtype=args[c.index].dtype)
    with pytest.raises(StaxGuardError, match=rf"dim {d}: expected \d+ \(.*fdiv2_"):
        real_bind(bad)


class SmallCNN(torch.nn.Module):
    """conv, max pool (its indices saved for the backward), a strided conv with
    BatchNorm, average pooling and a global one, then a linear head: every spatial size
    after the first conv is a floor division."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.bn = torch.nn.BatchNorm2d(16)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x):
        y = F.max_pool2d(torch.relu(self.c1(x)), 2)
        y = F.avg_pool2d(torch.relu(self.bn(self.c2(y))), 2, ceil_mode=True)
        return self.fc(F.adaptive_avg_pool2d(y, 1).flatten(1))


# spatial sizes >= 10 (the last map is 2x2 or more: Dynamo guards a size of 1 apart),
# odd and even, H != W at the first call
CNN_SHAPES = [(4, 32, 24), (3, 17, 23), (2, 12, 64), (6, 64, 11), (5, 31, 15), (4, 32, 24)]

# torch before 2.13 (the H200's 2.11) guards the parity of a pooled size in
# max_pool2d's meta function (`div_rtn`): Dynamo itself recompiles per parity class of
# H and W, and each of its graphs is one dynamic stax compile
_PARITY_GUARDS = torch.torch_version.TorchVersion(torch.__version__) < (2, 13)


def _pooling_reports(per_frame: int, counts) -> list:
    """The dynamic reports of the CNN: one Dynamo frame (several under parity guards),
    each compiled once by stax for every size, never per size."""
    reps = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    assert reps and (len(reps) <= 4 if _PARITY_GUARDS else len(reps) == 1), len(reps)
    assert counts == {"static": 0, "dynamic": per_frame * len(reps)}, counts
    return reps


@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
def test_cnn_with_pooling_compiles_once_cpu(counts, train):
    torch.manual_seed(0)
    ref = SmallCNN().train(train)
    mine, m64 = copy.deepcopy(ref), copy.deepcopy(ref).double()
    cf = torch.compile(mine, backend="stax", dynamic=True)
    for b, h, w in CNN_SHAPES:
        x = torch.randn(b, 3, h, w)
        if not train:
            with torch.no_grad():
                got, want = cf(x), ref(x)
            assert got.shape == want.shape and got.stride() == want.stride()
            torch.testing.assert_close(got, want, rtol=2e-4, atol=2e-4)
            continue
        train_step_against_oracle(ref, mine, m64, cf, x)
    for rep in _pooling_reports(2 if train else 1, counts):
        assert rep.route == "stax-cpu" and rep.fallback_reason is None, rep.summary()
        assert all(g.route == "stax-cpu" for g in rep.graphs), rep.summary()
        pools = {t for g in rep.graphs for t in g.fallback_ops if "pool" in t}
        assert "aten.max_pool2d_with_indices.default" in pools, pools


def test_cnn_with_pooling_triton(counts, interpreted_triton):
    torch.manual_seed(0)
    net = SmallCNN().eval()
    cf = torch.compile(net, backend="stax", dynamic=True)
    with torch.no_grad():
        for b, h, w in CNN_SHAPES[:4]:
            x = torch.randn(b, 3, h, w)
            got, want = cf(x), net(x)
            assert got.shape == want.shape and got.stride() == want.stride()
            torch.testing.assert_close(got, want, rtol=2e-4, atol=2e-4)
    for rep in _pooling_reports(1, counts):
        assert rep.route == "triton" and all(g.route == "triton" for g in rep.graphs)
    assert interpreted_triton["sized"] > 0


STEP_SLICES = {
    "every_other": lambda x: x[:, ::2] * 2,
    "from_1_by_3": lambda x: torch.tanh(x[:, 1::3]) + 1,
    "from_1": lambda x: x[:, 1:] - 1,
    "reduce_every_other": lambda x: x[:, ::2].sum(1) + x.amax(1),
    "last_dim": lambda x: x[..., 1::2].float().softmax(-1),
    # to k before the end (a shifted LM loss's logits[:, :-1])
    "before_end": lambda x: x[:, :-1] - 1,
    "before_end_sum": lambda x: x[:, :-3].sum(1),
}


@pytest.mark.parametrize("case", sorted(STEP_SLICES))
@pytest.mark.parametrize("route", ["stax-cpu", "triton"])
def test_step_slices_of_a_symbolic_dim(case, route, counts, request):
    """`x[:, start::step]` of a dynamic dim to its end: its length is a derived symbol
    (`fdiv2_s0P1` for `::2`), every read in bounds at every size; primes, even and odd,
    above and below the first (a result of length 0 or 1 is Dynamo's own graph; its size-oblivious
    mode writes the strides after such a slice with Max(1, ...), no polynomial)."""
    if route == "triton":
        request.getfixturevalue("interpreted_triton")
    fn = STEP_SLICES[case]
    cf = torch.compile(fn, backend="stax", dynamic=True)
    with torch.no_grad():
        for n in [16, 37, 100, 7, 11, 16]:   # results of 2 or more: Dynamo splits 0 and 1
            x = torch.randn(3, n, 520) if case != "last_dim" else torch.randn(3, 6, n + 3)
            got, want = cf(x), fn(x)
            assert got.shape == want.shape, (n, case)
            # (a dim of size 1 has no stride that matters: eager's is arbitrary there)
            assert [st for st, k in zip(got.stride(), got.shape) if k > 1] == \
                [st for st, k in zip(want.stride(), want.shape) if k > 1], (n, case)
            torch.testing.assert_close(got, want, rtol=2e-4, atol=2e-4)
    (rep,) = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    assert rep.route == route and rep.fallback_reason is None, rep.summary()
    assert counts == {"static": 0, "dynamic": 1}, rep.summary()


def test_glu_trains_with_one_compile(counts):
    """F.glu over a dynamic last dim: the backward takes `s//2` and `2*(s//2)` as SymInt
    inputs (the slices' bounds). A floor division was bound as a function argument (the
    verifier refused it: "names a derived symbol"), and the graph was compiled per size;
    now it is derived from `s` like any size expression. Widths >= 512 among them, rows
    >= 256; outputs, strides and the input gradient against eager."""
    def fn(x):
        return F.glu(x, -1).sin() * 2

    cf = torch.compile(fn, backend="stax", dynamic=True)
    for rows, width in ((256, 520), (300, 14), (257, 1030), (3, 4), (256, 520)):
        x = torch.randn(rows, width, requires_grad=True)
        x2 = x.detach().clone().requires_grad_()
        got, want = cf(x), fn(x2)
        assert got.shape == want.shape and got.stride() == want.stride()
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        g = torch.randn_like(want)
        got.backward(g)
        want.backward(g)
        assert x.grad.stride() == x2.grad.stride()
        torch.testing.assert_close(x.grad, x2.grad, rtol=1e-5, atol=1e-5)
    reps = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    assert len(reps) == 1 and reps[0].route == "stax-cpu", [r.summary() for r in B.reports()]
    assert counts["static"] == 0 and "could not stay dynamic" not in reps[0].summary()
