"""Means over symbolic dims compiled once (stax.size_value, docs/dynamic-shapes.md):
global average pooling over a dynamic sequence, layer_norm over a dynamic last dim,
var/std, `x.sum(1) / x.size(1)`, and mean-reduction losses over a dynamic batch in
training (forward and backward). CPU, and the Triton route through the TTIR interpreter
(test_dynamic_gpu's fixtures). Every call: values (dtype-aware tolerance), shape,
strides and dtype against eager on fresh inputs; one dynamic build, no static compile,
the one dynamic variant serving every call.
"""
from __future__ import annotations

import pytest
import torch
import torch.fx.experimental._config as fx_config
import torch.nn.functional as F

import stax.backend as B
from stax.dynamic_compile import DynamicShapes
from test_dynamic_gpu import TOL, counts, interpreted_triton  # noqa: F401 - fixtures

pytestmark = pytest.mark.usefixtures("stax_strict")

#: sizes of the dynamic dim: 1, primes, and one >= 512
SIZES = [1, 2, 7, 31, 521]


def _close(got, ref):
    """test_dynamic_gpu's check, where a nan matches a nan (var of one element)."""
    assert got.shape == ref.shape and got.dtype == ref.dtype, (got.shape, ref.shape)
    assert got.stride() == ref.stride(), (got.stride(), ref.stride())
    torch.testing.assert_close(got, ref, equal_nan=True, **TOL[ref.dtype])


def _report(route):
    reps = [r for r in B.reports() if isinstance(r.specializer, DynamicShapes)]
    assert len(reps) == 1, [line for r in B.reports() for line in r.summary().splitlines()
                            if "could not" in line]
    (v,) = reps[0].variants
    assert v.dynamic and reps[0].fallback_reason is None, reps[0].summary()
    assert all(g.route == route for g in reps[0].graphs), reps[0].summary()
    return v.calls


def gap(x):
    """Global average pool over the (dynamic) sequence, then a mean over everything."""
    return x.mean(1), x.mean()


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5), x.mean(-1, keepdim=True)


def var_std(x):
    return torch.var(x, 0), torch.std(x, -1, correction=0), torch.var_mean(x, 1)[0]


def sum_over_size(x):
    return x.sum(1) / x.size(1)


def _inference(fn, make, sizes, route):
    cf = torch.compile(fn, backend="stax", dynamic=True)
    with torch.no_grad(), fx_config.patch(backed_size_oblivious=True):
        for k, n in enumerate(sizes):
            args = make(n)
            got, ref = cf(*args), fn(*args)
            got, ref = (got, ref) if isinstance(ref, tuple) else ((got,), (ref,))
            for g, r in zip(got, ref):
                _close(g, r)
            assert _report(route) == k + 1


CASES = {
    "gap": (gap, lambda n: (torch.randn(3, n, 24),)),
    # the normalized dim is the dynamic one (w and b of its length)
    "layer_norm": (layer_norm, lambda n: (torch.randn(5, n) * 3 + 1, torch.randn(n),
                                          torch.randn(n))),
    "var_std": (var_std, lambda n: (torch.randn(n, 6, n % 5 + 3) + 2,)),
    "sum_over_size": (sum_over_size, lambda n: (torch.randn(4, n, 8),)),
    # pooling over a sequence laid out last
    "gap_last": (lambda x: (x.mean(-1), x.sum(-1) / x.size(-1)),
                 lambda n: (torch.randn(3, 24, n),)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_cpu_mean_over_dynamic_dim(case, counts):
    fn, make = CASES[case]
    _inference(fn, make, SIZES, "stax-cpu")
    assert counts == {"static": 0, "dynamic": 1}


def test_wide_layer_norm_and_batch_cpu(counts):
    """Widths >= 512 and batches >= 256 at one compile."""
    fn, _ = CASES["layer_norm"]
    _inference(fn, lambda n: (torch.randn(263, n), torch.randn(n), torch.randn(n)),
               [512, 769, 1031, 3, 1], "stax-cpu")
    assert counts == {"static": 0, "dynamic": 1}


@pytest.mark.parametrize("case", ["gap", "gap_last", "layer_norm", "var_std"])
def test_triton_mean_over_dynamic_dim(case, counts, interpreted_triton):
    fn, make = CASES[case]
    _inference(fn, make, [1, 2, 7, 37], "triton")
    assert counts == {"static": 0, "dynamic": 1}
    assert interpreted_triton["sized"] > 0


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(12, 5)

    def forward(self, x, t, loss):
        y = self.fc(x)
        if loss == "mse":
            return F.mse_loss(y, t)
        if loss == "ce":
            return F.cross_entropy(y, t)
        return y.mean(0).sum()


@pytest.mark.parametrize("loss", ["mse", "ce", "mean0"])
def test_training_mean_loss_over_dynamic_batch(loss, counts):
    torch.manual_seed(0)
    ref = Head()
    model = Head()
    model.load_state_dict(ref.state_dict())
    cf = torch.compile(model, backend="stax", dynamic=True)
    with fx_config.patch(backed_size_oblivious=True):
        for k, n in enumerate([1, 2, 7, 31, 263]):
            x = torch.randn(n, 12)
            t = torch.randint(0, 5, (n,)) if loss == "ce" else torch.randn(n, 5)
            xr, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
            want, got = ref(xr, t, loss), cf(xc, t, loss)
            _close(got, want)
            want.backward()
            got.backward()
            _close(xc.grad, xr.grad)
            for p, q in zip(model.parameters(), ref.parameters()):
                _close(p.grad, q.grad)
                p.grad = q.grad = None
            assert _report("stax-cpu") == k + 1
    assert counts["static"] == 0 and counts["dynamic"] == 2   # one forward, one backward
