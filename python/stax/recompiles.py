"""Why code was compiled again: Dynamo's recompiles and stax's own shape variants.

Dynamo records the guard that failed before each recompile of a frame
(`torch._dynamo.utils.guard_failures`, e.g. "0/0: tensor 'x' size mismatch at index 0.
expected 8, actual 5"). When a graph reaches the backend, the reasons recorded since the
previous graph are the ones that led to it: the backend stores them on the graph's
report (`StaxReport.recompile_reasons`), and `stax.explain` prints them. A graph with
symbolic shapes then gets one stax variant per size (stax.shape_specialize), each with
the reason it was compiled (`ShapeVariant.reason`).

With STAX_EXPLAIN=1 both are also printed to stderr as they happen ("[stax] explain: ...").
"""
from __future__ import annotations

import os
import sys
import threading

__all__ = ["explain_enabled", "announce", "new_dynamo_recompile_reasons"]

_lock = threading.Lock()
# code object -> (Dynamo's list of its reasons, how many were handed out); a new list
# means torch._dynamo.reset() cleared them
_seen: dict[object, tuple[list, int]] = {}


def explain_enabled() -> bool:
    return os.environ.get("STAX_EXPLAIN", "") not in ("", "0")


def announce(message: str) -> None:
    """Print `message` to stderr when STAX_EXPLAIN is set."""
    if explain_enabled():
        print(f"[stax] explain: {message}", file=sys.stderr, flush=True)


def _frame_name(code) -> str:
    name = getattr(code, "co_name", "?")
    where = f"{getattr(code, 'co_filename', '?')}:{getattr(code, 'co_firstlineno', '?')}"
    return f"{name} ({where})"


def new_dynamo_recompile_reasons() -> list[str]:
    """The guard failures Dynamo recorded since the last call, one line each:
    `forward (model.py:12) recompiled: 0/0: tensor 'x' size mismatch at index 0. ...`."""
    try:
        from torch._dynamo.utils import guard_failures
    except ImportError:  # a torch without it: nothing to say
        return []
    out = []
    with _lock:
        for code, reasons in list(guard_failures.items()):
            known, start = _seen.get(code, (None, 0))
            if known is not reasons:
                start = 0
            for reason in reasons[start:]:
                first = str(reason).strip().splitlines()[0] if str(reason).strip() else "?"
                out.append(f"{_frame_name(code)} recompiled: {first}")
            _seen[code] = (reasons, len(reasons))
    return out
