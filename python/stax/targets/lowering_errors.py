"""The error every code generator raises for a kernel it cannot lower.

The CPU target, the Triton target and `stax-lower-cpu` raise `KernelLoweringError`; the
driver catches this one class. It lives apart from both code generators so that a
Triton-only or pass-only import (stax-opt) does not load the CPU target and torch."""


class KernelLoweringError(Exception):
    """The kernel uses something the target cannot lower (the message says what)."""
