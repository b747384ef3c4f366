"""The errors a compiled graph, a loaded artifact and the compiler raise. They live on the
lowest floor (torch-free) so the runtime (guards, CompiledGraph, artifacts) and the
compiler share them. Every one is a `StaxError` (a RuntimeError)."""

__all__ = ["StaxError", "StaxGuardError", "StaxCompileError", "StaxUnsupportedError",
           "StaxArtifactError", "StaxArtifactFormatError", "StaxArtifactIntegrityError",
           "StaxArtifactVersionError", "StaxArtifactPlanError", "StaxInvariantError",
           "StaxIndexError"]


class StaxError(RuntimeError):
    """Base of every error stax raises on purpose."""


class StaxIndexError(StaxError, IndexError):
    """A gather met an index out of range at run time (eager raises there too: an
    IndexError for embedding and tensor indexing, a RuntimeError for index_select on an
    inner dim; this is both)."""


def index_out_of_range(index: int, size: int, negative_wraps: bool, where: str) -> StaxIndexError:
    """The error of a gather that met `index` along a dim of `size` elements: the valid
    range is `-size .. size-1` where a negative index counts from the end (tensor
    indexing), else `0 .. size-1` (embedding, index_select). `where` names the kernel or
    graph that gathers."""
    low = -size if negative_wraps else 0
    return StaxIndexError(
        f"index {index} is out of bounds for a dimension of size {size} (valid: {low} to "
        f"{size - 1}); {where} gathers along it (embedding, index_select, torch.gather "
        "or tensor indexing): check the index tensor's values. Eager PyTorch raises here too; no "
        "output of this call was returned")


class StaxGuardError(StaxError):
    """A compiled graph was called with arguments it was not specialized for."""


class StaxCompileError(StaxError):
    """A graph could not be compiled natively (raised in strict mode)."""


class StaxUnsupportedError(StaxError):
    """The driver itself refuses the graph (symbolic shapes, non-CPU tensors, ...)."""


class StaxArtifactError(StaxError):
    """A saved artifact (a `stax.precompile` file or a compile-cache entry) cannot be
    loaded. The message is one line: what is wrong, where, and what to do."""


class StaxArtifactFormatError(StaxArtifactError):
    """Not a stax artifact, truncated, or a container/format version this stax does not read."""


class StaxArtifactIntegrityError(StaxArtifactError):
    """A part, or the whole file, does not match its sha256 (corrupted or edited)."""


class StaxArtifactVersionError(StaxArtifactError):
    """Saved by another stax / torch / MLIR / triton, or for another machine."""


class StaxArtifactPlanError(StaxArtifactError):
    """The metadata (wrapper plan, kernels, constants, fallback ops) is outside what the
    installed stax generates: refused before anything runs."""


class StaxInvariantError(StaxGuardError):
    """A precompiled function was called with modules or inputs that break one of its
    numbered invariants (`invariant` is the number, `subject` the name that differs)."""

    def __init__(self, message: str, invariant: int = 0, subject: str | None = None):
        super().__init__(message)
        self.invariant = invariant
        self.subject = subject
