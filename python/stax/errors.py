"""The errors a compiled graph and the compiler raise. They live on the lowest floor
(torch only) so the runtime (guards, CompiledGraph) and the compiler share them."""

__all__ = ["StaxGuardError", "StaxCompileError", "StaxUnsupportedError"]


class StaxGuardError(RuntimeError):
    """A compiled graph was called with arguments it was not specialized for."""


class StaxCompileError(RuntimeError):
    """A graph could not be compiled natively (raised in strict mode)."""


class StaxUnsupportedError(RuntimeError):
    """The driver itself refuses the graph (symbolic shapes, non-CPU tensors, ...)."""
