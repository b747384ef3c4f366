"""The exceptions of the CPU code generator (`stax.targets.llvm` re-exports the public one).

`KernelLoweringError` (defined in `lowering_errors`, shared with the Triton target): the
kernel uses something the CPU target cannot lower; the driver catches this class. `NeedScalar`:
internal to the lowering, raised while emitting 16-lane code where an index is not
per-lane affine; the lowering catches it and emits the whole kernel with 1 lane."""

from stax.targets.lowering_errors import KernelLoweringError  # noqa: F401  (re-exported)


class NeedScalar(Exception):
    """Raised while emitting 16-lane code when an index is not per-lane affine."""
