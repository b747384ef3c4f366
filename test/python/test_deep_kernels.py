"""A long fused chain is one kernel on every target: the code generators evaluate the
expression tree recursively, and a chain of a few hundred ops passed Python's recursion
limit (the graph fell back; at 10,000 ops a raised limit overflowed the C stack and
segfaulted). `kernel_ir.with_deep_stack` lowers large kernels on a thread with a stack
sized for them."""
import os
import sys

import pytest
import torch

import stax.backend as B
from stax.targets.kernel_ir import with_deep_stack

DEVICE = os.environ.get("STAX_TEST_DEVICE", "cpu")
ROUTE = "triton" if DEVICE.startswith("cuda") else "stax-cpu"

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

N_OPS = 600


def _chain(x):
    for i in range(N_OPS):
        x = torch.tanh(x) if i % 2 else x + 0.5
    return x


@pytest.mark.usefixtures("stax_strict")
def test_long_chain_compiles_to_one_kernel():
    x = torch.randn(64, 64, device=DEVICE)
    got = torch.compile(_chain, backend="stax", fullgraph=True)(x)
    torch.testing.assert_close(got, _chain(x), rtol=1e-5, atol=1e-5)
    r = B.last_report()
    assert r.route == ROUTE and r.kernel_count == 1 and r.fallback_ops == []


def test_long_chain_lowers_to_ttir():
    pytest.importorskip("triton")
    from test_triton_compile import fused_kernels, ttir_of
    ((ctx, _, kernels),) = fused_kernels(_chain, torch.randn(64, 64))
    assert len(kernels) == 1
    with ctx:
        text = ttir_of(kernels[0], "deep_chain").text
    assert text.count("math.tanh") + text.count("tanh") >= N_OPS // 2


def test_with_deep_stack_recursion_and_errors():
    class Op:  # a stand-in with 5000 body ops and a context (only counted and entered)
        def __init__(self):
            from stax._mlir import new_context
            self.context = new_context()
            self.regions = [type("R", (), {"blocks": [type("B", (), {
                "operations": range(5000)})()]})()]

    def depth(n):
        return 0 if n == 0 else 1 + depth(n - 1)

    assert with_deep_stack(Op(), lambda: depth(50000)) == 50000
    with pytest.raises(ZeroDivisionError):
        with_deep_stack(Op(), lambda: 1 // 0)
