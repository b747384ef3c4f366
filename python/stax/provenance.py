"""Where compiled code came from: the FX nodes and the user's source lines behind an op.

The importer locates every op at `loc("<fx node>"("<file>":<line>:0))` (the FX node's
name, and the last frame of its `stack_trace` outside torch); stax-fuse gives a kernel
the fused location of its members. `SourceMap` reads those locations back, adds the
source text (the FX node's `stack_trace`, else the file itself through linecache) and
gives the comment lines the wrapper puts above each launch and the lines
`stax.explain` lists under each kernel.
"""
from __future__ import annotations

import dataclasses
import linecache
import re

__all__ = ["SourceLine", "SourceMap", "loc_nodes"]

# a quoted string in a printed location: a NameLoc's name, or a file when :line:col follows
_TOKEN_RE = re.compile(r'"((?:[^"\\]|\\.)*)"(?::(\d+):\d+)?')
_FRAME_RE = re.compile(r'File "([^"]+)", line (\d+)')
MAX_LINES = 6  # source lines per launch comment: a huge fused kernel stays readable


@dataclasses.dataclass
class SourceLine:
    file: str
    line: int
    code: str            # the source text ("" when unknown)
    nodes: list          # FX node names that came from this line

    def __str__(self) -> str:
        code = f"  {self.code}" if self.code else ""
        return f"{self.file}:{self.line}{code}  [{', '.join(self.nodes)}]"


def loc_nodes(location) -> list[tuple[str, str | None, int | None]]:
    """(fx node, file, line) of each NameLoc in `location` (file/line None when the
    node has no user frame), in order, without repeats."""
    out, seen = [], set()
    pending = None
    for m in _TOKEN_RE.finditer(str(location)):
        text, line = m.group(1), m.group(2)
        if line is None:  # a name; it owns the file location that follows it, if any
            if pending is not None and pending not in seen:
                seen.add(pending)
                out.append(pending)
            pending = (text, None, None)
        elif pending is not None:
            pending = (pending[0], text, int(line))
            if pending not in seen:
                seen.add(pending)
                out.append(pending)
            pending = None
    if pending is not None and pending not in seen:
        out.append(pending)
    return out


def _code_from_trace(stack_trace: str | None, file: str, line: int) -> str:
    """The source text stack_trace shows under the frame `File "file", line N`."""
    if not stack_trace:
        return ""
    lines = stack_trace.splitlines()
    for i, ln in enumerate(lines):
        m = _FRAME_RE.search(ln)
        if m and m.group(1) == file and int(m.group(2)) == line and i + 1 < len(lines):
            nxt = lines[i + 1].strip()
            if nxt and not _FRAME_RE.search(nxt):
                return nxt
    return ""


class SourceMap:
    """The user's source lines of ops of one FX graph (`gm` may be None: then only the
    locations and linecache are read)."""

    def __init__(self, gm=None):
        self._nodes = {n.name: n for n in gm.graph.nodes} if gm is not None else {}

    def lines(self, op) -> list[SourceLine]:
        """The source lines `op` (a kernel, fallback op, matmul) came from, in order of
        first appearance, each with the FX nodes it produced."""
        by_key: dict = {}
        for node, file, line in loc_nodes(op.operation.location):
            if file is None:
                continue
            key = (file, line)
            if key not in by_key:
                fx = self._nodes.get(node)
                code = _code_from_trace(fx.meta.get("stack_trace") if fx is not None else None,
                                        file, line)
                if not code:
                    code = linecache.getline(file, line).strip()
                by_key[key] = SourceLine(file, line, code, [])
            if node not in by_key[key].nodes:
                by_key[key].nodes.append(node)
        return list(by_key.values())

    def comment(self, op, indent: str = "    ") -> list[str]:
        """`# file:line  code  [fx nodes]` lines for the wrapper (one line each: the text
        is a comment, so nothing in it can change what the wrapper does)."""
        src = self.lines(op)
        out = [f"{indent}# {_one_line(str(s))}" for s in src[:MAX_LINES]]
        if len(src) > MAX_LINES:
            out.append(f"{indent}# ... and {len(src) - MAX_LINES} more source lines")
        return out


def _one_line(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
