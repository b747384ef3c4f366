"""Real tensors while the backend compiles: aot_autograd calls the compilers with its
fake and functional dispatch modes active, so a constant read (`.numpy()`) or made
(`torch.tensor`, `.to(device)`) there would be fake, and fail at its first real use."""
from __future__ import annotations


def real_tensors():
    """A context in which no dispatch mode is active (torch's own helper for this)."""
    from torch.utils._python_dispatch import _disable_current_modes
    return _disable_current_modes()
