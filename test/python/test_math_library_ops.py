"""The math library's functions as stax ops: acos, asin, atan, sinh, cosh, tan, log10,
asinh, acosh, atanh, erfc (and sin, cos on the CPU), and copysign.

Before, each was a stax_graph.fallback op that PyTorch ran between kernels (and a
dynamic graph refused it). Now they are elementwise stax ops that fuse; the CPU target
calls SLEEF's vector functions, the ones eager's Vectorized kernels call
(`targets/cpu_sleef.py`, exported by libtorch_cpu), and Triton calls libdevice.
Checked against eager on fresh random inputs over each function's domain and on special
values (NaN positions and infinities exact, the rest within a few ULPs), f32, f64 and
bf16, at sizes with a vector tail, forward and backward, static and dynamic.
"""
from __future__ import annotations

import pytest
import torch

import stax.backend as B
from stax.targets import cpu_sleef
from stax.targets.kernel_ir import LIBM_UNARY_OPS
from test_dynamic_gpu import counts, interpreted_triton  # noqa: F401
from test_dynamic_prefix_slices import _where, assert_dynamic_only

pytestmark = pytest.mark.usefixtures("stax_strict")
INF, NAN = float("inf"), float("nan")
#: each function's inputs: (low, high) of the uniform draw
DOMAIN = {"acos": (-1, 1), "asin": (-1, 1), "atan": (-20, 20), "sinh": (-20, 20),
          "cosh": (-20, 20), "tan": (-3, 3), "log10": (1e-3, 1e3), "asinh": (-1e3, 1e3),
          "acosh": (1, 1e3), "atanh": (-1, 1), "erfc": (-5, 12), "sin": (-50, 50),
          "cos": (-50, 50)}
SPECIALS = [0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 1e-40, -1e-40, 1e30, -1e30, 0.5, 2.0]
RTOL = {torch.float32: 4e-7, torch.float64: 1e-15, torch.bfloat16: 8e-3}


def _inputs(name, n, dtype, seed):
    lo, hi = DOMAIN[name]
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, generator=g, dtype=torch.float64) * (hi - lo) + lo
    return torch.cat([torch.tensor(SPECIALS, dtype=torch.float64), x]).to(dtype)


def assert_like_eager(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape and got.stride() == want.stride()
    assert torch.equal(got.isnan(), want.isnan()), (got[got.isnan() != want.isnan()],
                                                    want[got.isnan() != want.isnan()])
    g, w = got[~want.isnan()].double(), want[~want.isnan()].double()
    assert torch.equal(g[~w.isfinite()], w[~w.isfinite()])   # infinities exactly
    # zeros with their sign, or (a result that underflows) the smallest denormal
    tiny = 2 * torch.finfo(want.dtype).smallest_normal * torch.finfo(want.dtype).eps
    zero = w == 0
    assert ((g[zero] == 0) & (g[zero].signbit() == w[zero].signbit()) |
            (g[zero].abs() <= tiny)).all(), (g[zero], w[zero])
    torch.testing.assert_close(g, w, rtol=RTOL[want.dtype], atol=tiny)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("name", [*LIBM_UNARY_OPS, "sin", "cos"])
def test_math_functions_match_eager(name, dtype, device):
    """On the CPU against eager's SLEEF, on the GPU (libdevice) against eager's CUDA
    math library."""
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    fn = getattr(torch, name)
    for n in (1000, 4099):   # past whole vectors, with a tail
        x = _inputs(name, n, dtype, seed=n).to(device)
        torch._dynamo.reset()
        got = torch.compile(lambda x: fn(x) * 1.0, backend="stax", fullgraph=True)(x)
        assert_like_eager(got, fn(x))
        c = B.compiled_callables[-1]
        assert c.stax_route == ("stax-cpu" if device == "cpu" else "triton") and \
            c.stax_fallback_ops == [], c.stax_fallback_ops


@pytest.mark.parametrize("name", list(LIBM_UNARY_OPS))
def test_math_functions_fuse_into_one_kernel_and_call_sleef(name, tmp_path, monkeypatch):
    """The function fuses with the ops around it (one kernel, no library op between),
    and the CPU kernel calls SLEEF where this CPU has it."""
    monkeypatch.setenv("STAX_DEBUG_DIR", str(tmp_path))
    fn = getattr(torch, name)
    x = _inputs(name, 2048, torch.float32, seed=3)
    torch._dynamo.reset()
    f = lambda x: fn(x * 0.5 + 0.25) * 2.0 - 1.0   # noqa: E731
    got = torch.compile(f, backend="stax")(x)
    # (the fused kernel's x * 0.5 + 0.25 may be one FMA, and the final - 1 cancels)
    torch.testing.assert_close(got, f(x), rtol=1e-5, atol=1e-6, equal_nan=True)
    rep = B.reports()[-1]
    assert rep.route == "stax-cpu" and rep.kernel_count == 1, rep.summary()
    text = "".join(p.read_text() for p in tmp_path.rglob("kernel_*.mlir"))
    if cpu_sleef.available("f32"):
        assert "@Sleef_" in text, text[:2000]


@pytest.mark.parametrize("name", ["acos", "atan", "tanh_of_sinh", "erfc", "log10"])
def test_math_functions_train(name):
    fns = {"tanh_of_sinh": lambda x: torch.tanh(torch.sinh(x))}
    fn = fns.get(name) or getattr(torch, name)
    lo, hi = DOMAIN.get(name, (-3, 3))
    g = torch.Generator().manual_seed(5)
    x0 = (torch.rand(512, 300, generator=g) * (hi - lo) * 0.98 + lo * 0.98 + (hi - lo) * 0.01)
    x, xe = x0.clone().requires_grad_(), x0.clone().requires_grad_()
    w = torch.randn(512, 300, generator=g)
    torch._dynamo.reset()
    (torch.compile(fn, backend="stax")(x) * w).sum().backward()
    (fn(xe) * w).sum().backward()
    torch.testing.assert_close(x.grad, xe.grad, rtol=1e-5, atol=1e-5)
    assert all(r.route == "stax-cpu" for r in B.reports()[-2:])


def test_copysign_is_bit_exact():
    g = torch.Generator().manual_seed(9)
    a = torch.cat([torch.tensor(SPECIALS), torch.randn(1000, generator=g)])
    b = torch.cat([torch.tensor(SPECIALS[::-1]), torch.randn(1000, generator=g)])
    for fn in (torch.copysign, lambda a, b: torch.copysign(a, -2.0),
               lambda a, b: torch.copysign(a * 3, b.abs() - 0.5)):
        torch._dynamo.reset()
        got, want = torch.compile(fn, backend="stax")(a, b), fn(a, b)
        assert torch.equal(got.view(torch.int32), want.view(torch.int32))
        assert B.compiled_callables[-1].stax_fallback_ops == []


@pytest.mark.parametrize("where", ["stax-cpu", "triton", "cuda"])
def test_math_functions_stay_dynamic(where, counts, request):
    dev, sizes, route = _where(where, request)

    def fn(x):
        return torch.atan(x) + torch.erfc(x) * torch.asinh(x) - torch.copysign(
            torch.cosh(x * 0.1), x) + torch.log10(x.abs() + 1)

    cf = torch.compile(fn, backend="stax", dynamic=True)
    for rows, cols in sizes:
        x = torch.randn(rows, cols, device=dev) * 3
        torch.testing.assert_close(cf(x), fn(x), rtol=1e-5, atol=1e-5)
    assert_dynamic_only(route, counts)


def test_a_saved_kernel_that_calls_sleef_loads_in_a_fresh_process(tmp_path):
    """A loaded artifact's kernels are JIT-compiled without the compiler
    (runtime.cpu_kernel.load_cpu_kernels), which must make SLEEF visible itself."""
    import subprocess
    import sys
    import stax
    x = torch.randn(1000)
    fn = lambda x: torch.acos(torch.tanh(x)) + torch.erfc(x)   # noqa: E731
    stax.precompile(fn, (x,)).save(str(tmp_path / "f.stax"))
    torch.save((x, fn(x)), tmp_path / "io.pt")
    code = ("import sys, torch, stax\n"
            f"x, want = torch.load({str(tmp_path / 'io.pt')!r})\n"
            f"got = stax.load({str(tmp_path / 'f.stax')!r})(x)\n"
            "torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)\n"
            "assert 'stax.targets.cpu_sleef' not in sys.modules\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
