"""Assertions on computed values (`aten._assert_async`, which F.one_hot writes for its
class range, and `torch._assert_async` in user code) as `stax_graph.check`
(importer.ops_checks): the graph stays on a stax route, its values match eager, and a
value that breaks the assertion raises eager's RuntimeError with eager's message, on the
static and the dynamic path. Before, such a graph ran as written by PyTorch."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import stax.backend as B
from ptx_check import training_kernels_to_ptx

pytestmark = pytest.mark.usefixtures("stax_strict")
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU"))]
# eager's messages (the decomposition stax compiles prefixes them with "one_hot: ")
TOO_BIG = "Class values must be smaller than num_classes."
NEGATIVE = "Class values must be non-negative."


def weighted_one_hot(labels, w):
    return F.one_hot(labels, 1000).to(w.dtype) * w


def positive_sum_doubled(x):
    torch._assert_async(x.sum() > 0, 'the sum must be "positive"')
    return x * 2


def _route(device):
    return "stax-cpu" if device == "cpu" else "triton"


def _default_device():   # STAX_TEST_DEVICE=cuda makes CUDA the factories' default
    return torch.empty(0).device.type


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_one_hot_matches_eager_and_raises_as_eager(dynamic):
    cf = torch.compile(weighted_one_hot, backend="stax", dynamic=dynamic)
    for n in (256, 300, 1):
        labels, w = torch.randint(0, 1000, (n,)), torch.randn(n, 1000)
        got, want = cf(labels, w), weighted_one_hot(labels, w)
        assert got.stride() == want.stride() and torch.equal(got, want)
    assert {g.route for r in B.reports() for g in r.graphs} == {_route(_default_device())}
    assert not B.last_report().fallback_ops
    if _default_device() != "cpu":   # on CUDA eager's failure is a device-side assert
        return
    checked = None   # whether the frontend's graph holds the check: the torch version's
    for bad, message in ((1000, TOO_BIG), (-1, NEGATIVE)):
        labels[0] = bad
        with pytest.raises(RuntimeError, match=message):
            weighted_one_hot(labels, w)
        if checked is None:
            checked = _frontend_checks(labels, w)
        if checked:
            with pytest.raises(RuntimeError, match=message):
                cf(labels, w)
    if not checked:
        pytest.skip(f"torch {torch.__version__}'s one_hot decomposition carries no class "
                    "check (aot_eager does not raise either): nothing for stax to check")


def _frontend_checks(labels, w) -> bool:
    """Whether the graph Dynamo and aot_autograd hand a backend carries one_hot's class
    check: torch 2.13's decomposition asserts it, 2.11's does not (the GPU machine's), so
    there no backend given that graph can raise."""
    torch._dynamo.reset()
    try:
        torch.compile(weighted_one_hot, backend="aot_eager")(labels, w)
    except RuntimeError:
        return True
    finally:
        torch._dynamo.reset()
    return False


@pytest.mark.parametrize("device", DEVICES)
def test_user_assertion(device):
    x = torch.rand(4096, device=device) + 0.1
    cf = torch.compile(positive_sum_doubled, backend="stax")
    assert torch.equal(cf(x), positive_sum_doubled(x))
    assert B.last_report().route == _route(device) and not B.last_report().fallback_ops
    if device == "cpu":   # on CUDA eager's failure is a device-side assert (fatal)
        with pytest.raises(RuntimeError, match='the sum must be "positive"'):
            cf(-x)


def test_one_hot_trains():
    """one_hot's checks in a training graph: the forward keeps them; the gradient of
    the weights matches eager's."""
    labels = torch.randint(0, 1000, (512,))
    w = torch.randn(512, 1000, requires_grad=True)
    w2 = w.detach().clone().requires_grad_()
    torch.compile(weighted_one_hot, backend="stax")(labels, w2).square().sum().backward()
    weighted_one_hot(labels, w).square().sum().backward()
    assert torch.equal(w2.grad, w.grad)
    assert {g.route for r in B.reports() for g in r.graphs} == {_route(_default_device())}


def test_check_kernels_compile_to_ptx():
    w = torch.randn(512, 1000)
    out, stats = training_kernels_to_ptx(lambda w, labels: weighted_one_hot(labels, w), w,
                                         torch.randint(0, 1000, (512,)))
    # (3 kernels where the CPU's decompositions are used, 2 with a GPU's)
    assert out.status == "pass" and stats["kernels"] >= 2, (out, stats)
