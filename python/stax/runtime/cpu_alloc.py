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

**Recycling.** Even on huge pages a fresh 32 MiB output costs its faults (about as much
as the kernel that writes it), call after call, while the caller drops the previous
call's output. So the large buffers are also recycled, as CUDA's caching allocator does
on the GPU: `OutputRecycler` keeps a reference to each storage it handed out, and hands
one out again only when that reference is the storage's last one (`use count == 1`: no
tensor, view, autograd saved tensor or numpy array anywhere holds it), under a lock, so
a recycled buffer is as fresh as a new one to every observer: no live tensor aliases
it. Its contents are stale, as `empty`'s are uninitialized; every allocation here is
fully written by the kernels before anyone reads it. Idle storages (held only by the
recycler) are capped at `STAX_CPU_OUTPUT_CACHE_MB` (default 512; 0 turns recycling off),
the oldest dropped first.

Runtime code: needs torch only.
"""
from __future__ import annotations

import ctypes
import os
import threading

import torch

from stax.runtime.layout import extent

__all__ = ["empty_huge_pages", "HUGE_PAGE_MIN_BYTES", "OutputRecycler", "RECYCLER"]

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
    """`torch.empty_strided` on the CPU: a recycled storage no one else holds
    (`RECYCLER`), else a new one whose whole 2 MiB pages are advised MADV_HUGEPAGE
    before anything touches them."""
    return RECYCLER.empty_strided(shape, strides, dtype)


def _new_huge_pages(shape, strides, dtype) -> torch.Tensor:
    t = torch.empty_strided(shape, strides, dtype=dtype, device="cpu")
    if _MADVISE is not None:
        ptr, n = t.data_ptr(), t.untyped_storage().nbytes()
        lo, hi = -(-ptr // _HUGE) * _HUGE, (ptr + n) // _HUGE * _HUGE
        if hi > lo:
            _MADVISE(lo, hi - lo, _MADV_HUGEPAGE)   # (a refusal leaves a plain buffer)
    return t


_use_count = torch._C._storage_Use_Count


class OutputRecycler:
    """Large CPU buffers handed out again once nobody holds them (module docstring)."""

    def __init__(self, max_idle_bytes: int):
        self.max_idle_bytes = max_idle_bytes
        self._lock = threading.Lock()
        self._held: list = []      # UntypedStorages handed out, oldest first
        self.stats = {"new": 0, "recycled": 0, "dropped": 0}

    def empty_strided(self, shape, strides, dtype) -> torch.Tensor:
        if self.max_idle_bytes <= 0:
            self.stats["new"] += 1
            return _new_huge_pages(shape, strides, dtype)
        nbytes = extent(shape, strides, 0) * dtype.itemsize
        with self._lock:
            for i, st in enumerate(self._held):
                # the last reference is ours: no tensor anywhere reads or writes it
                if st.nbytes() == nbytes and _use_count(st._cdata) == 1:
                    del self._held[i]
                    self._held.append(st)
                    self.stats["recycled"] += 1
                    # made under the lock: no other call can take it in between
                    return torch.empty(0, dtype=dtype).set_(st, 0, shape, strides)
            t = _new_huge_pages(shape, strides, dtype)
            self.stats["new"] += 1
            self._held.append(t.untyped_storage())
            self._trim()
            return t

    def _trim(self):
        """Drop the oldest idle storages while the idle ones exceed the cap, and stop
        tracking in-use ones beyond a bound (the caller keeps those alive)."""
        idle = [st for st in self._held if _use_count(st._cdata) == 1]
        excess = sum(st.nbytes() for st in idle) - self.max_idle_bytes
        for st in idle:
            if excess <= 0:
                break
            self._held.remove(st)
            excess -= st.nbytes()
            self.stats["dropped"] += 1
        while len(self._held) > _MAX_TRACKED:
            self._held.pop(0)

    def clear(self):
        with self._lock:
            self._held.clear()


#: storages tracked at most (a caller keeping many outputs alive: the oldest are forgotten)
_MAX_TRACKED = 256


def _cap_from_env() -> int:
    raw = os.environ.get("STAX_CPU_OUTPUT_CACHE_MB", "512")
    try:
        return int(float(raw) * (1 << 20))
    except ValueError:
        raise ValueError(f"STAX_CPU_OUTPUT_CACHE_MB={raw!r}: expected a number of MiB "
                         "(0 turns recycling of large CPU buffers off)") from None


RECYCLER = OutputRecycler(_cap_from_env())
