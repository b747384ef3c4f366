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
