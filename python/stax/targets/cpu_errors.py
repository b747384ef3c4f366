"""The exceptions of the CPU code generator (`stax.targets.llvm` re-exports the public one).

`KernelLoweringError`: the kernel uses something the CPU target cannot lower; callers
(the driver, the Triton target, which raises it too) catch this class. `NeedScalar`:
internal to the lowering, raised while emitting 16-lane code where an index is not
per-lane affine; the lowering catches it and emits the whole kernel with 1 lane."""


class KernelLoweringError(Exception):
    """The kernel uses something the CPU target cannot lower (the message says what)."""


class NeedScalar(Exception):
    """Raised while emitting 16-lane code when an index is not per-lane affine."""
