"""Which intermediates of a generated wrapper the buffer arena holds, and which of them
share memory (the compile side of `stax.runtime.arena`).

`plan_arena` takes the wrapper's allocations (`empty_strided` or `_empty_huge_pages` lines
of buffers that no output is or views) and the body lines that use them, and packs the
buffers into slots: two buffers share a slot when one's last use comes before the
other's allocation, so
the arena holds about the graph's peak of live intermediates, not their sum (the
reuse Inductor's wrapper makes within a call, kept across calls). A buffer's lifetime
runs from its allocation line to the last line naming it or a view of it: the wrapper
is straight-line code whose kernels run in line order on the CPU and in stream order on
one stream on the GPU, so a kernel that writes a slot runs after every read of the
slot's previous buffer. A buffer is placed in a slot (a uint8 tensor) at offset 0, so
the fixed `as_strided` views of it keep their offsets, and slot memory keeps the
allocator's alignment.
"""
from __future__ import annotations

import dataclasses
import re

from stax.arena import arena_limits

__all__ = ["ArenaAlloc", "ArenaPlan", "plan_arena"]

_VAR = re.compile(r"\bv\d+\b")


@dataclasses.dataclass(frozen=True)
class ArenaAlloc:
    """One allocation of the wrapper: its line and what it allocates."""
    line: int
    nbytes: int
    shape: tuple
    strides: tuple
    dtype_src: str      # the dtype as wrapper source (torch.float32)


@dataclasses.dataclass
class ArenaPlan:
    """`slot_of`: buffer var -> slot index; `slot_bytes`: each slot's size; `views`:
    the fixed views (var -> root) the arena builds with their roots."""
    slot_of: dict
    slot_bytes: list
    views: dict

    def __bool__(self) -> bool:
        return bool(self.slot_of)

    @property
    def held_bytes(self) -> int:
        return sum(self.slot_bytes)

    @property
    def names(self) -> list:
        """The arena's buffers and views, in the order `_arena_build` returns them."""
        return list(self.slot_of) + list(self.views)


def lifetimes(lines: list, allocs: dict, views: dict) -> dict:
    """var -> (first line, last line) of each allocated buffer: from its allocation to
    the last line that names it or one of its views (None lines are dropped ones)."""
    last: dict = {}
    for i, ln in enumerate(lines):
        if ln is None:
            continue
        for name in _VAR.findall(ln):
            last[name] = i
    root_of = {v: root for v, (_line, root) in views.items()}
    end = {v: a.line for v, a in allocs.items()}
    for name, i in last.items():
        root = root_of.get(name, name)
        if root in end and i > end[root]:
            end[root] = i
    return {v: (a.line, end[v]) for v, a in allocs.items()}


def plan_arena(lines: list, allocs: dict, views: dict, output_roots: set,
               eager_ops: bool, gpu: bool) -> ArenaPlan:
    """The arena of a wrapper: every allocated intermediate that no output is or views,
    packed into shared slots by lifetime, with the fixed views of them; nothing when the
    graph calls eager ops (`eager_ops`: a fallback op may return a view of its input, a
    collective's buffers are in flight after it returns). A buffer above the
    per-buffer limit, or one whose slot would take the arena past its total limit
    (`stax.arena.arena_limits`), is allocated per call."""
    if eager_ops:
        return ArenaPlan({}, [], {})
    max_total, max_buffer = arena_limits(gpu)
    spans = lifetimes(lines, allocs, views)
    slot_of: dict = {}
    slot_bytes: list = []
    slot_free_after: list = []   # the last line of the slot's latest buffer
    for v in sorted(allocs, key=lambda n: allocs[n].line):
        a = allocs[v]
        if v in output_roots or a.nbytes > max_buffer:
            continue
        start, end = spans[v]
        free = [s for s in range(len(slot_bytes)) if slot_free_after[s] < start]
        fits = [s for s in free if slot_bytes[s] >= a.nbytes]
        if fits:      # the smallest free slot that holds it
            s = min(fits, key=lambda s: slot_bytes[s])
        elif free:    # else the largest free one, grown
            s = max(free, key=lambda s: slot_bytes[s])
            if sum(slot_bytes) - slot_bytes[s] + a.nbytes > max_total:
                continue
            slot_bytes[s] = a.nbytes
        else:
            if sum(slot_bytes) + a.nbytes > max_total:
                continue
            s = len(slot_bytes)
            slot_bytes.append(a.nbytes)
            slot_free_after.append(-1)
        slot_of[v] = s
        slot_free_after[s] = end
    return ArenaPlan(slot_of, slot_bytes,
                     {v: root for v, (_line, root) in views.items() if root in slot_of})
