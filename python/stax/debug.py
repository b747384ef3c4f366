"""Debug output of the stax backend.

Environment variables:

  STAX_DEBUG=1        print one line per fallback reason, note (modes that do not
                      apply to the target, ...) and compiled graph to stderr; no
                      tracebacks (a fallback is expected behaviour, not a crash).
  STAX_DEBUG=2        the same with every message in full (multi-line reasons) and the
                      Python traceback of each fallback.
  STAX_DEBUG_DIR=DIR  each compiled graph writes DIR/<graph_id>/:
                        fx_graph.txt                the ATen FX graph (readable form)
                        00_imported.mlir            the importer's stax IR
                        01_after_<pass>.mlir ...    the IR after each pass
                                                    (all IR printed with locations:
                                                    loc("<fx node>"("file.py":line:0)))
                        kernel_<i>.mlir / .ll       each kernel's lowered MLIR / LLVM IR
                        wrapper.py                  the generated wrapper source
                        fallback.txt                (only when the graph fell back) why
  STAX_STRICT=1       a graph that cannot be compiled natively raises StaxCompileError
                      instead of running as written (same as strict_native=True).

The same messages go to the `stax` logger (Python logging) when STAX_DEBUG is not set:
`TORCH_LOGS="stax"` (INFO: the one-line messages) or `TORCH_LOGS="+stax"` (DEBUG: also
the full text and tracebacks) turn them on through torch's logging, as does
`torch._logging.set_logs(stax=logging.DEBUG)` (stax registers the `stax` log alias
with torch._logging on import).
"""
from __future__ import annotations

import itertools
import logging
import os
import re
import sys
import traceback

__all__ = ["debug_enabled", "debug_level", "strict_enabled", "log", "one_line", "DumpDir",
           "new_graph_id", "logger", "mlir_with_locations"]

_counter = itertools.count()

#: stax's logger; torch._logging routes TORCH_LOGS="+stax" to it
logger = logging.getLogger("stax")


def _register_with_torch_logging() -> None:
    """Make `stax` a torch._logging alias (for `set_logs(stax=...)` and TORCH_LOGS).
    torch 2.13 also accepts TORCH_LOGS="+stax" as a module name without this; older or
    newer torch may not have the private registry: then only the module-name form works."""
    try:
        from torch._logging._internal import log_registry, register_log
    except ImportError:
        return
    if not log_registry.is_log("stax"):
        register_log("stax", "stax")


_register_with_torch_logging()


def debug_level() -> int:
    """0 (off), 1 (STAX_DEBUG=1: one line per message) or 2 (STAX_DEBUG=2 and up:
    full messages and tracebacks); any other non-empty value counts as 1."""
    v = os.environ.get("STAX_DEBUG", "").strip()
    if v in ("", "0"):
        return 0
    return 2 if v.isdigit() and int(v) >= 2 else 1


def debug_enabled() -> bool:
    return debug_level() > 0


def strict_enabled() -> bool:
    return os.environ.get("STAX_STRICT", "") not in ("", "0")


_ONE_LINE_MAX = 400


def one_line(msg: str, limit: int = _ONE_LINE_MAX) -> str:
    """`msg` on one line: lines joined with " | ", cut at `limit` characters (the full
    text is in the report, in STAX_DEBUG=2 output and in the dump's fallback.txt)."""
    text = " | ".join(ln.strip() for ln in str(msg).splitlines() if ln.strip())
    if len(text) > limit:
        text = text[:limit - 40].rstrip() + " ... (cut; STAX_DEBUG=2 prints all)"
    return text


def log(msg: str, exc: BaseException | None = None) -> None:
    """One message. STAX_DEBUG=1: one line on stderr; STAX_DEBUG=2: the full text and,
    with `exc`, its traceback. Without STAX_DEBUG it goes to the `stax` logger (INFO one
    line, DEBUG the full text and traceback), silent unless logging enables it."""
    level = debug_level()
    if level == 1:
        print(f"[stax] {one_line(msg)}", file=sys.stderr, flush=True)
    elif level >= 2:
        print(f"[stax] {msg}", file=sys.stderr, flush=True)
        if exc is not None:
            traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
            sys.stderr.flush()
    elif logger.isEnabledFor(logging.DEBUG):
        logger.debug("%s", msg, exc_info=(type(exc), exc, exc.__traceback__) if exc else None)
    elif logger.isEnabledFor(logging.INFO):
        logger.info("%s", one_line(msg))


def mlir_with_locations(module) -> str:
    """The IR text with every op's location, as `mlir-opt --mlir-print-debuginfo` prints
    it (re-parseable): `loc(#locN)` on each op, and the aliases at the end, e.g.
    `#loc3 = loc("mul"(#loc1))` with `#loc1 = loc("/path/model.py":12:0)`: the FX node
    and the user's file:line the importer put there."""
    return getattr(module, "operation", module).get_asm(enable_debug_info=True)


def new_graph_id(kind: str = "graph") -> str:
    """A process-unique id such as `g0003_forward` (also the dump folder's name)."""
    kind = re.sub(r"[^A-Za-z0-9_]+", "_", kind)
    return f"g{next(_counter):04d}_{kind}_p{os.getpid()}"


class DumpDir:
    """Writes the debug files of one graph; every method is a no-op without
    STAX_DEBUG_DIR (or an explicit `root`)."""

    def __init__(self, graph_id: str, root: str | None = None):
        root = root if root is not None else os.environ.get("STAX_DEBUG_DIR") or None
        self.path = os.path.join(root, graph_id) if root else None
        self._n = 0
        if self.path:
            os.makedirs(self.path, exist_ok=True)

    def __bool__(self) -> bool:
        return self.path is not None

    def write(self, name: str, text: str) -> None:
        if self.path:
            with open(os.path.join(self.path, name), "w") as f:
                f.write(text if text.endswith("\n") else text + "\n")

    def fx_graph(self, gm) -> None:
        if not self.path:
            return
        try:
            text = gm.print_readable(print_output=False)
        except Exception:  # older/odd GraphModules
            text = str(gm.graph)
        self.write("fx_graph.txt", text)

    def ir(self, stage: str, module) -> None:
        """`00_imported.mlir`, then `01_after_<stage>.mlir`, ... in call order."""
        if not self.path:
            return
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", stage)
        name = f"{self._n:02d}_{safe}.mlir" if self._n == 0 else f"{self._n:02d}_after_{safe}.mlir"
        self._n += 1
        self.write(name, module if isinstance(module, str) else mlir_with_locations(module))

    def kernel(self, index: int, kernel) -> None:
        if not self.path:
            return
        # CPU kernels have mlir/llvm_ir, Triton kernels ttir/ptx (reading .ptx waits
        # for a background compile: only when dumping)
        for attr, ext in (("mlir", "mlir"), ("llvm_ir", "ll"), ("ttir", "ttir"), ("ptx", "ptx")):
            text = getattr(kernel, attr, None)
            if text:
                self.write(f"kernel_{index}.{ext}", str(text))
