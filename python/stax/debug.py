"""Debug output of the stax backend.

Environment variables:

  STAX_DEBUG=1        print fallback reasons, notes (modes that do not apply to the
                      target) and a one-line summary per compiled graph to stderr.
  STAX_DEBUG_DIR=DIR  each compiled graph writes DIR/<graph_id>/:
                        fx_graph.txt                the ATen FX graph (readable form)
                        00_imported.mlir            the importer's stax IR
                        01_after_<pass>.mlir ...    the IR after each pass
                        kernel_<i>.mlir / .ll       each kernel's lowered MLIR / LLVM IR
                        wrapper.py                  the generated wrapper source
                        fallback.txt                (only when the graph fell back) why
  STAX_STRICT=1       a graph that cannot be compiled natively raises StaxCompileError
                      instead of running as written (same as strict_native=True).
"""
from __future__ import annotations

import itertools
import os
import re
import sys

__all__ = ["debug_enabled", "strict_enabled", "log", "DumpDir", "new_graph_id"]

_counter = itertools.count()


def debug_enabled() -> bool:
    return os.environ.get("STAX_DEBUG", "") not in ("", "0")


def strict_enabled() -> bool:
    return os.environ.get("STAX_STRICT", "") not in ("", "0")


def log(msg: str) -> None:
    """Print `msg` to stderr when STAX_DEBUG is set."""
    if debug_enabled():
        print(f"[stax] {msg}", file=sys.stderr, flush=True)


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
        self.write(name, str(module))

    def kernel(self, index: int, kernel) -> None:
        if not self.path:
            return
        # CPU kernels have mlir/llvm_ir, Triton kernels ttir/ptx (reading .ptx waits
        # for a background compile: only when dumping)
        for attr, ext in (("mlir", "mlir"), ("llvm_ir", "ll"), ("ttir", "ttir"), ("ptx", "ptx")):
            text = getattr(kernel, attr, None)
            if text:
                self.write(f"kernel_{index}.{ext}", str(text))
