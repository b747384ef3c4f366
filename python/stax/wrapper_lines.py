"""Edits of the generated wrapper's lines once they are all emitted (stax.wrapper):
views nobody reads dropped, and the arena's build function made from the allocations it
takes over."""
from __future__ import annotations

import re

__all__ = ["arena_build_lines", "drop_dead_views"]

_VIEW_LINE = re.compile(r"^\s+(v\d+) = as_strided\(")
_DEL_LINE = re.compile(r"^(\s+)del (.*)$")


def drop_dead_views(lines: list, extra_uses) -> list[str]:
    """Blank (None) the wrapper lines that make a view nobody reads, and drop those
    names from `del` lines; returns the dropped names. A chain of view ops becomes one
    `as_strided` of the root per view, so the inner views of a chain (and the split
    results an op never reads) are dead: each cost an as_strided per call (about 1.3
    µs on the CPU)."""
    dropped: list[str] = []
    while True:
        defs = {}
        for i, ln in enumerate(lines):
            m = ln is not None and _VIEW_LINE.match(ln)
            if m:
                defs[m.group(1)] = i
        words: dict[str, int] = {}
        for ln in list(lines) + list(extra_uses):
            if ln is None or ln.lstrip().startswith(("#", "del ")):
                continue
            for w in re.findall(r"\bv\d+\b", ln):
                words[w] = words.get(w, 0) + 1
        dead = [v for v in defs if words.get(v, 0) <= 1]  # only its own definition
        if not dead:
            break
        for v in dead:
            lines[defs[v]] = None
        dropped += dead
    gone = set(dropped)
    for i, ln in enumerate(lines):
        m = ln is not None and _DEL_LINE.match(ln)
        if m:
            keep = [n for n in (x.strip() for x in m.group(2).split(",")) if n not in gone]
            lines[i] = f"{m.group(1)}del {', '.join(keep)}" if keep else None
    return dropped


def arena_build_lines(arena, allocs: dict, views: dict, em, gpu: bool):
    """The body of `_arena_build` (one uint8 slot per shared slot, each buffer built on
    its slot, then the fixed views) and the wrapper lines it replaces."""
    device = "_dev" if gpu else repr("cpu")
    slot_vars = [em.new_var() for _ in arena.slot_bytes]
    lines = [f"    {sv} = empty_strided(({n},), (1,), dtype=torch.uint8, device={device})"
             for sv, n in zip(slot_vars, arena.slot_bytes)]
    for v, s in arena.slot_of.items():
        a = allocs[v]
        lines.append(f"    {v} = _slot_tensor({slot_vars[s]}, {a.shape!r}, {a.strides!r}, "
                     f"{a.dtype_src})")
    moved = {allocs[v].line for v in arena.slot_of}
    for v in arena.views:
        line = views[v][0]
        lines.append(em.lines[line])
        moved.add(line)
    return lines, moved
