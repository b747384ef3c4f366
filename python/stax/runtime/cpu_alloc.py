"""Large CPU buffers on transparent huge pages (`empty_huge_pages`).

A fresh CPU buffer of several MiB is fresh pages from the OS: glibc maps it anew, and
the first write faults in every 4 KiB page. On this VM a 32 MiB output cost 12-15 ms
of faults, where writing it costs 1.7 ms, so a compiled softmax or layer_norm of
[8192, 1024] spent most of its time there (eager and Inductor alike). Outputs cannot
come from the arena (the caller owns them), so a large one is advised
`MADV_HUGEPAGE` before its first touch: its faults then map 2 MiB at a time (4 ms
for the same 32 MiB buffer). Only stax's own allocations are advised; the process's
policy (`THP_MEM_ALLOC_ENABLE`, /sys/kernel/mm/transparent_hugepage) is left as it is.
Where madvise is missing (not Linux) or refuses, the buffer is a plain one.

Runtime code: needs torch only.
"""
from __future__ import annotations

import ctypes

import torch

__all__ = ["empty_huge_pages", "HUGE_PAGE_MIN_BYTES"]

#: buffers from this size on are advised (below it a huge page is most of the buffer)
HUGE_PAGE_MIN_BYTES = 4 << 20
_HUGE = 1 << 21
_MADV_HUGEPAGE = 14


def _madvise():
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_MADVISE = _madvise()


def empty_huge_pages(shape, strides, dtype) -> torch.Tensor:
    """`torch.empty_strided` on the CPU, whose whole 2 MiB pages are advised
    MADV_HUGEPAGE before anything touches them."""
    t = torch.empty_strided(shape, strides, dtype=dtype, device="cpu")
    if _MADVISE is not None:
        ptr, n = t.data_ptr(), t.untyped_storage().nbytes()
        lo, hi = -(-ptr // _HUGE) * _HUGE, (ptr + n) // _HUGE * _HUGE
        if hi > lo:
            _MADVISE(lo, hi - lo, _MADV_HUGEPAGE)   # (a refusal leaves a plain buffer)
    return t
