"""Reused intermediate buffers of a small compiled graph (the wrapper's `_arena`).

A launch-bound graph spends more time allocating its intermediates than running its
kernels: `torch.empty_strided` costs about 1.4 µs on the CPU, and a graph of 20 small
kernels allocates 20 buffers per call. The generated wrapper instead takes one set of
buffers (every intermediate, and the fixed views of them) from the graph's arena at the
start of a call and gives it back before it returns.

What makes that safe (the wrapper only puts a buffer here when all of it holds):
- an intermediate's lifetime ends inside the call: no output is one of these buffers or
  a view of one, and the graph has no fallback op (an eager op may return a view of its
  input);
- two calls never share a set: a set is taken off a free list, so concurrent calls
  (threads) and a call whose kernel raised (its set is simply not given back) get their
  own;
- on the GPU, sets are kept per stream. Work on one stream runs in order, so the next
  call's kernels (enqueued after this call's) cannot overtake this call's reads of the
  same buffers. A call on another stream takes another set;
- during a CUDA graph capture a set is allocated fresh (from the graph's pool) and not
  kept: the captured graph owns that memory.
Buffers whose lifetimes do not overlap within a call share one slot (`stax.arena_plan`
packs them at compile time; `slot_tensor` builds each on its slot), so a set holds about
the graph's peak of live intermediates. Limits (`arena_limits`): a buffer above the
per-buffer limit, or one that would take a set past the total, is allocated per call as
eager does. On the CPU (defaults 32 MiB a buffer, 128 MiB a set; env
`STAX_ARENA_MAX_BUFFER_BYTES`, `STAX_ARENA_MAX_BYTES`) a fresh buffer of a few MiB is
fresh pages from the OS each call, and faulting them in cost a GPT-2 block's GELU kernel
twice its own time; on the GPU (defaults 1 MiB and 4 MiB) the caching allocator already
makes allocation cheap, and memory held per graph would add to the peak that eager and
the allocator share across graphs.

Runtime code: needs torch only.
"""
from __future__ import annotations

import os

import torch

__all__ = ["BufferArena", "ARENA_MAX_BYTES", "ARENA_MAX_BUFFER_BYTES", "arena_limits",
           "slot_tensor"]

#: (total per set, per buffer) by device kind; the env vars override both kinds
_DEFAULT_LIMITS = {False: (128 << 20, 32 << 20), True: (4 << 20, 1 << 20)}
ARENA_MAX_BYTES = os.environ.get("STAX_ARENA_MAX_BYTES")
ARENA_MAX_BUFFER_BYTES = os.environ.get("STAX_ARENA_MAX_BUFFER_BYTES")


def arena_limits(gpu: bool) -> tuple[int, int]:
    """(bytes a set may hold, bytes one buffer may have) for a graph on the GPU or not.
    Read at each compile, so a test (or a user) may change the module's values."""
    total, per_buffer = _DEFAULT_LIMITS[bool(gpu)]
    if ARENA_MAX_BYTES is not None:
        total = int(ARENA_MAX_BYTES)
    if ARENA_MAX_BUFFER_BYTES is not None:
        per_buffer = int(ARENA_MAX_BUFFER_BYTES)
    return total, per_buffer


def slot_tensor(slot: torch.Tensor, shape, strides, dtype) -> torch.Tensor:
    """A `dtype` tensor of (shape, strides) at the start of `slot` (a uint8 buffer at
    least as large): the arena's buffers share slots, each at offset 0 of its slot."""
    return torch.empty((0,), dtype=dtype, device=slot.device).set_(
        slot.untyped_storage(), 0, shape, strides)

#: sets kept per free list: more concurrent calls than this allocate their own
_KEEP = 4
#: streams with a free list: beyond this the lists are dropped (streams are few)
_MAX_STREAMS = 8


def _never_capturing() -> bool:
    return False


class BufferArena:
    """`take()` -> a tuple of buffers (built by `build()` when none is free);
    `give(bufs)` returns it. On the GPU both take the stream (`take(stream)`,
    `give(stream, bufs)`)."""

    __slots__ = ("_build", "_free", "_by_stream", "_capturing", "built")

    def __init__(self, build, gpu: bool = False):
        self._build = build
        self._free: list = []
        self._by_stream: dict = {}
        self._capturing = None
        if gpu:  # (a CPU build has no capture to ask about: the tests interpret kernels)
            self._capturing = torch.cuda.is_current_stream_capturing \
                if torch.cuda.is_available() else _never_capturing
        #: sets built so far (a test reads it: 1 after many sequential calls)
        self.built = 0

    def _new(self):
        self.built += 1
        return self._build()

    def take(self, stream=None):
        if self._capturing is None:
            free = self._free
        else:
            if self._capturing():
                return self._build()
            free = self._by_stream.get(stream)
            if free is None:
                if len(self._by_stream) >= _MAX_STREAMS:
                    self._by_stream.clear()
                free = self._by_stream[stream] = []
        try:
            return free.pop()
        except IndexError:
            return self._new()

    def give(self, *args) -> None:
        if self._capturing is None:
            bufs, = args
            free = self._free
        else:
            stream, bufs = args
            if self._capturing():
                return
            free = self._by_stream.setdefault(stream, [])
        if len(free) < _KEEP:
            free.append(bufs)
