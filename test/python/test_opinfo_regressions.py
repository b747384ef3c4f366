"""Regression tests for op-lowering bugs found by the OpInfo sweep
(`benchmarks/opinfo_sweep.py`; findings in benchmarks/results/opinfo-cpu.md)."""
from __future__ import annotations

import pytest
import torch

from stax.targets.kernel_ir import float_literal


@pytest.mark.parametrize("v", [1e-15, 1e20, -1e-300, 5e-324, 1.5, 0.1, 3.0, -0.0, 1e16,
                               1.7976931348623157e308])
def test_float_literal_is_mlir_float(v):
    """MLIR float literals need a '.' in the mantissa: `1e-15` parsed as the integer 1
    followed by `e-15` ("custom op 'e' is unknown"); repr round-trips the value."""
    s = float_literal(v)
    mant = s.split("e")[0]
    assert "." in mant, s
    assert float(s) == v and str(float(s)) == repr(v)


def test_float_literal_parses_in_mlir():
    from stax._mlir import ir
    with ir.Context() as ctx:
        ctx.allow_unregistered_dialects = True
        for v in (1e-15, 1e20, 2.5e-8):
            ir.Module.parse(f"func.func @f() -> f64 {{\n  %c = arith.constant "
                            f"{float_literal(v)} : f64\n  return %c : f64\n}}")


def test_pinverse_compiles_on_cpu(stax_strict):
    """torch.pinverse's decomposition stores rcond's default 1e-15 as an f64 constant:
    the CPU kernel's MLIR did not parse (KernelLoweringError under STAX_STRICT=1)."""
    x = torch.randn(5, 5)
    f = torch.compile(torch.pinverse, backend="stax", fullgraph=True, dynamic=False)
    torch.testing.assert_close(f(x), torch.pinverse(x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_unbind_copy_compiles(stax_strict, dtype):
    """unbind_copy (a fallback op with one `Tensor[]` return) made the wrapper look up
    its schema's return by the result's position: IndexError for every position past
    0 (OpInfo sweep, session 31). Each piece is a fresh tensor with eager's values."""
    x = torch.randn(300, 4, 512).to(dtype)
    f = torch.compile(lambda t: torch.unbind_copy(t, 1), backend="stax", fullgraph=True,
                      dynamic=False)
    got, want = f(x), torch.unbind_copy(x, 1)
    assert len(got) == len(want) == 4
    for g, w in zip(got, want):
        assert g.stride() == w.stride() and torch.equal(g, w)
        assert g.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()


def test_functional_batch_norm_in_eval_with_bf16_running_stats(stax_strict):
    """`_native_batch_norm_legit_functional` with training=False returns the running
    stats unchanged, in the dtype the trace gives them (f32 for bf16 stats); the importer
    returned them as they came (bf16) and refused its own graph (OpInfo sweep, bf16)."""
    from torch.ops import aten
    x = torch.randn(256, 3, 8, 8).bfloat16()
    w, b = torch.randn(3).bfloat16(), torch.randn(3).bfloat16()
    rm, rv = torch.randn(3).bfloat16(), torch.rand(3).bfloat16() + 0.5

    def fn(x, w, b, rm, rv):
        return aten._native_batch_norm_legit_functional(x, w, b, rm, rv, False, 0.1, 1e-5)
    f = torch.compile(fn, backend="stax", fullgraph=True, dynamic=False)
    got, want = f(x, w, b, rm, rv), fn(x, w, b, rm, rv)
    torch.testing.assert_close(got[0], want[0], rtol=2e-2, atol=2e-2)
    for g, e in zip(got[3:], want[3:]):
        torch.testing.assert_close(g.float(), e.float())
