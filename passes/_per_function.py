"""The driver most stax passes share: verify the input, rewrite each `func.func` in
place, verify the output (located PassErrors that name the pass)."""
from __future__ import annotations

from collections.abc import Callable

from stax._mlir import ir
from stax.passes.fuse import verify_pass_ir


def run_per_function(module: "ir.Module", pass_name: str,
                     rewrite: Callable[["ir.Operation"], object]) -> None:
    """Run `rewrite(func_op)` on every func.func of `module`, between verifications."""
    with module.context, ir.Location.unknown():
        verify_pass_ir(module, "input", pass_name)
        for op in module.body.operations:
            if op.operation.name == "func.func":
                rewrite(op.operation)
        verify_pass_ir(module, "output", pass_name)
