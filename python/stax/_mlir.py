"""The one place stax imports MLIR from.

Every other module imports `ir`, `PassManager`, ... from here, so that moving to
another build of the upstream MLIR Python bindings (today the copy shipped inside
torch-mlir) is a one-file change.
"""
from torch_mlir import ir  # noqa: F401
from torch_mlir import passmanager  # noqa: F401
from torch_mlir import rewrite  # noqa: F401
from torch_mlir.passmanager import PassManager  # noqa: F401
from torch_mlir.execution_engine import ExecutionEngine  # noqa: F401
from torch_mlir.dialects import ext, irdl, func, arith  # noqa: F401

MLIRError = ir.MLIRError

__all__ = ["ir", "passmanager", "rewrite", "PassManager", "ExecutionEngine", "ext", "irdl",
           "func", "arith", "MLIRError", "new_context"]


def new_context() -> "ir.Context":
    """A fresh Context with the stax dialect loaded (once, as the bindings require)."""
    from stax.dialects.stax_dialect import load_into

    ctx = ir.Context()
    with ctx:
        load_into(ctx)
    return ctx
