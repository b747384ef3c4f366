"""pow by a Python number and pow by a tensor are different eager kernels, and they differ
at -inf and -0: eager's pow by the number 0.5 is sqrt (sqrt(-inf) = NaN, sqrt(-0) = -0),
by -0.5 rsqrt, by -1 a reciprocal, where pow by a tensor of 0.5 is std::pow
(pow(-inf, 0.5) = inf, pow(-0, 0.5) = +0). Eager's CPU half kernel has no shortcut.

Regression (`benchmarks/special_values.py`): both code generators rewrote any stax.pow by
a fill of 0.5 as sqrt, so `torch.pow(x, torch.full_like(x, 0.5))` at -inf gave NaN, not
eager's inf. Now the importer says which kernel eager ran (`ops_elementwise.
_pow_by_a_scalar`) and the targets rewrite only what is exact for std::pow.

Specials are compared bit for bit (sign of zero included, NaN by position); ordinary
values within a few ULPs (eager's 1/(x*x) for -2 and std::pow round differently).
CPU, interpreted Triton (CPU tensors, so the CPU's eager is the reference; through the
dynamic-shape path, which is the one that interprets with CPU tensors) and CUDA.
"""
from __future__ import annotations

import pytest
import torch

import stax.backend as B
from test_dynamic_gpu import interpreted_triton  # noqa: F401

pytestmark = pytest.mark.usefixtures("stax_strict")
INF, NAN = float("inf"), float("nan")
EXPONENTS = [0.5, -0.5, -1.0, 2.0, 3.0, -2.0, 1.0, 0.0, 1.5]
RTOL = {torch.float32: 1e-6, torch.float64: 1e-14, torch.bfloat16: 1e-2, torch.float16: 2e-3}


def _bases(dtype, device):
    specials = [-INF, -0.0, 0.0, INF, NAN, 4.0, -1.0, 0.3, -2.5, 1e-3, -7.0]
    g = torch.Generator().manual_seed(7)
    rest = torch.randn(600, generator=g) * 3   # past one vector and one block, with a tail
    return torch.cat([torch.tensor(specials), rest]).to(dtype).to(device)


def _assert_eager_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    g, w = got.double().cpu(), want.double().cpu()
    assert torch.equal(g.isnan(), w.isnan()), (g[g.isnan() != w.isnan()], w[g.isnan() != w.isnan()])
    exact = ~w.isfinite() | (w == 0)
    exact &= ~w.isnan()
    assert torch.equal(g[exact], w[exact]) and torch.equal(
        g[exact].signbit(), w[exact].signbit()), (g[exact], w[exact])
    torch.testing.assert_close(g[~exact], w[~exact], rtol=RTOL[want.dtype], atol=0,
                               equal_nan=True)


def _device(where, request):
    if where == "triton":
        request.getfixturevalue("interpreted_triton")
    if where == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    return "cuda" if where == "cuda" else "cpu"


@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_pow_by_a_number_and_by_a_fill_are_eagers_kernels(where, dtype, request):
    device = _device(where, request)
    if where == "triton" and dtype == torch.float64:
        pytest.skip("the interpreter's f64 libdevice pow is not in ttir_interp")
    x = _bases(dtype, device)
    for e in EXPONENTS:
        for form in (lambda x, e=e: torch.pow(x, e),
                     lambda x, e=e: torch.pow(x, torch.full_like(x, e)),
                     lambda x, e=e: x ** torch.tensor(e, dtype=x.dtype, device=x.device)):
            torch._dynamo.reset()
            got = torch.compile(form, backend="stax", fullgraph=True,
                                dynamic=where == "triton")(x)
            _assert_eager_bits(got, form(x))
            rep = B.reports()[-1]
            assert rep.route == ("stax-cpu" if where == "stax-cpu" else "triton"), rep.summary()


def test_pow_forms_in_the_ir():
    """The importer's choice is visible: a number's 0.5 is stax.sqrt, a fill's is stax.pow."""
    from test_importer import capture, do_import
    x = torch.randn(8, 16)
    for fn, op in ((lambda x: torch.pow(x, 0.5), "stax.sqrt"),
                   (lambda x: torch.pow(x, -0.5), "stax.rsqrt"),
                   (lambda x: torch.pow(x, torch.full_like(x, 0.5)), "stax.pow")):
        (gm, ex), = capture(fn, x)
        text = do_import(gm, ex)[1]
        assert op in text, text
        if op != "stax.pow":
            assert "stax.pow" not in text, text
