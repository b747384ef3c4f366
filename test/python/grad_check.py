"""One compiled call against eager, forward, or forward and backward (shared by the
dynamic tests)."""
from __future__ import annotations

import torch


def same_forward(compiled, fn, *args, tol):
    """compiled(*args) against fn(*args): the output's values, shape and strides."""
    got, want = compiled(*args), fn(*args)
    assert got.shape == want.shape and got.stride() == want.stride()
    torch.testing.assert_close(got, want, **tol)


def same_forward_and_backward(compiled, fn, x, *rest, tol):
    """compiled(x, *rest) against fn on a detached copy of `x` (which requires grad):
    the output's values, shape and strides, then the gradient of `x` for one random
    output gradient, its values and strides."""
    xr = x.detach().clone().requires_grad_(True)
    got, want = compiled(x, *rest), fn(xr, *rest)
    assert got.shape == want.shape and got.stride() == want.stride()
    torch.testing.assert_close(got, want, **tol)
    g = torch.randn_like(want)
    got.backward(g)
    want.backward(g)
    assert x.grad.stride() == xr.grad.stride()
    torch.testing.assert_close(x.grad, xr.grad, **tol)
